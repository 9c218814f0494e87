"""Records of attention, dense (:mod:`minitorch_attn.functional.attention`, homework tasks
4.1 and 4.2) and blockwise (:mod:`~minitorch_attn.functional.flash`, tasks 5.1 and 5.2).

One float64 NumPy reference serves both: the scores ``scale · Q Kᵀ`` plus the mask, a
softmax over the keys allowed (a row with none outputs 0), times ``V`` (Vaswani et al.
2017, eq. 1). Flash samples use tiny blocks (2 or 3) on lengths 5 to 7, so every sample
runs several query and key blocks, ragged last blocks and, when causal, skipped and
diagonal-crossing tiles.
"""

import numpy as np

import minitorch_attn as mt
import minitorch_attn.functional as F

from .record import TORCH_KEEPS_INTS, OneInput, OpInfo, Sample, float_mask, register, seeded

EMPTY, BROADCAST, EXTREME, NONFINITE = (frozenset({e}) for e in ("empty", "broadcast", "extreme", "nonfinite"))
NOT_TORCH = NotImplemented  # what a torch reference returns for an option PyTorch lacks


# BEGIN REFERENCE 4.1
def np_scores(q, k, attn_mask=None, is_causal=False, scale=None, enable_gqa=False, causal_alignment="top_left"):
    """The masked, scaled scores ``(..., H_q, N_q, N_k)`` in float64 (-inf where masked)."""
    if enable_gqa and q.ndim >= 3:
        k = np.repeat(k, q.shape[-3] // k.shape[-3], axis=-3)
    scale = 1 / np.sqrt(q.shape[-1]) if scale is None else scale
    s = scale * (q @ np.swapaxes(k, -1, -2)) if q.shape[-1] else np.zeros(q.shape[:-1] + k.shape[-2:-1])
    N_q, N_k = s.shape[-2:]
    if is_causal:
        offset = N_k - N_q if causal_alignment == "bottom_right" else 0
        s = np.where(np.arange(N_k)[None, :] <= np.arange(N_q)[:, None] + offset, s, -np.inf)
    if attn_mask is not None:
        s = np.where(attn_mask, s, -np.inf) if attn_mask.dtype == bool else s + attn_mask
    return s


def np_weights(q, k, attn_mask=None, is_causal=False, scale=None, enable_gqa=False, causal_alignment="top_left"):
    """softmax of :func:`np_scores` over the keys; a row without keys gives zeros."""
    s = np_scores(q, k, attn_mask, is_causal, scale, enable_gqa, causal_alignment)
    top = np.max(s, axis=-1, keepdims=True, initial=-np.inf)
    with np.errstate(invalid="ignore"):
        e = np.where(np.isfinite(top), np.exp(s - np.where(np.isfinite(top), top, 0.0)), 0.0)
    total = e.sum(-1, keepdims=True)
    return np.divide(e, total, out=np.zeros_like(e), where=total > 0)


def np_attention(
    q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False, causal_alignment="top_left"
):
    """``weights @ V`` (no dropout: a sample with dropout has no reference)."""
    if enable_gqa and q.ndim >= 3:
        v = np.repeat(v, q.shape[-3] // v.shape[-3], axis=-3)
    return np_weights(q, k, attn_mask, is_causal, scale, enable_gqa, causal_alignment) @ v


# END REFERENCE


def np_flash(
    q,
    k,
    v,
    attn_mask=None,
    is_causal=False,
    causal_alignment="top_left",
    scale=None,
    dropout_p=0.0,
    enable_gqa=False,
    block_size_q=None,
    block_size_k=None,
    return_lse=False,
):
    out = np_attention(q, k, v, attn_mask, 0.0, is_causal, scale, enable_gqa, causal_alignment)
    if not return_lse:
        return out
    s = np_scores(q, k, attn_mask, is_causal, scale, enable_gqa, causal_alignment)
    top = np.max(s, axis=-1, keepdims=True, initial=-np.inf)
    with np.errstate(divide="ignore", invalid="ignore"):
        safe = np.where(np.isfinite(top), top, 0.0)
        lse = (safe + np.log(np.exp(s - safe).sum(-1, keepdims=True)))[..., 0]
    return out, np.where(np.isfinite(top[..., 0]), lse, np.inf)


# BEGIN REFERENCE 4.2
def sum_to_shape(a, shape):
    """``a`` summed over the axes that broadcasting added or stretched to reach its shape."""
    a = a.sum(axis=tuple(range(a.ndim - len(shape)))) if a.ndim > len(shape) else a
    return a.sum(axis=tuple(i for i, s in enumerate(shape) if s == 1 and a.shape[i] != 1), keepdims=True)


def _scores_backward(dS, q, k, attn_mask, scale, enable_gqa):
    """``dQ = scale dS K``, ``dK = scale dSᵀ Q`` (summed over the query heads of a group),
    and a float mask's gradient ``dS`` summed to its shape."""
    scale = 1 / np.sqrt(q.shape[-1]) if scale is None else scale
    groups = q.shape[-3] // k.shape[-3] if enable_gqa and q.ndim >= 3 else 1
    k_rep = np.repeat(k, groups, axis=-3) if groups > 1 else k
    dq = scale * dS @ k_rep
    dk = scale * np.swapaxes(dS, -1, -2) @ q
    if groups > 1:
        dk = dk.reshape(dk.shape[:-3] + (k.shape[-3], groups) + dk.shape[-2:]).sum(-3)
    dk = sum_to_shape(dk, k.shape)
    dmask = None
    if attn_mask is not None and attn_mask.dtype != bool:
        dmask = sum_to_shape(np.where(np.isfinite(attn_mask), dS, 0.0), attn_mask.shape)
    return dq, dk, dmask


def np_weights_backward(
    grads, q, k, attn_mask=None, is_causal=False, scale=None, enable_gqa=False, causal_alignment="top_left"
):
    """``dS = P ∘ (dP - rowsum(dP ∘ P))`` with ``dP`` the upstream gradient of the weights."""
    P, dP = np_weights(q, k, attn_mask, is_causal, scale, enable_gqa, causal_alignment), grads[0]
    dS = P * (dP - (dP * P).sum(-1, keepdims=True))
    dq, dk, dmask = _scores_backward(dS, q, k, attn_mask, scale, enable_gqa)
    return [dq, dk] + ([dmask] if attn_mask is not None else [])


def np_attention_backward(
    grads,
    q,
    k,
    v,
    attn_mask=None,
    dropout_p=0.0,
    is_causal=False,
    scale=None,
    enable_gqa=False,
    causal_alignment="top_left",
    d_lse=None,
):
    """FlashAttention-2's equations in float64: ``dV = Pᵀ dO``, ``dP = dO Vᵀ``,
    ``dS = P ∘ (dP - rowsum(dO ∘ O))`` (plus ``P ∘ d lse`` when the log-sum-exp is an
    output), then :func:`_scores_backward`."""
    groups = q.shape[-3] // k.shape[-3] if enable_gqa and q.ndim >= 3 else 1
    v_rep = np.repeat(v, groups, axis=-3) if groups > 1 else v
    P, dO = np_weights(q, k, attn_mask, is_causal, scale, enable_gqa, causal_alignment), grads[0]
    dv = np.swapaxes(P, -1, -2) @ dO
    if groups > 1:
        dv = dv.reshape(dv.shape[:-3] + (v.shape[-3], groups) + dv.shape[-2:]).sum(-3)
    dv = sum_to_shape(dv, v.shape)
    dP = dO @ np.swapaxes(v_rep, -1, -2)
    dS = P * (dP - (dP * P).sum(-1, keepdims=True))
    if d_lse is not None:
        dS = dS + P * d_lse[..., None]
    dq, dk, dmask = _scores_backward(dS, q, k, attn_mask, scale, enable_gqa)
    return [dq, dk, dv] + ([dmask] if attn_mask is not None else [])


# END REFERENCE


def np_flash_backward(
    grads,
    q,
    k,
    v,
    attn_mask=None,
    is_causal=False,
    causal_alignment="top_left",
    scale=None,
    dropout_p=0.0,
    enable_gqa=False,
    block_size_q=None,
    block_size_k=None,
    return_lse=False,
):
    return np_attention_backward(
        grads,
        q,
        k,
        v,
        attn_mask,
        0.0,
        is_causal,
        scale,
        enable_gqa,
        causal_alignment,
        d_lse=grads[1] if return_lse else None,
    )


def torch_sdpa(
    torch,
    q,
    k,
    v,
    attn_mask=None,
    dropout_p=0.0,
    is_causal=False,
    scale=None,
    enable_gqa=False,
    causal_alignment="top_left",
):
    if causal_alignment != "top_left" or dropout_p:
        return NOT_TORCH
    return torch.nn.functional.scaled_dot_product_attention(
        q, k, v, attn_mask=attn_mask, is_causal=is_causal, scale=scale, enable_gqa=enable_gqa
    )


def torch_flash(
    torch,
    q,
    k,
    v,
    attn_mask=None,
    is_causal=False,
    causal_alignment="top_left",
    scale=None,
    dropout_p=0.0,
    enable_gqa=False,
    block_size_q=None,
    block_size_k=None,
    return_lse=False,
):
    if return_lse:
        return NOT_TORCH
    return torch_sdpa(torch, q, k, v, attn_mask, dropout_p, is_causal, scale, enable_gqa, causal_alignment)


def flash(**options):
    """``flash_attention`` with tiny blocks (overridable) and the given options."""
    options = {"block_size_q": 2, "block_size_k": 3, **options}
    return lambda q, k, v, *mask: F.flash_attention(q, k, v, *mask, **options)


def padding_mask(d, batch, S):
    """A key-padding mask ``(batch, 1, 1, S)``: the last keys of each sequence are padding
    (at least one key kept per sequence)."""
    lengths = d.rng.integers(1, S + 1, batch)
    keep = np.arange(S)[None, :] < lengths[:, None]
    return mt.tensor(keep[:, None, None, :], device=d.device)


def bias_with_neg_inf(d, *shape):
    """An additive bias that requires grad, about a quarter -inf (never a whole row)."""
    values = d.rng.standard_normal(shape)
    blocked = d.rng.random(shape) < 0.25
    blocked[..., 0] = False
    return d._tensor(np.where(blocked, -np.inf, values))


def extreme_qkv(d, limit=None):
    """q, k, v whose scaled scores lie in [-1000, 1000] (float64) or [-80, 80] (float32), the
    largest of them +1000 (or +80) whatever the seed: exp of it overflows unless shifted."""
    limit = limit if limit is not None else d.EXTREME[d.dtype]
    q, k = d.rng.standard_normal((2, 2, 5, 4)), d.rng.standard_normal((2, 2, 6, 4))
    scores = q @ np.swapaxes(k, -1, -2) / 2.0
    extreme = scores.flat[np.abs(scores).argmax()]  # the score of largest size, made +limit
    return [d._tensor(q * (limit / extreme)), d._tensor(k), d.randn(2, 2, 6, 3)]


def flash_sample(name, make, edges=frozenset(), gradcheck=None, **options):
    """A flash sample with tiny blocks: several query and key blocks on every length."""
    return Sample(
        name, make, kwargs={"block_size_q": 2, "block_size_k": 3, **options}, edges=edges, gradcheck=gradcheck
    )


# (name, make, options): the empty cases, each run densely and blockwise
EMPTY_CASES: tuple = (
    ("no keys", lambda d: [d.randn(1, 1), d.randn(0, 1), d.randn(0, 1)], {}),  # PyTorch: [[0.]]
    ("no keys, heads", lambda d: [d.randn(2, 3, 4, 5), d.randn(2, 3, 0, 5), d.randn(2, 3, 0, 6)], {}),
    (
        "no keys, causal bottom-right",
        lambda d: [d.randn(1, 2, 3, 4), d.randn(1, 2, 0, 4), d.randn(1, 2, 0, 4)],
        {"is_causal": True, "causal_alignment": "bottom_right"},
    ),
    ("no queries", lambda d: [d.randn(2, 0, 4), d.randn(2, 3, 4), d.randn(2, 3, 5)], {}),
    ("no queries, causal", lambda d: [d.randn(1, 0, 4), d.randn(1, 3, 4), d.randn(1, 3, 4)], {"is_causal": True}),
    ("empty batch", lambda d: [d.randn(0, 2, 3, 4), d.randn(0, 2, 3, 4), d.randn(0, 2, 3, 4)], {}),
    (
        "empty batch, GQA",
        lambda d: [d.randn(0, 4, 3, 4), d.randn(0, 2, 3, 4), d.randn(0, 2, 3, 4)],
        {"enable_gqa": True},
    ),
    ("no value features", lambda d: [d.randn(2, 3, 4), d.randn(2, 5, 4), d.randn(2, 5, 0)], {}),
)

SDPA_SAMPLES = (
    Sample("sdpa", lambda d: [d.randn(2, 3, 4), d.randn(2, 5, 4), d.randn(2, 5, 3)]),
    Sample(
        "sdpa (causal, 4-D, scale)",
        lambda d: [d.randn(1, 2, 4, 3), d.randn(1, 2, 4, 3), d.randn(1, 2, 4, 3)],
        kwargs=dict(is_causal=True, scale=0.7),
    ),
    Sample(
        "sdpa (bool mask, empty row)",
        lambda d: [
            d.randn(2, 3, 4),
            d.randn(2, 4, 4),
            d.randn(2, 4, 2),
            d.bools([[True, False, True, False], [False] * 4, [True] * 4]),
        ],
    ),
    Sample(
        "sdpa (float mask with grad)", lambda d: [d.randn(2, 3, 4), d.randn(2, 4, 4), d.randn(2, 4, 2), d.randn(3, 4)]
    ),
    Sample(
        "sdpa (-inf bias, bottom-right N_q > N_k)",
        lambda d: [d.randn(2, 4, 3), d.randn(2, 3, 3), d.randn(2, 3, 3), float_mask(d, 2, 4, 3)],
        fn=lambda q, k, v, m: (
            F.scaled_dot_product_attention(q, k, v, attn_mask=m)
            + F.scaled_dot_product_attention(q, k, v, is_causal=True, causal_alignment="bottom_right")
        ),
    ),
    Sample(
        "sdpa (GQA, broadcast mask)",
        lambda d: [d.randn(1, 4, 3, 2), d.randn(1, 2, 5, 2), d.randn(1, 2, 5, 3), d.mask(4, 1, 5)],
        fn=lambda q, k, v, m: F.scaled_dot_product_attention(
            q, k, v, attn_mask=m | (mt.arange(5, device=m.device) == 0), enable_gqa=True
        ),
    ),
    Sample(
        "sdpa (dropout 0.3)",
        lambda d: [d.randn(2, 3, 4), d.randn(2, 5, 4), d.randn(2, 5, 3)],
        fn=seeded(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, dropout_p=0.3)),
    ),
    Sample(
        "sdpa (bottom-right, N_q < N_k)",
        lambda d: [d.randn(1, 3, 4), d.randn(1, 5, 4), d.randn(1, 5, 2)],
        kwargs=dict(is_causal=True, causal_alignment="bottom_right"),
        gradcheck=True,
    ),
    Sample(
        "sdpa (GQA)",
        lambda d: [d.randn(2, 4, 3, 2), d.randn(2, 2, 5, 2), d.randn(2, 2, 5, 3)],
        kwargs=dict(enable_gqa=True),
        gradcheck=True,
    ),
    Sample("sdpa (extreme scores)", extreme_qkv, edges=EXTREME),
    Sample("sdpa (extreme scores, causal)", extreme_qkv, kwargs=dict(is_causal=True), edges=EXTREME),
    Sample(
        "sdpa (inf in a masked value)",
        lambda d: [
            d.randn(1, 2, 2),
            d.randn(1, 2, 2),
            d.values([[[1.0, 2.0], [np.inf, 0.0]]]),
            d.bools([[True, False], [True, False]]),
        ],
        edges=NONFINITE,
    ),
) + tuple(Sample(f"sdpa ({name})", make, kwargs=options, edges=EMPTY) for name, make, options in EMPTY_CASES)

FLASH_SAMPLES = (
    flash_sample(
        "flash (N_q > N_k, ragged blocks, lse)",
        lambda d: [d.randn(2, 2, 7, 3), d.randn(2, 2, 5, 3), d.randn(2, 2, 5, 2)],
        return_lse=True,
    ),
    flash_sample(
        "flash (N_q < N_k, blocks 1 and 4)",
        lambda d: [d.randn(1, 2, 5, 3), d.randn(1, 2, 7, 3), d.randn(1, 2, 7, 4)],
        block_size_q=1,
        block_size_k=4,
    ),
    flash_sample(
        "flash (causal, top-left, scale)",
        lambda d: [d.randn(2, 1, 7, 3), d.randn(2, 1, 7, 3), d.randn(2, 1, 7, 2)],
        is_causal=True,
        scale=0.7,
        return_lse=True,
    ),
    flash_sample(
        "flash (causal, bottom-right, N_q < N_k)",
        lambda d: [d.randn(1, 2, 5, 3), d.randn(1, 2, 7, 3), d.randn(1, 2, 7, 3)],
        is_causal=True,
        causal_alignment="bottom_right",
        return_lse=True,
    ),
    flash_sample(
        "flash (causal, bottom-right, N_q > N_k)",  # the first N_q - N_k queries see no key: out 0
        lambda d: [d.randn(1, 2, 7, 2), d.randn(1, 2, 5, 2), d.randn(1, 2, 5, 3)],
        is_causal=True,
        causal_alignment="bottom_right",
    ),
    flash_sample(
        "flash (key-padding mask)",
        lambda d: [d.randn(2, 2, 5, 3), d.randn(2, 2, 6, 3), d.randn(2, 2, 6, 2), padding_mask(d, 2, 6)],
        return_lse=True,
    ),
    flash_sample(
        "flash (additive -inf mask, grad)",
        lambda d: [d.randn(2, 2, 5, 3), d.randn(2, 2, 6, 3), d.randn(2, 2, 6, 2), bias_with_neg_inf(d, 2, 1, 5, 6)],
    ),
    flash_sample(
        "flash (GQA, broadcast bias, grad)",
        lambda d: [d.randn(1, 4, 5, 3), d.randn(1, 2, 6, 3), d.randn(1, 2, 6, 2), d.randn(4, 1, 6)],
        enable_gqa=True,
        return_lse=True,
    ),
    flash_sample(
        "flash (GQA, causal)",
        lambda d: [d.randn(2, 6, 5, 2), d.randn(2, 2, 5, 2), d.randn(2, 2, 5, 3)],
        enable_gqa=True,
        is_causal=True,
    ),
    Sample(
        "flash (dropout 0.3, causal)",
        lambda d: [d.randn(1, 2, 6, 3), d.randn(1, 2, 6, 3), d.randn(1, 2, 6, 2)],
        fn=seeded(flash(dropout_p=0.3, is_causal=True)),
    ),
    flash_sample("flash (extreme scores)", extreme_qkv, edges=EXTREME, block_size_q=2, block_size_k=2),
    flash_sample("flash (extreme scores, causal)", extreme_qkv, edges=EXTREME, is_causal=True),
) + tuple(flash_sample(f"flash ({name})", make, edges=EMPTY, **options) for name, make, options in EMPTY_CASES)


def _qkv(x):
    """One (2, 3) tensor viewed as (1, 2, 3) queries, keys and values (their one-input call)."""
    return (x.reshape(1, 2, 3),) * 3


# BEGIN REFERENCE 4.2
BACKWARD_SCALED_DOT_PRODUCT_ATTENTION = (
    "dV = Pᵀ dO, dP = dO Vᵀ, dS = P ∘ (dP - rowsum(dP ∘ P)), dQ = scale dS K, dK = scale dSᵀ Q"
)
BACKWARD_ATTENTION_WEIGHTS = "dS = P ∘ (dP - rowsum(dP ∘ P)), dQ = scale dS K, dK = scale dSᵀ Q"
# END REFERENCE


# BEGIN REFERENCE 5.2
BACKWARD_FLASH_ATTENTION = (
    "per tile: P = exp(S - lse), dV += Pᵀ dO, dS = P ∘ (dO Vᵀ - D), dQ += scale dS K, dK += scale dSᵀ Q"
)
# END REFERENCE


# one record a block, aligned by hand: the catalogue reads as a table
# fmt: off
RECORDS = register(__name__, [
    OpInfo("scaled_dot_product_attention", F.scaled_dot_product_attention, ("F.scaled_dot_product_attention",),
           SDPA_SAMPLES,
           "Vaswani et al. 2017 (arXiv:1706.03762, eq. 1); GQA: Ainslie et al. 2023 (arXiv:2305.13245)",
           ref=np_attention, ref_backward=np_attention_backward, torch_ref=torch_sdpa, task="4.2", forward_task="4.1",
           exponentiates=True, n_ops=64,
           differentiable_in=("query", "key", "value", "attn_mask"),
           one_input=OneInput(lambda x: F.scaled_dot_product_attention(*_qkv(x)), lambda torch,
                              x: torch.nn.functional.scaled_dot_product_attention(*_qkv(x)), of_ints="TypeError"),
           forward="O = P V, P = softmax(scale Q Kᵀ + mask)",
           backward=BACKWARD_SCALED_DOT_PRODUCT_ATTENTION),
    OpInfo("attention_weights", F.attention_weights, ("F.attention_weights",),
           (Sample("attention_weights (GQA, causal)", lambda d: [d.randn(1, 2, 3, 4), d.randn(1, 1, 3, 4)],
                   kwargs=dict(is_causal=True, enable_gqa=True)),
            Sample("attention_weights (bool mask)", lambda d: [d.randn(2, 3, 4), d.randn(2, 5, 4), d.mask(3, 5)],
                   gradcheck=False),
            Sample("attention_weights (extreme scores, causal)", lambda d: extreme_qkv(d)[:2],
                   kwargs=dict(is_causal=True),
                   edges=EXTREME),
            Sample("attention_weights (no keys)", lambda d: [d.randn(1, 1), d.randn(0, 1)], edges=EMPTY),
            Sample("attention_weights (no queries)", lambda d: [d.randn(2, 0, 3), d.randn(2, 4, 3)], edges=EMPTY)),
           "the P of scaled_dot_product_attention",
           ref=np_weights, ref_backward=np_weights_backward, torch_ref=None, task="4.2", forward_task="4.1",
           exponentiates=True, n_ops=64,
           differentiable_in=("query", "key", "attn_mask"),
           one_input=OneInput(lambda x: F.attention_weights(*_qkv(x)[:2]), lambda torch,
                              x: torch.softmax(_qkv(x)[0] @ _qkv(x)[1].transpose(-1, -2) / 3 ** 0.5, -1),
                              of_ints="TypeError", torch_differs=TORCH_KEEPS_INTS),
           forward="P = softmax(scale Q Kᵀ + mask)",
           backward=BACKWARD_ATTENTION_WEIGHTS),
    OpInfo("flash_attention", F.flash_attention, ("F.flash_attention",), FLASH_SAMPLES,
           "Dao 2023 (FlashAttention-2, arXiv:2307.08691, Algorithms 1 and 2): an online softmax over key "
           "blocks; the backward recomputes each tile's P from the saved log-sum-exp",
           ref=np_flash, ref_backward=np_flash_backward, torch_ref=torch_flash, task="5.2", forward_task="5.1",
           exponentiates=True, n_ops=64,
           differentiable_in=("query", "key", "value", "attn_mask"),
           one_input=OneInput(lambda x: F.flash_attention(*_qkv(x)), lambda torch,
                              x: torch.nn.functional.scaled_dot_product_attention(*_qkv(x)), of_ints="TypeError"),
           forward="O = softmax(scale Q Kᵀ + mask) V, by key blocks with an online softmax",
           backward=BACKWARD_FLASH_ATTENTION),
])
# fmt: on
