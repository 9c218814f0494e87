"""What both attention kernels share: argument checks, the causal rule, and the grouped-query layout.

Both :mod:`.attention` (the dense kernel) and :mod:`.flash` (the blockwise one) import
from here and never from each other:

* :func:`attention_setup` checks the arguments of an attention call once and returns the
  GQA group size, the scale and the causal offset;
* :func:`causal_keep` is the causal rule, ``key j <= query i + offset``, for any tile;
  :func:`causal_mask` is the same rule as a public bool tensor;
* :func:`gqa_layout` puts queries, keys, values and mask in the layout where grouped-query
  attention is plain broadcasting, and :func:`sum_over_group` undoes it for a gradient.

Notation, shared by both kernels and their docs: ``N_q`` queries and ``N_k`` keys per
head, head dims ``E`` (queries and keys) and ``E_v`` (values), ``H_q`` query heads and
``H_kv`` key/value heads, ``G = H_q / H_kv``; ``S = scale · Q Kᵀ`` the scores ``(N_q, N_k)``
(``S_ij`` a tile of them), ``P`` the attention weights, ``lse`` the log-sum-exp of a row of
``S``, ``dO`` the upstream gradient of the output ``O``. PyTorch's documentation calls
the two lengths ``L`` and ``S``; here ``S`` is always the scores.
"""

from __future__ import annotations

import dataclasses
import math
import numbers

from ..core.backend import get_backend
from ..core.ops import broadcast_shapes
from ..core.tensor import FLOAT_DTYPES, Tensor, _is_int, dtype_name
from ._checks import _check_flag, _check_probability

CAUSAL_ALIGNMENTS = ("top_left", "bottom_right")


# ---- the causal rule ----------------------------------------------------------------------------
def causal_offset(alignment, N_q, N_k):
    """The ``offset`` of the causal rule ``j <= i + offset`` for an alignment name.

    ``top_left`` (PyTorch's ``is_causal``): offset 0, query ``i`` sees keys ``j <= i``.
    ``bottom_right`` (FlashAttention >= 2.1, KV-cache decoding, where the ``N_q`` queries
    are the *last* ``N_q`` positions of the ``N_k`` keys): offset ``N_k - N_q``.
    This is the one place an alignment name is checked and interpreted.
    """
    if alignment not in CAUSAL_ALIGNMENTS:
        raise ValueError(f"causal_alignment must be one of {CAUSAL_ALIGNMENTS}, got {alignment!r}")
    return 0 if alignment == "top_left" else N_k - N_q


def causal_keep(xp, device, i0, i1, j0, j1, offset, window=None):
    """Raw bool array ``(i1 - i0, j1 - j0)`` for queries ``i0..i1-1`` and keys ``j0..j1-1``:
    True where key ``j`` may be seen by query ``i``, i.e. ``j <= i + offset``; with a
    sliding ``window``, also ``j > i + offset - window`` (the last ``window`` keys up to the
    query's own position)."""
    rows = xp.arange(i0, i1, device=device)[:, None]
    cols = xp.arange(j0, j1, device=device)[None, :]
    keep = cols <= rows + offset
    return keep if window is None else keep & (cols > rows + offset - window)


def causal_mask(
    N_q: int, N_k: int | None = None, alignment: str = "top_left", device: str | None = None, window: int | None = None
) -> Tensor:
    """A bool tensor ``(N_q, N_k)`` that is True where query ``i`` may attend to key ``j``.

    Pass it as ``attn_mask`` to :func:`scaled_dot_product_attention` (True = takes part,
    as in PyTorch).

    Args:
        N_q: number of queries; N_k: number of keys (defaults to N_q).
        alignment: ``"top_left"`` keeps ``j <= i`` (PyTorch's ``is_causal=True``);
            ``"bottom_right"`` keeps ``j <= i + N_k - N_q`` (FlashAttention >= 2.1 and
            decoding with a KV cache: the queries are the last N_q of the N_k positions).
            The two agree when ``N_q == N_k``. With bottom-right alignment and
            ``N_q > N_k`` the first ``N_q - N_k`` queries see no key (their output is 0).
        device: ``"cpu"``, ``"cuda"`` or ``"strict"`` (default: the default device).
        window: sliding-window attention (Beltagy et al., arXiv:2004.05150, §3.1; Mistral):
            each query sees only the last ``window`` keys up to its own position, itself
            included. None (default): every earlier key.

    Raises:
        ValueError: for a negative size, a window < 1 or an unknown alignment.
    """
    N_k = N_q if N_k is None else N_k
    for name, n in (("N_q", N_q), ("N_k", N_k)):
        if not _is_int(n) or n < 0:
            raise ValueError(f"causal_mask: {name} must be a non-negative int, got {n!r}")
    if window is not None and (not _is_int(window) or window < 1):
        raise ValueError(f"causal_mask: window must be an int >= 1 (or None), got {window!r}")
    offset = causal_offset(alignment, N_q, N_k)
    backend = get_backend(device)
    return Tensor(causal_keep(backend.xp, backend.device, 0, N_q, 0, N_k, offset, window))


# ---- argument checks ------------------------------------------------------------------------------
def _check_attention_inputs(query, key, value, attn_mask=None, is_causal=False, enable_gqa=False):
    """Validate the shapes and dtypes of an attention call; return the GQA group size.

    Accepts Tensors or raw arrays. Expected shapes (PyTorch's)::

        query (..., H_q, N_q, E)   key (..., H_kv, N_k, E)   value (..., H_kv, N_k, E_v)
        attn_mask broadcastable to (..., H_q, N_q, N_k)

    Without ``enable_gqa`` the leading dims of all three must be equal (``H_q == H_kv``);
    with it, ``H_q`` must be a multiple of ``H_kv`` and query head ``h`` uses key/value
    head ``h // G``, ``G = H_q // H_kv`` the group size returned (1 without GQA).

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
            f"query {q}, key {k}, value {v}; expected (..., N_q, E), (..., N_k, E), (..., N_k, E_v)"
        )
    if q[-1] != k[-1]:
        raise ValueError(f"attention: query {q} and key {k} must share the last dim E (the dot-product size)")
    if k[:-1] != v[:-1]:
        raise ValueError(f"attention: key {k} and value {v} must agree in all dims but the last, (..., N_k)")
    if enable_gqa:
        if len(q) < 3:
            raise ValueError(f"attention: enable_gqa needs a heads dim, (..., H, N_q, E); got query {q}")
        if q[:-3] != k[:-3] or k[-3] == 0 or q[-3] % k[-3] != 0:
            raise ValueError(
                f"attention: with enable_gqa, query {q} and key {k} must agree in the batch dims "
                f"and query heads ({q[-3]}) must be a multiple of key/value heads ({k[-3]})"
            )
        groups = q[-3] // k[-3]
    else:
        if q[:-2] != k[:-2]:
            raise ValueError(
                f"attention: query {q} and key {k} must agree in the leading (batch, heads) dims; "
                f"for fewer key/value heads pass enable_gqa=True"
            )
        groups = 1
    if attn_mask is not None:
        if is_causal:
            raise ValueError("attention: pass either attn_mask or is_causal=True, not both (as in PyTorch)")
        mask_dtype = dtype_name(attn_mask.dtype)
        if mask_dtype != "bool" and mask_dtype != dtypes[0]:
            raise TypeError(
                f"attention: attn_mask must be bool (True = takes part) or a float bias of the "
                f"query's dtype {dtypes[0]}, got {mask_dtype}"
            )
        scores_shape = (*q[:-1], k[-2])
        m = tuple(attn_mask.shape)
        if broadcast_shapes(m, scores_shape) != scores_shape:
            raise ValueError(
                f"attention: attn_mask of shape {m} does not broadcast to the attention scores' "
                f"shape {scores_shape} (..., N_q, N_k)"
            )
    return groups


def broadcast_batch(query, key, value=None, enable_gqa=False):
    """Query, key and value with their batch dims broadcast together, as PyTorch's attention
    does: query ``(4, 3, 8)`` with key and value ``(4, 4, 6, 8)`` gives query ``(4, 4, 3, 8)``.

    The batch dims are all but the last two, ``(N, E)``, or with ``enable_gqa`` all but the
    last three (the heads dim differs between the query and the keys). Expanding is a view,
    and its backward sums each gradient back over the dims it was broadcast along (the
    engine's :class:`~minitorch_attn.core.shape_ops.Expand`). Tensors whose batch dims
    already agree come back as they are; shapes too short are left for
    :func:`attention_setup` to refuse.

    Raises:
        ValueError: for batch dims that do not broadcast (all three shapes named).
    """
    _check_flag(enable_gqa, "attention: enable_gqa")
    tensors = [t for t in (query, key, value) if t is not None]
    tail = 3 if enable_gqa else 2
    if not all(isinstance(t, Tensor) for t in tensors) or any(t.ndim < tail for t in tensors):
        return query, key, value
    batches = [tuple(t.shape[:-tail]) for t in tensors]
    if all(b == batches[0] for b in batches):
        return query, key, value
    batch = broadcast_shapes(*batches)
    if batch is None:
        raise ValueError(
            f"attention: the batch dims of query {query.shape}, key {key.shape}"
            f"{'' if value is None else f' and value {value.shape}'} do not broadcast "
            f"(all but the last {tail} dims)"
        )
    query, key, value = (None if t is None else t.expand(*batch, *t.shape[-tail:]) for t in (query, key, value))
    return query, key, value


@dataclasses.dataclass(frozen=True)
class AttentionSetup:
    """What :func:`attention_setup` found: the GQA group size ``G``, the scale, and the
    causal offset (None when not causal; else query ``i`` sees keys ``j <= i + offset``)."""

    groups: int
    scale: float
    causal_offset: int | None


def attention_setup(
    query,
    key,
    value=None,
    attn_mask=None,
    is_causal=False,
    causal_alignment="top_left",
    scale=None,
    dropout_p=0.0,
    enable_gqa=False,
):
    """Check every argument of an attention call (dense, flash, or the weights alone,
    where ``value`` is None) and return an :class:`AttentionSetup`.

    Raises:
        TypeError / ValueError: see :func:`_check_attention_inputs`; also for non-Tensor
            inputs, a non-bool ``is_causal`` or ``enable_gqa``, a ``dropout_p`` outside [0, 1], an unknown
            ``causal_alignment``, a non-finite ``scale``, or ``E = 0`` with the default scale.
    """
    for name, t in (("query", query), ("key", key), ("value", value), ("attn_mask", attn_mask)):
        if (t is not None or name in ("query", "key")) and not isinstance(t, Tensor):
            raise TypeError(f"attention: {name} must be a Tensor, got {type(t).__name__}")
    _check_flag(is_causal, "attention: is_causal")
    _check_flag(enable_gqa, "attention: enable_gqa")
    groups = _check_attention_inputs(query, key, value if value is not None else key, attn_mask, is_causal, enable_gqa)
    _check_probability(dropout_p, "attention: dropout_p")
    offset = causal_offset(causal_alignment, query.shape[-2], key.shape[-2])
    if scale is None:
        if query.shape[-1] == 0:
            raise ValueError("attention: the head dim E is 0, so the default scale 1/sqrt(E) is undefined; pass scale=")
        scale = 1.0 / math.sqrt(query.shape[-1])
    if isinstance(scale, bool) or not isinstance(scale, numbers.Real) or not math.isfinite(scale):
        raise ValueError(f"attention: scale must be a finite number, got {scale!r}")
    return AttentionSetup(groups, float(scale), offset if is_causal else None)


# ---- grouped-query attention as broadcasting ---------------------------------------------------------
def gqa_layout(xp, query, key, value, mask, groups):
    """Reshape raw arrays (views, no copies) to the layout where GQA is broadcasting::

        q    (*batch, H_kv, G, N_q, E)       G = H_q / H_kv query heads share one key/value head
        k    (*batch, H_kv, 1, N_k, E)
        v    (*batch, H_kv, 1, N_k, E_v)     (None stays None)
        mask (*batch or 1, H_kv or 1, G or 1, N_q or 1, N_k or 1)   (None stays None)

    Query head ``h`` then meets key/value head ``h // G``, PyTorch's ``repeat_interleave``
    rule, without copying keys or values ``G`` times. Without GQA, ``G = 1``. Inputs without
    a heads dim, ``(N, E)``, get one. The backward sums a key or value gradient over the
    ``G`` axis (:func:`sum_over_group`): the heads of a group all used the same one.
    """
    N_q, E = query.shape[-2:]
    lead = query.shape[:-3] if query.ndim >= 3 else ()
    heads = query.shape[-3] if query.ndim >= 3 else 1
    q = xp.reshape(query, lead + (heads // groups, groups, N_q, E))
    k = xp.reshape(key, lead + (heads // groups, 1) + key.shape[-2:])
    v = None if value is None else xp.reshape(value, lead + (heads // groups, 1) + value.shape[-2:])
    if mask is not None:
        padded = (1,) * (query.ndim - mask.ndim) + tuple(mask.shape)
        mask_heads = padded[-3] if query.ndim >= 3 else 1
        split = (1, 1) if mask_heads == 1 else (heads // groups, groups)
        mask = xp.reshape(mask, padded[:-3] + split + padded[-2:])
    return q, k, v, mask


def sum_over_group(xp, grad):
    """A key or value gradient in the layout of :func:`gqa_layout`, ``(..., H_kv, G, N_k, ·)``,
    summed over the ``G`` query heads of each group: ``(..., H_kv, 1, N_k, ·)``."""
    return xp.sum(grad, axis=-3, keepdims=True) if grad.shape[-3] > 1 else grad
