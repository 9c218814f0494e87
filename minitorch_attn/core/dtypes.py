"""Dtypes, named by strings as PyTorch's (``"float32"``, ``"float64"``, ``"int64"``, ``"int32"``,
``"bool"``), and the checks of ints and shapes that the factories and :class:`Tensor` share."""

from __future__ import annotations

import numbers

float32 = "float32"
float64 = "float64"
int32 = "int32"
int64 = "int64"
bool_ = "bool"
DTYPES = (float32, float64, int32, int64, bool_)
FLOAT_DTYPES = (float32, float64)


_NAME_OF = {}
"""speed: ``dtype_name`` of each dtype object seen so far. Every operation asks its inputs'
dtypes, and NumPy computes ``dtype.name`` anew (a few microseconds) on each request: about
1,700 requests per training step of the default GPT (counted with cProfile). Keyed by
(type, dtype), so that objects of different kinds are never compared with each other
(``numpy.dtype("float32") == "float32"`` holds, and array-api-strict warns when one of its
dtypes is compared with a NumPy one)."""


def dtype_name(dtype):
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


def _is_int(value):
    """An int of any kind (Python's or NumPy's ``int64``, as PyTorch accepts), not a bool."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _shape_args(shape):
    """Accept ``f(2, 3)`` and ``f((2, 3))`` as PyTorch does; NumPy ints become Python ints."""
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    for s in shape:
        if not _is_int(s) or s < 0:
            raise TypeError(f"a shape must be non-negative ints, got {shape!r}")
    return tuple(int(s) for s in shape)
