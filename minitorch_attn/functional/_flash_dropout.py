"""Dropout for flash attention from a counter-based hash, so any tile's mask can be regenerated.

A random stream drawn in loop order would give the forward (query blocks outside) and the
backward (key blocks outside) different masks. Instead each weight's fate is a pure
function of its coordinates: keep (b, i, j) iff hash(seed, b, i, j) >= p * 2**32, in the
style of Philox/"counter-based" generators (Salmon et al., SC'11), here with the
lowbias32 integer hash (C. Wellons), which any array namespace evaluates on uint32.
"""

from __future__ import annotations

import math

from ..core.backend import get_backend
from ..core.tensor import Tensor


def dropout_mask(seed, batch_shape, N_q, N_k, dropout_p, device=None):
    """The keep-mask ``flash_attention`` uses for a seed: a bool Tensor ``(*batch_shape, N_q, N_k)``.

    ``batch_shape`` is the query's shape without its last two dims, ``(*batch, H_q)``;
    True marks kept weights. Element ``(b, i, j)`` (``b`` the flat batch-head index) is
    kept when ``hash(seed, b, i, j) >= dropout_p * 2**32`` for the counter-based hash of
    :func:`_keep_tile`, so any tile can be regenerated in any order. Forms the full
    ``(N_q, N_k)`` matrix: for tests and for naive attention with the same mask.
    """
    backend = get_backend(device)
    xp = backend.xp
    row_keys = _row_keys(xp, backend.device, seed, tuple(batch_shape) + (1, 1))
    return Tensor(_keep_tile(xp, backend.device, row_keys, 0, N_q, 0, N_k, _drop_threshold(dropout_p)))


def _hash32(x):
    """lowbias32: a bijection of uint32 whose output bits each depend on every input bit."""
    x = x ^ (x >> 16)
    x = x * 0x7FEB352D
    x = x ^ (x >> 15)
    x = x * 0x846CA68B
    return x ^ (x >> 16)


def _row_keys(xp, device, seed, shape):
    """One uint32 key per (batch, head) slice, shape ``shape`` (ending in (1, 1)): a hash of
    the seed (both halves) and the slice's flat index."""
    count = math.prod(shape)
    index = xp.reshape(xp.arange(count, dtype=xp.uint32, device=device), shape)
    low, high = seed & 0xFFFFFFFF, (seed >> 32) & 0xFFFFFFFF
    return _hash32(_hash32(index ^ low) ^ high)


def _keep_tile(xp, device, row_keys, i0, i1, j0, j1, threshold):
    """Keep-mask of one tile: bool ``(..., i1 - i0, j1 - j0)``, independent of the tiling."""
    rows = xp.arange(i0, i1, dtype=xp.uint32, device=device)[:, None]
    cols = xp.arange(j0, j1, dtype=xp.uint32, device=device)[None, :]
    return _hash32(_hash32(row_keys + rows) ^ _hash32(cols ^ 0x9E3779B9)) >= threshold


def _drop_threshold(dropout_p):
    """The uint32 below which a hash means "dropped": ``P(hash < t) = t / 2**32 ≈ p``."""
    return min(int(round(dropout_p * 2**32)), 2**32 - 1)


def _keep_scale(dropout_p):
    """Inverted dropout: survivors are scaled by ``1 / (1 - p)``; ``p = 1`` keeps nothing (0)."""
    return 0.0 if dropout_p >= 1.0 else 1.0 / (1.0 - dropout_p)
