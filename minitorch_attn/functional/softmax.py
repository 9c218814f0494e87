"""The softmax family: softmax, log-softmax and cross-entropy, with hand-written backward passes.

All three exponentiate, so all three subtract the row maximum first (the log-sum-exp
trick); the forward of each keeps what its backward needs, and no backward divides by a
probability.
"""

from __future__ import annotations

from ..core.autograd import Function
from ..core.tensor import Tensor
from ._checks import _axis, _check_float, _check_probability


class Softmax(Function):
    """``p = exp(x - max) / sum(exp(x - max))`` along ``dim``.

    Backward (Jacobian ``dp_i/dx_j = p_i (δ_ij - p_j)``):
        ``dx = p ∘ (g - sum(g ∘ p))``, with no division by p, so entries with p = 0
        (``x = -inf``) get exactly 0.
    A row of all ``-inf`` gives NaN, as in PyTorch (attention handles such rows itself).
    Source: Bridle 1990; the max shift is the standard overflow guard.
    """

    @staticmethod
    def forward(ctx, x, dim=-1):
        # BEGIN SOLUTION 2.1
        xp = ctx.xp
        ctx.axis = dim
        p = xp.exp(x - xp.max(x, axis=dim, keepdims=True))        # 1. shift by the row max, exponentiate
        p /= xp.sum(p, axis=dim, keepdims=True)                     # 2. normalize (in place: p is ours)
        ctx.save_for_backward(p)
        return p
        # END SOLUTION

    @staticmethod
    def backward(ctx, g):
        # BEGIN SOLUTION 2.1
        (p,) = ctx.saved_tensors
        xp = ctx.xp
        grad = g * p                                                # undoes 2 and 1 at once:
        grad -= p * xp.sum(grad, axis=ctx.axis, keepdims=True)     # p ∘ g - p ∘ sum(g ∘ p)
        return grad
        # END SOLUTION


class LogSoftmax(Function):
    """``y = x - max - log(sum(exp(x - max)))`` along ``dim``.

    Backward (``dy_i/dx_j = δ_ij - softmax_j``): ``dx = g - softmax ∘ sum(g)``, with
    ``softmax = exp(y)`` recomputed from the output.
    Exact for large offsets: ``log_softmax([1000, 0]) == [0, -1000]``.
    """

    @staticmethod
    def forward(ctx, x, dim=-1):
        # BEGIN SOLUTION 2.2
        xp = ctx.xp
        ctx.axis = dim
        y = x - xp.max(x, axis=dim, keepdims=True)                                   # 1. shift
        y -= xp.log(xp.sum(xp.exp(y), axis=dim, keepdims=True))                      # 2. minus log-sum-exp
        ctx.save_for_backward(y)
        return y
        # END SOLUTION

    @staticmethod
    def backward(ctx, g):
        # BEGIN SOLUTION 2.2
        (y,) = ctx.saved_tensors
        xp = ctx.xp
        softmax_times_sum = xp.exp(y)                                                # undoes 2 (1 is a shift)
        softmax_times_sum *= xp.sum(g, axis=ctx.axis, keepdims=True)
        return g - softmax_times_sum
        # END SOLUTION


def softmax(x, dim=-1):
    """Softmax along ``dim`` (as ``torch.softmax``): ``exp(x_i) / sum_j exp(x_j)``.

    Shapes and dtypes: any float32/float64 tensor; the output has its shape and dtype.
    Entries equal to ``-inf`` get probability 0 and gradient 0 (no NaN while the row has a
    finite entry); a row of all ``-inf`` gives NaN, as in PyTorch. Source: Bridle 1990,
    "Probabilistic interpretation of feedforward classification network outputs".

    Raises:
        TypeError: for a non-float tensor. ValueError: for a ``dim`` out of range.
    """
    _check_float(x, "softmax")
    return Softmax.apply(x, dim=_axis(dim, x.ndim, "softmax"))


def log_softmax(x, dim=-1):
    """Log of the softmax along ``dim`` (as ``torch.log_softmax``): ``x - logsumexp(x)``.

    Shapes and dtypes as :func:`softmax`. Computed from the max-shifted input, never as
    ``log(softmax(x))``, so ``log_softmax([1000, 0]) == [0, -1000]`` and rows shifted by
    ``-1e4`` keep their digits.

    Raises:
        TypeError: for a non-float tensor. ValueError: for a ``dim`` out of range.
    """
    _check_float(x, "log_softmax")
    return LogSoftmax.apply(x, dim=_axis(dim, x.ndim, "log_softmax"))


class CrossEntropy(Function):
    """Fused log-softmax + negative log-likelihood over rows ``logits (M, C)``.

    Forward, for row i with target t_i and smoothing ε (target distribution
    ``q = (1-ε) onehot(t_i) + ε/C``):
        1. ``logp = log_softmax(logits)``
        2. ``loss_i = -sum_c q_c logp_c``  (0 for ignored rows)
        3. reduce: sum, mean over the non-ignored rows, or none.
    Backward: ``d loss_i / d logits_i = softmax_i - q_i``, so
        ``dlogits = (exp(logp) - q) ∘ w_i`` with ``w_i = g`` (sum), ``g / count`` (mean) or
        ``g_i`` (none), and ``w_i = 0`` on ignored rows. With every row ignored, the mean
        is NaN and the gradient 0, as in PyTorch.
    """

    @staticmethod
    def forward(ctx, logits, target, ignore_index=-100, label_smoothing=0.0, reduction="mean"):
        xp = ctx.xp
        M, C = logits.shape
        valid = target != ignore_index
        out_of_range = valid & ((target < 0) | (target >= C))
        if bool(xp.any(out_of_range)):
            zeros = xp.zeros_like(target)
            low = int(xp.min(xp.where(valid, target, zeros)))
            high = int(xp.max(xp.where(valid, target, zeros)))
            raise ValueError(
                f"cross_entropy: targets must be class indices in [0, {C}) or ignore_index="
                f"{ignore_index}; got values from {low} to {high}")
        safe_target = xp.where(valid, target, xp.zeros_like(target))     # never index with ignore_index

        # BEGIN SOLUTION 2.3
        logp = logits - xp.max(logits, axis=1, keepdims=True)            # 1. log-softmax
        logp -= xp.log(xp.sum(xp.exp(logp), axis=1, keepdims=True))
        nll = -xp.take_along_axis(logp, safe_target[:, None], axis=1)[:, 0]  # 2. -logp[target]
        if label_smoothing > 0.0:
            nll = (1.0 - label_smoothing) * nll - label_smoothing * xp.mean(logp, axis=1)
        weight = xp.astype(valid, logits.dtype)                          # 0 on ignored rows
        loss = nll * weight
        # END SOLUTION

        ctx.save_for_backward(logp, safe_target, weight)
        ctx.options = (label_smoothing, reduction)
        if reduction == "none":                                          # 3. reduce
            return loss
        if reduction == "sum":
            return xp.sum(loss)
        count = xp.sum(weight)
        ctx.count = xp.where(count > 0, count, 1.0)                      # backward: no 0/0 when
        return xp.sum(loss) / xp.where(count > 0, count, xp.nan)         # every row is ignored

    @staticmethod
    def backward(ctx, g):
        # BEGIN SOLUTION 2.3
        logp, safe_target, weight = ctx.saved_tensors
        label_smoothing, reduction = ctx.options
        xp = ctx.xp
        C = logp.shape[1]
        row_weight = weight * (g / ctx.count if reduction == "mean" else g)   # undoes 3
        grad = xp.exp(logp)                                              # undoes 2 and 1: softmax - q
        if label_smoothing > 0.0:
            grad -= label_smoothing / C
        is_target = safe_target[:, None] == xp.arange(C, device=ctx.backend.device)[None, :]
        grad = xp.where(is_target, grad - (1.0 - label_smoothing), grad)
        grad *= row_weight[:, None]
        return grad, None
        # END SOLUTION


def cross_entropy(logits, target, ignore_index=-100, label_smoothing=0.0, reduction="mean"):
    """Cross-entropy between ``logits`` and integer class ``target`` (as ``F.cross_entropy``).

    Shapes: ``logits (N, C)`` with ``target (N,)``, ``logits (N, C, d1, ...)`` with
    ``target (N, d1, ...)`` (the class dim is dim 1, as in PyTorch), or unbatched
    ``logits (C,)`` with a 0-d ``target``. float32/float64 logits, int64/int32 target; the
    loss has the logits' dtype. Returns a scalar for
    ``reduction="mean"`` (over the non-ignored targets; NaN if all are ignored, as PyTorch)
    or ``"sum"``, and the per-target losses ``(N, d1, ...)`` for ``"none"`` (0 where ignored).
    The gradient goes to ``logits`` only.

    Args:
        ignore_index: targets equal to it add nothing to the loss or the gradient, and are
            never used as (negative) indices.
        label_smoothing: ε in [0, 1]: the target distribution is ``(1-ε) onehot + ε/C``
            (Szegedy et al. 2016, arXiv:1512.00567 §7).

    Raises:
        TypeError: for non-float logits or a non-integer target.
        ValueError: for mismatched shapes, an unknown reduction, a smoothing outside
            [0, 1], or a target out of range ``[0, C)`` that is not ``ignore_index``.
    """
    _check_float(logits, "cross_entropy: logits")
    if not isinstance(target, Tensor) or target.dtype not in ("int32", "int64"):
        raise TypeError(f"cross_entropy: target must be an int64/int32 tensor of class indices, "
                        f"got {getattr(target, 'dtype', type(target).__name__)}")
    if isinstance(ignore_index, bool) or not isinstance(ignore_index, int):
        raise TypeError(f"cross_entropy: ignore_index must be an int, got {ignore_index!r}")
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"cross_entropy: reduction must be 'mean', 'sum' or 'none', got {reduction!r}")
    label_smoothing = _check_probability(label_smoothing, "cross_entropy: label_smoothing")
    if target.device != logits.device:
        raise ValueError(f"cross_entropy: target is on '{target.device}' but logits on '{logits.device}'")
    if logits.ndim == 0:
        raise ValueError("cross_entropy: logits need a class dim, (C,), (N, C) or (N, C, d1, ...)")
    expected = () if logits.ndim == 1 else (logits.shape[0],) + logits.shape[2:]
    if target.shape != expected:
        raise ValueError(f"cross_entropy: logits {logits.shape} (N, C, d1, ...) need target of shape "
                         f"(N, d1, ...) = {expected}, got {target.shape}")
    C = logits.shape[-1] if logits.ndim == 1 else logits.shape[1]
    if logits.ndim > 2:  # (N, C, d1, ...) -> (N * d1 * ..., C): classes last, one row per target
        rest = tuple(range(2, logits.ndim))
        logits = logits.permute(0, *rest, 1)
    rows = logits.reshape(-1, C)
    loss = CrossEntropy.apply(rows, target.reshape(-1).data, ignore_index=ignore_index,
                              label_smoothing=label_smoothing, reduction=reduction)
    return loss.reshape(*target.shape) if reduction == "none" else loss
