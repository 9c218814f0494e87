"""The softmax family: logsumexp, softmax, log-softmax and cross-entropy, with hand-written backward passes.

All three start from one log-sum-exp, ``_shifted_logsumexp`` (in :mod:`.shifted`): with ``m`` the row
maximum, ``z = x - m`` and ``lse(z) = log Σ_j exp(z_j)``, so that no exponential overflows.
Then

    log_softmax(x) = z - lse(z)          softmax(x) = exp(z - lse(z))

and cross-entropy is ``-Σ_c q_c log_softmax(x)_c`` for a target distribution ``q``.

Notation (as in every backward of the package): ``grad_output`` is the upstream gradient
``dL/dy`` of the output ``y`` (``g`` in the derivations); ``p = softmax(x)``; ``δ_ij`` is 1
when i = j, else 0.
"""

from __future__ import annotations

import math

from ..core.autograd import Function
from ..core.ops import _check_keepdim, _normalize_dims
from ..core.tensor import FLOAT_DTYPES, Tensor, _is_int, dtype_name
from ._checks import _axis, _bad_targets, _check_float, _check_probability, as_float
from .losses import undefined_mean
from .shifted import _shifted_logsumexp


class LogSumExp(Function):
    r"""``lse(x) = log Σ_j exp(x_j)`` over the axes ``dims``, shifted by the maximum ``m``::

        1. m = max(x) over dims (0 where it is ±inf or the dims are empty: nothing to shift)
        2. s = Σ_j exp(x_j - m)                   (the largest term is exp(0) = 1: no overflow)
        3. lse = m + log s                        (log 0 = -inf for an empty or all -inf row)

    .. derivation 2.1 begin
    Backward (3-1, ``m`` cancels): :math:`dx_j = g\,e^{x_j}/\sum_i e^{x_i} = g\,\mathrm{softmax}(x)_j`.
    .. derivation end

    An entry ``-inf`` gets gradient ``exp(-inf) = 0`` while its row has a finite entry.
    """

    @staticmethod
    def forward(ctx, x, dims=(-1,), keepdim=False):
        xp = ctx.xp
        if 0 in [x.shape[a] for a in dims]:
            m = xp.sum(x, axis=dims, keepdims=True)  # 1. zeros
        else:
            m = xp.max(x, axis=dims, keepdims=True)
            m = xp.where(xp.isfinite(m), m, 0.0)  # 1
        total = xp.sum(xp.exp(x - m), axis=dims, keepdims=True)  # 2
        lse = m + xp.where(total == 0, -math.inf, xp.log(xp.where(total == 0, 1.0, total)))  # 3
        ctx.save_for_backward(x, lse)
        ctx.dims, ctx.keepdim = dims, keepdim
        return lse if keepdim else xp.squeeze(lse, axis=dims)

    @staticmethod
    def backward(ctx, grad_output):
        x, lse = ctx.saved_tensors
        if not ctx.keepdim:
            grad_output = ctx.xp.reshape(grad_output, lse.shape)
        return grad_output * ctx.xp.exp(x - lse)  # 3-1


def logsumexp(input: Tensor, dim: int | tuple[int, ...], keepdim: bool = False) -> Tensor:
    """``log Σ exp(input)`` over ``dim`` (an int or a tuple of ints), as ``torch.logsumexp``:
    computed from the max-shifted input, so ``logsumexp([1000, 1000]) = 1000 + log 2``, not
    inf. Shapes: the input's, without ``dim`` (or with it of size 1 when ``keepdim``); a
    0-d input is its own logsumexp; over an empty dim the result is ``-inf``, as PyTorch.
    float32/float64, dtype kept; the gradient is ``softmax(input)`` along ``dim`` times
    the upstream gradient. Source: the log-sum-exp trick (e.g. Blanchard et al. 2021,
    "Accurately computing the log-sum-exp and softmax functions", IMA J. Numer. Anal., eq. 1.3).

    Raises:
        TypeError: for a non-float tensor, a dim not an int or a tuple of ints, a non-bool keepdim.
        ValueError: for a dim out of range.

    Catalogue record: ``opinfo/softmax.py`` (its samples, references and checks).
    """
    input = as_float(input, "logsumexp")
    _check_float(input, "logsumexp")
    dims = _normalize_dims(dim, input.ndim, "logsumexp: dim")
    _check_keepdim(keepdim)
    if input.ndim == 0:
        return LogSumExp.apply(input.reshape(1), dims=(0,), keepdim=False)
    return LogSumExp.apply(input, dims=dims, keepdim=keepdim)


def _cast_first(x, dtype, what):
    """``x`` in ``dtype`` before the operation (PyTorch's ``dtype=`` argument of softmax and
    log_softmax: "the input tensor is cast to dtype before the operation is performed"); the
    cast is differentiable, so the gradient comes back in ``x``'s own dtype."""
    if dtype is None:
        return x
    try:
        name = dtype_name(dtype)
    except (TypeError, ValueError):
        name = None
    if name not in FLOAT_DTYPES:
        raise TypeError(f"{what}: dtype must be float32 or float64 (or None), got {dtype!r}")
    return x.to(dtype=name)


class Softmax(Function):
    r"""``p = softmax(x) = exp(x - lse(x))`` along ``dim`` (Bridle 1990).

    Forward (its backward returns ``dx``, of ``x``'s shape, from ``g`` and the saved ``p``, never dividing by ``p``)::

        1. z = x - max(x),  lse_z = log Σ_j exp(z_j)      (see _shifted_logsumexp)
        2. p = exp(z - lse_z)                              (= exp(x - lse(x)))

    .. derivation 2.1 begin
    Backward. Differentiate :math:`p_i = \exp(x_i - \mathrm{lse})`, with
    :math:`\partial\,\mathrm{lse}/\partial x_j = \exp(x_j - \mathrm{lse}) = p_j`:

    .. math::

        \frac{\partial p_i}{\partial x_j} = p_i\,\Big(\delta_{ij} - \frac{\partial\,\mathrm{lse}}{\partial x_j}\Big)
            = p_i\,(\delta_{ij} - p_j),
        \qquad
        dx_j = \sum_i g_i\, p_i\,(\delta_{ij} - p_j) = p_j\,\Big(g_j - \sum_i g_i\, p_i\Big)

    the Jacobian multiplied by ``grad_output`` (call it ``g``) from the left::

        2-1. dx_j = Σ_i g_i p_i (δ_ij - p_j) = p_j (g_j - Σ_i g_i p_i)

    The max shift of step 1 does not change this: ``p(x - c) = p(x)`` for every constant ``c``.

    Why the formula never divides by p: for ``x = [0, -inf]``, ``p = [1, 0]``. Composing
    ``log(softmax(x))`` differentiates the logarithm as ``d(log p_j) = dp_j / p_j``, which
    is ``0 / 0`` at the second entry (index 1): NaN there, and since ``Σ_i g_i p_i`` then
    holds a NaN, the whole row's gradient is NaN (tested). Here ``dx_1 = 0 · (g_1 - …) = 0``.
    .. derivation end
    """

    @staticmethod
    def forward(ctx, x, dim=-1):
        # BEGIN SOLUTION 2.1
        z, lse_z = _shifted_logsumexp(ctx.xp, x, dim)  # 1
        p = ctx.xp.exp(z - lse_z)  # 2
        # END SOLUTION
        ctx.save_for_backward(p)
        ctx.axis = dim
        return p

    @staticmethod
    def backward(ctx, grad_output):
        (p,) = ctx.saved_tensors
        # BEGIN SOLUTION 2.1
        row_term = ctx.xp.sum(grad_output * p, axis=ctx.axis, keepdims=True)  # Σ_i g_i p_i
        return p * (grad_output - row_term)  # 2-1
        # END SOLUTION


class LogSoftmax(Function):
    r"""``y = log_softmax(x) = x - lse(x)`` along ``dim``.

    Forward (its backward returns ``dx``, of ``x``'s shape, from ``g`` and the saved ``p = softmax(x) = e^y``)::

        1. z = x - max(x),  lse_z = log Σ_j exp(z_j)      (see _shifted_logsumexp)
        2. y = z - lse_z                                   (= x - lse(x))

    .. derivation 2.2 begin
    Backward (2-1), with :math:`p = \mathrm{softmax}(x) = e^y` (saved by the forward) and
    :math:`\partial\,\mathrm{lse}/\partial x_j = p_j`:

    .. math::

        \frac{\partial y_i}{\partial x_j} = \delta_{ij} - \frac{\partial\,\mathrm{lse}}{\partial x_j}
            = \delta_{ij} - p_j,
        \qquad
        dx_j = \sum_i g_i\,(\delta_{ij} - p_j) = g_j - p_j \sum_i g_i

    The max shift of step 1 does not change this: ``y(x - c) = y(x)`` for every constant ``c``.
    .. derivation end
    Exact for large offsets: ``log_softmax([1000, 0]) == [0, -1000]``.
    """

    @staticmethod
    def forward(ctx, x, dim=-1):
        # BEGIN SOLUTION 2.2
        z, lse_z = _shifted_logsumexp(ctx.xp, x, dim)  # 1
        y = z - lse_z  # 2
        # END SOLUTION
        ctx.save_for_backward(ctx.xp.exp(y))  # p, what the backward needs
        ctx.axis = dim
        return y

    @staticmethod
    def backward(ctx, grad_output):
        (p,) = ctx.saved_tensors
        # BEGIN SOLUTION 2.2
        return grad_output - p * ctx.xp.sum(grad_output, axis=ctx.axis, keepdims=True)  # 2-1
        # END SOLUTION


def _rowwise(function, x, dim):
    """Apply softmax or log-softmax along ``dim``; a 0-d tensor is a row of one entry (dim 0
    or -1, as in PyTorch): its softmax is 1 and its log-softmax 0."""
    if x.ndim == 0:
        return function.apply(x.reshape(1), dim=0).reshape(())
    return function.apply(x, dim=dim)


def softmax(x: Tensor, dim: int = -1, dtype: str | None = None) -> Tensor:
    """Softmax along ``dim`` (as ``torch.softmax``): ``exp(x_i) / sum_j exp(x_j)``.

    Shapes and dtypes: any float32/float64 tensor, also with a 0-length ``dim`` (the result
    is then empty, as in PyTorch) and 0-d (softmax 1); the output has its shape and dtype.
    Entries equal to ``-inf`` get probability 0 and gradient 0 (no NaN while the row has a
    finite entry); a row of all ``-inf``, or one holding NaN or ``+inf``, gives NaN in the
    whole row, as in PyTorch. ``dtype`` (float32 or float64): ``x`` is cast to it first
    and the output has it, as PyTorch's (the gradient returns in ``x``'s dtype).
    Source: Bridle 1990, "Probabilistic interpretation of feedforward classification
    network outputs".

    Raises:
        TypeError: for a non-float tensor or ``dtype``. ValueError: for a ``dim`` out of range.

    Catalogue record: ``opinfo/softmax.py`` (its samples, references and checks).
    """
    _check_float(x, "softmax")
    x = _cast_first(x, dtype, "softmax")
    return _rowwise(Softmax, x, _axis(dim, x.ndim, "softmax"))


def log_softmax(x: Tensor, dim: int = -1, dtype: str | None = None) -> Tensor:
    """Log of the softmax along ``dim`` (as ``torch.log_softmax``): ``x - logsumexp(x)``.

    Shapes, dtypes and ``dtype`` as :func:`softmax`. Computed from the max-shifted input, never as
    ``log(softmax(x))``, so ``log_softmax([1000, 0]) == [0, -1000]`` and rows shifted by
    ``-1e4`` keep their digits.

    Raises:
        TypeError: for a non-float tensor or ``dtype``. ValueError: for a ``dim`` out of range.

    Catalogue record: ``opinfo/softmax.py`` (its samples, references and checks).
    """
    _check_float(x, "log_softmax")
    x = _cast_first(x, dtype, "log_softmax")
    return _rowwise(LogSoftmax, x, _axis(dim, x.ndim, "log_softmax"))


class CrossEntropy(Function):
    r"""Fused log-softmax and cross-entropy over rows ``logits (M, C)``, as PyTorch defines it.

    Row ``i`` has target class ``t_i``; with smoothing ``ε`` and class weights ``w`` (all 1
    without ``weight``) its loss is a cross-entropy against the weighted target
    distribution ``r_i``::

        1. logp_i = log_softmax(logits_i)                    (see _shifted_logsumexp)
        2. r_ic   = w_c ((1-ε) [c = t_i] + ε/C)               (0 on ignored rows)
           loss_i = -Σ_c r_ic logp_ic
        3. reduce: sum_i loss_i;  mean = Σ_i loss_i / Σ_i w_{t_i} over the rows not
           ignored;  or none (loss_i itself)

    Backward: the gradient of the logits (None for target and weight) from ``g`` and the saved ``logp`` and ``r``.
    .. derivation 2.3 begin
    This is PyTorch's ``(1-ε) nll + ε/C · Σ_c w_c (-logp_c)``: expanding ``r`` gives
    ``-(1-ε) w_t logp_t - (ε/C) Σ_c w_c logp_c``, the weighted ``nll`` plus the smoothing
    term. Written as ``-Σ_c r_c logp_c`` its gradient is one line. With
    :math:`\partial\,\mathrm{logp}_c/\partial x_j = \delta_{cj} - p_j` (the log-softmax
    Jacobian, :math:`x = \mathrm{logits}_i`, :math:`p = \mathrm{softmax}(x)`), 2-1 is

    .. math::

        \frac{\partial\,\mathrm{loss}_i}{\partial x_j} = -\sum_c r_c\,(\delta_{cj} - p_j)
            = p_j \sum_c r_c - r_j

    Without weights :math:`\sum_c r_c = 1` and this is the familiar :math:`p - q`, ``q`` the
    smoothed one-hot. Step 3 multiplies row ``i`` by :math:`g` (sum),
    :math:`g / \sum_i w_{t_i}` (mean) or :math:`g_i` (none), ``g`` the ``grad_output``.
    .. derivation end
    An ignored row has ``r_i = 0``, so it adds nothing to the loss or the gradient; its logits
    are replaced by zeros first, so that not even ``-inf`` logits (padding) can turn that
    nothing into ``0 · inf = NaN``. Likewise a term with ``r_c = 0`` is selected away rather
    than multiplied by a ``-inf`` logp. When the targets' weights sum to 0, the mean is NaN
    (0 / 0) and so is its gradient on the rows not ignored (``losses.undefined_mean``).
    """

    @staticmethod
    def forward(ctx, logits, target, weight=None, ignore_index=-100, label_smoothing=0.0, reduction="mean"):
        xp = ctx.xp
        M, C = logits.shape
        valid = target != ignore_index
        out_of_range = valid & ((target < 0) | (target >= C))

        ctx.backend.check(
            out_of_range,  # on a device: read with the next copy to the host
            lambda: _bad_targets(xp, target, valid, C, ignore_index),
        )
        classes = xp.arange(C, device=ctx.backend.device)
        if not ctx.backend.all_false(~valid):  # speed: no copy when no row is ignored
            logits = xp.where(valid[:, None], logits, 0.0)  # an ignored row adds nothing, whatever its logits

        # BEGIN SOLUTION 2.3
        z, lse_z = _shifted_logsumexp(xp, logits, 1)  # 1
        logp = z - lse_z
        onehot = xp.astype((target[:, None] == classes[None, :]) & valid[:, None], logits.dtype)
        smooth = label_smoothing / C if C else 0.0  # 2. q = (1-ε) onehot + ε/C
        q = (1.0 - label_smoothing) * onehot + smooth * xp.astype(valid, logits.dtype)[:, None]
        r = q if weight is None else q * weight  #    r = w ∘ q
        loss = -xp.sum(r * xp.where(r != 0, logp, 0.0), axis=1)  #    -Σ_c r_c logp_c
        # END SOLUTION

        ctx.save_for_backward(logp, r)
        ctx.reduction = reduction
        if reduction == "none":  # 3
            return loss
        if reduction == "sum":
            return xp.sum(loss)
        ctx.total_weight, ctx.counted = xp.sum(onehot if weight is None else onehot * weight), valid[:, None]  # Σ w_t
        return xp.sum(loss) / xp.where(ctx.total_weight != 0, ctx.total_weight, math.nan)

    @staticmethod
    def backward(ctx, grad_output):
        # BEGIN SOLUTION 2.3
        logp, r = ctx.saved_tensors
        xp = ctx.xp
        row_factor = grad_output  # 3
        if ctx.reduction == "mean":
            total = ctx.total_weight
            row_factor = xp.where(total != 0, grad_output / xp.where(total != 0, total, 1.0), 0.0)
        elif ctx.reduction == "none":
            row_factor = grad_output[:, None]
        p = xp.exp(logp)  # 2-1
        grad = (p * xp.sum(r, axis=1, keepdims=True) - r) * row_factor
        # END SOLUTION
        return undefined_mean(xp, ctx, grad), None, None


class SoftCrossEntropy(Function):
    r"""Cross-entropy against probability ("soft") targets ``t (M, C)``, as PyTorch defines it::

        1. logp_i = log_softmax(logits_i)                    (see _shifted_logsumexp)
        2. r_ic   = w_c ((1-ε) t_ic + ε/C);   loss_i = -Σ_c r_ic logp_ic
        3. reduce: sum_i loss_i;  mean = Σ_i loss_i / M (the number of rows, not the
           weights: PyTorch's rule for probability targets);  or none.  0 log 0 = 0 (PyTorch: NaN).

    .. derivation 2.3 begin
    Backward. As :class:`CrossEntropy`'s step 2-1, with this ``r``, and the targets too
    (``loss`` is linear in them, through :math:`\partial r_{ic}/\partial t_{ic} = (1-\varepsilon)\,w_c`):

    .. math::

        \frac{\partial\,\mathrm{loss}_i}{\partial x_j} = p_j \sum_c r_{ic} - r_{ij},
        \qquad
        \frac{\partial\,\mathrm{loss}_i}{\partial t_{ic}} = -(1-\varepsilon)\,w_c\,\mathrm{logp}_{ic}

    3-1: times :math:`g` (sum), :math:`g / M` (mean) or :math:`g_i` (none).
    .. derivation end
    """

    @staticmethod
    def forward(ctx, logits, target, weight=None, label_smoothing=0.0, reduction="mean"):
        xp = ctx.xp
        M, C = logits.shape
        z, lse_z = _shifted_logsumexp(xp, logits, 1)  # 1
        logp = z - lse_z
        q = (1.0 - label_smoothing) * target + (label_smoothing / C if C else 0.0)  # 2
        r = q if weight is None else q * weight
        loss = -xp.sum(r * xp.where(r != 0, logp, 0.0), axis=1)
        ctx.save_for_backward(logp, r, weight)
        ctx.reduction, ctx.rows, ctx.smoothing = reduction, M, label_smoothing
        if reduction == "none":  # 3
            return loss
        total = xp.sum(loss)
        return total if reduction == "sum" else (total / M if M else total * math.nan)

    @staticmethod
    def backward(ctx, grad_output):
        logp, r, weight = ctx.saved_tensors
        xp = ctx.xp
        factor = grad_output  # 3-1
        if ctx.reduction == "mean":
            factor = grad_output / max(ctx.rows, 1)
        elif ctx.reduction == "none":
            factor = grad_output[:, None]
        grad_logits = (xp.exp(logp) * xp.sum(r, axis=1, keepdims=True) - r) * factor  # 2-1
        grad_target = None
        if ctx.needs_input_grad[1]:
            w = 1.0 if weight is None else weight
            grad_target = -(1.0 - ctx.smoothing) * w * logp * factor
        return grad_logits, grad_target, None


def _soft_cross_entropy(logits, target, weight, label_smoothing, reduction):
    """:func:`cross_entropy` with probability targets of the logits' shape."""
    indices_shape = () if logits.ndim == 1 else (logits.shape[0],) + logits.shape[2:]
    if target.shape == indices_shape and target.shape != logits.shape:
        raise TypeError(
            f"cross_entropy: a target of shape {target.shape} holds class indices and must be an "
            f"int64/int32 tensor, got {target.dtype} (probability targets have the logits' shape "
            f"{logits.shape})"
        )
    if target.shape != logits.shape or target.dtype != logits.dtype or target.device != logits.device:
        raise ValueError(
            f"cross_entropy: probability targets must have the logits' shape, dtype and device, "
            f"{logits.shape} {logits.dtype} on '{logits.device}'; got {target.shape} {target.dtype} "
            f"on '{target.device}'"
        )
    if logits.ndim > 2:  # (N, C, d1, ...) -> (N * d1 * ..., C): classes last, one row per position
        order = (0, *range(2, logits.ndim), 1)
        logits, target = logits.permute(*order), target.permute(*order)
    C = logits.shape[-1]
    rows = math.prod(logits.shape[:-1])
    loss = SoftCrossEntropy.apply(
        logits.reshape(rows, C),
        target.reshape(rows, C),
        None if weight is None else weight.data,
        label_smoothing=label_smoothing,
        reduction=reduction,
    )
    return loss.reshape(*logits.shape[:-1]) if reduction == "none" else loss


def cross_entropy(
    logits: Tensor,
    target: Tensor,
    weight: Tensor | None = None,
    ignore_index: int = -100,
    label_smoothing: float = 0.0,
    reduction: str = "mean",
) -> Tensor:
    """Cross-entropy between ``logits`` and integer class ``target`` (as ``F.cross_entropy``).

    Shapes: ``logits (N, C)`` with ``target (N,)``, ``logits (N, C, d1, ...)`` with
    ``target (N, d1, ...)`` (the class dim is dim 1, as in PyTorch), or unbatched
    ``logits (C,)`` with a 0-d ``target``; any of N, C, d1, ... may be 0. float32/float64
    logits, int64/int32 target; the loss has the logits' dtype. Returns a scalar for
    ``reduction="mean"`` or ``"sum"``, and the per-target losses ``(N, d1, ...)`` for
    ``"none"`` (0 where ignored). The gradient goes to ``logits`` only. With no targets,
    or every target ignored, the mean is NaN (0 / 0) and the sum 0, as in PyTorch.

    Probability targets: a float ``target`` of the logits' shape, dtype and device holds a
    distribution over the classes per row (dim 1); the loss is then
    ``-Σ_c w_c ((1-ε) t_c + ε/C) logp_c`` per row, the mean divides by the number of rows
    (not by the weights: PyTorch's definition), ``ignore_index`` does not apply, and the
    target gets a gradient too (see :class:`SoftCrossEntropy`).

    Args:
        weight: optional class weights ``(C,)`` of the logits' dtype and device (no
            gradient): target class ``c`` scales its row's loss by ``weight[c]``, the
            smoothing term weighs class ``c`` by ``weight[c]``, and the mean divides by
            the sum of the weights of the targets not ignored (PyTorch's definition).
        ignore_index: targets equal to it add nothing to the loss, the mean's
            denominator or the gradient, whatever their logits (also ``-inf``), and are
            never used as (negative) indices.
        label_smoothing: ε in [0, 1]: the target distribution is ``(1-ε) onehot + ε/C``
            (Szegedy et al. 2016, arXiv:1512.00567 §7).

    Raises:
        TypeError: for non-float logits or weight, a target neither integer nor float, or a
            weight of another dtype than the logits.
        ValueError: for mismatched shapes, an unknown reduction, a smoothing outside
            [0, 1], or a target out of range ``[0, C)`` that is not ``ignore_index``.

    Catalogue record: ``opinfo/softmax.py`` (its samples, references and checks).
    """
    _check_float(logits, "cross_entropy: logits")
    soft = isinstance(target, Tensor) and target.dtype in FLOAT_DTYPES
    if not isinstance(target, Tensor) or target.dtype not in ("int32", "int64") and not soft:
        raise TypeError(
            f"cross_entropy: target must be an int64/int32 tensor of class indices or a float tensor "
            f"of class probabilities, got {getattr(target, 'dtype', type(target).__name__)}"
        )
    if not _is_int(ignore_index):
        raise TypeError(f"cross_entropy: ignore_index must be an int, got {ignore_index!r}")
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"cross_entropy: reduction must be 'mean', 'sum' or 'none', got {reduction!r}")
    label_smoothing = _check_probability(label_smoothing, "cross_entropy: label_smoothing")
    if target.device != logits.device:
        raise ValueError(f"cross_entropy: target is on '{target.device}' but logits on '{logits.device}'")
    if logits.ndim == 0:
        raise ValueError("cross_entropy: logits need a class dim, (C,), (N, C) or (N, C, d1, ...)")
    expected = () if logits.ndim == 1 else (logits.shape[0],) + logits.shape[2:]
    if target.shape != expected and not soft:
        raise ValueError(
            f"cross_entropy: logits {logits.shape} (N, C, d1, ...) need target of shape "
            f"(N, d1, ...) = {expected}, got {target.shape}"
        )
    C = logits.shape[-1] if logits.ndim == 1 else logits.shape[1]
    if weight is not None:
        _check_float(weight, "cross_entropy: weight")
        if weight.shape != (C,):
            raise ValueError(f"cross_entropy: weight must have one entry per class, shape ({C},), got {weight.shape}")
        if weight.dtype != logits.dtype or weight.device != logits.device:
            raise TypeError(
                f"cross_entropy: weight is {weight.dtype} on '{weight.device}' but the logits are "
                f"{logits.dtype} on '{logits.device}'"
            )
    if soft:
        return _soft_cross_entropy(logits, target, weight, label_smoothing, reduction)
    if logits.ndim > 2:  # (N, C, d1, ...) -> (N * d1 * ..., C): classes last, one row per target
        rest = tuple(range(2, logits.ndim))
        logits = logits.permute(0, *rest, 1)
    rows = logits.reshape(math.prod(target.shape), C)
    loss = CrossEntropy.apply(
        rows,
        target.reshape(-1).data,
        None if weight is None else weight.data,
        ignore_index=ignore_index,
        label_smoothing=label_smoothing,
        reduction=reduction,
    )
    return loss.reshape(*target.shape) if reduction == "none" else loss


__all__ = ["softmax", "log_softmax", "cross_entropy"]  # what minitorch_attn.functional exports
