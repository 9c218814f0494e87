"""Tensor: factories, dtypes, devices, conversions and comparisons."""

import numpy as np
import pytest

import minitorch_attn as mt


@pytest.mark.parametrize("factory", [mt.zeros, mt.ones, mt.randn, mt.rand])
def test_shapes_as_varargs_or_tuple(factory, device):
    assert factory(2, 3, device=device).shape == (2, 3)
    assert factory((2, 3), device=device).shape == (2, 3)
    assert factory(2, 3, device=device).dtype == "float32"
    assert factory(2, dtype="float64", device=device).dtype == "float64"


def test_bad_shape_is_a_type_error():
    with pytest.raises(TypeError, match="shape must be non-negative ints"):
        mt.zeros(2, -1)
    with pytest.raises(TypeError, match="shape must be non-negative ints"):
        mt.ones(2.5)


def test_tensor_dtypes_follow_pytorch():
    assert mt.tensor([1.0, 2.0]).dtype == "float32"  # Python floats: the default float32
    assert mt.tensor(3.0).dtype == "float32"
    assert mt.tensor([1, 2]).dtype == "int64"
    assert mt.tensor([True, False]).dtype == "bool"
    assert mt.tensor(np.zeros(2)).dtype == "float64"  # a NumPy array keeps its dtype
    assert mt.tensor(np.zeros(2, dtype=np.float32)).dtype == "float32"
    assert mt.tensor([1, 2], dtype="float64").dtype == "float64"
    assert mt.tensor([1.0], dtype=np.float64).dtype == "float64"


def test_tensor_copies_its_data():
    source = np.zeros(3)
    t = mt.tensor(source)
    source[0] = 5
    assert t.numpy()[0] == 0


def test_unsupported_dtype_is_a_type_error():
    with pytest.raises(TypeError, match="unsupported dtype"):
        mt.zeros(2, dtype="complex64")
    with pytest.raises(TypeError, match="cannot make a tensor"):
        mt.tensor(["a", "b"])


def test_only_floats_require_grad():
    with pytest.raises(TypeError, match="only floating-point tensors can require gradients"):
        mt.tensor([1, 2], requires_grad=True)


def test_arange_full_like_and_randint(device):
    assert mt.arange(5, device=device).dtype == "int64"
    np.testing.assert_array_equal(mt.arange(1, 7, 2, device=device).numpy(), [1, 3, 5])
    assert mt.arange(0.0, 1.0, 0.25, device=device).dtype == "float32"
    np.testing.assert_array_equal(mt.full((2, 2), 7.0, device=device).numpy(), np.full((2, 2), 7.0))
    x = mt.randn(2, 3, dtype="float64", device=device)
    assert mt.zeros_like(x).shape == (2, 3) and mt.zeros_like(x).dtype == "float64"
    assert mt.ones_like(x).device == device
    r = mt.randint(3, 9, (100,), device=device).numpy()
    assert r.dtype == np.int64 and r.min() >= 3 and r.max() < 9
    assert mt.randint(4, (2, 2), device=device).shape == (2, 2)  # randint(high, size)


def test_moving_between_devices_keeps_values():
    x = mt.randn(2, 3)
    y = x.to("strict")
    assert y.device == "strict"
    np.testing.assert_array_equal(y.numpy(), x.numpy())
    z = y.cpu()
    assert z.device == "cpu"
    np.testing.assert_array_equal(z.numpy(), x.numpy())


def test_to_dtype_and_casts(device):
    x = mt.tensor([1.5, 2.5], device=device)
    assert x.to("float64").dtype == "float64"
    assert x.double().dtype == "float64" and x.double().float().dtype == "float32"
    assert x.long().dtype == "int64"


def test_mixing_devices_names_both():
    a = mt.ones(2)
    b = mt.ones(2, device="strict")
    with pytest.raises(ValueError, match="'cpu' and on 'strict'"):
        a + b


def test_item_numpy_tolist_and_len(device):
    x = mt.tensor([[1.0, 2.0]], device=device)
    assert x.sum().item() == 3.0
    assert isinstance(x.sum().item(), float)
    assert x.tolist() == [[1.0, 2.0]]
    assert len(x) == 1 and x.numel() == 2 and x.size(1) == 2 and x.ndim == 2
    with pytest.raises(ValueError, match="single-element"):
        x.item()


def test_comparisons_give_bool_tensors_without_grad(device):
    x = mt.tensor([1.0, 2.0, 3.0], device=device, requires_grad=True)
    for result in (x > 2, x >= 2, x < 2, x <= 2, x == 2, x != 2):
        assert result.dtype == "bool" and not result.requires_grad
    np.testing.assert_array_equal((x > 1.5).numpy(), [False, True, True])
    np.testing.assert_array_equal((~(x > 1.5)).numpy(), [True, False, False])
    np.testing.assert_array_equal(((x > 1.5) & (x < 2.5)).numpy(), [False, True, False])


def test_repr_shows_device_dtype_and_grad():
    x = mt.tensor([1.0, 2.0], requires_grad=True)
    assert repr(x) == "tensor([1., 2.], device='cpu', dtype=float32, requires_grad=True)"
    assert "grad_fn=<MulBackward>" in repr(x * 2)


def test_detach_cuts_the_graph():
    x = mt.randn(3, requires_grad=True)
    y = (x * 2).detach()
    assert not y.requires_grad and y.grad_fn is None


def test_python_floats_asked_as_float64_keep_every_digit():
    # a detour through the float32 default would round 0.1 to 0.10000000149011612
    assert mt.tensor([0.1], dtype="float64").item() == 0.1
    assert mt.tensor(0.1, dtype="float64", device="strict").item() == 0.1


def test_to_an_unknown_name_says_it_is_neither_device_nor_dtype():
    with pytest.raises(ValueError, match="not a device .* nor a dtype"):
        mt.ones(2).to("gpu")
