"""What every attention kernel shares: argument checks, masks, causality and grouped-query setup.

Both :mod:`.attention` (the dense kernel) and :mod:`.flash` (the blockwise one) import
from here and never from each other:

* :func:`attention_setup` checks the arguments of an attention call and returns the GQA
  group size and the scale;
* :func:`causal_mask` and :func:`causal_keep` give the causal pattern, top-left or
  bottom-right aligned;
* :func:`prepare_attention_mask` turns ``attn_mask`` / ``is_causal`` into a keep-mask and
  an additive bias that a kernel applies to its scores.
"""

from __future__ import annotations

import math
import numbers

from ..core.backend import get_backend
from ..core.tensor import FLOAT_DTYPES, Tensor, dtype_name
from ._checks import _check_probability

CAUSAL_ALIGNMENTS = ("top_left", "bottom_right")


def _causal_keep(xp, device, L, S, alignment="top_left", window=None):
    """Raw bool array ``(L, S)``: True where query ``i`` may look at key ``j``.

    ``top_left`` (PyTorch's ``is_causal``): ``j <= i``.
    ``bottom_right`` (FlashAttention >= 2.1, KV-cache decoding, where the L queries are the
    *last* L positions of the S keys): ``j <= i + S - L``.
    ``window`` (sliding-window attention): also ``j > i + offset - window``, the last
    ``window`` keys up to the query's own position.
    """
    if alignment not in CAUSAL_ALIGNMENTS:
        raise ValueError(f"causal alignment must be one of {CAUSAL_ALIGNMENTS}, got {alignment!r}")
    offset = 0 if alignment == "top_left" else S - L
    rows = xp.arange(L, device=device)[:, None]
    cols = xp.arange(S, device=device)[None, :]
    keep = cols <= rows + offset
    return keep if window is None else keep & (cols > rows + offset - window)


def causal_mask(L, S=None, alignment="top_left", device=None, window=None):
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
        window: sliding-window attention (Beltagy et al., arXiv:2004.05150, §3.1; Mistral):
            each query sees only the last ``window`` keys up to its own position, itself
            included. None (default): every earlier key.

    Raises:
        ValueError: for a negative size, a window < 1 or an unknown alignment.
    """
    S = L if S is None else S
    for name, n in (("L", L), ("S", S)):
        if not isinstance(n, int) or isinstance(n, bool) or n < 0:
            raise ValueError(f"causal_mask: {name} must be a non-negative int, got {n!r}")
    if window is not None and (not isinstance(window, int) or isinstance(window, bool) or window < 1):
        raise ValueError(f"causal_mask: window must be an int >= 1 (or None), got {window!r}")
    backend = get_backend(device)
    return Tensor(_causal_keep(backend.xp, backend.device, L, S, alignment, window))


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
