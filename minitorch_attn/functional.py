"""The operations of a Transformer, each one :class:`Function` with a hand-written backward.

Import it as PyTorch users import ``torch.nn.functional``::

    import minitorch_attn.functional as F
    y = F.layer_norm(x, (d_model,), weight, bias)

Every backward here is closed-form, derived on paper and written out beside the forward
step it undoes; none is composed from the primitive ops (those are used only in the tests,
as an independent reference; :func:`embedding` is the core's lookup op ``Take``). All of them are checked by finite differences in
``gradcheck/functional.py``.

Contents, in reading order:

* helpers for any attention kernel (this module's, or a blockwise one such as
  :mod:`minitorch_attn.flash`): :func:`causal_mask`, :func:`_check_attention_inputs`,
  :func:`_prepare_attention_mask`, :func:`_dropout_scale`;
* the softmax family: :func:`softmax`, :func:`log_softmax`, :func:`cross_entropy`;
* activations and regularization: :func:`gelu`, :func:`relu`, :func:`dropout`;
* normalization: :func:`layer_norm`, :func:`rms_norm`;
* layers' arithmetic: :func:`linear`, :func:`embedding`;
* attention: :func:`scaled_dot_product_attention`, :func:`attention_weights`.
* blockwise attention: :func:`flash_attention`, defined in :mod:`minitorch_attn.flash`.

Conventions: ``g`` is the upstream gradient ``dL/d(output)``; dtypes are kept (float32 in,
float32 out); reductions that could overflow (softmax) subtract the row maximum first.
"""

from __future__ import annotations

import math
import numbers

from .autograd import Function
from .backend import backend_of, get_backend
from .ops import Take, matmul_transposed
from .tensor import FLOAT_DTYPES, Tensor, dtype_name
from .flash import flash_attention  # noqa: F401  (F.flash_attention; flash.py imports this module lazily)

__all__ = [
    "causal_mask", "softmax", "log_softmax", "cross_entropy", "gelu", "relu", "dropout",
    "layer_norm", "rms_norm", "linear", "embedding", "scaled_dot_product_attention",
    "attention_weights", "flash_attention",
]

CAUSAL_ALIGNMENTS = ("top_left", "bottom_right")


# =============================================================================================
# Helpers for the attention kernels (here, and blockwise ones such as flash.py)
# =============================================================================================
def _causal_keep(xp, device, L, S, alignment="top_left"):
    """Raw bool array ``(L, S)``: True where query ``i`` may look at key ``j``.

    ``top_left`` (PyTorch's ``is_causal``): ``j <= i``.
    ``bottom_right`` (FlashAttention >= 2.1, KV-cache decoding, where the L queries are the
    *last* L positions of the S keys): ``j <= i + S - L``.
    """
    if alignment not in CAUSAL_ALIGNMENTS:
        raise ValueError(f"causal alignment must be one of {CAUSAL_ALIGNMENTS}, got {alignment!r}")
    offset = 0 if alignment == "top_left" else S - L
    rows = xp.arange(L, device=device)[:, None]
    cols = xp.arange(S, device=device)[None, :]
    return cols <= rows + offset


def causal_mask(L, S=None, alignment="top_left", device=None):
    """A bool tensor ``(L, S)`` that is True where query ``i`` may attend to key ``j``.

    Pass it as ``attn_mask`` to :func:`scaled_dot_product_attention` (True = takes part,
    as in PyTorch).

    Args:
        L: number of queries; S: number of keys (defaults to L).
        alignment: ``"top_left"`` keeps ``j <= i`` (PyTorch's ``is_causal=True``);
            ``"bottom_right"`` keeps ``j <= i + S - L`` (FlashAttention >= 2.1 and decoding
            with a KV cache: the queries are the last L of the S positions). The two agree
            when ``L == S``. With bottom-right alignment and ``L > S`` the first ``L - S``
            queries see no key (their attention output is 0).
        device: ``"cpu"``, ``"cuda"`` or ``"strict"`` (default: the default device).

    Raises:
        ValueError: for a negative size or an unknown alignment.
    """
    S = L if S is None else S
    for name, n in (("L", L), ("S", S)):
        if not isinstance(n, int) or isinstance(n, bool) or n < 0:
            raise ValueError(f"causal_mask: {name} must be a non-negative int, got {n!r}")
    backend = get_backend(device)
    return Tensor(_causal_keep(backend.xp, backend.device, L, S, alignment))


def _broadcast_shape(a, b):
    """NumPy's broadcast of two shapes, or None when they do not broadcast."""
    out = []
    for i in range(1, max(len(a), len(b)) + 1):
        x = a[-i] if i <= len(a) else 1
        y = b[-i] if i <= len(b) else 1
        if x != y and 1 not in (x, y):
            return None
        out.append(y if x == 1 else x)
    return tuple(reversed(out))


def _check_attention_inputs(query, key, value, attn_mask=None, is_causal=False, enable_gqa=False):
    """Validate the arguments of an attention call; return the GQA group size.

    Accepts Tensors or raw arrays. Expected shapes (PyTorch's)::

        query (..., Hq, L, E)   key (..., Hkv, S, E)   value (..., Hkv, S, Ev)
        attn_mask broadcastable to (..., Hq, L, S)

    Without ``enable_gqa`` the leading dims of all three must be equal (``Hq == Hkv``);
    with it, ``Hq`` must be a multiple of ``Hkv`` and query head ``h`` uses key/value head
    ``h // (Hq // Hkv)``, the group size returned (1 without GQA).

    Raises:
        TypeError: for non-float q/k/v, mixed dtypes, or a mask that is neither bool nor
            of the query's float dtype.
        ValueError: for mismatched shapes, a mask that does not broadcast to the scores'
            shape (both shapes are named), or ``is_causal`` together with ``attn_mask``.
    """
    q, k, v = (tuple(t.shape) for t in (query, key, value))
    dtypes = [dtype_name(t.dtype) for t in (query, key, value)]
    if any(d not in FLOAT_DTYPES for d in dtypes) or len(set(dtypes)) != 1:
        raise TypeError(f"attention: query, key and value must share one float dtype, got {dtypes}")
    if not (len(q) == len(k) == len(v) >= 2):
        raise ValueError(
            f"attention: query, key and value need the same number (>= 2) of dims, got "
            f"query {q}, key {k}, value {v}; expected (..., L, E), (..., S, E), (..., S, Ev)")
    if q[-1] != k[-1]:
        raise ValueError(f"attention: query {q} and key {k} must share the last dim E (the dot-product size)")
    if k[:-1] != v[:-1]:
        raise ValueError(f"attention: key {k} and value {v} must agree in all dims but the last, (..., S)")
    if enable_gqa:
        if len(q) < 3:
            raise ValueError(f"attention: enable_gqa needs a heads dim, (..., H, L, E); got query {q}")
        if q[:-3] != k[:-3] or k[-3] == 0 or q[-3] % k[-3] != 0:
            raise ValueError(
                f"attention: with enable_gqa, query {q} and key {k} must agree in the batch dims "
                f"and query heads ({q[-3]}) must be a multiple of key/value heads ({k[-3]})")
        groups = q[-3] // k[-3]
    else:
        if q[:-2] != k[:-2]:
            raise ValueError(
                f"attention: query {q} and key {k} must agree in the leading (batch, heads) dims; "
                f"for fewer key/value heads pass enable_gqa=True")
        groups = 1
    if attn_mask is not None:
        if is_causal:
            raise ValueError("attention: pass either attn_mask or is_causal=True, not both (as in PyTorch)")
        mask_dtype = dtype_name(attn_mask.dtype)
        if mask_dtype != "bool" and mask_dtype != dtypes[0]:
            raise TypeError(
                f"attention: attn_mask must be bool (True = takes part) or a float bias of the "
                f"query's dtype {dtypes[0]}, got {mask_dtype}")
        scores_shape = (*q[:-1], k[-2])
        m = tuple(attn_mask.shape)
        if _broadcast_shape(m, scores_shape) != scores_shape:
            raise ValueError(
                f"attention: attn_mask of shape {m} does not broadcast to the attention scores' "
                f"shape {scores_shape} (..., L, S)")
    return groups


def _prepare_attention_mask(backend, attn_mask, L, S, is_causal=False, causal_alignment="top_left"):
    """Turn ``attn_mask`` / ``is_causal`` into what an attention kernel applies to its scores.

    Args:
        backend: the inputs' :class:`~minitorch_attn.backend.Backend`.
        attn_mask: None or a raw array (not a Tensor), bool (True = takes part) or float
            (an additive bias), broadcastable to ``(..., L, S)`` (checked beforehand by
            :func:`_check_attention_inputs`).
        is_causal, causal_alignment: add the causal pattern (see :func:`causal_mask`).

    Returns:
        ``(keep, bias)``: ``keep`` a bool array or None, ``bias`` a float array or None.
        Each has the mask's own leading dims and exactly ``(L, S)`` as its last two (a
        broadcast view, no copy), so a blockwise kernel may slice ``[..., i0:i1, j0:j1]``.
        A kernel computes ``scores = scale * Q Kᵀ (+ bias)``, then
        ``where(keep, scores, -inf)``.
    """
    xp = backend.xp
    keep = bias = None
    if is_causal:
        keep = _causal_keep(xp, backend.device, L, S, causal_alignment)
    if attn_mask is not None:
        lead = tuple(attn_mask.shape[:-2]) if attn_mask.ndim > 2 else ()
        full = xp.broadcast_to(attn_mask, (*lead, L, S))
        if full.dtype == xp.bool:
            keep = full
        else:
            bias = full
    return keep, bias


def _dropout_scale(backend, shape, p, dtype):
    """Inverted-dropout multiplier: ``1/(1-p)`` where kept (probability 1-p), 0 where dropped.

    Drawn from the backend's seeded stream (:func:`minitorch_attn.manual_seed`), always in
    float32, so one seed gives one mask whatever the dtype; ``p == 1`` gives all zeros.
    Saved by the forward, reused by the backward.
    """
    xp = backend.xp
    if p >= 1.0:
        return xp.zeros(shape, dtype=dtype, device=backend.device)
    kept = backend.uniform(shape, "float32") >= p
    return xp.astype(kept, dtype) * (1.0 / (1.0 - p))


def _check_eps(eps, what):
    if isinstance(eps, bool) or not isinstance(eps, numbers.Real) or not eps >= 0:
        raise ValueError(f"{what}: eps must be a number >= 0, got {eps!r}")
    return float(eps)


def _check_probability(p, what):
    if isinstance(p, bool) or not isinstance(p, numbers.Real) or not 0.0 <= p <= 1.0:
        raise ValueError(f"{what} must be a probability in [0, 1], got {p!r}")
    return float(p)


def _axis(dim, ndim, what):
    if not isinstance(dim, int) or isinstance(dim, bool) or not -max(ndim, 1) <= dim < max(ndim, 1):
        raise ValueError(f"{what}: dim {dim!r} is out of range for a tensor with {ndim} dims")
    return dim % max(ndim, 1)


def _check_float(x, what):
    if not isinstance(x, Tensor):
        raise TypeError(f"{what}: expected a Tensor, got {type(x).__name__}")
    if x.dtype not in FLOAT_DTYPES:
        raise TypeError(f"{what}: expected a float32 or float64 tensor, got {x.dtype}")


# =============================================================================================
# The softmax family
# =============================================================================================
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


# =============================================================================================
# Activations and dropout
# =============================================================================================
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_INV_SQRT_2 = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_GELU_CUBIC = 0.044715


class GELU(Function):
    """Gaussian Error Linear Unit, ``x Φ(x)`` (Hendrycks & Gimpel, arXiv:1606.08415, eq. 1).

    Exact (``approximate="none"``): ``y = x/2 (1 + erf(x/√2))``,
        ``dy/dx = Φ(x) + x φ(x)``, ``φ(x) = exp(-x²/2)/√(2π)``.
    Tanh (``approximate="tanh"``, the paper's eq. 2 and GPT-2's):
        ``u = √(2/π)(x + 0.044715 x³)``, ``t = tanh(u)``, ``y = x/2 (1 + t)``,
        ``dy/dx = (1 + t)/2 + x/2 (1 - t²) √(2/π)(1 + 3·0.044715 x²)``.
    The backward reuses ``Φ(x)`` (or ``t``) saved by the forward rather than recomputing
    it: erf is the expensive part on NumPy.
    """

    @staticmethod
    def forward(ctx, x, approximate="none"):
        xp = ctx.xp
        ctx.approximate = approximate
        if approximate == "tanh":
            t = xp.tanh(_SQRT_2_OVER_PI * (x + _GELU_CUBIC * x * x * x))
            ctx.save_for_backward(x, t)
            return 0.5 * x * (1.0 + t)
        cdf = 0.5 * (1.0 + ctx.backend.erf(x * _INV_SQRT_2))      # Φ(x)
        ctx.save_for_backward(x, cdf)
        return x * cdf

    @staticmethod
    def backward(ctx, g):
        x, saved = ctx.saved_tensors
        xp = ctx.xp
        if ctx.approximate == "tanh":
            t = saved
            du = _SQRT_2_OVER_PI * (1.0 + 3.0 * _GELU_CUBIC * x * x)
            return g * (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * du)
        pdf = _INV_SQRT_2PI * xp.exp(-0.5 * x * x)                 # φ(x)
        return g * (saved + x * pdf)


def gelu(x, approximate="none"):
    """GELU activation, elementwise (as ``F.gelu``): ``x Φ(x)``, Φ the standard normal CDF.

    ``approximate="none"`` uses erf (the backend's); ``"tanh"`` the tanh approximation of
    GPT-2. Any shape, float32/float64, shape and dtype kept. At x = 1: 0.8413447461 (exact)
    and 0.8411919906 (tanh). Source: Hendrycks & Gimpel, arXiv:1606.08415.

    Raises:
        TypeError: for a non-float tensor. ValueError: for another ``approximate``.
    """
    _check_float(x, "gelu")
    if approximate not in ("none", "tanh"):
        raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    return GELU.apply(x, approximate=approximate)


class ReLU(Function):
    """``max(x, 0)``.  Backward: ``g`` where ``x > 0``, else 0 (0 at x = 0, as PyTorch)."""

    @staticmethod
    def forward(ctx, x):
        xp = ctx.xp
        positive = x > 0
        ctx.save_for_backward(positive)
        return xp.where(positive, x, xp.zeros((), dtype=x.dtype, device=ctx.backend.device))

    @staticmethod
    def backward(ctx, g):
        (positive,) = ctx.saved_tensors
        xp = ctx.xp
        return xp.where(positive, g, xp.zeros((), dtype=g.dtype, device=ctx.backend.device))


def relu(x):
    """Rectified linear unit ``max(x, 0)``, elementwise (as ``F.relu``); shape and dtype kept.
    The gradient at exactly 0 is 0, as in PyTorch. Source: Nair & Hinton 2010.

    Raises:
        TypeError: for a non-float tensor.
    """
    _check_float(x, "relu")
    return ReLU.apply(x)


class Dropout(Function):
    """Inverted dropout: ``y = x ∘ m`` with ``m = 1/(1-p)`` kept (probability 1-p), else 0.

    Backward: ``dx = g ∘ m``, the very mask of the forward (saved, not redrawn).
    Source: Srivastava et al. 2014 (JMLR 15), with the scaling moved to training time.
    """

    @staticmethod
    def forward(ctx, x, p=0.5):
        scale = _dropout_scale(ctx.backend, x.shape, p, x.dtype)
        ctx.save_for_backward(scale)
        return x * scale

    @staticmethod
    def backward(ctx, g):
        (scale,) = ctx.saved_tensors
        return g * scale


def dropout(x, p=0.5, training=True):
    """Zero each element with probability ``p`` and scale the rest by ``1/(1-p)`` (as ``F.dropout``).

    The identity (``x`` itself) when ``training`` is False or ``p == 0``; zeros when
    ``p == 1``. Random numbers come from the seeded stream of :func:`manual_seed`.

    Raises:
        TypeError: for a non-float tensor. ValueError: for ``p`` outside [0, 1].
    """
    _check_float(x, "dropout")
    p = _check_probability(p, "dropout: p")
    if not training or p == 0.0:
        return x
    return Dropout.apply(x, p=p)


# =============================================================================================
# Normalization
# =============================================================================================
def _normalized_axes(x, normalized_shape, weight, bias, what):
    """Check ``normalized_shape`` against ``x``'s trailing dims and the affine parameters;
    return the normalized axes (the last ``len(normalized_shape)`` dims)."""
    _check_float(x, what)
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    if not shape or len(shape) > x.ndim or x.shape[x.ndim - len(shape):] != shape:
        raise ValueError(f"{what}: normalized_shape {shape} must equal the trailing dims of the input {x.shape}")
    for name, p in (("weight", weight), ("bias", bias)):
        if p is not None:
            _check_float(p, f"{what}: {name}")
            if p.shape != shape:
                raise ValueError(f"{what}: {name} has shape {p.shape}, expected normalized_shape {shape}")
            if p.dtype != x.dtype:
                raise TypeError(f"{what}: {name} is {p.dtype} but the input is {x.dtype}")
    return tuple(range(x.ndim - len(shape), x.ndim))


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
    return LayerNorm.apply(x, weight, bias, axes=axes, eps=_check_eps(eps, "layer_norm"))


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
    return RMSNorm.apply(x, weight, axes=axes, eps=_check_eps(eps, "rms_norm"))


# =============================================================================================
# Linear layer and embedding lookup
# =============================================================================================
class Linear(Function):
    """``y = x Wᵀ + b``: ``x (..., in)``, ``W (out, in)``, ``b (out,)`` -> ``(..., out)``.

    The leading dims are flattened into rows first, ``X (M, in)``, so every product is one
    2-D matrix multiply (a single BLAS call, much faster than a batched one with a
    broadcast weight). Backward::

        dX = G W,   dW = Gᵀ X (summed over the rows),   db = sum_rows(G)
    """

    @staticmethod
    def forward(ctx, x, weight, bias):
        xp = ctx.xp
        rows = xp.reshape(x, (-1, x.shape[-1]))                      # (M, in)
        ctx.save_for_backward(rows, weight)
        ctx.x_shape = tuple(x.shape)
        y = xp.matmul(rows, xp.matrix_transpose(weight))             # (M, out)
        if bias is not None:
            y += bias
        return xp.reshape(y, (*x.shape[:-1], weight.shape[0]))

    @staticmethod
    def backward(ctx, g):
        rows, weight = ctx.saved_tensors
        xp = ctx.xp
        need_x, need_w, need_b = ctx.needs_input_grad
        g = xp.reshape(g, (-1, g.shape[-1]))                         # (M, out)
        grad_x = xp.reshape(xp.matmul(g, weight), ctx.x_shape) if need_x else None
        grad_w = xp.matmul(xp.matrix_transpose(g), rows) if need_w else None
        grad_b = xp.sum(g, axis=0) if need_b else None
        return grad_x, grad_w, grad_b


def linear(x, weight, bias=None):
    """Affine map ``x Wᵀ + b`` (as ``F.linear``): ``x (..., in)``, ``weight (out, in)``,
    ``bias (out,)`` or None -> ``(..., out)``.

    Raises:
        TypeError: for non-float tensors or mixed dtypes. ValueError: for mismatched shapes.
    """
    _check_float(x, "linear: input")
    _check_float(weight, "linear: weight")
    if weight.ndim != 2 or x.ndim < 1 or x.shape[-1] != weight.shape[1]:
        raise ValueError(f"linear: input {x.shape} (..., in) and weight {weight.shape} (out, in) do not match")
    if bias is not None:
        _check_float(bias, "linear: bias")
        if bias.shape != (weight.shape[0],):
            raise ValueError(f"linear: bias has shape {bias.shape}, expected ({weight.shape[0]},)")
    if len({t.dtype for t in (x, weight, bias) if t is not None}) != 1:
        raise TypeError("linear: input, weight and bias must share one dtype")
    return Linear.apply(x, weight, bias)


def embedding(indices, weight):
    """Look up rows of ``weight (num_embeddings, dim)`` at integer ``indices (*)`` -> ``(*, dim)``
    (as ``F.embedding``).

    Backward: a scatter-add; row k of ``dweight`` is the sum of the upstream gradients of
    every position whose index is k (``backend.index_add``). This is the core's
    :class:`~minitorch_attn.ops.Take`, with the argument checks of an embedding.

    Raises:
        TypeError: for non-integer indices or a non-float weight.
        ValueError: for a weight that is not 2-D, or an index outside ``[0, num_embeddings)``
            (negative indices are not wrapped around, as in PyTorch).
    """
    if not isinstance(indices, Tensor) or indices.dtype not in ("int32", "int64"):
        raise TypeError(f"embedding: indices must be an int64/int32 tensor, got {getattr(indices, 'dtype', type(indices).__name__)}")
    _check_float(weight, "embedding: weight")
    if weight.ndim != 2:
        raise ValueError(f"embedding: weight must be (num_embeddings, dim), got shape {weight.shape}")
    if indices.device != weight.device:
        raise ValueError(f"embedding: indices are on '{indices.device}' but the weight is on '{weight.device}'")
    if indices.numel():
        xp = backend_of(indices.data).xp
        low, high = int(xp.min(indices.data)), int(xp.max(indices.data))
        if low < 0 or high >= weight.shape[0]:
            raise ValueError(f"embedding: indices must be in [0, {weight.shape[0]}) (the rows of the weight), "
                             f"got values from {low} to {high}")
    return Take.apply(weight, indices)


# =============================================================================================
# Attention
# =============================================================================================
def _repeat_kv(xp, x, groups):
    """``(..., Hkv, S, D) -> (..., Hkv * groups, S, D)``, each head repeated ``groups`` times
    side by side (repeat-interleave, not tile: head h of the result is head ``h // groups``)."""
    if groups == 1:
        return x
    *lead, h, s, d = x.shape
    x = xp.broadcast_to(xp.expand_dims(x, axis=-3), (*lead, h, groups, s, d))
    return xp.reshape(x, (*lead, h * groups, s, d))


def _sum_groups(xp, grad, groups):
    """Undo :func:`_repeat_kv` for a gradient: sum the ``groups`` copies of each head."""
    if groups == 1:
        return grad
    *lead, hq, s, d = grad.shape
    return xp.sum(xp.reshape(grad, (*lead, hq // groups, groups, s, d)), axis=-3)


def _attention_probabilities(xp, q, k, scale, keep, bias):
    """Passes 1-3 of attention on raw arrays: scores, mask, softmax -> ``P (..., L, S)``.

    A row where no key takes part (every entry masked or -inf) gets ``P = 0``, not NaN.
    """
    # BEGIN SOLUTION 4.1
    scores = matmul_transposed(xp, q, k)                           # 1. scores = scale · Q Kᵀ
    scores *= scale                                                 #    (in place: a new array)
    if bias is not None:                                            # 2. mask: add the bias ...
        scores += bias
    if keep is not None:                                            #    ... and remove what is masked
        scores = xp.where(keep, scores, -xp.inf)
    row_max = xp.max(scores, axis=-1, keepdims=True)                # 3. softmax, stable
    row_max = xp.where(row_max == -xp.inf, xp.zeros_like(row_max), row_max)  # empty row: no -inf - -inf
    scores -= row_max
    P = xp.exp(scores)
    total = xp.sum(P, axis=-1, keepdims=True)
    P /= xp.where(total == 0, xp.ones_like(total), total)           #    empty row: 0 / 1 = 0
    return P
    # END SOLUTION


def _attention_scores_backward(xp, dP, P, q, k, scale, D=None):
    """Backward of passes 3-1: from ``dP`` to ``(dS, dQ, dK)``.

    3. softmax: ``dS = P ∘ (dP - D)`` with ``D = rowsum(dP ∘ P)``; masked and empty-row
       entries have ``P = 0`` and so ``dS = 0`` (this is also the gradient of the bias, 2).
    1. ``dQ = scale · dS K``,  ``dK = scale · dSᵀ Q``.
    """
    # BEGIN SOLUTION 4.2
    if D is None:
        D = xp.sum(dP * P, axis=-1, keepdims=True)
    dS = dP - D                                                     # 3 (a new array; dP may be g)
    dS *= P
    dQ = xp.matmul(dS, k)                                           # 1
    dQ *= scale
    dK = xp.matmul(xp.matrix_transpose(dS), q)
    dK *= scale
    return dS, dQ, dK
    # END SOLUTION


class ScaledDotProductAttention(Function):
    """Attention ``O = dropout(softmax(scale · Q Kᵀ + mask)) V`` (Vaswani et al. 2017,
    arXiv:1706.03762, eq. 1), in numbered passes.

    Forward::

        0. K, V repeated to the query heads (GQA; a no-op otherwise)
        1. S  = scale · Q Kᵀ                                    (..., L, S)
        2. S  = S + bias;  S = where(keep, S, -inf)
        3. P  = softmax(S) along keys; rows with no key -> 0
        4. P̃  = P ∘ M,  M = 1/(1-p) kept, 0 dropped
        5. O  = P̃ V                                            (..., L, Ev)

    Backward, walking the passes in reverse::

        5. dV = P̃ᵀ dO,   dP̃ = dO Vᵀ
        4. dP = dP̃ ∘ M
        3. dS = P ∘ (dP - D),  D = rowsum(dO ∘ O)   (= rowsum(dP ∘ P), as FlashAttention-2)
        2. dbias = dS   (the engine sums it to the mask's shape)
        1. dQ = scale · dS K,   dK = scale · dSᵀ Q
        0. dK, dV summed over each group of query heads
    """

    @staticmethod
    def forward(ctx, query, key, value, attn_mask, scale=1.0, dropout_p=0.0, is_causal=False,
                groups=1, causal_alignment="top_left"):
        xp, backend = ctx.xp, ctx.backend
        L, S = query.shape[-2], key.shape[-2]
        keep, bias = _prepare_attention_mask(backend, attn_mask, L, S, is_causal, causal_alignment)
        k = _repeat_kv(xp, key, groups)                                        # 0
        v = _repeat_kv(xp, value, groups)
        P = _attention_probabilities(xp, query, k, scale, keep, bias)              # 1-3
        drop = None
        P_dropped = P
        if dropout_p > 0.0:                                                    # 4
            drop = _dropout_scale(backend, P.shape, dropout_p, P.dtype)
            P_dropped = P * drop
        # BEGIN SOLUTION 4.1
        out = xp.matmul(P_dropped, v)                                          # 5
        # END SOLUTION
        ctx.save_for_backward(query, k, v, P, drop, out)
        ctx.scale, ctx.groups = scale, groups
        return out

    @staticmethod
    def backward(ctx, dO):
        q, k, v, P, drop, out = ctx.saved_tensors
        xp = ctx.xp
        P_dropped = P if drop is None else P * drop
        # BEGIN SOLUTION 4.2
        dV = xp.matmul(xp.matrix_transpose(P_dropped), dO)                    # 5
        dP = matmul_transposed(xp, dO, v)
        if drop is not None:                                                   # 4
            dP *= drop
        D = xp.sum(dO * out, axis=-1, keepdims=True)                           # 3-1
        dS, dQ, dK = _attention_scores_backward(xp, dP, P, q, k, ctx.scale, D)
        # END SOLUTION
        need_mask = ctx.needs_input_grad[3]
        return (dQ, _sum_groups(xp, dK, ctx.groups), _sum_groups(xp, dV, ctx.groups),  # 0
                dS if need_mask else None)


def _attention_setup(query, key, attn_mask, is_causal, scale, enable_gqa, value=None, dropout_p=0.0):
    """Shared argument handling of :func:`scaled_dot_product_attention` and
    :func:`attention_weights`: returns ``(groups, scale)``."""
    for name, t in (("query", query), ("key", key), ("value", value), ("attn_mask", attn_mask)):
        if (t is not None or name in ("query", "key")) and not isinstance(t, Tensor):
            raise TypeError(f"attention: {name} must be a Tensor, got {type(t).__name__}")
    if not isinstance(is_causal, bool):
        raise TypeError(f"attention: is_causal must be True or False, got {is_causal!r}")
    groups = _check_attention_inputs(query, key, value if value is not None else key,
                                     attn_mask, is_causal, enable_gqa)
    _check_probability(dropout_p, "attention: dropout_p")
    if scale is None:
        if query.shape[-1] == 0:
            raise ValueError("attention: the head dim E is 0, so the default scale 1/sqrt(E) is undefined; pass scale=")
        scale = 1.0 / math.sqrt(query.shape[-1])
    if isinstance(scale, bool) or not isinstance(scale, numbers.Real) or not math.isfinite(scale):
        raise ValueError(f"attention: scale must be a finite number, got {scale!r}")
    return groups, float(scale)


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False,
                                 scale=None, enable_gqa=False, causal_alignment="top_left"):
    """Scaled dot-product attention with PyTorch's semantics (``F.scaled_dot_product_attention``).

    Shapes: ``query (..., Hq, L, E)``, ``key (..., Hkv, S, E)``, ``value (..., Hkv, S, Ev)``
    -> ``(..., Hq, L, Ev)``; without GQA the leading dims of the three are equal (the heads
    dim is then optional). float32 or float64, output of the same dtype.

    Args:
        attn_mask: bool (True = takes part) or a float additive bias, broadcastable to
            ``(..., L, S)``; a float mask receives a gradient if it requires one.
        dropout_p: probability of dropping each attention weight (applied whenever > 0,
            as in PyTorch; modules pass 0 in eval mode). One keep-mask serves forward and
            backward, drawn from the seeded stream.
        is_causal: query i sees keys ``j <= i`` (top-left, as PyTorch); cannot be combined
            with ``attn_mask``. ``causal_alignment="bottom_right"`` makes it ``j <= i + S - L``
            (or pass ``causal_mask(L, S, "bottom_right")`` as ``attn_mask``).
        scale: multiplies ``Q Kᵀ`` before the mask is added; default ``1/sqrt(E)``.
        enable_gqa: grouped-query attention; query head h uses key/value head
            ``h // (Hq // Hkv)``.

    A query row with no allowed key outputs 0 and gets gradient 0 (PyTorch's math path,
    FlashAttention). A finite bias such as ``finfo(float32).min`` is an ordinary number.
    Source: arXiv:1706.03762 eq. 1; GQA: arXiv:2305.13245.

    Raises:
        TypeError / ValueError: see :func:`_check_attention_inputs`; ValueError for a
        ``dropout_p`` outside [0, 1] or an unknown ``causal_alignment``.
    """
    if not isinstance(value, Tensor):
        raise TypeError(f"attention: value must be a Tensor, got {type(value).__name__}")
    groups, scale = _attention_setup(query, key, attn_mask, is_causal, scale, enable_gqa, value, dropout_p)
    if causal_alignment not in CAUSAL_ALIGNMENTS:
        raise ValueError(f"causal_alignment must be one of {CAUSAL_ALIGNMENTS}, got {causal_alignment!r}")
    return ScaledDotProductAttention.apply(
        query, key, value, attn_mask, scale=scale, dropout_p=float(dropout_p), is_causal=is_causal,
        groups=groups, causal_alignment=causal_alignment)


class AttentionWeights(Function):
    """The attention probabilities ``P = softmax(scale · Q Kᵀ + mask)`` of
    :class:`ScaledDotProductAttention` (its passes 0-3, no dropout), for pictures.

    Backward: passes 3-0 of that class, with ``D = rowsum(dP ∘ P)``.
    """

    @staticmethod
    def forward(ctx, query, key, attn_mask, scale=1.0, is_causal=False, groups=1,
                causal_alignment="top_left"):
        xp, backend = ctx.xp, ctx.backend
        keep, bias = _prepare_attention_mask(backend, attn_mask, query.shape[-2], key.shape[-2],
                                             is_causal, causal_alignment)
        k = _repeat_kv(xp, key, groups)
        P = _attention_probabilities(xp, query, k, scale, keep, bias)
        ctx.save_for_backward(query, k, P)
        ctx.scale, ctx.groups = scale, groups
        return P

    @staticmethod
    def backward(ctx, dP):
        q, k, P = ctx.saved_tensors
        xp = ctx.xp
        dS, dQ, dK = _attention_scores_backward(xp, dP, P, q, k, ctx.scale)
        return dQ, _sum_groups(xp, dK, ctx.groups), dS if ctx.needs_input_grad[2] else None


def attention_weights(query, key, attn_mask=None, is_causal=False, scale=None, enable_gqa=False,
                      causal_alignment="top_left"):
    """The attention weights ``(..., Hq, L, S)`` that :func:`scaled_dot_product_attention`
    with the same arguments applies to the values (before dropout); each row sums to 1,
    or is all 0 when no key is allowed. Differentiable. Arguments and errors as there.
    """
    groups, scale = _attention_setup(query, key, attn_mask, is_causal, scale, enable_gqa)
    if causal_alignment not in CAUSAL_ALIGNMENTS:
        raise ValueError(f"causal_alignment must be one of {CAUSAL_ALIGNMENTS}, got {causal_alignment!r}")
    return AttentionWeights.apply(query, key, attn_mask, scale=scale, is_causal=is_causal,
                                  groups=groups, causal_alignment=causal_alignment)
