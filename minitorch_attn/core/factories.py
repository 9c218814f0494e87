"""Factories: ``tensor``, ``zeros``, ``ones``, ``full``, ``arange``, ``randn``, ``rand``, ``randint``.

Each makes a :class:`~minitorch_attn.core.tensor.Tensor` on a device (the default one
unless ``device=`` says otherwise) with a dtype (float32 unless ``dtype=`` says
otherwise, as in PyTorch).
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy

from .backend import backend_of, get_backend
from .dtypes import Scalar, _category
from .tensor import FLOAT_DTYPES, Tensor, _is_int, _shape_args, dtype_name, get_default_dtype, int64


def _make(array, requires_grad):
    return Tensor(array, requires_grad=requires_grad)


def _host_array(data):
    """``data`` (numbers, nested lists, a NumPy array) as a NumPy array of a supported
    dtype: other ints (uint8, int16, uint32, ...) become int64 and float16 becomes float32,
    both without loss, as a list of the same values would.

    Raises:
        TypeError: for data that are not numbers (strings, None, complex, objects).
        ValueError: for ragged nested lists, or unsigned values past int64's range.
    """
    try:
        host = numpy.asarray(data)
    except ValueError:
        raise ValueError("tensor: nested lists must have the same length at each depth (a rectangular array)") from None
    if host.dtype.kind not in "fiub" or host.dtype.itemsize > 8:
        raise TypeError(f"cannot make a tensor from data of dtype {host.dtype}")
    if host.dtype == numpy.uint64 and host.size and host.max() > numpy.iinfo(numpy.int64).max:
        raise ValueError(f"tensor: the value {host.max()} does not fit in int64, the widest int dtype")
    if host.dtype.kind in "iu" and host.dtype not in (numpy.int32, numpy.int64):
        host = host.astype(numpy.int64)
    elif host.dtype == numpy.float16:
        host = host.astype(numpy.float32)
    return host


def _element_dtype(value):
    """The dtype PyTorch infers for one element of a list: a Tensor's or a NumPy scalar's
    own, the default float dtype for a Python float, int64 for an int, bool for a bool."""
    if isinstance(value, Tensor):
        return value.dtype
    if isinstance(value, numpy.generic):
        return _host_array(value).dtype.name
    if isinstance(value, bool):
        return "bool"
    return "int64" if isinstance(value, numbers.Integral) else get_default_dtype()


def _unpack_elements(data, dtypes):
    """``data`` (nested lists) with each Tensor element replaced by its one value, as
    ``torch.tensor`` reads a list of tensors: a 0-d or one-element tensor is a number
    (``[tensor([1.]), tensor([2.])]`` has shape (2,)). Adds each element's dtype to ``dtypes``.

    Raises:
        ValueError: for a tensor of more than one element, as PyTorch.
    """
    if isinstance(data, (list, tuple)):
        return [_unpack_elements(item, dtypes) for item in data]
    if isinstance(data, Tensor):
        if data.numel() != 1:
            raise ValueError(
                f"tensor: only one-element tensors can be converted to Python scalars, got a "
                f"tensor of shape {tuple(data.shape)} in the list (stack them with mt.stack)"
            )
        dtypes.add(data.dtype)
        return data.item()
    dtypes.add(_element_dtype(data))
    return data


def _holds_tensors_or_numpy_scalars(data):
    """Whether nested lists ``data`` hold a Tensor or a NumPy scalar anywhere (speed: a list
    of Python numbers is told by the set of its types, in C, not element by element)."""
    if isinstance(data, (list, tuple)):
        if set(map(type, data)) <= _PYTHON_NUMBERS:
            return False
        return any(_holds_tensors_or_numpy_scalars(item) for item in data if type(item) not in _PYTHON_NUMBERS)
    return isinstance(data, (Tensor, numpy.generic))


_PYTHON_NUMBERS = {int, float, bool}


def _promoted(dtypes):
    """PyTorch's promotion of the element dtypes of a list: the highest category (bool <
    int < float), then the widest dtype within it (int32 and float32 beside int64 give
    int64 and float32; float64 wins over float32)."""
    top = max(_category(d) for d in dtypes)
    return max((d for d in dtypes if _category(d) == top), key=lambda d: numpy.dtype(d).itemsize)


def tensor(data: Any, dtype: str | None = None, device: str | None = None, requires_grad: bool = False) -> Tensor:
    """A new tensor holding a copy of ``data``.

    Args:
        data: a Python number or nested list, a NumPy (or CuPy / array-api-strict) array,
            or a Tensor. A list may hold 0-d or one-element Tensors and NumPy scalars, each
            read as its one number (as ``torch.tensor``: ``[tensor(1.), tensor([2.])]``
            has shape (2,)).
        dtype: defaults to the data's own dtype for arrays and Tensors; Python floats
            become the default float dtype (float32), ints int64, bools bool; the elements
            of a list, each of its own dtype (a Tensor's, a NumPy scalar's, or a Python
            number's as above), promote as in PyTorch (float64 and int32 elements make
            float64, int32 and int elements int64).
        device: ``"cpu"``, ``"cuda"`` or ``"strict"``; defaults to the data's device for
            Tensors and device arrays, else to the default device.
    Raises:
        TypeError: for data of an unsupported kind or dtype.
        ValueError: for ragged nested lists, values that do not fit int64, or a Tensor of
            more than one element inside a list.
    """
    if isinstance(data, Tensor):
        source_device = data.device
        data = data.data
    else:
        source_device = None
    if _holds_tensors_or_numpy_scalars(data):
        dtypes: set[str] = set()
        data = _unpack_elements(data, dtypes)
        if dtype is None and dtypes:
            dtype = _promoted(dtypes)  # what PyTorch infers from the elements' own dtypes
    try:
        source_device = source_device or backend_of(data).name
        is_array = True
    except TypeError:
        is_array = False
    if device is None:
        device = source_device if source_device is not None else None
    backend = get_backend(device)

    if is_array and not isinstance(data, numpy.ndarray):
        if backend_of(data) is backend:
            array = backend.xp.asarray(data, copy=True)
        else:
            array = backend.asarray(backend_of(data).to_numpy(data))
    else:
        host = _host_array(data)
        if dtype is not None:
            host = host.astype(dtype_name(dtype))  # straight to the asked dtype: no float32 detour
        elif host.dtype == numpy.float64 and not isinstance(data, numpy.ndarray):
            host = host.astype(get_default_dtype())  # Python floats become the default float dtype
        array = backend.asarray(host.copy() if host is data else host)  # never the caller's buffer
    if dtype is not None:
        array = backend.xp.astype(array, backend.dtype(dtype_name(dtype)))
    return _make(array, requires_grad)


def _resolve(dtype, device):
    backend = get_backend(device)
    return backend, backend.dtype(dtype_name(dtype if dtype is not None else get_default_dtype()))


def zeros(
    *shape: int | tuple[int, ...], dtype: str | None = None, device: str | None = None, requires_grad: bool = False
) -> Tensor:
    """A tensor of zeros of the given shape (``zeros(2, 3)`` or ``zeros((2, 3))``); the default
    float dtype (float32) by default."""
    backend, dt = _resolve(dtype, device)
    return _make(backend.xp.zeros(_shape_args(shape), dtype=dt, device=backend.device), requires_grad)


def ones(
    *shape: int | tuple[int, ...], dtype: str | None = None, device: str | None = None, requires_grad: bool = False
) -> Tensor:
    """A tensor of ones of the given shape; the default float dtype (float32) by default."""
    backend, dt = _resolve(dtype, device)
    return _make(backend.xp.ones(_shape_args(shape), dtype=dt, device=backend.device), requires_grad)


def full(
    shape: int | tuple[int, ...],
    fill_value: Scalar,
    dtype: str | None = None,
    device: str | None = None,
    requires_grad: bool = False,
) -> Tensor:
    """A tensor of the given shape filled with ``fill_value``; by default of the value's
    dtype, as ``torch.full``: bool for a bool, int64 for an int (Python's or NumPy's), the
    default float dtype (float32) for a float.

    Raises:
        TypeError: for a fill value that is not a real number.
        ValueError: for NaN or infinity in an int dtype (as PyTorch: no int holds them).
    """
    if not isinstance(fill_value, numbers.Real):
        raise TypeError(f"full: fill_value must be a real number, got {fill_value!r}")
    if dtype is None and isinstance(fill_value, (bool, numpy.bool_)):
        dtype = "bool"
    elif dtype is None and _is_int(fill_value):
        dtype = int64
    backend, dt = _resolve(dtype, device)
    shape = _shape_args((shape,) if isinstance(shape, (tuple, list)) else (shape,))
    if dtype_name(dtype or get_default_dtype()) in ("int32", "int64") and not math.isfinite(fill_value):
        raise ValueError(f"full: fill_value {fill_value!r} cannot be converted to {dtype_name(dtype)}")
    return _make(backend.xp.full(shape, fill_value, dtype=dt, device=backend.device), requires_grad)


def zeros_like(t: Tensor, dtype: str | None = None, requires_grad: bool = False) -> Tensor:
    return zeros(t.shape, dtype=dtype or t.dtype, device=t.device, requires_grad=requires_grad)


def ones_like(t: Tensor, dtype: str | None = None, requires_grad: bool = False) -> Tensor:
    return ones(t.shape, dtype=dtype or t.dtype, device=t.device, requires_grad=requires_grad)


def arange(
    start: Scalar,
    end: Scalar | None = None,
    step: Scalar = 1,
    dtype: str | None = None,
    device: str | None = None,
    requires_grad: bool = False,
) -> Tensor:
    """Values from ``start`` (inclusive) to ``end`` (exclusive) by ``step``, as torch.arange:
    int64 when all bounds are ints, else the default float dtype.

    Raises:
        TypeError: for bounds that are not real numbers.
        ValueError: for a step of 0, or a bound that is NaN or infinite.
    """
    if end is None:
        start, end = 0, start
    for name, value in (("start", start), ("end", end), ("step", step)):
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise TypeError(f"arange: {name} must be a number, got {value!r}")
        if not math.isfinite(value):
            raise ValueError(f"arange: {name} must be finite, got {value!r}")
    if step == 0:
        raise ValueError("arange: step must not be 0")
    if dtype is None:
        dtype = int64 if all(_is_int(v) for v in (start, end, step)) else get_default_dtype()
    backend, dt = _resolve(dtype, device)
    return _make(backend.xp.arange(start, end, step, dtype=dt, device=backend.device), requires_grad)


def _float_dtype(dtype, what):
    name = dtype_name(dtype or get_default_dtype())
    if name not in FLOAT_DTYPES:
        raise TypeError(f"{what}: dtype must be float32 or float64, got {name}")
    return name


def randn(
    *shape: int | tuple[int, ...], dtype: str | None = None, device: str | None = None, requires_grad: bool = False
) -> Tensor:
    """Standard normal samples of the given shape; reproducible after :func:`manual_seed`.
    Raises TypeError for a dtype that is not float32/float64."""
    backend = get_backend(device)
    return _make(backend.normal(_shape_args(shape), _float_dtype(dtype, "randn")), requires_grad)


def rand(
    *shape: int | tuple[int, ...], dtype: str | None = None, device: str | None = None, requires_grad: bool = False
) -> Tensor:
    """Uniform samples in [0, 1) of the given shape; reproducible after :func:`manual_seed`.
    Raises TypeError for a dtype that is not float32/float64."""
    backend = get_backend(device)
    return _make(backend.uniform(_shape_args(shape), _float_dtype(dtype, "rand")), requires_grad)


def randint(
    low: int,
    high: int | tuple[int, ...] | None = None,
    size: int | tuple[int, ...] | None = None,
    dtype: str | None = None,
    device: str | None = None,
) -> Tensor:
    """Integers in ``[low, high)`` of shape ``size``, as torch.randint (``randint(high, size)``
    also works); int64 by default.

    Raises:
        TypeError: without a size, or for bounds that are not ints.
        ValueError: unless low < high.
    """
    if size is None:
        if high is None or not isinstance(high, (tuple, list)):
            raise TypeError("randint needs a size, e.g. randint(0, 10, (3,)) or randint(10, (3,))")
        low, high, size = 0, low, high
    if not (_is_int(low) and _is_int(high)):
        raise TypeError(f"randint: low and high must be ints, got {low!r} and {high!r}")
    if not low < high:
        raise ValueError(f"randint: the range [low, high) = [{low}, {high}) is empty; it needs low < high")
    backend = get_backend(device)
    return _make(backend.integers(low, high, _shape_args((size,)), dtype_name(dtype or int64)), False)
