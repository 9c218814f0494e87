"""Factories: ``tensor``, ``zeros``, ``ones``, ``full``, ``arange``, ``randn``, ``rand``, ``randint``.

Each makes a :class:`~minitorch_attn.core.tensor.Tensor` on a device (the default one
unless ``device=`` says otherwise) with a dtype (float32 unless ``dtype=`` says
otherwise, as in PyTorch).
"""

from __future__ import annotations

import numpy

from .backend import backend_of, get_backend
from .tensor import Tensor, _shape_args, dtype_name, float32, int64


def _make(array, requires_grad):
    return Tensor(array, requires_grad=requires_grad)


def tensor(data, dtype=None, device=None, requires_grad=False):
    """A new tensor holding a copy of ``data``.

    Args:
        data: a Python number or nested list, a NumPy (or CuPy / array-api-strict) array,
            or a Tensor.
        dtype: defaults to the data's own dtype for arrays and Tensors; Python floats
            become float32, ints int64, bools bool.
        device: ``"cpu"``, ``"cuda"`` or ``"strict"``; defaults to the data's device for
            Tensors and device arrays, else to the default device.
    Raises:
        TypeError: for data of an unsupported kind or dtype.
    """
    if isinstance(data, Tensor):
        source_device = data.device
        data = data.data
    else:
        source_device = None
    try:
        source_device = source_device or backend_of(data).name
        is_array = True
    except TypeError:
        is_array = False
    if device is None:
        device = source_device if source_device is not None else None
    backend = get_backend(device)

    if is_array:
        if backend_of(data) is backend:
            array = backend.xp.asarray(data, copy=True)
        else:
            array = backend.asarray(backend_of(data).to_numpy(data))
    else:
        host = numpy.asarray(data)
        if dtype is not None and host.dtype.kind in "fiub":
            host = host.astype(dtype_name(dtype))  # straight to the asked dtype: no float32 detour
        elif host.dtype == numpy.float64 and not isinstance(data, numpy.ndarray):
            host = host.astype(numpy.float32)  # Python floats become the default float32
        if host.dtype.kind not in "fiub":
            raise TypeError(f"cannot make a tensor from data of dtype {host.dtype}")
        if host.dtype.kind == "u":
            host = host.astype(numpy.int64)
        array = backend.asarray(host)
    if dtype is not None:
        array = backend.xp.astype(array, backend.dtype(dtype_name(dtype)))
    return _make(array, requires_grad)


def _resolve(dtype, device):
    backend = get_backend(device)
    return backend, backend.dtype(dtype_name(dtype if dtype is not None else float32))


def zeros(*shape, dtype=None, device=None, requires_grad=False):
    """A tensor of zeros of the given shape (``zeros(2, 3)`` or ``zeros((2, 3))``); float32 by default."""
    backend, dt = _resolve(dtype, device)
    return _make(backend.xp.zeros(_shape_args(shape), dtype=dt, device=backend.device), requires_grad)


def ones(*shape, dtype=None, device=None, requires_grad=False):
    """A tensor of ones of the given shape; float32 by default."""
    backend, dt = _resolve(dtype, device)
    return _make(backend.xp.ones(_shape_args(shape), dtype=dt, device=backend.device), requires_grad)


def full(shape, fill_value, dtype=None, device=None, requires_grad=False):
    """A tensor of the given shape filled with ``fill_value``; float32 by default."""
    backend, dt = _resolve(dtype, device)
    shape = _shape_args((shape,) if isinstance(shape, (tuple, list)) else (shape,))
    return _make(backend.xp.full(shape, fill_value, dtype=dt, device=backend.device), requires_grad)


def zeros_like(t, dtype=None, requires_grad=False):
    return zeros(t.shape, dtype=dtype or t.dtype, device=t.device, requires_grad=requires_grad)


def ones_like(t, dtype=None, requires_grad=False):
    return ones(t.shape, dtype=dtype or t.dtype, device=t.device, requires_grad=requires_grad)


def arange(start, end=None, step=1, dtype=None, device=None, requires_grad=False):
    """Values from ``start`` (inclusive) to ``end`` (exclusive) by ``step``, as torch.arange:
    int64 when all bounds are ints, else float32."""
    if end is None:
        start, end = 0, start
    if step == 0:
        raise ValueError("arange: step must not be 0")
    if dtype is None:
        dtype = int64 if all(isinstance(v, int) for v in (start, end, step)) else float32
    backend, dt = _resolve(dtype, device)
    return _make(backend.xp.arange(start, end, step, dtype=dt, device=backend.device), requires_grad)


def randn(*shape, dtype=None, device=None, requires_grad=False):
    """Standard normal samples of the given shape; reproducible after :func:`manual_seed`."""
    backend = get_backend(device)
    return _make(backend.normal(_shape_args(shape), dtype_name(dtype or float32)), requires_grad)


def rand(*shape, dtype=None, device=None, requires_grad=False):
    """Uniform samples in [0, 1) of the given shape; reproducible after :func:`manual_seed`."""
    backend = get_backend(device)
    return _make(backend.uniform(_shape_args(shape), dtype_name(dtype or float32)), requires_grad)


def randint(low, high=None, size=None, dtype=None, device=None):
    """Integers in ``[low, high)`` of shape ``size``, as torch.randint (``randint(high, size)``
    also works); int64 by default."""
    if size is None:
        if high is None or not isinstance(high, (tuple, list)):
            raise TypeError("randint needs a size, e.g. randint(0, 10, (3,)) or randint(10, (3,))")
        low, high, size = 0, low, high
    backend = get_backend(device)
    return _make(backend.integers(low, high, _shape_args((size,)), dtype_name(dtype or int64)), False)
