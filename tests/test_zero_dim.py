"""0-d tensors are accepted wherever PyTorch accepts them: dim 0 and -1 name their one
(absent) dim, reductions over it return the value, and its gradient is 1 (or the
reduction's own)."""

import math
import warnings

import numpy as np
import pytest

import minitorch_attn as mt
import minitorch_attn.functional as F

V = 0.7
# (name, ours, theirs, the value, the gradient d(out)/dx); theirs takes torch and its module F
CASES = [
    ("sum dim 0", lambda x: mt.sum(x, 0), lambda t, x: t.sum(x, 0), V, 1.0),
    ("sum dim -1", lambda x: x.sum(-1), lambda t, x: x.sum(-1), V, 1.0),
    ("sum (0,) keepdim", lambda x: x.sum((0,), keepdim=True), lambda t, x: x.sum((0,), keepdim=True), V, 1.0),
    ("sum all", lambda x: x.sum(), lambda t, x: x.sum(), V, 1.0),
    ("mean dim 0", lambda x: mt.mean(x, 0), lambda t, x: t.mean(x, 0), V, 1.0),
    ("mean dim -1 keepdim", lambda x: x.mean(-1, keepdim=True), lambda t, x: x.mean(-1, keepdim=True), V, 1.0),
    ("amax dim 0", lambda x: mt.amax(x, 0), lambda t, x: t.amax(x, 0), V, 1.0),
    ("max dim -1", lambda x: x.max(-1), lambda t, x: x.amax(-1), V, 1.0),
    ("var dim 0 correction 0", lambda x: mt.var(x, 0, correction=0), lambda t, x: t.var(x, 0, correction=0), 0.0, 0.0),
    (
        "var correction None",
        lambda x: mt.var(x, correction=None),
        lambda t, x: t.var(x, correction=None),
        math.nan,
        math.nan,
    ),
    ("var dim -1", lambda x: x.var(-1), lambda t, x: x.var(-1), math.nan, math.nan),
    ("transpose 0 0", lambda x: mt.transpose(x, 0, 0), lambda t, x: t.transpose(x, 0, 0), V, 1.0),
    ("transpose -1 0", lambda x: x.transpose(-1, 0), lambda t, x: x.transpose(-1, 0), V, 1.0),
    ("T", lambda x: x.T, lambda t, x: x.T, V, 1.0),
    ("squeeze 0", lambda x: x.squeeze(0), lambda t, x: x.squeeze(0), V, 1.0),
    ("softmax dim 0", lambda x: F.softmax(x, 0), lambda t, x: t.nn.functional.softmax(x, 0), 1.0, 0.0),
    ("softmax dim -1", lambda x: F.softmax(x, -1), lambda t, x: t.nn.functional.softmax(x, -1), 1.0, 0.0),
    ("log_softmax dim 0", lambda x: F.log_softmax(x, 0), lambda t, x: t.nn.functional.log_softmax(x, 0), 0.0, 0.0),
    ("flatten", lambda x: x.flatten(), lambda t, x: x.flatten(), [V], 1.0),
    ("unsqueeze -1", lambda x: x.unsqueeze(-1), lambda t, x: x.unsqueeze(-1), [V], 1.0),
    ("stack dim -1", lambda x: mt.stack([x, x], -1), lambda t, x: t.stack([x, x], -1), [V, V], 2.0),
    ("clamp", lambda x: x.clamp(0.0, 0.5), lambda t, x: x.clamp(0.0, 0.5), 0.5, 0.0),
    ("relu", F.relu, lambda t, x: t.nn.functional.relu(x), V, 1.0),
]


@pytest.mark.parametrize("name, ours, theirs, value, grad", CASES, ids=[c[0] for c in CASES])
def test_0d_input(name, ours, theirs, value, grad):
    x = mt.tensor(V, dtype="float64", requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # var with no degree of freedom: NaN, as meant
        y = ours(x)
        y.sum().backward()
    np.testing.assert_allclose(y.numpy(), value, rtol=2 * np.finfo(np.float64).eps)
    assert y.shape == np.shape(value) or name.endswith("keepdim")
    np.testing.assert_allclose(x.grad.numpy(), grad, rtol=2 * np.finfo(np.float64).eps)
    assert x.grad.shape == ()


@pytest.mark.parametrize("name, ours, theirs, value, grad", CASES, ids=[c[0] for c in CASES])
def test_0d_input_agrees_with_torch(name, ours, theirs, value, grad, torch):
    x = mt.tensor(V, dtype="float64", requires_grad=True)
    tx = torch.tensor(V, dtype=torch.float64, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        y, ty = ours(x), theirs(torch, tx)
        y.sum().backward()
        ty.sum().backward()
    assert y.shape == tuple(ty.shape)
    np.testing.assert_allclose(y.numpy(), ty.detach().numpy(), rtol=2 * np.finfo(np.float64).eps, equal_nan=True)
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=2 * np.finfo(np.float64).eps, equal_nan=True)


@pytest.mark.parametrize(
    "call, error",
    [
        (lambda x: x.sum(1), ValueError),
        (lambda x: x.transpose(0, 1), ValueError),
        (lambda x: mt.cat([x, x]), ValueError),
        (lambda x: x.split(1), ValueError),
        (lambda x: x.chunk(1), ValueError),
        (lambda x: x.var(correction="1"), TypeError),
    ],
    ids=["sum dim 1", "transpose 0 1", "cat", "split", "chunk", "var correction str"],
)
def test_what_pytorch_refuses_for_0d_is_a_clear_error(call, error):
    with pytest.raises(error):
        call(mt.tensor(V))
