"""Normalization: LayerNorm and RMSNorm, with hand-written backward passes.

Both normalize each row (the trailing ``normalized_shape`` dims, ``n`` elements) and then
scale it by a learned gain. Notation (as in every backward of the package):
``grad_output`` is the upstream gradient ``dL/dy`` (``g`` in the derivations), ``x̂`` the
normalized row, ``dx̂ = g ∘ w`` the gradient reaching it, ``mean(·)`` a mean over the
row's ``n`` elements and ``δ_ij`` 1 when i = j, else 0.

``eps`` must be > 0 (also after rounding to the input's dtype): with ``eps = 0`` a row
with nothing to normalize (constant for LayerNorm, all zeros for RMSNorm) divides 0 by 0.
A zero-length row (``n = 0``) has nothing to normalize and an empty output: its
statistics divide by ``max(n, 1)`` so that 0 / 0 is never formed, which changes no
gradient because such a row has no entries to receive one.
"""

from __future__ import annotations

import math

from ..core.autograd import Function
from ..core.backend import backend_of
from ._checks import _check_eps, _normalized_axes


class LayerNorm(Function):
    """LayerNorm over the trailing ``axes`` (Ba et al. 2016, arXiv:1607.06450, eqs. 3-4).

    Forward (n = number of normalized elements per row)::

        1.  mean = sum(x) / n
        1'. mean = mean + sum(x - mean) / n     (adds back the rounding error of 1, so the
                                                 mean of a constant row is exactly its value)
        2.  xc   = x - mean                     (two passes: exact for shifted rows)
        3.  var  = sum(xc²) / n                 (biased, as PyTorch)
        4.  rstd = 1 / sqrt(var + eps)
        5.  x̂    = xc · rstd
        6.  y    = x̂ · w + b

    Derivation of the backward. From 3-4, ``dvar/dx_j = 2 xc_j / n`` (the term through the
    mean is ``-(2/n²) Σ_i xc_i = 0``) and ``drstd/dx_j = -rstd³ xc_j / n = -rstd² x̂_j / n``.
    Then from 2 and 5, with ``dmean/dx_j = 1/n``::

        dx̂_i/dx_j = rstd (δ_ij - 1/n) + xc_i drstd/dx_j = rstd (δ_ij - 1/n - x̂_i x̂_j / n)

    so the Jacobian is ``rstd (I - 11ᵀ/n - x̂x̂ᵀ/n)``, symmetric. Multiplying by ``dx̂``
    gives the backward, each line undoing the forward line of the same number::

        6.   db = sum_rows(g),  dw = sum_rows(g · x̂),  dx̂ = g · w
        5-1. dx = rstd · (dx̂ - mean(dx̂) - x̂ · mean(dx̂ · x̂))
             (the mean(dx̂) term undoes 1-2, the x̂ term undoes 3-4 through rstd)

    The guards change no gradient: 1' adds ``mean(x - mean)``, which is 0 for every ``x``
    in exact arithmetic, so the function of ``x`` is the same; the two-pass variance 3 is
    exactly ``mean(x²) - mean²`` in exact arithmetic. Both only change rounding.

    A constant row has xc = 0 exactly (thanks to 1'), so y = b, dw = 0 and
    ``dx = rstd · (dx̂ - mean(dx̂))`` with ``rstd = 1/sqrt(eps)``: finite, but the upstream
    gradient is amplified by ``1/sqrt(eps)`` (316 at the default eps = 1e-5; tested).
    """

    @staticmethod
    def forward(ctx, x, weight, bias, axes=(-1,), eps=1e-5):
        # BEGIN SOLUTION 3.1
        xp = ctx.xp
        n = max(math.prod(x.shape[a] for a in axes), 1)          # an empty row: statistics 0, not 0/0
        mean = xp.sum(x, axis=axes, keepdims=True) / n                      # 1
        mean = mean + xp.sum(x - mean, axis=axes, keepdims=True) / n        # 1'
        xc = x - mean                                                       # 2
        var = xp.sum(xc * xc, axis=axes, keepdims=True) / n                 # 3
        rstd = 1.0 / xp.sqrt(var + eps)                                     # 4
        xhat = xc * rstd                                                    # 5
        y = xhat if weight is None else xhat * weight                       # 6
        y = y if bias is None else y + bias
        ctx.save_for_backward(xhat, rstd, weight)
        ctx.axes, ctx.n = axes, n
        return y
        # END SOLUTION

    @staticmethod
    def backward(ctx, grad_output):
        # BEGIN SOLUTION 3.1
        xhat, rstd, weight = ctx.saved_tensors
        xp = ctx.xp
        axes, n = ctx.axes, ctx.n
        rows = tuple(range(grad_output.ndim - len(axes)))                   # the leading (batch) dims
        need_x, need_w, need_b = ctx.needs_input_grad
        grad_b = xp.sum(grad_output, axis=rows) if need_b else None         # 6
        grad_w = xp.sum(grad_output * xhat, axis=rows) if need_w else None
        grad_x = None
        if need_x:
            dxhat = grad_output if weight is None else grad_output * weight
            mean_dxhat = xp.sum(dxhat, axis=axes, keepdims=True) / n
            mean_dxhat_xhat = xp.sum(dxhat * xhat, axis=axes, keepdims=True) / n
            grad_x = rstd * (dxhat - mean_dxhat - xhat * mean_dxhat_xhat)   # 5-1
        return grad_x, grad_w, grad_b
        # END SOLUTION


def layer_norm(x, normalized_shape, weight=None, bias=None, eps=1e-5):
    """Layer normalization over the trailing ``normalized_shape`` dims (as ``F.layer_norm``).

    Shapes: ``x (..., *normalized_shape)``; ``weight`` and ``bias`` ``normalized_shape``
    (optional); output like ``x``. Any dim may be 0 (the output is then empty, as in
    PyTorch). Normalizing several trailing dims equals flattening them into one. The
    variance is biased and computed after the mean (two passes), so
    ``layer_norm(x + c) == layer_norm(x)`` for large offsets c. A constant row gives
    exactly ``bias``. Source: arXiv:1607.06450.

    Raises:
        TypeError: for non-float tensors or mixed dtypes.
        ValueError: when ``normalized_shape`` is not the trailing shape of ``x``, the
            parameters do not have that shape, or ``eps`` is not a finite number > 0 in
            the input's dtype (eps = 0 would make a constant row 0 / 0).
    """
    axes = _normalized_axes(x, normalized_shape, weight, bias, "layer_norm")
    return LayerNorm.apply(x, weight, bias, axes=axes, eps=_check_eps(eps, "layer_norm", x.dtype))


class RMSNorm(Function):
    """RMSNorm over the trailing ``axes`` (Zhang & Sennrich 2019, arXiv:1910.07467, eq. 4).

    Forward::

        1. ms = sum(x²) / n
        2. r  = 1 / sqrt(ms + eps)              (eps inside the root, as PyTorch)
        3. x̂  = x · r
        4. y  = x̂ · w

    Derivation of the backward. From 1-2, ``dr/dx_j = -½ r³ · 2 x_j / n = -r² x̂_j / n``.
    Then from 3::

        dx̂_i/dx_j = r δ_ij + x_i dr/dx_j = r (δ_ij - x̂_i x̂_j / n)

    so the Jacobian is ``r (I - x̂x̂ᵀ/n)``, symmetric, and each line below undoes the
    forward line of the same number::

        4.   dw = sum_rows(g · x̂),  dx̂ = g · w
        3-1. dx = r · (dx̂ - x̂ · mean(dx̂ · x̂))

    It is LayerNorm's without the mean: no ``11ᵀ/n`` term. That is why RMSNorm is cheaper:
    the forward reduces each row once (``sum(x²)``; LayerNorm three times: the mean, its
    correction, the variance) and subtracts nothing, and the backward reduces each row
    once (``mean(dx̂ · x̂)``; LayerNorm twice), with no bias to sum.

    An all-zero row has x̂ = 0, so y = 0, dw = 0 and ``dx = r · dx̂`` with
    ``r = 1/sqrt(eps)``: finite, but the upstream gradient is amplified by
    ``1/sqrt(eps)``. At the default eps (the dtype's machine epsilon) that is 2.9e3 in
    float32 and 6.7e7 in float64 (tested).
    """

    @staticmethod
    def forward(ctx, x, weight, axes=(-1,), eps=1e-6):
        # BEGIN SOLUTION 3.2
        xp = ctx.xp
        n = max(math.prod(x.shape[a] for a in axes), 1)          # an empty row: statistics 0, not 0/0
        ms = xp.sum(x * x, axis=axes, keepdims=True) / n                    # 1
        r = 1.0 / xp.sqrt(ms + eps)                                         # 2
        xhat = x * r                                                        # 3
        y = xhat if weight is None else xhat * weight                       # 4
        ctx.save_for_backward(xhat, r, weight)
        ctx.axes, ctx.n = axes, n
        return y
        # END SOLUTION

    @staticmethod
    def backward(ctx, grad_output):
        # BEGIN SOLUTION 3.2
        xhat, r, weight = ctx.saved_tensors
        xp = ctx.xp
        axes, n = ctx.axes, ctx.n
        rows = tuple(range(grad_output.ndim - len(axes)))
        need_x, need_w = ctx.needs_input_grad
        grad_w = xp.sum(grad_output * xhat, axis=rows) if need_w else None  # 4
        grad_x = None
        if need_x:
            dxhat = grad_output if weight is None else grad_output * weight
            mean_dxhat_xhat = xp.sum(dxhat * xhat, axis=axes, keepdims=True) / n
            grad_x = r * (dxhat - xhat * mean_dxhat_xhat)                   # 3-1
        return grad_x, grad_w
        # END SOLUTION


def rms_norm(x, normalized_shape, weight=None, eps=None):
    """Root-mean-square normalization over the trailing ``normalized_shape`` dims (as ``F.rms_norm``).

    ``y = x / sqrt(mean(x²) + eps) · weight``. ``eps=None`` means the dtype's machine
    epsilon (``finfo(dtype).eps``), as PyTorch and as :class:`minitorch_attn.nn.RMSNorm`.
    Shapes as :func:`layer_norm`, also with dims of size 0. An all-zero row gives 0, with
    its gradient amplified by ``1/sqrt(eps)`` (see :class:`RMSNorm`). Source:
    arXiv:1910.07467.

    Raises:
        TypeError / ValueError: as :func:`layer_norm`.
    """
    axes = _normalized_axes(x, normalized_shape, weight, None, "rms_norm")
    if eps is None:
        eps = float(backend_of(x.data).xp.finfo(x.data.dtype).eps)
    return RMSNorm.apply(x, weight, axes=axes, eps=_check_eps(eps, "rms_norm", x.dtype))
