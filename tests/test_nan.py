"""NaN propagates as in PyTorch through every op whose forward or backward branches on a
comparison: it is never hidden in the forward, and the gradient at a NaN goes where
PyTorch sends it."""

import warnings

import numpy as np
import pytest
from conftest import float64_tolerance

import minitorch_attn as mt
import minitorch_attn.functional as F
from minitorch_attn import opinfo

nan = float("nan")
CALLS = opinfo.one_input_calls()  # each op's call and its NaN facts: its catalogue record


def nan_input(lib=mt, **options):
    values = np.array([[nan, 0.5, -1.0], [2.0, -0.25, 1.5]])
    return lib.tensor(values, dtype=lib.float64, **options)


def test_relu():
    x = mt.tensor([nan, -1.0, 0.0, 2.0], dtype="float64", requires_grad=True)
    y = F.relu(x)
    y.backward(mt.ones(4, dtype="float64"))
    np.testing.assert_array_equal(y.numpy(), [nan, 0.0, 0.0, 2.0])
    np.testing.assert_array_equal(x.grad.numpy(), [1.0, 0.0, 0.0, 1.0])


@pytest.mark.parametrize("op", [mt.maximum, mt.minimum], ids=["maximum", "minimum"])
def test_maximum_and_minimum_send_the_gradient_to_both_sides_of_a_nan(op):
    a = mt.tensor([nan, 1.0, 2.0, nan, 3.0], dtype="float64", requires_grad=True)
    b = mt.tensor([1.0, nan, 2.0, nan, 3.0], dtype="float64", requires_grad=True)
    y = op(a, b)
    y.backward(mt.ones(5, dtype="float64"))
    np.testing.assert_array_equal(y.numpy(), [nan, nan, 2.0, nan, 3.0])
    np.testing.assert_array_equal(a.grad.numpy(), [1.0, 1.0, 0.5, 1.0, 0.5])
    np.testing.assert_array_equal(b.grad.numpy(), [1.0, 1.0, 0.5, 1.0, 0.5])


def test_abs_gradient_at_nan_is_zero():
    x = mt.tensor([nan, 0.0, -2.0, 3.0], requires_grad=True)
    x.abs().backward(mt.ones(4))
    np.testing.assert_array_equal(x.grad.numpy(), [0.0, 0.0, -1.0, 1.0])


@pytest.mark.parametrize("dim", [None, -1])
def test_max_sends_the_gradient_to_the_nans(dim):
    x = mt.tensor([[nan, 1.0, nan], [1.0, 2.0, 2.0]], dtype="float64", requires_grad=True)
    y = mt.amax(x, dim=dim) if dim is not None else mt.amax(x[0:1])
    y.sum().backward()
    assert np.isnan(y.numpy().reshape(-1)[0])
    np.testing.assert_array_equal(x.grad.numpy()[0], [0.5, 0.0, 0.5])
    if dim is not None:
        np.testing.assert_array_equal(x.grad.numpy()[1], [0.0, 0.5, 0.5])


def test_clamp_at_nan():
    x = mt.tensor([nan, -2.0, 0.5, 2.0], dtype="float64", requires_grad=True)
    y = mt.clamp(x, -1.0, 1.0)
    y.backward(mt.ones(4, dtype="float64"))
    np.testing.assert_array_equal(y.numpy(), [nan, -1.0, 0.5, 1.0])
    np.testing.assert_array_equal(x.grad.numpy(), [0.0, 0.0, 1.0, 0.0])
    x = mt.tensor([0.0, 0.0, nan], dtype="float64", requires_grad=True)
    low = mt.tensor([nan, 0.0, 0.0], dtype="float64", requires_grad=True)
    high = mt.tensor([1.0, nan, 1.0], dtype="float64", requires_grad=True)
    y = mt.clamp(x, low, high)
    y.backward(mt.ones(3, dtype="float64"))
    assert np.isnan(y.numpy()).all()
    for t in (x, low, high):
        np.testing.assert_array_equal(t.grad.numpy(), [0.0, 0.0, 0.0])


def test_dropout_keeps_nan():
    y = F.dropout(mt.full((64,), nan), p=0.5)
    assert np.isnan(y.numpy()).all()  # NaN times the mask, as PyTorch


def _forward_backward(op, x, grad):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        y = op(x)
        if y.requires_grad:
            y.backward(grad(y))
    return y


@pytest.mark.parametrize("name", sorted(CALLS))
def test_no_op_hides_a_nan_in_its_forward(name):
    y = _forward_backward(CALLS[name].call, nan_input(), lambda y: mt.ones_like(y))
    assert np.isnan(y.numpy()).any() != bool(CALLS[name].hides_nan)


@pytest.mark.parametrize("name", sorted(CALLS))
def test_every_op_at_a_nan_matches_torch(name, torch):
    ours, theirs = CALLS[name].call, CALLS[name].torch_call
    if theirs is None:
        pytest.skip("no PyTorch counterpart")
    upstream = {}

    def seed(y):
        upstream["g"] = np.random.default_rng(0).standard_normal(y.shape)
        return mt.tensor(upstream["g"], dtype=y.dtype)

    x = nan_input(requires_grad=True)
    y = _forward_backward(ours, x, seed)
    tx = torch.tensor(nan_input().numpy(), requires_grad=True)
    ty = theirs(torch, tx)
    want = ty.detach().numpy()
    tolerance = float64_tolerance(np.nan_to_num(want), n_ops=64, dtype="float64")  # 64 roundings at most
    np.testing.assert_allclose(y.numpy(), want, rtol=0, atol=tolerance, equal_nan=True)
    if CALLS[name].nan_gradient_differs or not y.requires_grad:
        return
    ty.backward(torch.tensor(upstream["g"], dtype=ty.dtype))
    want = tx.grad.numpy()
    tolerance = float64_tolerance(np.nan_to_num(want), n_ops=64, dtype="float64")
    np.testing.assert_allclose(x.grad.numpy(), want, rtol=0, atol=tolerance, equal_nan=True)
