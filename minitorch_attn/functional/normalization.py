"""Normalization: LayerNorm and RMSNorm, with hand-written backward passes."""

from __future__ import annotations

from ..core.autograd import Function
from ..core.backend import backend_of
from ._checks import _check_eps, _normalized_axes
from ._parallel import by_row_chunks


class LayerNorm(Function):
    """LayerNorm over the trailing ``axes`` (Ba et al. 2016, arXiv:1607.06450, eqs. 3-4).

    Forward (n = number of normalized elements per row)::

        1. mean = sum(x) / n
           mean += sum(x - mean) / n            (adds back the rounding error of 1, so the
                                                 mean of a constant row is exactly its value)
        2. xc   = x - mean                      (two passes: exact for shifted rows)
        3. var  = sum(xc²) / n                  (biased, as PyTorch)
        4. rstd = 1 / sqrt(var + eps)
        5. x̂    = xc · rstd
        6. y    = x̂ · w + b

    Backward, each line undoing the forward line of the same number::

        6. db = sum_rows(g),  dw = sum_rows(g · x̂),  dx̂ = g · w
        5-1. dx = rstd · (dx̂ - mean(dx̂) - x̂ · mean(dx̂ · x̂))
             (the mean(dx̂) term undoes 1-2, the x̂ term undoes 3-4 through rstd)

    A constant row has xc = 0, so y = b exactly, dw = 0, and dx = rstd · (dx̂ - mean dx̂)
    stays finite (rstd = 1/sqrt(eps)).
    """

    @staticmethod
    def forward(ctx, x, weight, bias, axes=(-1,), eps=1e-5):
        # BEGIN SOLUTION 3.1
        xp = ctx.xp
        mean = xp.mean(x, axis=axes, keepdims=True)                 # 1
        mean += xp.mean(x - mean, axis=axes, keepdims=True)          # 1' (rounding error of 1)
        xhat = x - mean                                              # 2 (xc, a new array)
        var = xp.mean(xhat * xhat, axis=axes, keepdims=True)         # 3
        rstd = 1.0 / xp.sqrt(var + eps)                              # 4
        xhat *= rstd                                                 # 5 (in place: xc -> x̂)
        ctx.axes = axes
        ctx.save_for_backward(xhat, rstd, weight)
        if weight is None:                                           # 6
            return xhat if bias is None else xhat + bias
        y = xhat * weight
        if bias is not None:
            y += bias
        return y
        # END SOLUTION

    @staticmethod
    def backward(ctx, g):
        # BEGIN SOLUTION 3.1
        xhat, rstd, weight = ctx.saved_tensors
        xp = ctx.xp
        axes = ctx.axes
        rows = tuple(range(g.ndim - len(axes)))                      # the leading (batch) dims
        need_x, need_w, need_b = ctx.needs_input_grad
        grad_b = xp.sum(g, axis=rows) if need_b else None            # 6
        grad_w = xp.sum(g * xhat, axis=rows) if need_w else None
        grad_x = None
        if need_x:
            dxhat = g if weight is None else g * weight
            grad_x = dxhat - xp.mean(dxhat, axis=axes, keepdims=True)                 # 5-1
            grad_x -= xhat * xp.mean(dxhat * xhat, axis=axes, keepdims=True)
            grad_x *= rstd
        return grad_x, grad_w, grad_b
        # END SOLUTION


def layer_norm(x, normalized_shape, weight=None, bias=None, eps=1e-5):
    """Layer normalization over the trailing ``normalized_shape`` dims (as ``F.layer_norm``).

    Shapes: ``x (..., *normalized_shape)``; ``weight`` and ``bias`` ``normalized_shape``
    (optional); output like ``x``. Normalizing several trailing dims equals flattening
    them into one. The variance is biased and computed after the mean (two passes), so
    ``layer_norm(x + c) == layer_norm(x)`` for large offsets c. Source: arXiv:1607.06450.

    Raises:
        TypeError: for non-float tensors or mixed dtypes.
        ValueError: when ``normalized_shape`` is not the trailing shape of ``x``, the
            parameters do not have that shape, or ``eps`` is not a number >= 0.
    """
    axes = _normalized_axes(x, normalized_shape, weight, bias, "layer_norm")
    return by_row_chunks(LayerNorm, x, weight, bias, axes=axes, eps=_check_eps(eps, "layer_norm"))  # speed: see there


class RMSNorm(Function):
    """RMSNorm over the trailing ``axes`` (Zhang & Sennrich 2019, arXiv:1910.07467, eq. 4).

    Forward::

        1. ms = sum(x²) / n
        2. r  = 1 / sqrt(ms + eps)              (eps inside the root, as PyTorch)
        3. x̂  = x · r
        4. y  = x̂ · w

    Backward (``dr/dx_j = -r³ x_j / n``)::

        4.   dw = sum_rows(g · x̂),  dx̂ = g · w
        3-1. dx = r · (dx̂ - x̂ · mean(dx̂ · x̂))

    An all-zero row gives y = 0 and dx = r · dx̂, finite since eps > 0.
    """

    @staticmethod
    def forward(ctx, x, weight, axes=(-1,), eps=1e-6):
        # BEGIN SOLUTION 3.2
        xp = ctx.xp
        ms = xp.mean(x * x, axis=axes, keepdims=True)                # 1
        r = 1.0 / xp.sqrt(ms + eps)                                  # 2
        xhat = x * r                                                 # 3
        ctx.axes = axes
        ctx.save_for_backward(xhat, r, weight)
        return xhat if weight is None else xhat * weight             # 4
        # END SOLUTION

    @staticmethod
    def backward(ctx, g):
        # BEGIN SOLUTION 3.2
        xhat, r, weight = ctx.saved_tensors
        xp = ctx.xp
        axes = ctx.axes
        rows = tuple(range(g.ndim - len(axes)))
        need_x, need_w = ctx.needs_input_grad
        grad_w = xp.sum(g * xhat, axis=rows) if need_w else None     # 4
        grad_x = None
        if need_x:
            dxhat = g if weight is None else g * weight
            grad_x = dxhat - xhat * xp.mean(dxhat * xhat, axis=axes, keepdims=True)  # 3-1
            grad_x *= r
        return grad_x, grad_w
        # END SOLUTION


def rms_norm(x, normalized_shape, weight=None, eps=None):
    """Root-mean-square normalization over the trailing ``normalized_shape`` dims (as ``F.rms_norm``).

    ``y = x / sqrt(mean(x²) + eps) · weight``. ``eps=None`` means the dtype's machine
    epsilon (``finfo(dtype).eps``), as PyTorch. Shapes as :func:`layer_norm`. Source:
    arXiv:1910.07467.

    Raises:
        TypeError / ValueError: as :func:`layer_norm`.
    """
    axes = _normalized_axes(x, normalized_shape, weight, None, "rms_norm")
    if eps is None:
        xp = backend_of(x.data).xp
        eps = float(xp.finfo(x.data.dtype).eps)
    return by_row_chunks(RMSNorm, x, weight, axes=axes, eps=_check_eps(eps, "rms_norm"))  # speed: see there
