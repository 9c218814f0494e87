"""Every reduction's backward over every axis, with and without keepdim (task 1.4).

A backward written for the last axis only (reshaping the upstream gradient to
``shape[:-1] + (1,)``, or broadcasting it from the right) passes every test that reduces
over ``dim=-1`` and fails here for the other axes, for several axes at once and for all
of them. The upstream gradient is random, the expected gradients closed-form NumPy. The
graph is this process's; the student's backward of each reduction is asked for
(:func:`~tests.instructor.expect.backward_of_task`), so their engine (task 1.1) plays no part.
"""

import numpy as np
import pytest

from minitorch_attn.opinfo import reductions
from tests.instructor.expect import backward_of_task, expect_close, our_leaf

SHAPE = (2, 3, 4)
DIMS = [0, 1, 2, -1, -2, (0, 2), (1, 2), None]


def expected_gradient(op, x, g, dim, keepdim):
    """d/dx of sum(g * op(x, dim, keepdim)) for a (no ties) input x."""
    axes = tuple(range(x.ndim)) if dim is None else tuple(d % x.ndim for d in np.atleast_1d(dim))
    if not keepdim:
        g = np.expand_dims(g, axes)
    n = int(np.prod([x.shape[a] for a in axes]))
    if op == "sum":
        return np.broadcast_to(g, x.shape)
    if op == "mean":
        return np.broadcast_to(g / n, x.shape)
    if op == "max":
        return g * (x == x.max(axis=axes, keepdims=True))
    if op == "min":
        return g * (x == x.min(axis=axes, keepdims=True))
    if op == "var":
        return g * 2 * (x - x.mean(axis=axes, keepdims=True)) / (n - 1)  # unbiased
    if op == "std":
        return g * (x - x.mean(axis=axes, keepdims=True)) / ((n - 1) * x.std(axis=axes, ddof=1, keepdims=True))
    raise AssertionError(f"the reduction {op!r} of the catalogue needs its closed-form gradient here")


@pytest.mark.task_1_4
@pytest.mark.parametrize("op", [record.name for record in reductions.RECORDS])  # every reduction of the catalogue
@pytest.mark.parametrize("keepdim", [False, True], ids=["no keepdim", "keepdim"])
@pytest.mark.parametrize("dim", DIMS, ids=str)
def test_reduction_backward_over_every_axis(student, rng, op, dim, keepdim):
    x = rng.permutation(np.arange(np.prod(SHAPE)) * 0.1 + rng.uniform(0, 0.01)).reshape(SHAPE)  # no ties
    t = our_leaf(x)
    y = getattr(t, op)(dim=dim, keepdim=keepdim)
    axes = tuple(range(x.ndim)) if dim is None else tuple(d % x.ndim for d in np.atleast_1d(dim))
    g = rng.standard_normal(np.sum(x, axis=axes, keepdims=keepdim).shape)
    backward_of_task(student, "1.4", y, [g])
    expect_close(
        t.grad,
        expected_gradient(op, x, g, dim, keepdim),
        what=f"{op}(dim={dim}, keepdim={keepdim}) gradient, input {SHAPE} float64",
    )
