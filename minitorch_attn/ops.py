"""The primitive differentiable operations, each a :class:`Function` with its backward.

Every backward returns ``dL/d(input)`` from ``dL/d(output)`` (``g`` below). Gradients
may keep the broadcast shape of the output: the engine sums them back to each input's
shape (:func:`minitorch_attn.autograd.sum_to_shape`), so no backward here un-broadcasts.
No backward modifies ``g`` in place.

Shapes follow NumPy broadcasting; dtypes follow NumPy/PyTorch promotion (float32 stays
float32, also with Python-float operands). Sources: the derivative of each elementary
function; matmul and reductions as in any autograd text (e.g. Baydin et al.,
arXiv:1502.05767).
"""

from __future__ import annotations

import builtins
import math

from .autograd import Function
from .tensor import Tensor, _shape_args_allow_minus_one, dtype_name


def _normalize_dims(dim, ndim, what="dim"):
    """``dim`` (None, int or tuple, negatives allowed) -> a sorted tuple of axes."""
    if dim is None:
        return tuple(range(ndim))
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    out = []
    for d in dims:
        if not isinstance(d, int) or not -builtins.max(ndim, 1) <= d < builtins.max(ndim, 1):
            raise ValueError(f"{what} {d!r} is out of range for a tensor with {ndim} dimensions")
        out.append(d % builtins.max(ndim, 1))
    return tuple(sorted(set(out)))


def _keepdim_shape(shape, axes):
    return tuple(1 if i in axes else s for i, s in enumerate(shape))


# ---- elementwise arithmetic -------------------------------------------------------------------
class Add(Function):
    """``a + b`` with broadcasting.  d/da = 1, d/db = 1."""

    @staticmethod
    def forward(ctx, a, b):
        return a + b

    @staticmethod
    def backward(ctx, g):
        return g, g


class Sub(Function):
    """``a - b`` with broadcasting.  d/da = 1, d/db = -1."""

    @staticmethod
    def forward(ctx, a, b):
        return a - b

    @staticmethod
    def backward(ctx, g):
        return g, -g


class Mul(Function):
    """``a * b`` with broadcasting.  d/da = b, d/db = a."""

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a * b

    @staticmethod
    def backward(ctx, g):
        # BEGIN SOLUTION 1.2
        a, b = ctx.saved_tensors
        return (g * b if ctx.needs_input_grad[0] else None,
                g * a if ctx.needs_input_grad[1] else None)
        # END SOLUTION


class Div(Function):
    """``a / b`` with broadcasting.  d/da = 1/b, d/db = -a/b^2 = -(a/b)/b."""

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a / b

    @staticmethod
    def backward(ctx, g):
        # BEGIN SOLUTION 1.2
        a, b = ctx.saved_tensors
        grad_a = g / b
        return grad_a, (-grad_a * a / b if ctx.needs_input_grad[1] else None)
        # END SOLUTION


class Neg(Function):
    """``-x``.  d/dx = -1."""

    @staticmethod
    def forward(ctx, x):
        return -x

    @staticmethod
    def backward(ctx, g):
        return -g


class Pow(Function):
    """``x ** p`` for a Python-number exponent ``p``.  d/dx = p x^(p-1)."""

    @staticmethod
    def forward(ctx, x, exponent):
        ctx.save_for_backward(x)
        ctx.exponent = exponent
        return x ** exponent

    @staticmethod
    def backward(ctx, g):
        # BEGIN SOLUTION 1.2
        (x,) = ctx.saved_tensors
        p = ctx.exponent
        return g * (p * x ** (p - 1)) if p != 0 else g * 0, None
        # END SOLUTION


def pow(x, exponent):
    """``x ** exponent`` with a Python int/float exponent (a tensor exponent raises TypeError)."""
    if isinstance(exponent, Tensor) or not isinstance(exponent, (int, float)):
        raise TypeError(f"pow supports a Python-number exponent only, got {type(exponent).__name__}")
    return Pow.apply(x, exponent)


class Exp(Function):
    """``exp(x)``.  d/dx = exp(x), reusing the output."""

    @staticmethod
    def forward(ctx, x):
        y = ctx.xp.exp(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        # BEGIN SOLUTION 1.2
        (y,) = ctx.saved_tensors
        return g * y
        # END SOLUTION


class Log(Function):
    """``log(x)`` (natural).  d/dx = 1/x."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return ctx.xp.log(x)

    @staticmethod
    def backward(ctx, g):
        # BEGIN SOLUTION 1.2
        (x,) = ctx.saved_tensors
        return g / x
        # END SOLUTION


class Sqrt(Function):
    """``sqrt(x)``.  d/dx = 1 / (2 sqrt(x)), reusing the output."""

    @staticmethod
    def forward(ctx, x):
        y = ctx.xp.sqrt(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        # BEGIN SOLUTION 1.2
        (y,) = ctx.saved_tensors
        return g / (2 * y)
        # END SOLUTION


class Tanh(Function):
    """``tanh(x)``.  d/dx = 1 - tanh(x)^2, reusing the output."""

    @staticmethod
    def forward(ctx, x):
        y = ctx.xp.tanh(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        # BEGIN SOLUTION 1.2
        (y,) = ctx.saved_tensors
        return g * (1 - y * y)
        # END SOLUTION


class Abs(Function):
    """``|x|``.  d/dx = sign(x) (0 at x = 0, as PyTorch)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return ctx.xp.abs(x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * ctx.xp.sign(x)


class Maximum(Function):
    """Elementwise ``max(a, b)``.  The larger input gets ``g``; a tie splits it half/half."""

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return ctx.xp.maximum(a, b)

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        xp = ctx.xp
        share_a = xp.astype(a > b, g.dtype) + 0.5 * xp.astype(a == b, g.dtype)
        return g * xp.astype(share_a, g.dtype), g * xp.astype(1.0 - share_a, g.dtype)


class Minimum(Function):
    """Elementwise ``min(a, b)``.  The smaller input gets ``g``; a tie splits it half/half."""

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return ctx.xp.minimum(a, b)

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        xp = ctx.xp
        share_a = xp.astype(a < b, g.dtype) + 0.5 * xp.astype(a == b, g.dtype)
        return g * xp.astype(share_a, g.dtype), g * xp.astype(1.0 - share_a, g.dtype)


def maximum(a, b):
    """Elementwise maximum of two tensors (or a tensor and a number), broadcasting."""
    return Maximum.apply(a, b)


def minimum(a, b):
    """Elementwise minimum of two tensors (or a tensor and a number), broadcasting."""
    return Minimum.apply(a, b)


class Clamp(Function):
    """``min(max(x, min), max)``.  d/dx = 1 where ``min <= x <= max``, else 0 (as PyTorch)."""

    @staticmethod
    def forward(ctx, x, min=None, max=None):
        xp = ctx.xp
        ctx.save_for_backward(x)
        ctx.bounds = (min, max)
        y = x
        if min is not None:
            y = xp.where(y < min, xp.asarray(min, dtype=x.dtype, device=ctx.backend.device), y)
        if max is not None:
            y = xp.where(y > max, xp.asarray(max, dtype=x.dtype, device=ctx.backend.device), y)
        return y

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        low, high = ctx.bounds
        keep = ctx.xp.ones_like(x, dtype=ctx.xp.bool)
        if low is not None:
            keep = keep & (x >= low)
        if high is not None:
            keep = keep & (x <= high)
        return ctx.xp.where(keep, g, 0.0)


def clamp(x, min=None, max=None):
    """Clamp ``x`` into ``[min, max]`` (either bound may be None)."""
    return Clamp.apply(x, min=min, max=max)


class Cast(Function):
    """Change dtype (float32 <-> float64).  The gradient is cast back."""

    @staticmethod
    def forward(ctx, x, dtype):
        return ctx.xp.astype(x, ctx.backend.dtype(dtype))

    @staticmethod
    def backward(ctx, g):
        return g  # the engine casts every gradient to its input's dtype


# ---- matrix product ------------------------------------------------------------------------------
def matmul_transposed(xp, a, b):
    """``a @ bᵀ`` on raw arrays: ``(..., m, k) @ (..., n, k)ᵀ -> (..., m, n)``.

    ``bᵀ`` is first copied into a row-major array of its own (``reshape(copy=True)``):
    NumPy's *batched* matmul with a transposed view as its second operand misses its
    BLAS fast path and is 10 to 300 times slower; the copy is small next to the product.
    """
    b_t = xp.matrix_transpose(b)
    return xp.matmul(a, xp.reshape(b_t, b_t.shape, copy=True))


class MatMul(Function):
    """``a @ b`` as ``numpy.matmul``: batched, with broadcast batch dims, 1-D operands allowed.

    Shapes: ``(..., n, k) @ (..., k, m) -> (..., n, m)``; a 1-D ``a`` is a row ``(1, k)`` and
    a 1-D ``b`` a column ``(k, 1)``, the added dim removed from the result.
    Backward (C = A B):  dA = dC Bᵀ,  dB = Aᵀ dC; summing over broadcast batch dims is the
    engine's job.

    Raises:
        ValueError: for 0-d operands or mismatched inner dimensions.
    """

    @staticmethod
    def forward(ctx, a, b):
        if a.ndim == 0 or b.ndim == 0:
            raise ValueError("matmul: both operands need at least one dimension")
        if a.shape[-1] != b.shape[-2 if b.ndim > 1 else 0]:
            raise ValueError(
                f"matmul: inner dimensions differ: {tuple(a.shape)} @ {tuple(b.shape)} "
                f"(the last dim of the first must equal the {'second-to-last' if b.ndim > 1 else 'only'} dim of the second)"
            )
        if b.ndim > 2:  # speed: see matmul_transposed (a batched right operand must be row-major)
            b = ctx.xp.reshape(b, b.shape, copy=True)
        ctx.save_for_backward(a, b)
        return ctx.xp.matmul(a, b)

    @staticmethod
    def backward(ctx, g):
        # BEGIN SOLUTION 1.5
        a, b = ctx.saved_tensors
        xp = ctx.xp
        a2 = a[None, :] if a.ndim == 1 else a       # (k,) -> (1, k)
        b2 = b[:, None] if b.ndim == 1 else b       # (k,) -> (k, 1)
        if a.ndim == 1:
            g = xp.expand_dims(g, axis=g.ndim - 1 if b.ndim > 1 else 0)
        if b.ndim == 1:
            g = xp.expand_dims(g, axis=g.ndim)
        grad_a = matmul_transposed(xp, g, b2) if ctx.needs_input_grad[0] else None  # dA = dC Bᵀ
        grad_b = xp.matmul(xp.matrix_transpose(a2), g) if ctx.needs_input_grad[1] else None  # dB = Aᵀ dC
        if a.ndim == 1 and grad_a is not None:
            grad_a = xp.reshape(xp.sum(grad_a, axis=tuple(range(grad_a.ndim - 2))) if grad_a.ndim > 2 else grad_a, (-1,))
        if b.ndim == 1 and grad_b is not None:
            grad_b = xp.reshape(xp.sum(grad_b, axis=tuple(range(grad_b.ndim - 2))) if grad_b.ndim > 2 else grad_b, (-1,))
        return grad_a, grad_b
        # END SOLUTION


def matmul(a, b):
    """Matrix product of two tensors, as ``numpy.matmul`` (see :class:`MatMul`)."""
    return MatMul.apply(a, b)


# ---- reductions -----------------------------------------------------------------------------------
class Sum(Function):
    """Sum over ``dim`` (None = all).  Backward: every summed element receives ``g``,
    i.e. ``g`` broadcast back over the reduced axes."""

    @staticmethod
    def forward(ctx, x, dim=None, keepdim=False):
        axes = _normalize_dims(dim, x.ndim)
        ctx.shape, ctx.axes = tuple(x.shape), axes
        return ctx.xp.sum(x, axis=axes, keepdims=keepdim)

    @staticmethod
    def backward(ctx, g):
        # BEGIN SOLUTION 1.4
        xp = ctx.xp
        g = xp.reshape(g, _keepdim_shape(ctx.shape, ctx.axes))
        return xp.broadcast_to(g, ctx.shape)
        # END SOLUTION


class Mean(Function):
    """Mean over ``dim`` (None = all).  Backward: ``g / n`` broadcast back, n = count reduced."""

    @staticmethod
    def forward(ctx, x, dim=None, keepdim=False):
        axes = _normalize_dims(dim, x.ndim)
        ctx.shape, ctx.axes = tuple(x.shape), axes
        ctx.count = math.prod(x.shape[a] for a in axes)
        return ctx.xp.mean(x, axis=axes, keepdims=keepdim)

    @staticmethod
    def backward(ctx, g):
        # BEGIN SOLUTION 1.4
        xp = ctx.xp
        g = xp.reshape(g, _keepdim_shape(ctx.shape, ctx.axes))
        return xp.broadcast_to(g / ctx.count, ctx.shape)
        # END SOLUTION


class Max(Function):
    """Largest value over ``dim`` (as ``torch.amax``).  Backward: ``g`` goes to the
    position(s) of the maximum; ties share it evenly."""

    @staticmethod
    def forward(ctx, x, dim=None, keepdim=False):
        xp = ctx.xp
        axes = _normalize_dims(dim, x.ndim)
        y = xp.max(x, axis=axes, keepdims=True)
        ctx.save_for_backward(x, y)
        ctx.axes = axes
        return y if keepdim else xp.reshape(y, tuple(s for i, s in enumerate(x.shape) if i not in axes))

    @staticmethod
    def backward(ctx, g):
        # BEGIN SOLUTION 1.4
        x, y = ctx.saved_tensors
        xp = ctx.xp
        hit = xp.astype(x == y, g.dtype)
        share = hit / xp.sum(hit, axis=ctx.axes, keepdims=True)
        return xp.reshape(g, y.shape) * share
        # END SOLUTION


class Var(Function):
    """Variance over ``dim`` with ``correction`` (1 = unbiased, torch.var's default).

    Forward: m = mean(x), v = sum((x - m)^2) / (n - correction).
    Backward: dv/dx_i = 2 (x_i - m) / (n - correction) (the m term sums to zero)."""

    @staticmethod
    def forward(ctx, x, dim=None, keepdim=False, correction=1):
        xp = ctx.xp
        axes = _normalize_dims(dim, x.ndim)
        n = math.prod(x.shape[a] for a in axes)
        centered = x - xp.mean(x, axis=axes, keepdims=True)
        ctx.save_for_backward(centered)
        ctx.axes, ctx.denominator = axes, n - correction
        v = xp.sum(centered * centered, axis=axes, keepdims=keepdim) / (n - correction)
        return v

    @staticmethod
    def backward(ctx, g):
        # BEGIN SOLUTION 1.4
        (centered,) = ctx.saved_tensors
        g = ctx.xp.reshape(g, _keepdim_shape(centered.shape, ctx.axes))
        return g * centered * (2.0 / ctx.denominator)
        # END SOLUTION


# ---- shape operations -----------------------------------------------------------------------------
class Reshape(Function):
    """Same data, new shape (one entry may be -1).  Backward: reshape ``g`` back."""

    @staticmethod
    def forward(ctx, x, shape):
        ctx.shape = tuple(x.shape)
        try:
            return ctx.xp.reshape(x, shape)
        except (ValueError, TypeError) as exc:
            raise ValueError(f"cannot reshape a tensor of shape {tuple(x.shape)} to {shape}") from exc

    @staticmethod
    def backward(ctx, g):
        return ctx.xp.reshape(g, ctx.shape)


class Permute(Function):
    """Reorder dims by ``dims``.  Backward: permute ``g`` by the inverse permutation."""

    @staticmethod
    def forward(ctx, x, dims):
        dims = tuple(d % x.ndim for d in dims) if x.ndim else dims
        if sorted(dims) != list(range(x.ndim)):
            raise ValueError(f"permute: {dims} is not a permutation of the {x.ndim} dims of {tuple(x.shape)}")
        ctx.inverse = tuple(sorted(range(len(dims)), key=lambda i: dims[i]))
        return ctx.xp.permute_dims(x, dims)

    @staticmethod
    def backward(ctx, g):
        return ctx.xp.permute_dims(g, ctx.inverse)


class Transpose(Function):
    """Swap two dims.  Backward: swap them back."""

    @staticmethod
    def forward(ctx, x, dim0, dim1):
        dims = list(range(x.ndim))
        dim0, dim1 = _normalize_dims(dim0, x.ndim)[0], _normalize_dims(dim1, x.ndim)[0]
        dims[dim0], dims[dim1] = dims[dim1], dims[dim0]
        ctx.dims = tuple(dims)
        return ctx.xp.permute_dims(x, ctx.dims)

    @staticmethod
    def backward(ctx, g):
        return ctx.xp.permute_dims(g, ctx.dims)


class Expand(Function):
    """Broadcast to a larger shape (a view in NumPy).  Backward: ``g`` as is; the engine
    sums it over the expanded axes."""

    @staticmethod
    def forward(ctx, x, shape):
        try:
            return ctx.xp.broadcast_to(x, shape)
        except ValueError as exc:
            raise ValueError(f"cannot expand a tensor of shape {tuple(x.shape)} to {shape}") from exc

    @staticmethod
    def backward(ctx, g):
        return g


def expand(x, shape):
    """Broadcast ``x`` to ``shape``; -1 keeps a dim's size (as torch.Tensor.expand)."""
    shape = tuple(shape)
    lead = len(shape) - x.ndim
    if lead < 0:
        raise ValueError(f"expand: target {shape} has fewer dims than the tensor's {x.shape}")
    full = tuple(x.shape[i - lead] if s == -1 else s for i, s in enumerate(shape))
    return Expand.apply(x, shape=full)


def unsqueeze(x, dim):
    """Insert a size-1 dim at ``dim`` (negative counts from the end of the result)."""
    dim = dim % (x.ndim + 1) if -(x.ndim + 1) <= dim <= x.ndim else None
    if dim is None:
        raise ValueError(f"unsqueeze: dim out of range for a tensor with {x.ndim} dims")
    shape = x.shape[:dim] + (1,) + x.shape[dim:]
    return Reshape.apply(x, shape=shape)


def squeeze(x, dim=None):
    """Remove size-1 dims (all of them, or only ``dim`` when it has size 1)."""
    axes = _normalize_dims(dim, x.ndim)
    shape = tuple(s for i, s in enumerate(x.shape) if not (i in axes and s == 1))
    return Reshape.apply(x, shape=shape)


def flatten(x, start_dim=0, end_dim=-1):
    """Merge dims ``start_dim..end_dim`` into one."""
    if x.ndim == 0:
        return Reshape.apply(x, shape=(1,))
    start, end = _normalize_dims(start_dim, x.ndim)[0], _normalize_dims(end_dim, x.ndim)[0]
    if start > end:
        raise ValueError(f"flatten: start_dim {start_dim} comes after end_dim {end_dim}")
    shape = x.shape[:start] + (math.prod(x.shape[start:end + 1]),) + x.shape[end + 1:]
    return Reshape.apply(x, shape=shape)


# ---- indexing -------------------------------------------------------------------------------------
class GetItem(Function):
    """``x[key]`` for basic keys: ints, slices and ``...`` (``None`` is handled by :func:`getitem`).

    Backward: a zero array of ``x``'s shape with ``g`` written into the selected places
    (each place is selected at most once by a basic key, so writing is adding)."""

    @staticmethod
    def forward(ctx, x, key):
        ctx.shape, ctx.key, ctx.dtype = tuple(x.shape), key, x.dtype
        return x[key]

    @staticmethod
    def backward(ctx, g):
        xp = ctx.xp
        grad = xp.zeros(ctx.shape, dtype=g.dtype, device=ctx.backend.device)
        grad[ctx.key] = g
        return grad


class Take(Function):
    """``x[index]`` with an integer tensor ``index`` on the first axis (an embedding lookup).

    Shapes: ``x (n, *rest)``, ``index (*idx)`` -> ``(*idx, *rest)``.
    Backward: row ``index[i]`` of the gradient is the sum of ``g[i]`` over every ``i`` that
    picked it (a scatter-add: repeated indices accumulate), via ``backend.index_add``."""

    @staticmethod
    def forward(ctx, x, index):
        xp = ctx.xp
        n = x.shape[0]
        if math.prod(index.shape) > 0:
            low, high = int(xp.min(index)), int(xp.max(index))
            if low < -n or high >= n:
                raise IndexError(f"index values must be in [{-n}, {n}) for a first dimension of size {n}, "
                                 f"got values from {low} to {high}")
        index = xp.where(index < 0, index + n, index)
        ctx.save_for_backward(index)
        ctx.num_rows = n
        out = xp.take(x, xp.reshape(index, (-1,)), axis=0)
        return xp.reshape(out, (*index.shape, *x.shape[1:]))

    @staticmethod
    def backward(ctx, g):
        (index,) = ctx.saved_tensors
        return ctx.backend.index_add(ctx.num_rows, index, g), None


def getitem(x, key):
    """Indexing: basic keys (ints, slices, None, ...) or one integer tensor/list on axis 0."""
    if isinstance(key, list):
        key = Tensor(_backend_array(x, key))
    if isinstance(key, Tensor):
        if key.dtype == "bool":
            raise TypeError("boolean-mask indexing is not supported; use where() or masked_fill()")
        if key.dtype not in ("int32", "int64"):
            raise TypeError(f"index tensors must be int32/int64, got {key.dtype}")
        return Take.apply(x, key)
    parts = key if isinstance(key, tuple) else (key,)
    for k in parts:
        if not (k is None or k is Ellipsis or isinstance(k, (int, slice))) or isinstance(k, bool):
            raise TypeError(
                f"unsupported index {k!r}: use ints, slices, None, ... or a single integer tensor "
                f"on the first axis"
            )
    if Ellipsis not in parts:  # the array API wants the trailing "..." that NumPy implies
        parts = parts + (Ellipsis,)
    key = parts
    if any(k is None for k in parts):  # None only inserts size-1 axes: index without it, then reshape
        target = tuple(x.data[key].shape)
        stripped = tuple(k for k in parts if k is not None)
        return Reshape.apply(GetItem.apply(x, key=stripped), shape=target)
    return GetItem.apply(x, key=key)


def _backend_array(like, values):
    from .backend import backend_of

    backend = backend_of(like.data)
    return backend.asarray(values, dtype=backend.dtype("int64"))


# ---- joining and splitting ---------------------------------------------------------------------
class Concat(Function):
    """Join tensors along an existing ``dim``.  Backward: cut ``g`` back into the pieces."""

    @staticmethod
    def forward(ctx, *arrays, dim=0):
        axis = _normalize_dims(dim, arrays[0].ndim)[0]
        ctx.axis, ctx.sizes = axis, [a.shape[axis] for a in arrays]
        try:
            return ctx.xp.concat(arrays, axis=axis)
        except ValueError as exc:
            raise ValueError(f"concat: shapes {[tuple(a.shape) for a in arrays]} differ outside dim {dim}") from exc

    @staticmethod
    def backward(ctx, g):
        grads, start = [], 0
        for size in ctx.sizes:
            index = [slice(None)] * g.ndim
            index[ctx.axis] = slice(start, start + size)
            grads.append(g[tuple(index)])
            start += size
        return tuple(grads)


class Stack(Function):
    """Join tensors of one shape along a new ``dim``.  Backward: take slice i of ``g``."""

    @staticmethod
    def forward(ctx, *arrays, dim=0):
        ctx.axis = dim % (arrays[0].ndim + 1)
        shapes = {tuple(a.shape) for a in arrays}
        if len(shapes) != 1:
            raise ValueError(f"stack: all tensors need one shape, got {sorted(shapes)}")
        return ctx.xp.stack(arrays, axis=ctx.axis)

    @staticmethod
    def backward(ctx, g):
        return tuple(g[(slice(None),) * ctx.axis + (i, ...)] for i in range(g.shape[ctx.axis]))


def concat(tensors, dim=0):
    """Concatenate a sequence of tensors along ``dim`` (``torch.cat``)."""
    return Concat.apply(*tensors, dim=dim)


cat = concat


def stack(tensors, dim=0):
    """Stack same-shaped tensors along a new ``dim``."""
    return Stack.apply(*tensors, dim=dim)


def split(x, split_size, dim=0):
    """Cut ``x`` along ``dim`` into pieces of ``split_size`` (an int, the last piece may be
    smaller) or of the listed sizes, as torch.split. Each piece is a differentiable slice."""
    axis = _normalize_dims(dim, x.ndim)[0]
    length = x.shape[axis]
    if isinstance(split_size, int):
        if split_size <= 0:
            raise ValueError("split_size must be positive")
        sizes = [min(split_size, length - s) for s in range(0, length, split_size)]
    else:
        sizes = list(split_size)
        if builtins.sum(sizes) != length:
            raise ValueError(f"split sizes {sizes} do not add up to {length}")
    pieces, start = [], 0
    for size in sizes:
        key = (slice(None),) * axis + (slice(start, start + size), ...)
        pieces.append(GetItem.apply(x, key=key))
        start += size
    return tuple(pieces)


def chunk(x, chunks, dim=0):
    """Cut ``x`` into ``chunks`` nearly equal pieces along ``dim``, as torch.chunk."""
    if isinstance(chunks, bool) or not isinstance(chunks, int) or chunks < 1:
        raise ValueError(f"chunk: chunks must be a positive int, got {chunks!r}")
    length = x.shape[_normalize_dims(dim, x.ndim)[0]]
    return split(x, builtins.max(1, -(-length // chunks)), dim)


# ---- selection and masks ----------------------------------------------------------------------
class Where(Function):
    """``condition ? a : b`` elementwise, broadcasting.  Backward: ``g`` flows to ``a``
    where the condition holds and to ``b`` elsewhere."""

    @staticmethod
    def forward(ctx, condition, a, b):
        ctx.save_for_backward(condition)
        return ctx.xp.where(condition, a, b)

    @staticmethod
    def backward(ctx, g):
        (condition,) = ctx.saved_tensors
        xp = ctx.xp
        zero = xp.zeros((), dtype=g.dtype, device=ctx.backend.device)
        return (None,
                xp.where(condition, g, zero) if ctx.needs_input_grad[1] else None,
                xp.where(condition, zero, g) if ctx.needs_input_grad[2] else None)


def _check_bool(mask, what):
    if not isinstance(mask, Tensor) or mask.dtype != "bool":
        raise TypeError(f"{what} must be a bool tensor, got {getattr(mask, 'dtype', type(mask).__name__)}")


def where(condition, a, b):
    """Elementwise ``a`` where ``condition`` (a bool tensor) is True, else ``b``."""
    _check_bool(condition, "where: condition")
    return Where.apply(condition, a, b)


def masked_fill(x, mask, value):
    """``x`` with ``value`` written where the bool ``mask`` (broadcastable to x) is True.
    Backward: ``g`` where the mask is False, 0 where it is True."""
    _check_bool(mask, "masked_fill: mask")
    return Where.apply(mask, value, x)


class Tril(Function):
    """Keep the lower triangle (``j <= i + diagonal``) of the last two dims.  Backward: same mask on ``g``."""

    @staticmethod
    def forward(ctx, x, diagonal=0):
        ctx.diagonal = diagonal
        return ctx.xp.tril(x, k=diagonal)

    @staticmethod
    def backward(ctx, g):
        return ctx.xp.tril(g, k=ctx.diagonal)


class Triu(Function):
    """Keep the upper triangle (``j >= i + diagonal``) of the last two dims.  Backward: same mask on ``g``."""

    @staticmethod
    def forward(ctx, x, diagonal=0):
        ctx.diagonal = diagonal
        return ctx.xp.triu(x, k=diagonal)

    @staticmethod
    def backward(ctx, g):
        return ctx.xp.triu(g, k=ctx.diagonal)


def _check_matrix(x, what):
    if x.ndim < 2:
        raise ValueError(f"{what}: needs a tensor with at least 2 dims (..., rows, columns), got shape {x.shape}")


def tril(x, diagonal=0):
    """Lower triangle of the last two dims (others set to zero); ValueError for fewer than 2 dims."""
    _check_matrix(x, "tril")
    return Tril.apply(x, diagonal=diagonal)


def triu(x, diagonal=0):
    """Upper triangle of the last two dims (others set to zero); ValueError for fewer than 2 dims."""
    _check_matrix(x, "triu")
    return Triu.apply(x, diagonal=diagonal)


# ---- functional spellings (they shadow Python's builtins here, as torch.sum does; the code
# above uses builtins.max / builtins.sum explicitly) -----------------------------------------
def exp(x):
    """Elementwise e^x (see :class:`Exp`); any shape, float dtypes."""
    return Exp.apply(x)


def log(x):
    """Elementwise natural logarithm (see :class:`Log`); any shape, float dtypes."""
    return Log.apply(x)


def sqrt(x):
    """Elementwise square root (see :class:`Sqrt`); any shape, float dtypes."""
    return Sqrt.apply(x)


def tanh(x):
    """Elementwise hyperbolic tangent (see :class:`Tanh`); any shape, float dtypes."""
    return Tanh.apply(x)


def abs(x):
    """Elementwise absolute value (see :class:`Abs`); any shape."""
    return Abs.apply(x)


def sum(x, dim=None, keepdim=False):
    """Sum over ``dim`` (an int, a tuple, or None for all); ``keepdim`` keeps size-1 dims.
    Raises ValueError for a dim out of range."""
    return Sum.apply(x, dim=dim, keepdim=keepdim)


def mean(x, dim=None, keepdim=False):
    """Mean over ``dim`` (an int, a tuple, or None for all); ``keepdim`` keeps size-1 dims."""
    return Mean.apply(x, dim=dim, keepdim=keepdim)


def max(x, dim=None, keepdim=False):
    """Largest values over ``dim`` (values only, as torch.amax); ties share the gradient."""
    return Max.apply(x, dim=dim, keepdim=keepdim)


amax = max


def var(x, dim=None, keepdim=False, correction=1):
    """Variance over ``dim``, divided by ``n - correction`` (1: unbiased, as torch.var)."""
    return Var.apply(x, dim=dim, keepdim=keepdim, correction=correction)


def reshape(x, *shape):
    """``x`` with a new shape (one entry may be -1); raises ValueError if sizes differ."""
    return x.reshape(*shape)


def transpose(x, dim0, dim1):
    """Swap dims ``dim0`` and ``dim1``."""
    return Transpose.apply(x, dim0=dim0, dim1=dim1)


def permute(x, dims):
    """Reorder the dims of ``x`` as ``dims``; raises ValueError if not a permutation."""
    return Permute.apply(x, dims=tuple(dims))


__all__ = [
    "Add", "Sub", "Mul", "Div", "Neg", "Pow", "Exp", "Log", "Sqrt", "Tanh", "Abs", "Maximum",
    "Minimum", "Clamp", "Cast", "MatMul", "Sum", "Mean", "Max", "Var", "Reshape", "Permute",
    "Transpose", "Expand", "GetItem", "Take", "Concat", "Stack", "Where", "Tril", "Triu",
    "pow", "maximum", "minimum", "clamp", "matmul", "expand", "reshape", "transpose", "permute",
    "unsqueeze", "squeeze", "flatten", "getitem", "concat", "cat", "stack", "split", "chunk",
    "where", "masked_fill", "tril", "triu", "exp", "log", "sqrt", "tanh", "abs", "sum", "mean",
    "max", "amax", "var", "dtype_name", "_shape_args_allow_minus_one",
]
