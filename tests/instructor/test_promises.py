"""What a task's docstring promises, checked: LayerNorm and RMSNorm normalize rows whose
squares overflow (``[1e20, -1e20] -> [1, -1]``, in float32 and float64; the docstrings of
``layer_norm`` and ``rms_norm`` and of ``_unit_rms`` say so). A plain formula maps such a
row to ``[0, -0]`` (its ``x²`` overflows, ``rstd`` is 0), which the random inputs of the
other checks never show.

The gradients are those of the same formulas: ``y(x) = y(x / s)``, so ``dx(x) = dx(x / s) / s``,
computed here at ``x / s`` in float64.
"""

import numpy as np
import pytest

import minitorch_attn as mt
from tests.instructor.expect import expect_close, host, leaf


def _reference(op, x, g, w):
    """Output and gradient of x of the norm (eps 1e-5 after the scaling, which it no longer
    feels at these magnitudes) of rows ``x`` of ordinary size."""
    xc = x - x.mean(-1, keepdims=True) if op == "layer_norm" else x
    rstd = 1 / np.sqrt((xc * xc).mean(-1, keepdims=True))
    xhat, dxhat = xc * rstd, g * w
    dx = rstd * (dxhat - xhat * (dxhat * xhat).mean(-1, keepdims=True))
    if op == "layer_norm":
        dx = dx - rstd * dxhat.mean(-1, keepdims=True)
    return xhat * w, dx


@pytest.mark.parametrize("dtype, big", [("float32", 1e20), ("float32", 1e30), ("float64", 1e20), ("float64", 1e300)])
@pytest.mark.parametrize(
    "op", [pytest.param("layer_norm", marks=pytest.mark.task_3_1), pytest.param("rms_norm", marks=pytest.mark.task_3_2)]
)
def test_norms_of_rows_whose_squares_overflow(student, rng, op, dtype, big):
    rows = np.array([[1.0, -1.0, 0.5, 2.0], [3.0, 1.0, -2.0, 0.25]])
    g, w = rng.standard_normal(rows.shape), rng.uniform(0.5, 1.5, 4)
    x = rows * big
    t = leaf(student, x, dtype)
    F = student.module("minitorch_attn.functional")
    weight = mt.tensor(w, dtype=dtype)
    out = F.layer_norm(t, (4,), weight, None) if op == "layer_norm" else F.rms_norm(t, (4,), weight)
    out.backward(mt.tensor(g, dtype=dtype))
    y, dx = _reference(op, rows, g, w)
    what = f"{op} of rows of size {big:g} (whose squares overflow) {{}}, input (2, 4), weight (4,) {dtype}"
    expect_close(out, y, what=what.format("forward"), n_ops=64, dtype=dtype)
    grad = None if t.grad is None else host(t.grad) * big  # of order 1 / big: compared at scale 1
    expect_close(grad, dx, what=what.format(f"gradient of x times {big:g}"), n_ops=64, dtype=dtype)
