"""One promotion rule for every op, as PyTorch's: integer and bool inputs of float
operations give the default float dtype (float32, or what ``set_default_dtype`` says),
Python numbers follow ``torch.result_type``. Each op's call and its rule for an int input
are in its catalogue record (``OneInput`` in ``minitorch_attn/opinfo/record.py``)."""

import itertools
import warnings

import numpy as np
import pytest

import minitorch_attn as mt
from minitorch_attn import opinfo
from minitorch_attn.core.dtypes import result_dtype

CALLS = opinfo.one_input_calls()
FLOAT_OPS = sorted(name for name, call in CALLS.items() if call.of_ints == "float")
INT_DTYPES = ["int64", "int32", "bool"]


def test_every_public_function_has_a_one_input_call():
    public = {name for record in opinfo.op_db() for name in record.covers if name.startswith(("mt.", "F."))}
    called = {name for record in opinfo.op_db() if record.one_input for name in record.covers}
    missing = sorted(public - called)
    assert not missing, f"no one_input call in the catalogue for {missing}: add OneInput(...) to its record"


def int_input(dtype):
    return mt.tensor(np.array([[-3, 0, 3], [1, 2, -1]]).astype(dtype))


def run(op, x):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # log and sqrt of negatives: NaN, as meant
        try:
            return op(x).dtype
        except TypeError:
            return TypeError


@pytest.mark.parametrize("dtype", INT_DTYPES)
@pytest.mark.parametrize("name", sorted(CALLS))
def test_every_op_of_an_int_or_bool_input(name, dtype):
    assert run(CALLS[name].call, int_input(dtype)) == CALLS[name].dtype_of_ints(dtype, "float32")


@pytest.mark.parametrize("op", [mt.ones_like, mt.zeros_like], ids=["ones_like", "zeros_like"])
@pytest.mark.parametrize("dtype", INT_DTYPES)
def test_factories_like_keep_the_dtype(op, dtype):
    assert op(int_input(dtype)).dtype == dtype


@pytest.mark.parametrize("name", FLOAT_OPS)
def test_float_ops_follow_the_default_dtype(name):
    try:
        mt.set_default_dtype("float64")
        assert mt.get_default_dtype() == "float64"
        for dtype in INT_DTYPES:
            assert run(CALLS[name].call, int_input(dtype)) == "float64"
        assert mt.tensor([1.5]).dtype == mt.zeros(2).dtype == mt.where(mt.tensor([True]), 8.5, -3.9).dtype == "float64"
    finally:
        mt.set_default_dtype("float32")
    assert mt.tensor([1.5]).dtype == "float32"


def test_set_default_dtype_refuses_a_dtype_that_is_not_float():
    with pytest.raises(TypeError, match="float32 or float64"):
        mt.set_default_dtype("int64")


def test_the_cases_of_the_report():
    c = mt.tensor([True, False, True])
    i = mt.tensor([-3, 0, 3])
    assert mt.where(c, 8.5, -3.9).dtype == "float32"
    np.testing.assert_allclose(mt.where(c, 8.5, -3.9).numpy(), np.float32([8.5, -3.9, 8.5]))
    assert mt.where(c, i, mt.zeros(3)).dtype == "float32"
    assert mt.where(c, i, 2).dtype == "int64"
    assert mt.where(c, mt.zeros(3, dtype="float64"), 0.5).dtype == "float64"
    assert mt.clamp(i, min=0.5).tolist() == [0.5, 0.5, 3.0] and mt.clamp(i, min=0.5).dtype == "float32"
    assert mt.clamp(i, min=0).dtype == "int64"
    for f in (mt.exp, mt.log, mt.sqrt, mt.tanh, lambda t: t**0.5):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            assert f(i).dtype == "float32"
    assert (i**2).dtype == "int64" and (i**2).tolist() == [9, 0, 9]
    with pytest.raises(ValueError, match="negative integer powers"):
        i**-1
    assert (i / 2).dtype == (i * 0.5).dtype == (i + mt.zeros(3)).dtype == "float32"
    assert mt.masked_fill(i, c, 0.5).dtype == "int64"  # masked_fill keeps x's dtype, as PyTorch
    assert (i * np.float64(0.5)).dtype == mt.where(c, i, np.float64(0.5)).dtype == "float32"  # NumPy scalars: numbers
    assert mt.clamp(i, min=np.float32(0.5)).dtype == "float32"


OPERANDS = ["bool", "int32", "int64", "float32", "float64", True, 2, 2.5]


@pytest.mark.parametrize("a, b", list(itertools.product(OPERANDS, repeat=2)))
def test_result_dtype_is_torch_result_type(a, b):
    def ours(v):
        return mt.zeros(2, dtype=v) if isinstance(v, str) else v

    if not any(isinstance(v, str) for v in (a, b)):
        pytest.skip("two Python numbers: no tensor")
    category = {"bool": 0, "int32": 1, "int64": 1, "float32": 2, "float64": 2, True: 0, 2: 1, 2.5: 2}
    widest = max(category[a], category[b])
    tensors = [v for v in (a, b) if isinstance(v, str) and category[v] == widest]
    want = max(tensors, key=lambda d: d.endswith("64")) if tensors else ["bool", "int64", "float32"][widest]
    assert result_dtype(ours(a), ours(b)) == want
    assert (mt.where(mt.tensor([True, False]), ours(a), ours(b))).dtype == want


@pytest.mark.parametrize(
    "a, b", [p for p in itertools.product(OPERANDS, repeat=2) if any(isinstance(v, str) for v in p)]
)
def test_result_dtype_agrees_with_torch(a, b, torch):
    def theirs(v):
        return torch.zeros(2, dtype=getattr(torch, v)) if isinstance(v, str) else v

    def ours(v):
        return mt.zeros(2, dtype=v) if isinstance(v, str) else v

    assert result_dtype(ours(a), ours(b)) == str(torch.result_type(theirs(a), theirs(b))).split(".")[1]


@pytest.mark.parametrize("dtype", INT_DTYPES)
@pytest.mark.parametrize("name", sorted(CALLS))
def test_every_op_agrees_with_torch(name, dtype, torch):
    case = CALLS[name]
    if case.torch_call is None:
        pytest.skip("no PyTorch counterpart")
    try:
        want = str(case.torch_call(torch, torch.tensor(int_input(dtype).numpy())).dtype).split(".")[1]
    except RuntimeError:  # NotImplementedError too
        want = TypeError
    got = run(case.call, int_input(dtype))
    if dtype in case.torch_differs:
        assert got != want, f"{name} of {dtype} now agrees with PyTorch: remove its torch_differs entry"
    else:
        assert got == want


def test_negating_a_bool_tensor_says_what_to_use():
    with pytest.raises(TypeError, match=r"~x"):
        -mt.tensor([True, False])
