"""Shape, indexing, joining and selection operations, each a :class:`Function` with its backward.

None of them computes anything new: they move, copy or select elements, so each backward
moves the upstream gradient ``grad_output`` back to where the elements came from
(reshape back, permute by the inverse, scatter into zeros, cut a concatenation apart,
route through the same condition). Shapes follow NumPy's rules.
"""

from __future__ import annotations

import builtins
import math
import numbers

from . import indexing
from .autograd import Function
from .backend import backend_of
from .dtypes import Dims, Scalar
from .ops import Broadcasting, _normalize_dims
from .tensor import Tensor, _is_int, dtype_name, result_dtype


# ---- shape operations -----------------------------------------------------------------------------
class Reshape(Function):
    r"""Same data, new shape (one entry may be -1).  Element k of ``y`` is element k of ``x`` in
    row-major order, :math:`\partial y_k/\partial x_l = \delta_{kl}`, so the backward reshapes
    ``grad_output`` back: :math:`dx = \mathrm{reshape}(g, \mathrm{shape}(x))`."""

    is_view = True  # the output shares the input's memory and version counter

    @staticmethod
    def forward(ctx, x, shape):
        ctx.shape = tuple(x.shape)
        if -1 in shape and 0 in shape and math.prod(x.shape) == 0:  # 0 * anything = 0 (PyTorch raises too)
            raise ValueError(
                f"cannot reshape a tensor of shape {tuple(x.shape)} to {shape}: it has 0 elements, "
                f"so the -1 could be any size; give every size"
            )
        try:
            return ctx.xp.reshape(x, shape)
        except (ValueError, TypeError) as exc:
            raise ValueError(f"cannot reshape a tensor of shape {tuple(x.shape)} to {shape}") from exc

    @staticmethod
    def backward(ctx, grad_output):
        return ctx.xp.reshape(grad_output, ctx.shape)


class Permute(Function):
    r"""Reorder dims by ``dims``: each element moves, none is combined.  Backward: permute
    ``grad_output`` by the inverse permutation, :math:`dx = \mathrm{permute}(g, \mathrm{dims}^{-1})`."""

    is_view = True  # the output shares the input's memory and version counter

    @staticmethod
    def forward(ctx, x, dims):
        dims = tuple(d % x.ndim for d in dims) if x.ndim else dims
        if sorted(dims) != list(range(x.ndim)):
            raise ValueError(f"permute: {dims} is not a permutation of the {x.ndim} dims of {tuple(x.shape)}")
        ctx.inverse = tuple(sorted(range(len(dims)), key=lambda i: dims[i]))
        return ctx.xp.permute_dims(x, dims)

    @staticmethod
    def backward(ctx, grad_output):
        return ctx.xp.permute_dims(grad_output, ctx.inverse)


class Transpose(Function):
    r"""Swap two dims: :math:`y_{\ldots j \ldots i \ldots} = x_{\ldots i \ldots j \ldots}`.
    Backward: swap them back (a swap is its own inverse),
    :math:`dx_{\ldots i \ldots j \ldots} = g_{\ldots j \ldots i \ldots}`."""

    is_view = True  # the output shares the input's memory and version counter

    @staticmethod
    def forward(ctx, x, dim0, dim1):
        dims = list(range(x.ndim))
        dim0, dim1 = _normalize_dims(dim0, x.ndim), _normalize_dims(dim1, x.ndim)  # () for a 0-d x
        if x.ndim:
            dims[dim0[0]], dims[dim1[0]] = dims[dim1[0]], dims[dim0[0]]
        ctx.dims = tuple(dims)
        return ctx.xp.permute_dims(x, ctx.dims)

    @staticmethod
    def backward(ctx, grad_output):
        return ctx.xp.permute_dims(grad_output, ctx.dims)


class Expand(Function):
    r"""Broadcast to a larger shape (a view in NumPy): every ``y_i`` is a copy of one ``x_j``.
    Backward: :math:`dx_j = \sum_{i \text{ copies } j} g_i`; ``grad_output`` is returned as
    is, and the engine sums it over the expanded axes."""

    is_view = True  # the output shares the input's memory and version counter

    @staticmethod
    def forward(ctx, x, shape):
        try:
            return ctx.xp.broadcast_to(x, shape)
        except ValueError as exc:
            raise ValueError(f"cannot expand a tensor of shape {tuple(x.shape)} to {shape}") from exc

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output


def expand(x: Tensor, shape: tuple[int, ...]) -> Tensor:
    """Broadcast ``x`` to ``shape``; -1 keeps a dim's size (as torch.Tensor.expand).

    Catalogue record: ``opinfo/shape.py`` (its samples, references and checks).
    """
    shape = tuple(shape)
    lead = len(shape) - x.ndim
    if lead < 0:
        raise ValueError(f"expand: target {shape} has fewer dims than the tensor's {x.shape}")
    full = tuple(x.shape[i - lead] if s == -1 else s for i, s in enumerate(shape))
    return Expand.apply(x, shape=full)


def unsqueeze(x: Tensor, dim: int) -> Tensor:
    """Insert a size-1 dim at ``dim`` (negative counts from the end of the result).

    Catalogue record: ``opinfo/shape.py`` (its samples, references and checks).
    """
    if not -(x.ndim + 1) <= dim <= x.ndim:
        raise ValueError(f"unsqueeze: dim out of range for a tensor with {x.ndim} dims")
    dim = dim % (x.ndim + 1)
    shape = x.shape[:dim] + (1,) + x.shape[dim:]
    return Reshape.apply(x, shape=shape)


def squeeze(x: Tensor, dim: Dims = None) -> Tensor:
    """Remove size-1 dims (all of them, or only ``dim`` when it has size 1).

    Catalogue record: ``opinfo/shape.py`` (its samples, references and checks).
    """
    axes = _normalize_dims(dim, x.ndim)
    shape = tuple(s for i, s in enumerate(x.shape) if not (i in axes and s == 1))
    return Reshape.apply(x, shape=shape)


def flatten(x: Tensor, start_dim: int = 0, end_dim: int = -1) -> Tensor:
    """Merge dims ``start_dim..end_dim`` into one.

    Catalogue record: ``opinfo/shape.py`` (its samples, references and checks).
    """
    if x.ndim == 0:
        return Reshape.apply(x, shape=(1,))
    start, end = _normalize_dims(start_dim, x.ndim)[0], _normalize_dims(end_dim, x.ndim)[0]
    if start > end:
        raise ValueError(f"flatten: start_dim {start_dim} comes after end_dim {end_dim}")
    shape = x.shape[:start] + (math.prod(x.shape[start : end + 1]),) + x.shape[end + 1 :]
    return Reshape.apply(x, shape=shape)


# ---- indexing -------------------------------------------------------------------------------------
class GetItem(Function):
    r"""``x[key]`` for basic keys: ints, slices and ``...`` (``None`` is handled by :func:`getitem`).

    Backward: :math:`y_i = x_{k(i)}`, where ``k`` maps each output place to the place it was
    selected from, so :math:`dx_{k(i)} = g_i` and :math:`dx_j = 0` at the places not selected:
    a zero array of ``x``'s shape with ``grad_output`` written into the selected places (each
    place is selected at most once by a basic key, so writing is adding)."""

    is_view = True  # the output shares the input's memory and version counter

    @staticmethod
    def forward(ctx, x, key):
        ctx.shape, ctx.key, ctx.dtype = tuple(x.shape), key, x.dtype
        return x[key]

    @staticmethod
    def backward(ctx, grad_output):
        xp = ctx.xp
        grad = xp.zeros(ctx.shape, dtype=grad_output.dtype, device=ctx.backend.device)
        grad[ctx.key] = grad_output
        return grad


class Take(Function):
    r"""``x[index]`` with an integer tensor ``index`` on the first axis (an embedding lookup).

    Shapes: ``x (n, *rest)``, ``index (*idx)`` -> ``(*idx, *rest)``.
    Backward: :math:`y_i = x_{\mathrm{index}_i}`, so row ``r`` of the gradient is the sum of
    ``grad_output[i]`` over every ``i`` that picked it,
    :math:`dx_r = \sum_{i:\,\mathrm{index}_i = r} g_i` (a scatter-add: repeated indices
    accumulate), via ``backend.index_add``."""

    @staticmethod
    def forward(ctx, x, index):
        xp = ctx.xp
        n = x.shape[0]
        if math.prod(index.shape) > 0:  # on a device read with the next copy to the host (core/backend.py)
            ctx.backend.check(
                (index < -n) | (index >= n),
                lambda: IndexError(
                    f"index values must be in [{-n}, {n}) for a first dimension of size {n}, "
                    f"got values from {int(xp.min(index))} to {int(xp.max(index))}"
                ),
            )
        index = xp.where(index < 0, index + n, index)
        ctx.save_for_backward(index)
        ctx.num_rows = n
        out = xp.take(x, xp.reshape(index, (-1,)), axis=0)
        return xp.reshape(out, (*index.shape, *x.shape[1:]))

    @staticmethod
    def backward(ctx, grad_output):
        (index,) = ctx.saved_tensors
        return ctx.backend.index_add(ctx.num_rows, index, grad_output), None


def getitem(x, key):
    """Indexing: basic keys (ints, slices, None, ...) by :class:`GetItem`; one integer tensor
    or list on axis 0 by :class:`Take`; any other key with index arrays (on later axes,
    several, boolean masks) by :func:`~.indexing.index`."""
    if isinstance(key, list) and all(_is_int(k) for k in key) and key:
        key = Tensor(_backend_array(x, key))
    if isinstance(key, Tensor) and key.dtype in ("int32", "int64"):
        return Take.apply(x, key)
    if indexing.is_advanced(key):
        return indexing.index(x, key)
    parts = key if isinstance(key, tuple) else (key,)
    parts = tuple(
        int(k) if isinstance(k, numbers.Integral) and not isinstance(k, bool) else k for k in parts
    )  # NumPy ints index as Python ints
    for k in parts:
        if not (k is None or k is Ellipsis or isinstance(k, (int, slice))) or isinstance(k, bool):
            raise TypeError(f"unsupported index {k!r}: use ints, slices, None, ..., integer or bool tensors (or lists)")
    if Ellipsis not in parts:  # the array API wants the trailing "..." that NumPy implies
        parts = parts + (Ellipsis,)
    key = parts
    if any(k is None for k in parts):  # None only inserts size-1 axes: index without it, then reshape
        target = tuple(x.data[key].shape)
        stripped = tuple(k for k in parts if k is not None)
        return Reshape.apply(GetItem.apply(x, key=stripped), shape=target)
    return GetItem.apply(x, key=key)


def _backend_array(like, values):
    backend = backend_of(like.data)
    return backend.asarray(values, dtype=backend.dtype("int64"))


# ---- joining and splitting ---------------------------------------------------------------------
class Concat(Function):
    r"""Join tensors along an existing ``dim``: piece ``k``, of size :math:`n_k` along it, fills
    places :math:`o_k \ldots o_k + n_k - 1`, with :math:`o_k = n_1 + \dots + n_{k-1}`.  Backward:
    cut ``grad_output`` back into the pieces, :math:`dx_k = g_{[o_k,\; o_k + n_k)}` along ``dim``.

    As in PyTorch, a 1-D piece of shape ``(0,)`` joins tensors of any shape: it adds
    nothing, and its gradient is empty."""

    @staticmethod
    def forward(ctx, *arrays, dim=0):
        joined = [a for a in arrays if tuple(a.shape) != (0,)] or arrays[:1]
        if joined[0].ndim == 0:
            raise ValueError(
                "concat: zero-dimensional tensors cannot be concatenated (as PyTorch); "
                "use stack(), or unsqueeze them first"
            )
        axis = _normalize_dims(dim, joined[0].ndim)[0]
        ctx.axis = axis
        ctx.sizes = [a.shape[axis] if any(a is b for b in joined) else None for a in arrays]
        try:
            return ctx.xp.concat(joined, axis=axis)
        except ValueError as exc:
            raise ValueError(f"concat: shapes {[tuple(a.shape) for a in arrays]} differ outside dim {dim}") from exc

    @staticmethod
    def backward(ctx, grad_output):
        grads, start = [], 0
        for size in ctx.sizes:
            if size is None:  # a (0,) piece that was left out
                grads.append(ctx.xp.zeros((0,), dtype=grad_output.dtype, device=ctx.backend.device))
                continue
            index = [slice(None)] * grad_output.ndim
            index[ctx.axis] = slice(start, start + size)
            grads.append(grad_output[tuple(index)])
            start += size
        return tuple(grads)


class Stack(Function):
    r"""Join tensors of one shape along a new ``dim``: slice ``i`` of ``y`` along it is ``x_i``.
    Backward: take slice i of ``grad_output``, :math:`dx_i = g_{\ldots,\, i,\, \ldots}`."""

    @staticmethod
    def forward(ctx, *arrays, dim=0):
        ctx.axis = dim % (arrays[0].ndim + 1)
        shapes = {tuple(a.shape) for a in arrays}
        if len(shapes) != 1:
            raise ValueError(f"stack: all tensors need one shape, got {sorted(shapes)}")
        return ctx.xp.stack(arrays, axis=ctx.axis)

    @staticmethod
    def backward(ctx, grad_output):
        return tuple(grad_output[(slice(None),) * ctx.axis + (i, ...)] for i in range(grad_output.shape[ctx.axis]))


def _check_some(tensors, what):
    tensors = list(tensors)
    if not tensors:
        raise ValueError(f"{what} needs a non-empty sequence of tensors")
    return tensors


def concat(tensors: list[Tensor] | tuple[Tensor, ...], dim: int = 0) -> Tensor:
    """Concatenate a sequence of tensors along ``dim`` (``torch.cat``); ValueError for none.

    Catalogue record: ``opinfo/shape.py`` (its samples, references and checks).
    """
    return Concat.apply(*_check_some(tensors, "concat"), dim=dim)


cat = concat


def stack(tensors: list[Tensor] | tuple[Tensor, ...], dim: int = 0) -> Tensor:
    """Stack same-shaped tensors along a new ``dim``; ValueError for none.

    Catalogue record: ``opinfo/shape.py`` (its samples, references and checks).
    """
    return Stack.apply(*_check_some(tensors, "stack"), dim=dim)


def split(x: Tensor, split_size: int | list[int], dim: int = 0) -> tuple[Tensor, ...]:
    """Cut ``x`` along ``dim`` into pieces of ``split_size`` (an int, the last piece may be
    smaller) or of the listed sizes, as torch.split. Each piece is a differentiable slice.
    Raises ValueError for a 0-d tensor (no dim to cut), as PyTorch.

    Catalogue record: ``opinfo/shape.py`` (its samples, references and checks).
    """
    if x.ndim == 0:
        raise ValueError("split: a 0-d tensor has no dim to split")
    axis = _normalize_dims(dim, x.ndim)[0]
    length = x.shape[axis]
    if _is_int(split_size):
        split_size = int(split_size)
        if split_size < 0 or split_size == 0 < length:
            raise ValueError(f"split_size must be positive (0 only for a dim of size 0), got {split_size}")
        sizes = [min(split_size, length - s) for s in range(0, length, split_size)] if length else [0]
    else:
        if not isinstance(split_size, (tuple, list)) or not all(_is_int(s) for s in split_size):
            raise TypeError(f"split: split_size must be an int or a list of ints, got {split_size!r}")
        sizes = [int(s) for s in split_size]
        if builtins.sum(sizes) != length:
            raise ValueError(f"split sizes {sizes} do not add up to {length}")
    return Split.apply(x, tuple(sizes), axis)


class Split(Function):
    r"""``x`` cut along ``axis`` into consecutive pieces :math:`y_k` of ``sizes`` (views of ``x``).

    Backward: the pieces' gradients joined back along ``axis``,
    :math:`dx = \mathrm{concat}(g_1, \dots, g_n)` (one that no path from the loss reached is
    zeros, given by the engine). speed: one pass, where a slice per piece
    (:class:`GetItem`) would write each gradient into zeros of ``x``'s shape and add them:
    the fused Q, K, V projection of every attention layer is split this way."""

    is_view = True  # every piece shares the input's memory and version counter

    @staticmethod
    def forward(ctx, x, sizes, axis):
        ctx.axis = axis
        pieces, start = [], 0
        for size in sizes:
            pieces.append(x[(slice(None),) * axis + (slice(start, start + size), ...)])
            start += size
        return tuple(pieces)

    @staticmethod
    def backward(ctx, *grad_outputs):
        return ctx.xp.concat(grad_outputs, axis=ctx.axis), None, None


def chunk(x: Tensor, chunks: int, dim: int = 0) -> tuple[Tensor, ...]:
    """Cut ``x`` into ``chunks`` nearly equal pieces along ``dim``, as torch.chunk.

    Catalogue record: ``opinfo/shape.py`` (its samples, references and checks).
    """
    if not _is_int(chunks) or chunks < 1:
        raise ValueError(f"chunk: chunks must be a positive int, got {chunks!r}")
    chunks = int(chunks)
    if x.ndim == 0:
        raise ValueError("chunk: a 0-d tensor has no dim to cut")
    length = x.shape[_normalize_dims(dim, x.ndim)[0]]
    if length == 0:  # as PyTorch: ``chunks`` empty pieces
        return split(x, [0] * chunks, dim)
    return split(x, -(-length // chunks), dim)


# ---- selection and masks ----------------------------------------------------------------------
class Where(Broadcasting):
    r"""``y = condition ? a : b`` elementwise, broadcasting.  With :math:`c` the condition as 0/1,
    :math:`\partial y/\partial a = c` and :math:`\partial y/\partial b = 1 - c`.  Backward:
    ``grad_output`` flows to ``a`` where the condition holds and to ``b`` elsewhere."""

    promotes = False  # the condition stays bool; the result takes ``dtype``, chosen by the caller

    @staticmethod
    def forward(ctx, condition, a, b, dtype):
        ctx.save_for_backward(condition)
        y = ctx.xp.where(condition, a, b)
        return y if dtype_name(y.dtype) == dtype else ctx.xp.astype(y, ctx.backend.dtype(dtype))

    @staticmethod
    def backward(ctx, grad_output):
        (condition,) = ctx.saved_tensors
        xp = ctx.xp
        zero = xp.zeros((), dtype=grad_output.dtype, device=ctx.backend.device)
        return (
            None,
            xp.where(condition, grad_output, zero) if ctx.needs_input_grad[1] else None,
            xp.where(condition, zero, grad_output) if ctx.needs_input_grad[2] else None,
        )


def _check_bool(mask, what):
    if not isinstance(mask, Tensor) or mask.dtype != "bool":
        raise TypeError(f"{what} must be a bool tensor, got {getattr(mask, 'dtype', type(mask).__name__)}")


def where(condition: Tensor, a: Tensor | Scalar, b: Tensor | Scalar) -> Tensor:
    """Elementwise ``a`` where ``condition`` (a bool tensor) is True, else ``b``; ``a`` and
    ``b`` are tensors or Python numbers. The result's dtype is PyTorch's promotion of the
    two (``where(c, 8.5, -3.9)`` and ``where(c, int_tensor, 0.5)`` are float32, the default
    float dtype; see :func:`~minitorch_attn.core.dtypes.result_dtype`).

    Raises:
        TypeError: if ``condition`` is not a bool tensor.
        ValueError: if the shapes do not broadcast.

    Catalogue record: ``opinfo/shape.py`` (its samples, references and checks).
    """
    _check_bool(condition, "where: condition")
    return Where.apply(condition, a, b, dtype=result_dtype(a, b))


def masked_fill(x: Tensor, mask: Tensor, value: Tensor | Scalar) -> Tensor:
    """``x`` with ``value`` written where the bool ``mask`` (broadcastable to x) is True.
    Backward: ``grad_output`` where the mask is False, 0 where it is True.

    Catalogue record: ``opinfo/shape.py`` (its samples, references and checks).
    """
    _check_bool(mask, "masked_fill: mask")
    return Where.apply(mask, value, x, dtype=x.dtype)  # x's dtype, as PyTorch


class Triangle(Function):
    r"""Keep the lower (``j <= i + diagonal``) or, with ``upper=True``, the upper
    (``j >= i + diagonal``) triangle of the last two dims, zeroing the rest:
    :math:`y_{ij} = x_{ij}\,[j \le i + k]` for the lower one (``k`` the diagonal, ``[·]`` 1
    where it holds, else 0).  Backward: the same mask on ``grad_output``,
    :math:`dx_{ij} = g_{ij}\,[j \le i + k]` (``[j >= i + k]`` for the upper one)."""

    @staticmethod
    def forward(ctx, x, diagonal=0, upper=False):
        ctx.keep = ctx.xp.triu if upper else ctx.xp.tril
        ctx.diagonal = diagonal
        return ctx.keep(x, k=diagonal)

    @staticmethod
    def backward(ctx, grad_output):
        return ctx.keep(grad_output, k=ctx.diagonal)


def _check_matrix(x, what):
    if x.ndim < 2:
        raise ValueError(f"{what}: needs a tensor with at least 2 dims (..., rows, columns), got shape {x.shape}")


def tril(x: Tensor, diagonal: int = 0) -> Tensor:
    """Lower triangle of the last two dims (others set to zero); ValueError for fewer than 2 dims.

    Catalogue record: ``opinfo/shape.py`` (its samples, references and checks).
    """
    _check_matrix(x, "tril")
    return Triangle.apply(x, diagonal=diagonal)


def triu(x: Tensor, diagonal: int = 0) -> Tensor:
    """Upper triangle of the last two dims (others set to zero); ValueError for fewer than 2 dims.

    Catalogue record: ``opinfo/shape.py`` (its samples, references and checks).
    """
    _check_matrix(x, "triu")
    return Triangle.apply(x, diagonal=diagonal, upper=True)


def reshape(x: Tensor, *shape: int | tuple[int, ...]) -> Tensor:
    """``x`` with a new shape (one entry may be -1); raises ValueError if sizes differ.

    Catalogue record: ``opinfo/shape.py`` (its samples, references and checks).
    """
    return x.reshape(*shape)


def transpose(x: Tensor, dim0: int, dim1: int) -> Tensor:
    """Swap dims ``dim0`` and ``dim1``.

    Catalogue record: ``opinfo/shape.py`` (its samples, references and checks).
    """
    return Transpose.apply(x, dim0=dim0, dim1=dim1)


def permute(x: Tensor, dims: tuple[int, ...]) -> Tensor:
    """Reorder the dims of ``x`` as ``dims``; raises ValueError if not a permutation.

    Catalogue record: ``opinfo/shape.py`` (its samples, references and checks).
    """
    return Permute.apply(x, dims=tuple(dims))
