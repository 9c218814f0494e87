"""Gradients at the edge of a formula's domain, against PyTorch and against values written down.

Every op with a square root, a division by a statistic or a logarithm is evaluated where
that formula breaks: a constant row (std, LayerNorm), a zero row (RMSNorm, sqrt, pow), one
element, a correction that leaves no degrees of freedom (var, std), ``-inf`` (logsumexp,
log-softmax, cross-entropy), a fully masked row (attention). Each case states its expected
output and gradient, so the torch-free test catches a regression; the same cases are
replayed against PyTorch (skipped without it). Where PyTorch is wrong the case says so and
is compared with the PyTorch call that is right (see ``docs/pytorch-differences.md``).
"""

import math
import warnings

import numpy as np
import pytest

import minitorch_attn as mt
import minitorch_attn.functional as F
from minitorch_attn.optim import clip_grad_norm_

inf, nan = math.inf, math.nan


def _std(lib, x, **kw):
    return x.std(**kw)


def _var(lib, x, **kw):
    return x.var(**kw)


def _logsumexp(lib, x):
    return lib.logsumexp(x, 1)


def _log_softmax(lib, x):
    return (F if lib is mt else lib.nn.functional).log_softmax(x, 1)


def _cross_entropy(lib, x, target, **kw):
    fn = F.cross_entropy if lib is mt else lib.nn.functional.cross_entropy
    return fn(x, lib.tensor(target), **kw)


def _nll_loss(lib, x, target, **kw):
    fn = F.nll_loss if lib is mt else lib.nn.functional.nll_loss
    return fn(x, lib.tensor(target), **kw)


def _w(lib):
    """Class weights that give class 1 no weight."""
    return lib.tensor(np.array([1.0, 0.0]))


def _layer_norm(lib, x):
    return (F if lib is mt else lib.nn.functional).layer_norm(x, (x.shape[-1],))


def _rms_norm(lib, x):
    return (F if lib is mt else lib.nn.functional).rms_norm(x, (x.shape[-1],))


def _attention_masked_row(lib, q):
    """Self-attention of ``q`` whose second query sees no key (a row of False)."""
    mask = lib.tensor([[True, False], [False, False]])
    fn = F.scaled_dot_product_attention if lib is mt else lib.nn.functional.scaled_dot_product_attention
    return fn(q, q, q, attn_mask=mask)


def _flash_masked_row(lib, q):
    """As :func:`_attention_masked_row`, through flash attention (PyTorch: its SDPA)."""
    if lib is not mt:
        return _attention_masked_row(lib, q)
    mask = lib.tensor([[True, False], [False, False]])
    return F.flash_attention(q, q, q, attn_mask=mask)


def _attention_float_mask_row(lib, q):
    """A float mask whose second row is all ``-inf``: the same fully masked row."""
    mask = lib.tensor(np.array([[0.0, -inf], [-inf, -inf]]))
    fn = F.scaled_dot_product_attention if lib is mt else lib.nn.functional.scaled_dot_product_attention
    return fn(q, q, q, attn_mask=mask)


# (id, function(lib, *inputs), inputs, upstream gradient, expected output, expected gradients,
#  whether inf/NaN arise (then NumPy's RuntimeWarning is expected and silenced))
CASES = [
    ("std of a constant row", lambda lib, x: _std(lib, x), [[2.0, 2.0, 2.0]], 3.0, 0.0, [[[0.0, 0.0, 0.0]]], False),
    (
        "std per row, one constant",
        lambda lib, x: _std(lib, x, dim=1),
        [[2.0, 2.0, 2.0], [1.0, 2.0, 3.0]],
        [3.0, -2.0],
        [0.0, 1.0],
        [[[0.0, 0.0, 0.0], [1.0, 0.0, -1.0]]],
        False,
    ),
    ("std of one element, correction 0", lambda lib, x: _std(lib, x, correction=0), [3.0], 2.0, 0.0, [[0.0]], False),
    ("std of a 0-d tensor, correction 0", lambda lib, x: _std(lib, x, correction=0), 3.0, 2.0, 0.0, [0.0], False),
    (
        "std constant, dims and keepdim",
        lambda lib, x: _std(lib, x, dim=(1, 2), keepdim=True, correction=0),
        [[[1.0, 1.0], [1.0, 1.0]]],
        [[[5.0]]],
        [[[0.0]]],
        [[[[0.0, 0.0], [0.0, 0.0]]]],
        False,
    ),
    ("std with no dof (n = 1, correction 1)", lambda lib, x: _std(lib, x), [3.0], 1.0, nan, [[nan]], True),
    (
        "std with no dof (n = 2, correction 2)",
        lambda lib, x: _std(lib, x, correction=2),
        [3.0, 4.0],
        1.0,
        inf,
        [[nan, nan]],
        True,
    ),
    ("var of a constant row", lambda lib, x: _var(lib, x, dim=1), [[2.0, 2.0]], [3.0], [0.0], [[[0.0, 0.0]]], False),
    (
        "var with no dof, per row",
        lambda lib, x: _var(lib, x, dim=1, correction=2),
        [[3.0, 4.0], [1.0, 1.0]],
        [1.0, 1.0],
        [inf, nan],
        [[[-inf, inf], [nan, nan]]],
        True,
    ),
    ("var with no dof, all", lambda lib, x: _var(lib, x, correction=2), [3.0, 4.0], -1.0, inf, [[inf, -inf]], True),
    (
        "var with correction > n, per row",
        lambda lib, x: _var(lib, x, dim=1, correction=3),
        [[3.0, 4.0]],
        [1.0],
        [inf],
        [[[-inf, inf]]],
        True,
    ),
    ("sqrt at 0", lambda lib, x: lib.sqrt(x), [0.0, 4.0], [1.0, 2.0], [0.0, 2.0], [[inf, 0.5]], True),
    ("x ** 0.5 at 0", lambda lib, x: x**0.5, [0.0, 4.0], [1.0, 2.0], [0.0, 2.0], [[inf, 0.5]], True),
    ("x ** 1.5 at 0", lambda lib, x: x**1.5, [0.0, 4.0], [1.0, 1.0], [0.0, 8.0], [[0.0, 3.0]], False),
    ("x ** 0 at 0", lambda lib, x: x**0, [0.0, 4.0], [1.0, 1.0], [1.0, 1.0], [[0.0, 0.0]], False),
    ("x ** -0.5 at 0", lambda lib, x: x**-0.5, [0.0, 4.0], [1.0, 1.0], [inf, 0.5], [[-inf, -1 / 16]], True),
    (
        "0 ** b",
        lambda lib, a, b: a**b,
        ([0.0, 0.0, 0.0], [0.0, 0.5, 2.0]),
        [1.0, 1.0, 1.0],
        [1.0, 0.0, 0.0],
        [[0.0, inf, 0.0], [0.0, 0.0, 0.0]],
        True,
    ),
    ("log at 0", lambda lib, x: lib.log(x), [0.0, 2.0], [1.0, 1.0], [-inf, math.log(2.0)], [[inf, 0.5]], True),
    (
        "logsumexp of a -inf row",
        _logsumexp,
        [[-inf, -inf], [0.0, -inf]],
        [1.0, 1.0],
        [-inf, 0.0],
        [[[nan, nan], [1.0, 0.0]]],
        True,
    ),
    (
        "log_softmax of a -inf row",
        _log_softmax,
        [[-inf, -inf], [0.0, -inf]],
        [[1.0, 1.0], [1.0, 1.0]],
        [[nan, nan], [0.0, -inf]],
        [[[nan, nan], [-1.0, 1.0]]],
        True,
    ),
    (
        "cross_entropy, a -inf logit not the target",
        lambda lib, x: _cross_entropy(lib, x, [0, 0]),
        [[0.0, -inf], [1.0, -inf]],
        1.0,
        0.0,
        [[[0.0, 0.0], [0.0, 0.0]]],
        False,
    ),
    (
        "cross_entropy, every target ignored",
        lambda lib, x: _cross_entropy(lib, x, [-100, -100]),
        [[0.0, 1.0], [1.0, 2.0]],
        1.0,
        nan,
        [[[0.0, 0.0], [0.0, 0.0]]],
        True,
    ),
    (
        "cross_entropy, the targets left weigh 0",
        lambda lib, x: _cross_entropy(lib, x, [1, 1, -100], weight=_w(lib)),
        [[0.0, 1.0], [1.0, 2.0], [3.0, -1.0]],
        1.0,
        nan,
        [[[nan, nan], [nan, nan], [0.0, 0.0]]],
        True,
    ),
    (
        "cross_entropy, weigh 0, smoothing",
        lambda lib, x: _cross_entropy(lib, x, [1, -100], weight=_w(lib), label_smoothing=0.2),
        [[0.0, 1.0], [1.0, 2.0]],
        1.0,
        nan,
        [[[nan, nan], [0.0, 0.0]]],
        True,
    ),
    (
        "nll_loss, the targets left weigh 0",
        lambda lib, x: _nll_loss(lib, x, [1, 1, -100], weight=_w(lib)),
        [[0.0, 1.0], [1.0, 2.0], [3.0, -1.0]],
        1.0,
        nan,
        [[[0.0, nan], [0.0, nan], [0.0, 0.0]]],
        True,
    ),
    (
        "nll_loss, every target ignored",
        lambda lib, x: _nll_loss(lib, x, [-100, -100]),
        [[0.0, 1.0], [1.0, 2.0]],
        1.0,
        nan,
        [[[0.0, 0.0], [0.0, 0.0]]],
        True,
    ),
    (
        "layer_norm of a constant row",
        _layer_norm,
        [[2.0, 2.0, 2.0]],
        [[1.0, 2.0, 4.0]],
        [[0.0, 0.0, 0.0]],
        [[[(1 - 7 / 3) / math.sqrt(1e-5), (2 - 7 / 3) / math.sqrt(1e-5), (4 - 7 / 3) / math.sqrt(1e-5)]]],
        False,
    ),
    ("layer_norm of one element", _layer_norm, [[2.0], [3.0]], [[1.0], [2.0]], [[0.0], [0.0]], [[[0.0], [0.0]]], False),
    ("rms_norm of a zero row", _rms_norm, [[0.0, 0.0]], [[1.0, -2.0]], [[0.0, 0.0]], [[[2.0**26, -(2.0**27)]]], False),
    (
        "attention, a fully masked row",
        _attention_masked_row,
        [[[1.0, 2.0], [3.0, -1.0]]],
        [[[1.0, 1.0], [1.0, 1.0]]],
        [[[1.0, 2.0], [0.0, 0.0]]],
        [[[[1.0, 1.0], [0.0, 0.0]]]],
        False,
    ),
    (
        "attention, a row of -inf in a float mask",
        _attention_float_mask_row,
        [[[1.0, 2.0], [3.0, -1.0]]],
        [[[1.0, 1.0], [1.0, 1.0]]],
        [[[1.0, 2.0], [0.0, 0.0]]],
        [[[[1.0, 1.0], [0.0, 0.0]]]],
        False,
    ),
    (
        "flash attention, a fully masked row",
        _flash_masked_row,
        [[[1.0, 2.0], [3.0, -1.0]]],
        [[[1.0, 1.0], [1.0, 1.0]]],
        [[[1.0, 2.0], [0.0, 0.0]]],
        [[[[1.0, 1.0], [0.0, 0.0]]]],
        False,
    ),
]
IDS = [case[0] for case in CASES]

# PyTorch is wrong here; the case is compared with the call of PyTorch that is right
TORCH_STAND_IN = {
    # var(dim=None) with no dof gives +inf to every element; var over every dim, named, signs it by x - m
    "var with no dof, all": lambda torch, x: x.var(dim=0, correction=2),
}
# PyTorch is wrong here and no call of it is right
TORCH_DIFFERS = {
    "var with correction > n, per row": "PyTorch's forward takes n - c as 0 (inf) but its backward divides by "
    "the negative n - c, a finite gradient of an infinite value",
}


def _inputs(values):
    return values if isinstance(values, tuple) else (values,)


def _run_mt(case):
    name, fn, values, upstream, _, _, quiet = case
    xs = [mt.tensor(np.asarray(v, dtype=np.float64), dtype="float64", requires_grad=True) for v in _inputs(values)]
    with np.errstate(all="ignore" if quiet else "raise"):
        y = fn(mt, *xs)
        y.backward(mt.tensor(np.asarray(upstream, dtype=np.float64), dtype="float64"))
    return y.numpy(), [x.grad.numpy() for x in xs]


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_edge_values(case):
    """The values each case states: the output and the gradient of every input."""
    y, grads = _run_mt(case)
    np.testing.assert_allclose(y, case[4], rtol=1e-12, atol=0, equal_nan=True)
    for got, expected in zip(grads, case[5], strict=True):
        np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-300, equal_nan=True)


@pytest.mark.torch
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_edge_against_torch(case, torch):
    name, fn, values, upstream, _, _, _ = case
    if name in TORCH_DIFFERS:
        pytest.skip(TORCH_DIFFERS[name])
    xs = [torch.tensor(np.asarray(v, dtype=np.float64), requires_grad=True) for v in _inputs(values)]
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # PyTorch's "degrees of freedom is <= 0"
        y = TORCH_STAND_IN[name](torch, *xs) if name in TORCH_STAND_IN else fn(torch, *xs)
    y.backward(torch.tensor(np.asarray(upstream, dtype=np.float64)))
    y_mt, grads_mt = _run_mt(case)
    np.testing.assert_allclose(y_mt, y.detach().numpy(), rtol=1e-12, atol=0, equal_nan=True)
    for got, x in zip(grads_mt, xs, strict=True):
        np.testing.assert_allclose(got, x.grad.numpy(), rtol=1e-12, atol=1e-300, equal_nan=True)


def test_torch_full_reduction_var_with_no_dof_is_signless(torch):
    """Why the stand-in above: PyTorch's ``var()`` over everything with no degrees of
    freedom sends ``+inf`` to every element; the math (and PyTorch with ``dim``) signs it."""
    x = torch.tensor([3.0, 4.0], dtype=torch.float64, requires_grad=True)
    with pytest.warns(UserWarning):
        x.var(correction=2).backward()
    if not np.array_equal(x.grad.numpy(), [inf, inf]):
        pytest.skip("PyTorch now signs it: drop the stand-in")


def test_std_is_one_op_whose_gradient_is_finite_at_a_constant_row():
    """The fault fixed: ``sqrt(var)`` composed gave ``inf · 0 = NaN`` at a constant row."""
    x = mt.tensor([[5.0, 5.0, 5.0, 5.0]], requires_grad=True)
    x.std(dim=1).backward(mt.ones(1))
    assert np.isfinite(x.grad.numpy()).all()
    assert type(x.std().grad_fn).__name__ == "Node" and x.std().grad_fn.function.__name__ == "Std"


def test_clip_grad_norm_of_zero_gradients_leaves_them_zero():
    p = mt.zeros(3, requires_grad=True)
    p.grad = mt.zeros(3)
    assert clip_grad_norm_([p], 1.0) == 0.0
    np.testing.assert_array_equal(p.grad.numpy(), [0.0, 0.0, 0.0])


def test_soft_targets_count_zero_times_log_zero_as_zero():
    """``0 · log 0 = 0``: a target of 0 on a ``-inf`` logit adds nothing (PyTorch: NaN)."""
    logits = mt.tensor([[0.0, -inf], [1.0, 2.0]], dtype="float64", requires_grad=True)
    target = mt.tensor([[1.0, 0.0], [0.5, 0.5]], dtype="float64")
    loss = F.cross_entropy(logits, target)
    loss.backward()
    p = 1 / (1 + math.exp(1.0))  # softmax([1, 2])[0]
    assert loss.item() == pytest.approx((-math.log(p) - math.log(1 - p)) / 4, rel=1e-12)
    np.testing.assert_allclose(logits.grad.numpy(), [[0.0, 0.0], [(p - 0.5) / 2, (0.5 - p) / 2]], rtol=1e-12)


def test_soft_targets_zero_times_log_zero_in_torch_is_nan(torch):
    """The difference of docs/pytorch-differences.md, pinned: drop it when PyTorch changes."""
    logits = torch.tensor([[0.0, -inf], [1.0, 2.0]], dtype=torch.float64)
    target = torch.tensor([[1.0, 0.0], [0.5, 0.5]], dtype=torch.float64)
    assert math.isnan(torch.nn.functional.cross_entropy(logits, target).item())
