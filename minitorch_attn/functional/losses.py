"""Losses over log-probabilities: the negative log-likelihood, with a hand-written backward.

``nll_loss`` is the second half of :func:`~.softmax.cross_entropy`: it takes
log-probabilities (``log_softmax`` of the logits) and picks the target's entry, so
``nll_loss(log_softmax(x, 1), t) == cross_entropy(x, t)`` (tested).

Notation as in :mod:`minitorch_attn.functional.softmax`: ``grad_output`` (``g``) is the upstream gradient; rows
``i`` of ``logp (M, C)`` have target class ``t_i`` and class weights ``w`` (all 1 without
``weight``).
"""

from __future__ import annotations

import math

from ..core.autograd import Function
from ..core.tensor import Tensor, _is_int
from ._checks import _check_float


class NLLLoss(Function):
    r"""The weighted negative log-likelihood of rows ``logp (M, C)``, as PyTorch defines it::

        1. loss_i = -w_{t_i} logp_{i, t_i}                  (0 on ignored rows)
        2. reduce: sum_i loss_i;  mean = Σ_i loss_i / Σ_i w_{t_i} over the rows not
           ignored;  or none (loss_i itself)

    Backward. Only the picked entry of each row depends on ``logp`` (``[·]`` is 1 where it
    holds, else 0), 1-1:

    .. math::

        \frac{\partial\,\mathrm{loss}_i}{\partial\,\mathrm{logp}_{ic}} = -w_{t_i}\,[c = t_i]

    2-1: times :math:`g` (sum), :math:`g / \sum_i w_{t_i}` (mean) or :math:`g_i` (none).

    An ignored row has gradient 0. With the targets' weights summing to 0 the mean is NaN
    (0 / 0 whatever ``logp``) and the gradient NaN at each picked entry of a row not
    ignored, 0 elsewhere, as PyTorch's (so 0 everywhere when every target is ignored).
    """

    @staticmethod
    def forward(ctx, logp, target, weight=None, ignore_index=-100, reduction="mean"):
        xp = ctx.xp
        M, C = logp.shape
        valid = target != ignore_index
        ctx.backend.check(
            valid & ((target < 0) | (target >= C)),
            lambda: ValueError(  # see core/backend.py
                f"nll_loss: targets must be class indices in [0, {C}) or ignore_index={ignore_index}"
            ),
        )
        classes = xp.arange(C, device=ctx.backend.device)
        hit = (target[:, None] == classes[None, :]) & valid[:, None]
        picked = xp.astype(hit, logp.dtype)  # one-hot
        if weight is not None:
            picked = picked * weight  # w_{t_i} at (i, t_i)
        loss = -xp.sum(xp.where(picked != 0, logp, 0.0) * picked, axis=1)  # 1
        ctx.save_for_backward(picked)
        ctx.reduction = reduction
        if reduction == "none":  # 2
            return loss
        if reduction == "sum":
            return xp.sum(loss)
        ctx.total_weight, ctx.counted = xp.sum(picked), hit  # Σ_i w_{t_i}
        return xp.sum(loss) / xp.where(ctx.total_weight != 0, ctx.total_weight, math.nan)

    @staticmethod
    def backward(ctx, grad_output):
        (picked,) = ctx.saved_tensors
        xp = ctx.xp
        row_factor = grad_output  # 2-1
        if ctx.reduction == "mean":
            total = ctx.total_weight
            row_factor = xp.where(total != 0, grad_output / xp.where(total != 0, total, 1.0), 0.0)
        elif ctx.reduction == "none":
            row_factor = grad_output[:, None]
        return undefined_mean(xp, ctx, -picked * row_factor), None, None  # 1-1


def undefined_mean(xp, ctx, grad):
    """The gradient of a weighted mean whose weights sum to 0 (``ctx.total_weight``): that
    mean is ``0 / 0`` whatever the input, undefined, and so is its derivative: NaN where
    ``ctx.counted`` (the rows that were not ignored: their picked entry for
    :class:`NLLLoss`, the whole row for cross-entropy), as PyTorch's; 0 elsewhere, so 0
    everywhere when every target is ignored (PyTorch's 0 there). Other reductions and
    means keep ``grad``."""
    if ctx.reduction != "mean":
        return grad
    return xp.where((ctx.total_weight == 0) & ctx.counted, math.nan, grad)


def _class_rows(input, target, weight, what):
    """Check ``input (N, C, d1, ...)`` / ``(C,)`` against ``target (N, d1, ...)`` / ``()`` and
    ``weight (C,)``; return ``input`` as rows ``(N d1 ..., C)`` and the number of classes."""
    _check_float(input, f"{what}: input")
    if not isinstance(target, Tensor) or target.dtype not in ("int32", "int64"):
        raise TypeError(
            f"{what}: target must be an int64/int32 tensor of class indices, "
            f"got {getattr(target, 'dtype', type(target).__name__)}"
        )
    if target.device != input.device:
        raise ValueError(f"{what}: target is on '{target.device}' but input on '{input.device}'")
    if input.ndim == 0:
        raise ValueError(f"{what}: input needs a class dim, (C,), (N, C) or (N, C, d1, ...)")
    expected = () if input.ndim == 1 else (input.shape[0],) + input.shape[2:]
    if target.shape != expected:
        raise ValueError(
            f"{what}: input {input.shape} (N, C, d1, ...) needs target of shape "
            f"(N, d1, ...) = {expected}, got {target.shape}"
        )
    C = input.shape[-1] if input.ndim == 1 else input.shape[1]
    if weight is not None:
        _check_float(weight, f"{what}: weight")
        if weight.shape != (C,):
            raise ValueError(f"{what}: weight must have one entry per class, shape ({C},), got {weight.shape}")
        if weight.dtype != input.dtype or weight.device != input.device:
            raise TypeError(
                f"{what}: weight is {weight.dtype} on '{weight.device}' but the input is "
                f"{input.dtype} on '{input.device}'"
            )
    if input.ndim > 2:  # (N, C, d1, ...) -> (N * d1 * ..., C): classes last, one row per target
        input = input.permute(0, *range(2, input.ndim), 1)
    return input.reshape(math.prod(target.shape), C), C


def nll_loss(
    input: Tensor, target: Tensor, weight: Tensor | None = None, ignore_index: int = -100, reduction: str = "mean"
) -> Tensor:
    """Negative log-likelihood of integer class ``target`` under log-probabilities ``input``
    (as ``F.nll_loss``): ``-weight[t] input[t]`` per target, reduced.

    Shapes: ``input (N, C)`` with ``target (N,)``, ``input (N, C, d1, ...)`` with ``target
    (N, d1, ...)`` (the class dim is dim 1), or unbatched ``(C,)`` with a 0-d target; any
    size may be 0. float32/float64 input, int64/int32 target; the loss has the input's
    dtype: a scalar for ``"mean"``/``"sum"``, ``(N, d1, ...)`` for ``"none"`` (0 where
    ignored). The mean divides by the summed weights of the targets not ignored (NaN when
    there are none, as PyTorch). The gradient goes to ``input`` only. Source: the
    likelihood of a categorical distribution (Bishop 2006, PRML eq. 4.108).

    Raises:
        TypeError: for a non-float input or weight, a non-integer target, an ``ignore_index``
            that is not an int, or a weight of another dtype than the input.
        ValueError: for mismatched shapes, an unknown reduction, or a target out of range
            ``[0, C)`` that is not ``ignore_index``.

    Catalogue record: ``opinfo/softmax.py`` (its samples, references and checks).
    """
    if not _is_int(ignore_index):
        raise TypeError(f"nll_loss: ignore_index must be an int, got {ignore_index!r}")
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"nll_loss: reduction must be 'mean', 'sum' or 'none', got {reduction!r}")
    rows, _ = _class_rows(input, target, weight, "nll_loss")
    loss = NLLLoss.apply(
        rows,
        target.reshape(-1).data,
        None if weight is None else weight.data,
        ignore_index=ignore_index,
        reduction=reduction,
    )
    return loss.reshape(*target.shape) if reduction == "none" else loss


__all__ = ["nll_loss"]  # what minitorch_attn.functional exports
