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

import numpy

from ..core.autograd import Function
from ..core.backend import backend_of
from ..core.tensor import Tensor
from ..speed import RowWise, column_sums, last_axis_sums
from ._checks import _check_eps, _normalized_axes


class _Rows:
    """The rows a norm works on: the trailing ``axes`` of an array of ``shape`` hold each
    row's ``n`` normalized elements, the leading axes count the rows."""

    def __init__(self, xp, shape, axes):
        self.xp, self.axes = xp, axes
        self.n = max(math.prod(shape[a] for a in axes), 1)  # an empty row: 0 / 1, not 0 / 0
        self.leading = tuple(range(len(shape) - len(axes)))
        lead, row = tuple(shape[: len(self.leading)]), tuple(shape[len(self.leading) :])
        self.row_shape = row  # one row, as the input holds it
        self.one_axis = lead + (math.prod(row),)  # each row along one last axis
        self.matrix = (math.prod(lead), math.prod(row))  # the rows as a matrix
        self.kept = lead + (1,) * len(axes)  # a row statistic, to broadcast back

    def mean(self, a):
        """``mean(a)`` over each row, kept as size-1 dims so that it broadcasts back."""
        sums = last_axis_sums(self.xp, _reshape(self.xp, a, self.one_axis))  # speed: see speed/sums.py
        return _reshape(self.xp, sums, self.kept) / self.n

    def total(self, a):
        """``sum_rows(a)``: the sum over all rows, shaped like one row (a gain's gradient)."""
        sums = column_sums(self.xp, _reshape(self.xp, a, self.matrix))  # speed: see speed/sums.py
        return _reshape(self.xp, sums, self.row_shape)


def _reshape(xp, a, shape):
    return a if tuple(a.shape) == shape else xp.reshape(a, shape)


def _unit_rms(rows, a, eps):
    """``(â, r)``: each row of ``a`` scaled by ``r = 1 / sqrt(mean(a²) + eps)`` to a root mean
    square of 1 (up to eps). RMSNorm applies it to ``x``; LayerNorm to the centered
    ``xc``, whose mean square is its variance.

    ``a²`` overflows for large rows (``|a| > 1.8e19`` in float32, 1.3e154 in float64),
    and ``r`` would be 0 where the right ``â`` is scale-invariant (``[1, -1]`` for
    ``[1e20, -1e20]``). Such rows (seen as a mean square that is not finite) take the
    ``r`` of :func:`_rms_scaled`, the same quantity computed without squaring ``a``;
    every other row keeps its own ``r``, so a row's result does not depend on the rows
    beside it, and the backward's formulas do not change.
    speed: on the CPU the usual rows pay one check of the row statistics, no pass over
    the data; on a device that check would wait for the device (``all_false``,
    core/backend.py), so the scaled ``r`` is computed for every row and kept where needed."""
    xp = rows.xp
    with numpy.errstate(over="ignore"):  # an overflowing a² is expected here and taken care of below
        ms = rows.mean(a * a)
    r = 1.0 / xp.sqrt(ms + eps)
    finite = xp.isfinite(ms)
    if not backend_of(ms).all_false(~finite):  # a row that overflowed (or a device)
        r = xp.where(finite, r, _rms_scaled(rows, a, eps))
    return a * r, r


def _rms_scaled(rows, a, eps):
    """:func:`_unit_rms`'s ``r`` without overflow: with ``m = max |a|`` per row and ``s = a / m``,
    the row's root mean square is ``ρ = m sqrt(mean(s²))`` (no square of ``a``), and
    ``sqrt(ρ² + eps) = t sqrt((ρ/t)² + (√eps/t)²)`` with ``t = max(ρ, √eps)`` (the hypot
    rule: both ratios are at most 1). An all-zero row keeps ``m = 1``; a row with inf or
    NaN gives NaN, as the plain formula."""
    xp = rows.xp
    m = xp.max(xp.abs(a), axis=rows.axes, keepdims=True) if a.size else xp.ones_like(rows.mean(a))
    m = xp.where(m > 0, m, xp.ones_like(m))
    s = a / m
    rho = m * xp.sqrt(rows.mean(s * s))
    root_eps = xp.full_like(rho, eps**0.5)
    t = xp.maximum(rho, root_eps)
    return 1.0 / (t * xp.sqrt((rho / t) ** 2 + (root_eps / t) ** 2))


def _gain(xhat, weight, bias):
    """The last forward step of both norms: ``y = x̂ · w + b`` (w and b may be None)."""
    if weight is None:
        return xhat if bias is None else xhat + bias
    y = xhat * weight
    if bias is not None:
        y += bias  # speed: into the fresh product
    return y


def _gain_backward(rows, grad_output, xhat, weight, needs_weight, needs_bias):
    """Undo :func:`_gain`: ``dw = sum_rows(g · x̂)``, ``db = sum_rows(g)`` (each weight and
    bias entry is used once in every row), and ``dx̂ = g · w`` for the norm's own backward."""
    grad_w = rows.total(grad_output * xhat) if needs_weight else None
    grad_b = rows.total(grad_output) if needs_bias else None
    return (grad_output if weight is None else grad_output * weight), grad_w, grad_b


class LayerNorm(Function):
    r"""LayerNorm over the trailing ``axes`` (Ba et al. 2016, arXiv:1607.06450, eqs. 3-4).

    Forward (n = number of normalized elements per row)::

        1.  μ    = sum(x) / n                   (the row's mean; mu in the code)
        1'. μ    = μ + sum(x - μ) / n           (adds back the rounding error of 1, so the
                                                 μ of a constant row is exactly its value)
        2.  xc   = x - μ                        (two passes: accurate for shifted rows)
        3.  var  = sum(xc²) / n                 (biased, as PyTorch)
        4.  rstd = 1 / sqrt(var + eps)
        5.  x̂    = xc · rstd                    (3-5: RMSNorm's scaling, of xc)
        6.  y    = x̂ · w + b

    Backward: ``(dx, dw, db)``, the gradients of the loss with respect to ``x``, ``weight``
    and ``bias`` (None for an input that needs none), each of its input's shape; line 6's
    ``dw``, ``db`` and ``dx̂ = g · w`` are given (:func:`_gain_backward`), ``dx`` is the task.
    The forward saves ``x̂`` and ``rstd`` for it.

    .. derivation 3.1 begin
    .. hint 3.1: write x̂ as a function of x through lines 1-5 and find the Jacobian ∂x̂_i/∂x_j; it is symmetric.
    .. hint 3.1: the rounding guards (1', the two passes) change no gradient: derive from the exact math.
    .. hint 3.1: check a constant row (xc = 0): dx must stay finite.
    Derivation of the backward. The backward is written from the mathematical function
    of lines 1-6, so the forward's rounding guards (1', the two passes) never enter it.
    From 3, the term through μ sums to 0; from 4, the chain rule through the square root:

    .. math::

        \frac{\partial\,\mathrm{var}}{\partial x_j} = \frac{2\,xc_j}{n}
            \quad\Big(\text{through } \mu: -\frac{2}{n^2} \sum_i xc_i = 0\Big)

        \frac{\partial\,\mathrm{rstd}}{\partial\,\mathrm{var}} = -\tfrac12 (\mathrm{var} + \epsilon)^{-3/2}
            = -\tfrac12\,\mathrm{rstd}^3

        \frac{\partial\,\mathrm{rstd}}{\partial x_j} = -\tfrac12\,\mathrm{rstd}^3 \cdot \frac{2\,xc_j}{n}
            = -\frac{\mathrm{rstd}^2\,\hat x_j}{n}

    Then from 2 and 5, with :math:`\partial\mu/\partial x_j = 1/n`:

    .. math::

        \frac{\partial \hat x_i}{\partial x_j}
            = \mathrm{rstd}\,\Big(\delta_{ij} - \frac1n\Big) + xc_i\,\frac{\partial\,\mathrm{rstd}}{\partial x_j}
            = \mathrm{rstd}\,\Big(\delta_{ij} - \frac1n - \frac{\hat x_i \hat x_j}{n}\Big)

    so the Jacobian is :math:`\mathrm{rstd}\,(I - \mathbf{1}\mathbf{1}^\top/n - \hat x \hat x^\top/n)`,
    symmetric. Multiplying by ``dx̂`` gives the backward,

    .. math::

        dx = \mathrm{rstd}\,\big(d\hat x - \mathrm{mean}(d\hat x) - \hat x\,\mathrm{mean}(d\hat x \odot \hat x)\big),

    each line below undoing the forward line of the same number::

        6.   db = sum_rows(g),  dw = sum_rows(g · x̂),  dx̂ = g · w
        5-1. dx = rstd · (dx̂ - mean(dx̂) - x̂ · mean(dx̂ · x̂))
             (the mean(dx̂) term undoes 1-2, the x̂ term undoes 3-4 through rstd)

    The guards change no gradient: 1' adds ``mean(x - μ)``, which is 0 for every ``x``
    in exact arithmetic, so the function of ``x`` is the same; the two-pass variance 3 is
    exactly ``mean(x²) - μ²`` in exact arithmetic. Both only change rounding.

    A constant row has xc = 0 exactly (thanks to 1'), so y = b, dw = 0 and
    ``dx = rstd · (dx̂ - mean(dx̂))`` with ``rstd = 1/sqrt(eps)``: finite, but the upstream
    gradient is amplified by ``1/sqrt(eps)`` (316 at the default eps = 1e-5; tested).
    .. derivation end
    """

    row_wise = RowWise(row_axes="axes")  # each row (the trailing axes) on its own (minitorch_attn.speed)

    @staticmethod
    def forward(ctx, x, weight, bias, axes=(-1,), eps=1e-5):
        rows = ctx.rows = _Rows(ctx.xp, x.shape, axes)
        # BEGIN SOLUTION 3.1
        mu = rows.mean(x)  # 1
        mu = mu + rows.mean(x - mu)  # 1'
        xc = x - mu  # 2
        xhat, rstd = _unit_rms(rows, xc, eps)  # 3-5
        # END SOLUTION
        ctx.save_for_backward(xhat, rstd, weight)
        return _gain(xhat, weight, bias)  # 6

    @staticmethod
    def backward(ctx, grad_output):
        xhat, rstd, weight = ctx.saved_tensors
        need_x, need_w, need_b = ctx.needs_input_grad
        dxhat, grad_w, grad_b = _gain_backward(ctx.rows, grad_output, xhat, weight, need_w, need_b)  # 6
        if not need_x:
            return None, grad_w, grad_b
        # BEGIN SOLUTION 3.1
        mean = ctx.rows.mean
        grad_x = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat))  # 5-1
        # END SOLUTION
        return grad_x, grad_w, grad_b


def layer_norm(
    x: Tensor,
    normalized_shape: int | tuple[int, ...] | list[int],
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    eps: float = 1e-5,
) -> Tensor:
    """Layer normalization over the trailing ``normalized_shape`` dims (as ``F.layer_norm``).

    Shapes: ``x (..., *normalized_shape)``; ``weight`` and ``bias`` ``normalized_shape``
    (optional); output like ``x``. Any dim may be 0 (the output is then empty, as in
    PyTorch). Normalizing several trailing dims equals flattening them into one. The
    variance is biased and computed after the mean (two passes), so a large offset c
    costs only the float spacing near c: ``layer_norm(x + c)`` equals ``layer_norm(x)`` to
    about ``eps(dtype) · |c| / std(x)`` (the one-pass ``mean(x²) - mean(x)²`` loses everything,
    even NaN). A constant row gives
    exactly ``bias``. Rows whose squares overflow (float32 beyond 1.8e19) are still
    normalized right (``[1e20, -1e20] -> [1, -1]``; see ``_unit_rms``). Source: arXiv:1607.06450.

    Raises:
        TypeError: for non-float tensors or mixed dtypes.
        ValueError: when ``normalized_shape`` is not the trailing shape of ``x``, the
            parameters do not have that shape, or ``eps`` is not a finite number > 0 in
            the input's dtype (eps = 0 would make a constant row 0 / 0).

    Catalogue record: ``opinfo/normalization.py`` (its samples, references and checks).
    """
    axes = _normalized_axes(x, normalized_shape, weight, bias, "layer_norm")
    return LayerNorm.apply(x, weight, bias, axes=axes, eps=_check_eps(eps, "layer_norm", x.dtype))


class RMSNorm(Function):
    r"""RMSNorm over the trailing ``axes`` (Zhang & Sennrich 2019, arXiv:1910.07467, eq. 4).

    Forward::

        1. ms = sum(x²) / n
        2. r  = 1 / sqrt(ms + eps)              (eps inside the root, as PyTorch)
        3. x̂  = x · r
        4. y  = x̂ · w

    Backward: ``(dx, dw)``, the gradients of the loss with respect to ``x`` and ``weight``
    (None for an input that needs none), each of its input's shape; line 4's ``dw`` and
    ``dx̂ = g · w`` are given (:func:`_gain_backward`), ``dx`` is the task. The forward saves
    ``x̂`` and ``r`` for it.

    .. derivation 3.2 begin
    .. hint 3.2: it is LayerNorm's derivation without the mean: find ∂r/∂x_j first.
    Derivation of the backward. From 1-2, then from 3:

    .. math::

        \frac{\partial r}{\partial x_j} = -\tfrac12\, r^3 \cdot \frac{2\,x_j}{n} = -\frac{r^2\,\hat x_j}{n},
        \qquad
        \frac{\partial \hat x_i}{\partial x_j} = r\,\delta_{ij} + x_i\,\frac{\partial r}{\partial x_j}
            = r\,\Big(\delta_{ij} - \frac{\hat x_i \hat x_j}{n}\Big)

    so the Jacobian is :math:`r\,(I - \hat x \hat x^\top/n)`, symmetric, and each line below
    undoes the forward line of the same number::

        4.   dw = sum_rows(g · x̂),  dx̂ = g · w
        3-1. dx = r · (dx̂ - x̂ · mean(dx̂ · x̂))

    It is LayerNorm's without the mean: no ``11ᵀ/n`` term. That is why RMSNorm is cheaper:
    the forward reduces each row once (``sum(x²)``; LayerNorm three times: the mean, its
    correction, the variance) and subtracts nothing, and the backward reduces each row
    once (``mean(dx̂ · x̂)``; LayerNorm twice), with no bias to sum.

    An all-zero row has x̂ = 0, so y = 0, dw = 0 and ``dx = r · dx̂`` with
    ``r = 1/sqrt(eps)``: finite, but the upstream gradient is amplified by
    ``1/sqrt(eps)``. At :func:`rms_norm`'s default eps (the dtype's machine epsilon) that
    is 2.9e3 in float32 and 6.7e7 in float64 (tested).
    .. derivation end
    """

    row_wise = RowWise(row_axes="axes")  # each row (the trailing axes) on its own (minitorch_attn.speed)

    @staticmethod
    def forward(ctx, x, weight, axes=(-1,), eps=None):
        ctx.rows = _Rows(ctx.xp, x.shape, axes)
        eps = float(ctx.xp.finfo(x.dtype).eps) if eps is None else eps  # as rms_norm's default
        # BEGIN SOLUTION 3.2
        xhat, r = _unit_rms(ctx.rows, x, eps)  # 1-3
        # END SOLUTION
        ctx.save_for_backward(xhat, r, weight)
        return _gain(xhat, weight, None)  # 4

    @staticmethod
    def backward(ctx, grad_output):
        xhat, r, weight = ctx.saved_tensors
        need_x, need_w = ctx.needs_input_grad
        dxhat, grad_w, _ = _gain_backward(ctx.rows, grad_output, xhat, weight, need_w, False)  # 4
        # BEGIN SOLUTION 3.2
        grad_x = r * (dxhat - xhat * ctx.rows.mean(dxhat * xhat)) if need_x else None  # 3-1
        # END SOLUTION
        return grad_x, grad_w


def rms_norm(
    x: Tensor,
    normalized_shape: int | tuple[int, ...] | list[int],
    weight: Tensor | None = None,
    eps: float | None = None,
) -> Tensor:
    """Root-mean-square normalization over the trailing ``normalized_shape`` dims (as ``F.rms_norm``).

    ``y = x / sqrt(mean(x²) + eps) · weight``. ``eps=None`` means the dtype's machine
    epsilon (``finfo(dtype).eps``), as PyTorch and as :class:`minitorch_attn.nn.RMSNorm`.
    Shapes as :func:`layer_norm`, also with dims of size 0. An all-zero row gives 0, with
    its gradient amplified by ``1/sqrt(eps)`` (see :class:`RMSNorm`). Rows so large that
    their squares overflow (float32 beyond 1.8e19) are still normalized right
    (``[1e20, -1e20] -> [1, -1]``; see ``_unit_rms``). Source: arXiv:1910.07467.

    Raises:
        TypeError / ValueError: as :func:`layer_norm`.

    Catalogue record: ``opinfo/normalization.py`` (its samples, references and checks).
    """
    axes = _normalized_axes(x, normalized_shape, weight, None, "rms_norm")
    if eps is None:
        eps = float(backend_of(x.data).xp.finfo(x.data.dtype).eps)
    return RMSNorm.apply(x, weight, axes=axes, eps=_check_eps(eps, "rms_norm", x.dtype))


__all__ = ["layer_norm", "rms_norm"]  # what minitorch_attn.functional exports
