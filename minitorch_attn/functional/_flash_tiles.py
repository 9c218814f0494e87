"""The tile-level pieces that :mod:`.flash`'s forward (Algorithm 1) and backward (Algorithm 2) share.

A tile is the block of queries ``i0..i1-1`` against the block of keys ``j0..j1-1``. Both
passes ask the same functions which tiles the causal rule skips and how a tile's scores
``S_ij`` are formed, so they visit and mask exactly the same entries.
"""

from __future__ import annotations

import math

from ..core.tensor import _is_int
from ._attention_common import causal_keep


def _check_block_size(value, default, name):
    if value is None:
        return default
    if not _is_int(value) or value < 1:
        raise ValueError(f"flash_attention: {name} must be an int >= 1, got {value!r}")
    return int(value)


def _tile_visibility(offset, i0, i1, j0, j1):
    """Which entries of tile (queries i0..i1-1, keys j0..j1-1) the causal rule
    ``j <= i + offset`` lets through: "all", "none" or "some"."""
    if offset is None or j1 - 1 <= i0 + offset:  # its top-right corner is allowed
        return "all"
    if j0 > i1 - 1 + offset:  # its bottom-left corner is not
        return "none"
    return "some"


def _scores(xp, device, Q_i, K_T_j, mask, offset, visible, i0, i1, j0, j1):
    """One tile of scores ``S_ij = Q_i K_jᵀ`` (``Q`` already scaled), with the attention
    mask and, on a tile that crosses the causal diagonal, the causal rule applied (-inf
    where not allowed)."""
    S_ij = xp.matmul(Q_i, K_T_j)
    if mask is not None:
        mask_ij = _mask_tile(mask, i0, i1, j0, j1)
        if mask_ij.dtype == xp.bool:
            S_ij = xp.where(mask_ij, S_ij, -math.inf)
        else:
            S_ij = S_ij + mask_ij  # additive bias (may hold -inf itself)
    if visible == "some":
        S_ij = xp.where(causal_keep(xp, device, i0, i1, j0, j1, offset), S_ij, -math.inf)
    return S_ij


def _mask_tile(mask, i0, i1, j0, j1):
    """The part of a broadcastable mask over a tile (its size-1 axes are kept as they are)."""
    rows = slice(i0, i1) if mask.shape[-2] > 1 else slice(None)
    cols = slice(j0, j1) if mask.shape[-1] > 1 else slice(None)
    return mask[..., rows, cols]


def _add_tile(xp, dmask, dS_ij, i0, i1, j0, j1):
    """``dmask[tile] += dS_ij``, first summing ``dS_ij`` over the axes where the mask broadcast."""
    axes = tuple(a for a in range(dS_ij.ndim) if dmask.shape[a] == 1 and dS_ij.shape[a] > 1)
    if axes:
        dS_ij = xp.sum(dS_ij, axis=axes, keepdims=True)
    rows = slice(i0, i1) if dmask.shape[-2] > 1 else slice(None)
    cols = slice(j0, j1) if dmask.shape[-1] > 1 else slice(None)
    dmask[..., rows, cols] += dS_ij


def _join_blocks(xp, blocks, empty_shape, dtype, device):
    """The per-block results joined along the sequence axis (an empty sequence has no
    block: then an array of ``empty_shape``, of length 0 there)."""
    if not blocks:
        return xp.zeros(empty_shape, dtype=dtype, device=device)
    return xp.concat(blocks, axis=-2)
