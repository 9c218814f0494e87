"""Dtypes, named by strings as PyTorch's (``"float32"``, ``"float64"``, ``"int64"``, ``"int32"``,
``"bool"``), and the checks of ints and shapes that the factories and :class:`Tensor` share."""

from __future__ import annotations

import numbers
from typing import Any, TypeGuard

import numpy

float32 = "float32"
float64 = "float64"
int32 = "int32"
int64 = "int64"
bool_ = "bool"
DTYPES = (float32, float64, int32, int64, bool_)
FLOAT_DTYPES = (float32, float64)
Scalar = int | float  # in type hints: a Python number where a tensor may also be given
Dims = int | tuple[int, ...] | None  # in type hints: one dim, several, or None for all


_NAME_OF: dict = {}
"""speed: ``dtype_name`` of each dtype object seen so far. Every operation asks its inputs'
dtypes, and NumPy computes ``dtype.name`` anew (a few microseconds) on each request: about
1,700 requests per training step of the default GPT (counted with cProfile). Keyed by
(type, dtype), so that objects of different kinds are never compared with each other
(``numpy.dtype("float32") == "float32"`` holds, and array-api-strict warns when one of its
dtypes is compared with a NumPy one)."""


def dtype_name(dtype: object) -> str:
    """Normalize a dtype given as a string, a NumPy/CuPy dtype or type, or an
    array-api-strict dtype to one of :data:`DTYPES`. Raises TypeError otherwise."""
    key = (type(dtype), dtype)
    try:
        return _NAME_OF[key]
    except (KeyError, TypeError):  # not seen yet, or not hashable
        pass
    name = _dtype_name(dtype)
    try:
        _NAME_OF[key] = name
    except TypeError:
        pass
    return name


def _dtype_name(dtype):
    if isinstance(dtype, str):
        name = dtype
    elif hasattr(dtype, "name") and isinstance(dtype.name, str):  # numpy.dtype('float32')
        name = dtype.name
    elif isinstance(dtype, type) and hasattr(dtype, "__name__"):  # numpy.float32
        name = dtype.__name__
    else:  # array_api_strict.float32 prints as "array_api_strict.float32"
        name = str(dtype).split(".")[-1]
    name = {"bool_": "bool"}.get(name, name)
    if name not in DTYPES:
        raise TypeError(f"unsupported dtype {dtype!r}; expected one of {', '.join(DTYPES)}")
    return name


def _is_int(value: object) -> TypeGuard[int | numpy.integer]:
    """An int of any kind (Python's or NumPy's ``int64``, as PyTorch accepts), not a bool."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _is_size(value):
    """A size in a shape: an int (:func:`_is_int`), or a 0-d integer array, which PyTorch
    reads as its int in a shape (``torch.zeros(numpy.array(2))``; not as a dim)."""
    return _is_int(value) or (isinstance(value, numpy.ndarray) and value.ndim == 0 and value.dtype.kind in "iu")


def _shape_args(shape):
    """Accept ``f(2, 3)`` and ``f((2, 3))`` as PyTorch does; NumPy ints become Python ints."""
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    for s in shape:
        if not _is_size(s) or s < 0:
            raise TypeError(f"a shape must be non-negative ints, got {shape!r}")
    return tuple(int(s) for s in shape)


def _shape_args_allow_minus_one(shape):
    """Accept ``f(2, -1)`` and ``f((2, -1))``: ints, where -1 means "the rest" or "keep"."""
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    for s in shape:
        if type(s) is not int and not _is_size(s):  # speed: Python ints skip the ABC check
            raise TypeError(f"expected ints, got {shape!r}")
        if s < -1:
            raise ValueError(f"sizes must be >= 0, or -1; got {shape!r}")
    return tuple(int(s) for s in shape)


# ---- the default float dtype and the one promotion rule ------------------------------------------
_default_float = [float32]


def get_default_dtype() -> str:
    """The float dtype that Python floats, the factories and float operations of integer or
    bool inputs take (``"float32"`` unless :func:`set_default_dtype` said otherwise), as
    ``torch.get_default_dtype``."""
    return _default_float[0]


def set_default_dtype(dtype: str) -> None:
    """Set the default float dtype (``"float32"`` or ``"float64"``), as ``torch.set_default_dtype``.

    Raises:
        TypeError: for a dtype that is not float32 or float64.
    """
    name = dtype_name(dtype)
    if name not in FLOAT_DTYPES:
        raise TypeError(f"only float32 or float64 can be the default dtype, got {name}")
    _default_float[0] = name


def _category(dtype):
    """0 for bool, 1 for the ints, 2 for the floats: PyTorch promotes across categories."""
    return 2 if dtype in FLOAT_DTYPES else 1 if dtype != bool_ else 0


def result_dtype(*operands: Any) -> str:
    """The dtype of an operation of ``operands`` (Tensors, anything with a dtype name, and
    Python numbers), by PyTorch's rule (``torch.result_type``):

    1. the highest category among them wins (bool < int < float);
    2. if a Python number is alone in that category, the result is its category's default:
       ``bool``, ``int64``, or :func:`get_default_dtype` for a float (an int tensor times
       0.5 is float32, a float32 tensor times 0.5 stays float32);
    3. otherwise the widest tensor dtype of that category (float64 over float32, int64
       over int32).

    NumPy scalars (``numpy.float64(0.5)``) count as Python numbers, as in PyTorch.
    Operands that are None are skipped. (PyTorch also ranks 0-d tensors below tensors with
    dims; here every tensor counts alike.)
    """
    tensors, numbers_top = [], -1
    for operand in operands:
        if operand is None:
            continue
        if isinstance(operand, bool):
            numbers_top = max(numbers_top, 0)
        elif isinstance(operand, numbers.Integral):  # Python's, and NumPy's scalars, as PyTorch
            numbers_top = max(numbers_top, 1)
        elif isinstance(operand, numbers.Real):
            numbers_top = max(numbers_top, 2)
        elif getattr(operand, "dtype", None) is not None:
            tensors.append(dtype_name(operand.dtype))
    tensors_top = max((_category(d) for d in tensors), default=-1)
    if numbers_top > tensors_top:
        return (bool_, int64, get_default_dtype())[numbers_top]
    top = [d for d in tensors if _category(d) == tensors_top]
    for wide in (float64, int64):
        if wide in top:
            return wide
    return top[0]


def float_result_dtype(*operands):
    """The dtype of a float operation (exp, sqrt, division, ...): :func:`result_dtype`, or
    the default float dtype when that is an int or bool, as PyTorch."""
    dtype = result_dtype(*operands)
    return dtype if dtype in FLOAT_DTYPES else get_default_dtype()
