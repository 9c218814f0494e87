"""Dense attention: scaled dot-product attention and its weights, with hand-written backward passes.

The (L, S) matrix of weights is formed and kept for the backward; :mod:`.flash` computes
the same result blockwise. What the two share lives in :mod:`._attention_common`.
"""

from __future__ import annotations

from ..core.autograd import Function
from ..core.ops import matmul_transposed
from ..core.tensor import Tensor
from ._attention_common import CAUSAL_ALIGNMENTS, _attention_setup, _prepare_attention_mask
from .activations import _dropout_scale


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
