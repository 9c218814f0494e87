"""Every option that changes a backward, against closed-form NumPy (held back).

A test that tries one option at a time misses a mistake that shows only in a combination
(class weights *and* a mean, label smoothing *and* ignored rows), at a rank nobody tried (a
norm over two or three trailing dims), at a special value (the exponent 0) or in a
broadcasting pattern (two stretched dims and an added one). Each test here walks the
whole product of its op's options, so the kind is covered rather than one instance:

* broadcasting: every pair of shapes of rank 0 to 3 that broadcast to (2, 3, 4);
* ``x ** p``: every special exponent (0, 1, 2, 3, -1, -2, 0.5, -1.5, 2.5), at 0 where defined;
* cross-entropy: weight x ignored rows x label smoothing x reduction;
* layer_norm and rms_norm: normalized_shape of rank 1, 2 and 3, with and without weight.
"""

import itertools

import numpy as np
import pytest

import minitorch_attn as mt
from tests.instructor.expect import backward_of_task, expect_close, leaf, log_softmax, our_leaf

pytestmark = pytest.mark.instructor

RESULT = (2, 3, 4)


def broadcast_shapes():
    """Every shape of rank 0..3 that broadcasts to RESULT: leading dims dropped, any dims set to 1."""
    shapes = []
    for rank in range(len(RESULT) + 1):
        tail = RESULT[len(RESULT) - rank :]
        for ones in itertools.product([False, True], repeat=rank):
            shapes.append(tuple(1 if one else n for n, one in zip(tail, ones)))
    return shapes


def sum_to(g, shape):
    """``g`` summed down to ``shape`` (the brute-force un-broadcast)."""
    while g.ndim > len(shape):
        g = g.sum(axis=0)
    return g.sum(axis=tuple(i for i, n in enumerate(shape) if n == 1), keepdims=True) if shape else g


@pytest.mark.task_1_3
def test_every_broadcasting_pattern_sums_its_gradient_back(student, rng):
    for sa, sb in itertools.product(broadcast_shapes(), repeat=2):
        if np.broadcast_shapes(sa, sb) != RESULT:
            continue
        x, y, g = rng.standard_normal(sa), rng.standard_normal(sb), rng.standard_normal(RESULT)
        a, b = our_leaf(x), our_leaf(y)
        backward_of_task(student, "1.3", a * b + a, [g])  # the student's sum over broadcast dims, asked for
        what = f"a * b + a gradient of {{}}, inputs {sa}, {sb} float64"
        expect_close(a.grad, sum_to(g * (np.broadcast_to(y, RESULT) + 1), sa), what=what.format("a"), n_ops=64)
        expect_close(b.grad, sum_to(g * np.broadcast_to(x, RESULT), sb), what=what.format("b"), n_ops=64)


EXPONENTS = [0, 1, 2, 3, -1, -2, 0.5, -1.5, 2.5]


@pytest.mark.task_1_2
@pytest.mark.parametrize("p", EXPONENTS, ids=str)
def test_every_special_exponent(student, rng, p):
    x = rng.uniform(0.5, 2.0, 6) * rng.choice([-1.0, 1.0], 6) if float(p).is_integer() else rng.uniform(0.5, 2.0, 6)
    if float(p).is_integer() and p >= 0:
        x[0] = 0.0  # x ** p is smooth at 0 for these: d/dx = p x^(p-1), and 0 for p = 0
    g = rng.standard_normal(6)
    t = our_leaf(x)
    backward_of_task(student, "1.2", t**p, [g])  # the student's pow backward, asked for
    expected = g * (np.zeros_like(x) if p == 0 else p * np.power(x, p - 1.0))
    expect_close(t.grad, expected, what=f"x ** {p} gradient, input (6,) float64 (x includes 0: {x[0] == 0})")


@pytest.mark.task_2_3
@pytest.mark.parametrize(
    "weighted, ignored, smoothing, reduction",
    list(itertools.product([False, True], [False, True], [0.0, 0.2], ["mean", "sum", "none"])),
)
def test_cross_entropy_in_every_combination_of_its_options(student, rng, weighted, ignored, smoothing, reduction):
    M, C = 6, 4
    x = rng.standard_normal((M, C))
    target = rng.integers(0, C, M)
    if ignored:
        target[[1, 4]] = -100
    w = rng.uniform(0.2, 2.0, C) if weighted else np.ones(C)
    valid = target != -100
    onehot = np.eye(C)[np.where(valid, target, 0)] * valid[:, None]
    r = w * ((1 - smoothing) * onehot + smoothing / C * valid[:, None])  # the weighted target distribution
    loss = -(r * log_softmax(x)).sum(axis=1)
    grad_rows = np.exp(log_softmax(x)) * r.sum(axis=1, keepdims=True) - r  # d loss_i / d x_i
    g = rng.standard_normal(M) if reduction == "none" else np.array(rng.standard_normal())
    if reduction == "none":
        expected, expected_grad = loss, grad_rows * g[:, None]
    elif reduction == "sum":
        expected, expected_grad = loss.sum(), grad_rows * g
    else:
        total = (onehot * w).sum()
        expected, expected_grad = loss.sum() / total, grad_rows * g / total
    t = leaf(student, x)
    F = student.module("minitorch_attn.functional")
    out = F.cross_entropy(
        t, mt.tensor(target), weight=mt.tensor(w) if weighted else None, label_smoothing=smoothing, reduction=reduction
    )
    out.backward(mt.tensor(g))
    what = (
        f"cross_entropy(weight={'yes' if weighted else 'no'}, ignored rows={'yes' if ignored else 'no'}, "
        f"label_smoothing={smoothing}, reduction={reduction!r}) {{}}, logits ({M}, {C}) float64"
    )
    expect_close(out, expected, what=what.format("forward"), n_ops=64)
    expect_close(t.grad, expected_grad, what=what.format("gradient"), n_ops=64)


@pytest.mark.parametrize("rank", [1, 2, 3])
@pytest.mark.parametrize("weighted", [False, True], ids=["no weight", "weight"])
@pytest.mark.parametrize(
    "op", [pytest.param("layer_norm", marks=pytest.mark.task_3_1), pytest.param("rms_norm", marks=pytest.mark.task_3_2)]
)
def test_norms_over_every_rank_of_normalized_shape(student, rng, op, rank, weighted):
    shape = (2, 3, 4, 2)
    normalized = shape[len(shape) - rank :]
    axes = tuple(range(len(shape) - rank, len(shape)))
    x, g = rng.standard_normal(shape), rng.standard_normal(shape)
    w = rng.uniform(0.5, 1.5, normalized) if weighted else np.ones(normalized)

    def mean(a):
        return a.mean(axis=axes, keepdims=True)

    eps = 1e-5
    xc = x - mean(x) if op == "layer_norm" else x
    rstd = 1 / np.sqrt(mean(xc * xc) + eps)
    xhat = xc * rstd
    dxhat = g * w
    if op == "layer_norm":
        expected_grad = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat))
    else:
        expected_grad = rstd * (dxhat - xhat * mean(dxhat * xhat))
    t = leaf(student, x)
    weight = mt.tensor(w) if weighted else None
    F = student.module("minitorch_attn.functional")
    out = (
        F.layer_norm(t, normalized, weight, None, eps=eps)
        if op == "layer_norm"
        else F.rms_norm(t, normalized, weight, eps=eps)
    )
    out.backward(mt.tensor(g))
    what = (
        f"{op} over normalized_shape {normalized} ({'with' if weighted else 'no'} weight) {{}}, input {shape} float64"
    )
    expect_close(out, xhat * w, what=what.format("forward"), n_ops=64)
    expect_close(t.grad, expected_grad, what=what.format("gradient of x"), n_ops=256)
