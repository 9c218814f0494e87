"""clamp with number or tensor bounds, broadcasting, gradients to tensor bounds, empty
inputs and PyTorch's dtypes, computed with whole-array operations."""

import numpy as np
import pytest

import minitorch_attn as mt


def reference(x, low, high):
    """``min(max(x, low), high)`` in NumPy, and PyTorch's gradients (see core.minmax.Clamp)."""
    y = x if low is None else np.maximum(x, low)
    y = y if high is None else np.minimum(y, high)
    keep = np.ones(np.broadcast_shapes(*(np.shape(a) for a in (x, low, high) if a is not None)), bool)
    if low is not None:
        keep = keep & (x >= low)
    if high is not None:
        keep = keep & (x <= high)
    chose_low = None if low is None else (x < low) & (True if high is None else low < high)
    chose_high = None if high is None else (x > high) | (False if low is None else high < low)
    return y, keep, chose_low, chose_high


def unbroadcast(g, shape):
    while g.ndim > len(shape):
        g = g.sum(0)
    return g.sum(axis=tuple(i for i, s in enumerate(shape) if s == 1), keepdims=True)


BOUNDS = [
    ("numbers", -0.5, 0.5),
    ("min only", -0.5, None),
    ("max tensor only", None, "tensor"),
    ("tensor, number", "tensor", 0.5),
    ("both tensors", "tensor", "tensor"),
    ("broadcast row", "row", "row"),
    ("low above high", 0.5, -0.5),
]


@pytest.mark.parametrize("label, low, high", BOUNDS, ids=[b[0] for b in BOUNDS])
def test_values_and_gradients_with_every_kind_of_bound(label, low, high):
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, (4, 5))
    x[0, :3] = [0.5, -0.5, 0.0]  # ties with the number bounds

    def make(b):
        if b == "tensor":
            return rng.uniform(-1, 1, (4, 5))
        if b == "row":
            return rng.uniform(-1, 1, (1, 5))
        return b

    low, high = make(low), make(high)
    if isinstance(low, np.ndarray) and isinstance(high, np.ndarray):
        low, high = np.minimum(low, high), np.maximum(low, high)
    tensors = {
        k: mt.tensor(v, dtype="float64", requires_grad=True) if isinstance(v, np.ndarray) else v
        for k, v in (("x", x), ("low", low), ("high", high))
    }
    y = mt.clamp(tensors["x"], tensors["low"], tensors["high"])
    g = rng.standard_normal(y.shape)
    y.backward(mt.tensor(g, dtype="float64"))
    want, keep, chose_low, chose_high = reference(x, low, high)
    np.testing.assert_array_equal(y.numpy(), want)
    np.testing.assert_array_equal(tensors["x"].grad.numpy(), np.where(keep, g, 0.0))
    for name, chose, value in (("low", chose_low, low), ("high", chose_high, high)):
        if isinstance(value, np.ndarray):
            np.testing.assert_allclose(
                tensors[name].grad.numpy(),
                unbroadcast(np.where(chose, g, 0.0), value.shape),
                rtol=0,
                atol=16 * np.finfo(np.float64).eps * np.abs(g).sum(),
            )


def test_gradients_to_tensor_bounds_pass_gradcheck():
    rng = np.random.default_rng(1)
    x = mt.tensor(rng.uniform(-1, 1, (3, 4)), dtype="float64", requires_grad=True)
    low = mt.tensor(rng.uniform(-1, -0.1, (1, 4)), dtype="float64", requires_grad=True)
    high = mt.tensor(rng.uniform(0.1, 1, (3, 1)), dtype="float64", requires_grad=True)
    assert mt.gradcheck(lambda a, b, c: mt.clamp(a, b, c), [x, low, high])


def test_the_result_takes_the_broadcast_shape():
    y = mt.clamp(mt.zeros(3), min=mt.ones(2, 1))
    assert y.shape == (2, 3) and y.tolist() == [[1.0] * 3] * 2


@pytest.mark.parametrize("shape", [(0,), (0, 3), (2, 0)])
def test_empty_inputs(shape):
    x = mt.zeros(shape, requires_grad=True)
    y = mt.clamp(x, min=mt.zeros(shape[-1:]), max=1.0)
    assert y.shape == shape
    y.sum().backward()
    assert x.grad.shape == shape


def test_dtypes_follow_pytorch_promotion():
    i = mt.tensor([-3, 0, 3])
    assert mt.clamp(i, min=0.5).dtype == "float32" and mt.clamp(i, min=0.5).tolist() == [0.5, 0.5, 3.0]
    assert mt.clamp(i, min=-1, max=1).dtype == "int64"
    assert mt.clamp(mt.zeros(3), min=mt.zeros(3, dtype="float64")).dtype == "float64"
    assert mt.clamp(i, max=mt.ones(3)).dtype == "float32"
    assert i.clamp(min=0).tolist() == [0, 0, 3]


def test_bad_bounds_raise_clear_errors():
    with pytest.raises(ValueError, match="at least one of 'min' or 'max'"):
        mt.clamp(mt.zeros(3))
    with pytest.raises(TypeError, match="min must be None, a number or a Tensor"):
        mt.clamp(mt.zeros(3), min=[0.0])
    with pytest.raises(ValueError, match="do not broadcast"):
        mt.clamp(mt.zeros(3), min=mt.zeros(2))


def test_torch_agrees(torch):
    rng = np.random.default_rng(2)
    x, low, high = rng.uniform(-1, 1, (3, 4, 5)), rng.uniform(-1, 1, (4, 1)), rng.uniform(-1, 1, (5,))
    ours = [mt.tensor(a, dtype="float64", requires_grad=True) for a in (x, low, high)]
    theirs = [torch.tensor(a, requires_grad=True) for a in (x, low, high)]
    g = rng.standard_normal(x.shape)
    mt.clamp(*ours).backward(mt.tensor(g, dtype="float64"))
    torch.clamp(*theirs).backward(torch.tensor(g))
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(
            a.grad.numpy(), b.grad.numpy(), rtol=0, atol=16 * np.finfo(np.float64).eps * np.abs(g).sum()
        )
    assert str(torch.clamp(torch.tensor([-3, 0, 3]), min=0.5).dtype) == "torch.float32"
