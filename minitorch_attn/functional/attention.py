"""Dense attention: scaled dot-product attention and its weights, with hand-written backward passes.

The ``(N_q, N_k)`` matrix of weights is formed and kept for the backward; :mod:`.flash`
computes the same result blockwise. What the two share (argument checks, the causal rule,
the grouped-query layout and the notation) lives in :mod:`._attention_common`.
"""

from __future__ import annotations

import math  # noqa: F401 (for the tasks' code, as handed out: math.sqrt, -math.inf)

from ..core.autograd import Function
from ..core.ops import matmul_transposed, transposed_copy
from ..core.tensor import Tensor
from ..speed import RowWise, fused_kernels
from ._attention_common import attention_setup, broadcast_batch, causal_keep, gqa_layout, sum_over_group
from .activations import _dropout_scale
from .shifted import _shifted_exp


def _attention_weights(xp, device, q, k, scale, mask, causal_offset):
    """Passes 1-3 of attention on raw arrays in the GQA layout: ``P (..., N_q, N_k)``.

    Pass 3 is softmax row by row: with ``m`` the row maximum, ``e = exp(S - m)`` and
    ``P = e / Σ_k e_k`` (the shift by ``m`` keeps every exponential at most 1).

    A row where no key takes part (every entry masked or -inf, or no key at all) gets
    ``P = 0``, not NaN: its ``e`` is all 0 and so is its sum, which is replaced by 1 (as
    flash attention gives such a row ``lse = +inf``, so that ``exp(S - lse) = 0``). This
    guard changes no gradient: it touches only rows where softmax is 0/0, whose output
    PyTorch and FlashAttention define as 0 (and ``P = 0`` makes their gradients 0 in the
    backward); every row with a key has a sum of at least 1 and is computed as it would be
    without the guard.

    ``P = e / Σ e`` reuses the exponentials that the sum needed (``exp(S - lse)`` would take
    a second exponential of every score).
    """
    # BEGIN SOLUTION 4.1
    S = scale * matmul_transposed(xp, q, k)  # 1. S = scale · Q Kᵀ
    if mask is not None and mask.dtype != xp.bool:  # 2. S = S + bias ...
        S = S + mask
    if mask is not None and mask.dtype == xp.bool:  #    ... S = where(keep, S, -inf)
        S = xp.where(mask, S, -xp.inf)
    if causal_offset is not None:
        S = xp.where(causal_keep(xp, device, 0, S.shape[-2], 0, S.shape[-1], causal_offset), S, -xp.inf)
    _, e, total = _shifted_exp(xp, S, -1)  # 3. e = exp(S - m), Σ e along keys
    return e / xp.where(total == 0, 1.0, total)  #    P = e / Σ e  (no key: Σ e = 0, P = 0)
    # END SOLUTION


def _fused_weights(kernels, xp, device, q, k, scale, mask, causal_offset):
    """:func:`_attention_weights` by its fused twin (``minitorch_attn/speed/fused.py``), the
    same numbers bit for bit: the masks as the twin takes them (a bias, boolean keeps)."""
    bias = mask if mask is not None and mask.dtype != xp.bool else None
    keeps = [] if mask is None or bias is not None else [mask]
    if causal_offset is not None:
        keeps.append(causal_keep(xp, device, 0, q.shape[-2], 0, k.shape[-2], causal_offset))
    return kernels.attention_weights(xp, q, transposed_copy(xp, k), scale, bias, keeps)


def _scores_backward(xp, dP, P, q, k, scale, D):
    """Backward of passes 3-1 in the GQA layout: from ``dP`` to ``(dS, dQ, dK)``, with ``D``
    the softmax's row term (formed by the caller).

    .. derivation 4.2 begin
    3. softmax: ``dS = P ∘ (dP - D)`` with ``D = rowsum(dP ∘ P)`` (the softmax backward of
       :class:`~minitorch_attn.functional.softmax.Softmax`, row by row); masked and
       empty-row entries have ``P = 0`` and so ``dS = 0``. This is also the gradient of
       the additive bias of 2, which adds ``S`` one to one.
    1. ``S = scale · Q Kᵀ``: ``dQ = scale · dS K``, ``dK = scale · dSᵀ Q`` summed over the
       query heads of each group.
    .. derivation end
    """
    # BEGIN SOLUTION 4.2
    dS = P * (dP - D)  # 3
    dQ = scale * xp.matmul(dS, k)  # 1
    dK = scale * sum_over_group(xp, xp.matmul(xp.matrix_transpose(dS), q))
    return dS, dQ, dK
    # END SOLUTION


def _entries_apart(query, key, value, attn_mask, dropout_p=0.0, groups=1, **_):
    """Whether each entry of the first axis of query, key and value attends on its own: a
    batch (or heads) axis of all three (4-d, or 3-d without grouped-query heads), no mask
    (it may have a batch axis of its own) and no dropout (whose draws come in one order)."""
    return attn_mask is None and dropout_p == 0 and (query.ndim >= 4 or (query.ndim == 3 and groups == 1))


class ScaledDotProductAttention(Function):
    r"""Attention ``O = dropout(softmax(scale · Q Kᵀ + mask)) V`` (Vaswani et al. 2017,
    arXiv:1706.03762, eq. 1), in numbered passes.

    Forward::

        0. Q, K, V, mask in the GQA layout (views: K and V broadcast over G query heads)
        1. S  = scale · Q Kᵀ                                    (..., N_q, N_k)
        2. S  = S + bias;  S = where(keep, S, -inf)
        3. P  = softmax(S) = e / Σ e, e = exp(S - max S), along keys;  rows with no key: P = 0
        4. P_d = P ∘ M,  M = Z / (1-p): Z the 0/1 keep-mask, p the dropout probability
        5. O  = P_d V                                            (..., N_q, E_v)

    Backward: ``(dQ, dK, dV, dbias)``, the gradients of the loss with respect to each input
    (each of its input's shape in the GQA layout; None for one that needs none), from the
    upstream gradient ``dO`` and what the forward saves (Q, K, V, P, the dropout scale, O).

    .. derivation 4.2 begin
    .. hint 4.2: walk the passes in reverse; pass 3 is the softmax of task 2.1, row by row.
    .. hint 4.2: the softmax's row term can be computed from O and dO alone: show why.
    Backward, walking the passes in reverse::

        5. dV = P_dᵀ dO,   dP_d = dO Vᵀ               (the matmul rule of C = A B)
        4. dP = dP_d ∘ M
        3. dS = P ∘ (dP - D),   D = rowsum(dP ∘ P) = rowsum(dO ∘ O)
        2. dbias = dS   (the engine sums it to the mask's shape)
        1. dQ = scale · dS K,   dK = scale · dSᵀ Q
        0. dK, dV summed over the G query heads of each group

    Step 3 is the softmax backward row by row, over the keys j, k of one row (see
    :class:`~minitorch_attn.functional.softmax.Softmax`):

    .. math::

        dS_j = P_j\,\Big(dP_j - \sum_k dP_k\, P_k\Big)

    Why ``D`` can be taken from ``O`` and ``dO`` alone, without the rows of ``P`` (row i,
    keys j, features e), with :math:`dP_d = dO\,V^\top`:

    .. math::

        \sum_j P_{d,ij}\, dP_{d,ij} = \sum_j P_{d,ij} \sum_e dO_{ie} V_{je}
            = \sum_e dO_{ie} \sum_j P_{d,ij} V_{je} = \sum_e dO_{ie}\, O_{ie}

    That is ``rowsum(dP_d ∘ P_d) = rowsum(dO ∘ O)``. With dropout, ``P_d = P ∘ M`` and
    ``dP = dP_d ∘ M`` carry the same ``M``, so ``dP ∘ P = dP_d ∘ M ∘ P = dP_d ∘ P_d`` entry by
    entry, and ``rowsum(dP ∘ P)``, the ``D`` of the softmax, is still ``rowsum(dO ∘ O)``.
    (FlashAttention-2 computes ``D`` this way; it needs no row of ``P``.)
    .. derivation end
    """

    row_wise = RowWise(inputs=3, when=_entries_apart)  # each entry of a batch on its own (minitorch_attn.speed)

    @staticmethod
    def forward(ctx, query, key, value, attn_mask, scale=1.0, dropout_p=0.0, causal_offset=None, groups=1):
        xp, backend = ctx.xp, ctx.backend
        q, k, v, mask = gqa_layout(xp, query, key, value, attn_mask, groups)  # 0
        kernels = fused_kernels()
        if kernels is None:
            P = _attention_weights(xp, backend.device, q, k, scale, mask, causal_offset)  # 1-3
        else:  # speed: the same P, written into S's array
            P = _fused_weights(kernels, xp, backend.device, q, k, scale, mask, causal_offset)
        drop = None if dropout_p == 0.0 else _dropout_scale(backend, P.shape, dropout_p, P.dtype)
        P_dropped = P if drop is None else P * drop  # 4
        # BEGIN SOLUTION 4.1
        O = xp.matmul(P_dropped, v)  # 5
        # END SOLUTION
        ctx.save_for_backward(q, k, v, P, drop, O)
        ctx.scale, ctx.shapes = scale, (query.shape, key.shape, value.shape)
        return xp.reshape(O, query.shape[:-1] + (value.shape[-1],))

    @staticmethod
    def backward(ctx, dO):
        q, k, v, P, drop, O = ctx.saved_tensors
        xp = ctx.xp
        query_shape, key_shape, value_shape = ctx.shapes
        dO = xp.reshape(dO, O.shape)
        P_dropped = P if drop is None else P * drop
        # BEGIN SOLUTION 4.2
        dV = sum_over_group(xp, xp.matmul(xp.matrix_transpose(P_dropped), dO))  # 5, 0
        dP = matmul_transposed(xp, dO, v)
        dP = dP if drop is None else dP * drop  # 4
        D = xp.sum(dO * O, axis=-1, keepdims=True)  # 3-1
        dS, dQ, dK = _scores_backward(xp, dP, P, q, k, ctx.scale, D)
        # END SOLUTION
        dbias = xp.reshape(dS, query_shape[:-1] + (key_shape[-2],)) if ctx.needs_input_grad[3] else None  # 2
        return (xp.reshape(dQ, query_shape), xp.reshape(dK, key_shape), xp.reshape(dV, value_shape), dbias)


def scaled_dot_product_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attn_mask: Tensor | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: float | None = None,
    enable_gqa: bool = False,
    causal_alignment: str = "top_left",
) -> Tensor:
    """Scaled dot-product attention with PyTorch's semantics (``F.scaled_dot_product_attention``).

    Shapes: ``query (..., H_q, N_q, E)``, ``key (..., H_kv, N_k, E)``, ``value (..., H_kv,
    N_k, E_v)`` -> ``(..., H_q, N_q, E_v)``; the batch dims (all but the last two, or
    three with GQA) broadcast between the three, as PyTorch's (query ``(4, 3, 8)`` with
    key and value ``(4, 4, 6, 8)``: output ``(4, 4, 3, 8)``; see
    :func:`~._attention_common.broadcast_batch`); without GQA the heads dim is optional.
    Any size may be 0: with no keys (``N_k = 0``) the output is 0, as PyTorch's. float32 or
    float64, output of the same dtype. (PyTorch's docs call the lengths L and S.)

    Args:
        attn_mask: bool (True = takes part) or a float additive bias, broadcastable to
            ``(..., N_q, N_k)``; a float mask receives a gradient if it requires one.
        dropout_p: probability of dropping each attention weight (applied whenever > 0,
            as in PyTorch; modules pass 0 in eval mode). One keep-mask serves forward and
            backward, drawn from the seeded stream.
        is_causal: query i sees keys ``j <= i`` (top-left, as PyTorch); cannot be combined
            with ``attn_mask``. ``causal_alignment="bottom_right"`` makes it
            ``j <= i + N_k - N_q`` (or pass ``causal_mask(N_q, N_k, "bottom_right")`` as
            ``attn_mask``).
        scale: multiplies ``Q Kᵀ`` before the mask is added; default ``1/sqrt(E)``.
        enable_gqa: grouped-query attention; query head h uses key/value head
            ``h // (H_q // H_kv)``.

    A query row with no allowed key outputs 0 and gets gradient 0 (PyTorch's math path,
    FlashAttention). A finite bias such as ``finfo(float32).min`` is an ordinary number.
    Source: arXiv:1706.03762 eq. 1; GQA: arXiv:2305.13245.

    Raises:
        TypeError / ValueError: see :func:`._attention_common.attention_setup`: non-Tensor
        or mismatched inputs, a ``dropout_p`` outside [0, 1], an unknown
        ``causal_alignment``, ``attn_mask`` together with ``is_causal``.

    Catalogue record: ``opinfo/attention.py`` (its samples, references and checks).
    """
    if not isinstance(value, Tensor):
        raise TypeError(f"attention: value must be a Tensor, got {type(value).__name__}")
    query, key, value = broadcast_batch(query, key, value, enable_gqa)
    setup = attention_setup(query, key, value, attn_mask, is_causal, causal_alignment, scale, dropout_p, enable_gqa)
    options = dict(
        scale=setup.scale, dropout_p=float(dropout_p), causal_offset=setup.causal_offset, groups=setup.groups
    )
    return ScaledDotProductAttention.apply(query, key, value, attn_mask, **options)


class AttentionWeights(Function):
    r"""The attention weights ``P = softmax(scale · Q Kᵀ + mask)`` of
    :class:`ScaledDotProductAttention` (its passes 0-3, no dropout), for pictures.

    Backward: passes 3-0 of that class, ``(dQ, dK, dbias)``.

    .. derivation 4.2 begin
    The softmax's row term ``D = rowsum(dP ∘ P)`` is formed from ``P`` itself (there is no
    ``O`` here); row by row, over the keys j, k of one row:

    .. math::

        3.\quad dS_j = P_j\,\Big(dP_j - \sum_k dP_k\, P_k\Big)
        \qquad
        1.\quad dQ = \mathrm{scale}\cdot dS\,K,\quad dK = \mathrm{scale}\cdot dS^\top Q

    with ``dbias = dS`` (2) and ``dK`` summed over the G query heads of each group (0).
    .. derivation end
    """

    @staticmethod
    def forward(ctx, query, key, attn_mask, scale=1.0, causal_offset=None, groups=1):
        xp = ctx.xp
        q, k, _, mask = gqa_layout(xp, query, key, None, attn_mask, groups)
        P = _attention_weights(xp, ctx.backend.device, q, k, scale, mask, causal_offset)
        ctx.save_for_backward(q, k, P)
        ctx.scale, ctx.shapes = scale, (query.shape, key.shape)
        return xp.reshape(P, query.shape[:-1] + (key.shape[-2],))

    @staticmethod
    def backward(ctx, dP):
        q, k, P = ctx.saved_tensors
        xp = ctx.xp
        query_shape, key_shape = ctx.shapes
        dP = xp.reshape(dP, P.shape)
        dS, dQ, dK = _scores_backward(xp, dP, P, q, k, ctx.scale, xp.sum(dP * P, axis=-1, keepdims=True))
        dbias = xp.reshape(dS, query_shape[:-1] + (key_shape[-2],)) if ctx.needs_input_grad[2] else None
        return xp.reshape(dQ, query_shape), xp.reshape(dK, key_shape), dbias


def attention_weights(
    query: Tensor,
    key: Tensor,
    attn_mask: Tensor | None = None,
    is_causal: bool = False,
    scale: float | None = None,
    enable_gqa: bool = False,
    causal_alignment: str = "top_left",
) -> Tensor:
    """The attention weights ``(..., H_q, N_q, N_k)`` that :func:`scaled_dot_product_attention`
    with the same arguments applies to the values (before dropout); each row sums to 1,
    or is all 0 when no key is allowed (also when ``N_k = 0``). Differentiable. Arguments
    and errors as there.

    Catalogue record: ``opinfo/attention.py`` (its samples, references and checks).
    """
    query, key, _ = broadcast_batch(query, key, None, enable_gqa)
    setup = attention_setup(query, key, None, attn_mask, is_causal, causal_alignment, scale, 0.0, enable_gqa)
    return AttentionWeights.apply(
        query, key, attn_mask, scale=setup.scale, causal_offset=setup.causal_offset, groups=setup.groups
    )


__all__ = ["scaled_dot_product_attention", "attention_weights"]  # what minitorch_attn.functional exports
