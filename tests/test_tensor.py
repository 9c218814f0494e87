"""Tensor: factories, dtypes, devices, conversions and comparisons."""

import warnings

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


# ---- bad and unusual inputs: what PyTorch accepts works, the rest is a clear error ---------------------
@pytest.mark.parametrize("operand", [[1.0, 2.0, 3.0], "a", None, 1j, {"a": 1}])
def test_arithmetic_with_a_non_number_is_python_s_type_error(operand):
    """tensor + [1, 2, 3] once gave a float64 tensor (NumPy turned the list into an array)
    and tensor + "a" a NumPy ufunc error; PyTorch raises TypeError for both."""
    x = mt.tensor([1.0, 2.0, 3.0])
    for op in (lambda a, b: a + b, lambda a, b: b - a, lambda a, b: a * b, lambda a, b: b / a, lambda a, b: a @ b):
        with pytest.raises(TypeError, match="unsupported operand|can't multiply sequence"):  # Python's words
            op(x, operand)


def test_numpy_scalars_mix_with_float32_as_python_numbers_do():
    """NumPy scalars are numbers, as Python's: float32 stays float32 (PyTorch's rule)."""
    x = mt.tensor([1.0, 2.0], requires_grad=True)
    for y in (x + np.float64(0.1), np.float64(2.0) * x, x / np.int64(3), x - np.float32(1.0), x ** np.float64(2.0)):
        assert y.dtype == "float32"
    np.testing.assert_array_equal((x + np.float64(0.5)).numpy(), [1.5, 2.5])


@pytest.mark.parametrize(
    "dtype, expected",
    [(np.uint8, "int64"), (np.int8, "int64"), (np.int16, "int64"), (np.uint32, "int64"), (np.float16, "float32")],
)
def test_numpy_arrays_of_other_dtypes_become_the_nearest_supported_one(dtype, expected):
    """tensor(uint8 array) once made a Tensor whose .dtype then raised; a list of the
    same values gives int64, and so does the array now (float16 widens to float32)."""
    t = mt.tensor(np.array([1, 2], dtype=dtype))
    assert t.dtype == expected and t.tolist() == [1, 2]


def test_values_that_do_not_fit_the_tensor_dtype_are_value_errors():
    with pytest.raises(ValueError, match="int64"):
        mt.tensor(np.array([2**63 + 5], dtype=np.uint64))
    with pytest.raises(ValueError, match="int64"):
        mt.full((2,), float("nan"), dtype="int64")
    with pytest.raises(ValueError, match="same length"):
        mt.tensor([[1, 2], [3]])


def test_the_constructor_rejects_arrays_of_unsupported_dtypes():
    with pytest.raises(TypeError, match="unsupported dtype"):
        mt.Tensor(np.array([1], dtype=np.uint8))


def test_shapes_may_be_numpy_integers(device):
    n = np.int64(3)
    assert mt.zeros(n, 2, device=device).shape == (3, 2)
    assert mt.ones((n,), device=device).shape == (3,)
    assert mt.randn(2, n, device=device).reshape(n, 2).shape == (3, 2)


def test_factory_arguments_are_checked_before_numpy_sees_them():
    with pytest.raises(ValueError, match="arange: .*finite"):
        mt.arange(0, float("inf"))
    with pytest.raises(ValueError, match="arange: .*finite"):
        mt.arange(float("nan"))
    with pytest.raises(TypeError, match="randint: low and high must be ints"):
        mt.randint(0.5, 5, (3,))
    with pytest.raises(ValueError, match="randint: .*low < high"):
        mt.randint(5, 5, (3,))
    for factory in (mt.rand, mt.randn):
        with pytest.raises(TypeError, match="float32 or float64"):
            factory(3, dtype="int64")


@pytest.mark.parametrize("flag", ["no", 1, None])
def test_requires_grad_must_be_a_bool(flag):
    """requires_grad="no" once switched gradients on; PyTorch's is a bool."""
    with pytest.raises(TypeError, match="requires_grad must be True or False"):
        mt.tensor([1.0], requires_grad=flag)
    with pytest.raises(TypeError, match="requires_grad must be True or False"):
        mt.tensor([1.0]).requires_grad_(flag)


def test_an_assigned_grad_must_match_the_tensor():
    """A .grad of the wrong shape once surfaced as a NumPy broadcast error at the next
    backward (or silently broadcast); PyTorch checks it when it is assigned."""
    x = mt.tensor([1.0, 2.0], requires_grad=True)
    for bad, error in (
        (mt.zeros(3), ValueError),
        (mt.zeros(2, dtype="float64"), TypeError),
        (np.zeros(2), TypeError),
        ([0.0, 0.0], TypeError),
    ):
        with pytest.raises(error, match="grad"):
            x.grad = bad
    x.grad = mt.ones(2)
    (x * 2).sum().backward()
    assert x.grad.tolist() == [3.0, 3.0]
    x.grad = None
    assert x.grad is None


def test_dtype_name_remembers_answers_but_not_errors():
    """dtype_name keeps the names it computed (it is asked on every operation); a dtype it
    rejected is rejected again, and unhashable input still gets the TypeError."""
    for _ in range(2):
        assert mt.dtype_name(np.dtype("float32")) == "float32"
        assert mt.dtype_name(np.float64) == "float64"
        assert mt.dtype_name("bool") == "bool" and mt.dtype_name(np.bool_) == "bool"
        with pytest.raises(TypeError, match="unsupported dtype"):
            mt.dtype_name(np.float16)
        with pytest.raises(TypeError, match="unsupported dtype"):
            mt.dtype_name(float)  # equal to float64's dtype in NumPy's eyes, but not a dtype we take
        with pytest.raises(TypeError, match="unsupported dtype"):
            mt.dtype_name(["float32"])


def test_dtype_name_never_compares_dtypes_of_different_libraries():
    """The remembered answers are kept per kind of object: asking for array-api-strict and
    NumPy dtypes in turn gives each its name without comparing one with the other (which
    array-api-strict answers with a UserWarning)."""
    xp = pytest.importorskip("array_api_strict")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(2):
            for strict, native in (
                (xp.float32, np.dtype("float32")),
                (xp.float64, np.dtype("float64")),
                (xp.int64, np.dtype("int64")),
                (xp.bool, np.dtype("bool")),
            ):
                assert mt.dtype_name(native) == mt.dtype_name(strict) == native.name
