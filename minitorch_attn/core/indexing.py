"""Advanced indexing and gather: ``x[idx]``, ``x[:, idx]``, ``x[rows, cols]``, ``x[mask]``, mixed
with slices, ints, ``None`` and ``...``, as NumPy and PyTorch define them; and :func:`gather`.

Both become one lookup in the flattened input::

    1. linear = the flat position, in x, of each output element    (an int64 array, output's shape)
    2. out    = take(reshape(x, (-1,)), linear)

    2-1. dx = reshape(index_add(numel(x), linear, g), x.shape)

The backward is a scatter-add: an element picked several times (``x[[0, 0, 1]]``) receives
the sum of all its upstream gradients, through ``backend.index_add`` (one kernel per
device); an element never picked gets 0.

Where step 1 comes from: for indexing, NumPy's own rules, applied on the host to views of
``arange(size_d)`` broadcast to ``x``'s shape (no copy of ``x``): the view of dim ``d``
indexed by the key gives the dim-``d`` coordinate of every output element, and
``linear = Σ_d coordinate_d · stride_d``. So the placement of the result's dims (advanced
indices side by side stay in place, apart they go first), broadcasting between index
arrays, negative indices and boolean masks are exactly NumPy's, on every device; index
tensors on a device are read to the host for it (advanced indexing is not a training-loop
operation here: embeddings use :class:`~.shape_ops.Take`). For gather, step 1 is
arithmetic on the device.
"""

from __future__ import annotations

import builtins
import math
import numbers

import numpy

from .autograd import Function
from .backend import backend_of
from .tensor import Tensor


class FlatTake(Function):
    r"""``out = take(reshape(x, (-1,)), linear)`` (step 2 of the module docstring):
    :math:`\mathrm{out}_i = x_{\ell_i}`, ``x`` flattened, :math:`\ell` = ``linear``.

    Backward (2-1): :math:`\partial\,\mathrm{out}_i/\partial x_p = [\ell_i = p]`, so a
    scatter-add into ``x``'s places, :math:`dx_p = \sum_{i:\,\ell_i = p} g_i`, reshaped to
    ``x``'s shape (an element never picked gets 0)."""

    @staticmethod
    def forward(ctx, x, linear):
        xp = ctx.xp
        ctx.save_for_backward(linear)
        ctx.shape = tuple(x.shape)
        flat = xp.take(xp.reshape(x, (-1,)), xp.reshape(linear, (-1,)), axis=0)  # 2
        return xp.reshape(flat, tuple(linear.shape))

    @staticmethod
    def backward(ctx, grad_output):
        (linear,) = ctx.saved_tensors
        grad = ctx.backend.index_add(math.prod(ctx.shape), linear, grad_output)  # 2-1
        return ctx.xp.reshape(grad, ctx.shape), None


def is_advanced(key):
    """Whether ``key`` holds an index array (a Tensor, a list, a NumPy array): NumPy's
    "advanced" indexing, rather than ints, slices, None and ``...`` alone."""
    parts = key if isinstance(key, tuple) else (key,)
    return any(isinstance(k, (Tensor, list, numpy.ndarray)) for k in parts)


def _host_part(part):
    """One part of a key as NumPy indexes with it; index arrays must be integer or bool."""
    if isinstance(part, Tensor):
        if part.dtype not in ("int32", "int64", "bool"):
            raise TypeError(f"index tensors must be int32/int64 or bool, got {part.dtype}")
        return part.numpy()
    if isinstance(part, (list, numpy.ndarray)):
        array = numpy.asarray(part)
        if array.size == 0:
            return array.astype(numpy.int64)
        if array.dtype.kind not in "iub":
            raise TypeError(f"index lists must hold ints or bools, got {array.dtype} values: {part!r}")
        return array
    if isinstance(part, numbers.Integral) and not isinstance(part, bool):
        return int(part)
    if part is None or part is Ellipsis or isinstance(part, slice):
        return part
    raise TypeError(f"unsupported index {part!r}: use ints, slices, None, ..., integer or bool tensors (or lists)")


def linear_positions(shape, key):
    """Step 1 for ``x[key]`` with ``x`` of ``shape``: a host int64 array of the output's
    shape, holding each output element's flat position in ``x`` (NumPy's indexing rules).

    Raises:
        IndexError: for an index out of range, or a mask whose shape does not match the dims
            it indexes (as PyTorch), naming the key and the shape.
    """
    parts = tuple(_host_part(k) for k in (key if isinstance(key, tuple) else (key,)))
    strides = [math.prod(shape[d + 1 :]) for d in range(len(shape))]
    linear = 0
    try:
        for d, size in enumerate(shape):
            coordinate = numpy.arange(size, dtype=numpy.int64).reshape([-1 if i == d else 1 for i in range(len(shape))])
            linear = linear + numpy.broadcast_to(coordinate, shape)[parts] * strides[d]
        if not shape:
            linear = numpy.zeros((), dtype=numpy.int64)[parts]
    except IndexError as error:
        raise IndexError(f"index {key!r} does not fit a tensor of shape {tuple(shape)}: {error}") from None
    return numpy.asarray(linear, dtype=numpy.int64)


def index(x, key):
    """``x[key]`` for a key with index arrays (see the module docstring); its gradient is a
    scatter-add, repeated picks accumulating.

    Raises:
        TypeError: for an index tensor or list that is neither integer nor bool.
        IndexError: for an index out of range or a mask of the wrong shape.
    """
    linear = linear_positions(tuple(x.shape), key)
    backend = backend_of(x.data)
    return FlatTake.apply(x, backend.asarray(linear, dtype=backend.dtype("int64")))


def gather(input: Tensor, dim: int, index: Tensor) -> Tensor:
    """``out[i][j][k] = input[index[i][j][k]][j][k]`` for ``dim = 0`` (and so on for other
    dims), as ``torch.gather``: pick along ``dim`` by ``index``, elsewhere keep the position.

    Shapes: ``index`` has ``input``'s number of dims (a 0-d tensor counts as 1-d, as in
    PyTorch) and no dim larger than ``input``'s, except along ``dim``; the output has
    ``index``'s shape and ``input``'s dtype. An empty ``index`` (of any rank and dtype, as
    PyTorch) picks nothing and gives an empty output. The
    gradient is a scatter-add into ``input`` (``torch.scatter_add``), repeated picks
    accumulating; ``index`` has none. Source: ``torch.gather``'s definition.

    Raises:
        TypeError: for a non-Tensor, or an index that is not an int64/int32 tensor.
        ValueError: for a dim out of range, or shapes that do not fit.
        IndexError: for index values outside ``[0, input.size(dim))`` (negative ones too, as
            PyTorch).

    Catalogue record: ``opinfo/shape.py`` (its samples, references and checks).
    """
    if not isinstance(input, Tensor) or not isinstance(index, Tensor):
        raise TypeError(f"gather: expected Tensors, got {type(input).__name__} and {type(index).__name__}")
    ndim = builtins.max(input.ndim, 1)
    if isinstance(dim, bool) or not isinstance(dim, numbers.Integral) or not -ndim <= dim < ndim:
        raise ValueError(f"gather: dim {dim!r} is out of range for a tensor with {input.ndim} dims")
    if index.numel() == 0:  # nothing to pick: no other check, as PyTorch
        return FlatTake.apply(input, backend_of(input.data).asarray(numpy.zeros(index.shape, dtype="int64")))
    if index.dtype not in ("int32", "int64"):
        raise TypeError(f"gather: index must be an int64/int32 tensor, got {index.dtype}")
    if builtins.max(index.ndim, 1) != ndim:
        raise ValueError(
            f"gather: index has {index.ndim} dims but input {input.ndim}; they must have as many "
            f"(a 0-d tensor counts as 1-d)"
        )
    if input.ndim == 0 or index.ndim == 0:  # a 0-d tensor is a row of one element
        return gather(input.reshape(-1), 0, index.reshape(-1)).reshape(index.shape)
    dim = int(dim) % input.ndim
    if any(i > s for d, (i, s) in enumerate(zip(index.shape, input.shape)) if d != dim):
        raise ValueError(
            f"gather: index of shape {tuple(index.shape)} does not fit input of shape "
            f"{tuple(input.shape)} along dim {dim} (same number of dims, no larger elsewhere)"
        )
    xp = backend_of(input.data).xp
    backend = backend_of(input.data)
    size = input.shape[dim]
    picked = index.data
    if math.prod(index.shape) > 0:  # on a device read with the next copy to the host (backend.py)
        backend.check(
            (picked < 0) | (picked >= size),
            lambda: IndexError(
                f"gather: index values must be in [0, {size}) along dim {dim}, "
                f"got values from {int(xp.min(picked))} to {int(xp.max(picked))}"
            ),
        )
    picked = xp.astype(picked, backend.dtype("int64"))
    linear = xp.zeros(tuple(index.shape), dtype=backend.dtype("int64"), device=backend.device)
    for d in range(input.ndim):  # 1
        stride = math.prod(input.shape[d + 1 :])
        if d == dim:
            coordinate = picked
        else:
            coordinate = xp.reshape(
                xp.arange(index.shape[d], dtype=backend.dtype("int64"), device=backend.device),
                tuple(-1 if i == d else 1 for i in range(input.ndim)),
            )
        linear = linear + coordinate * stride
    return FlatTake.apply(input, linear)
