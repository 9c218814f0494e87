"""Sums along the rows or down the columns of an array, as matrix products with ones.

speed: NumPy's ``sum`` along a short last axis (the 64 keys of an attention row, the 103
classes of a logits row, the 128 features of a LayerNorm row) goes row by row; a matrix
product with a column of ones is one BLAS call that adds the same numbers in another order
(equal to rounding). Measured on one core, float32, the default GPT's arrays:

=======================================  ===========  ==========
rows summed                              ``xp.sum``   ``@ ones``
=======================================  ===========  ==========
(16, 4, 64, 64) attention, last axis        176 µs       40 µs
(1024, 103) logits, last axis                67 µs       20 µs
(1024, 128) LayerNorm rows, last axis        58 µs       21 µs
(1024, 512) down the columns (a bias)       124 µs       58 µs
=======================================  ===========  ==========

The kernels' formulas keep their names for these sums (``mean``, ``sum_rows``); only
the helpers they call live here.
"""

from __future__ import annotations

import functools
import math


def last_axis_sums(xp, a):
    """``xp.sum(a, axis=-1, keepdims=True)`` for an array ``(..., n)``: ``(..., 1)``."""
    n = a.shape[-1]
    rows = xp.reshape(a, (math.prod(a.shape[:-1]), n))
    return xp.reshape(rows @ _ones(xp, (n, 1), a.dtype, a.device), (*a.shape[:-1], 1))


def column_sums(xp, matrix):
    """``xp.sum(matrix, axis=0)`` for a matrix ``(m, n)``: ``(n,)``."""
    m, n = matrix.shape
    return xp.reshape(_ones(xp, (1, m), matrix.dtype, matrix.device) @ matrix, (n,))


@functools.lru_cache(maxsize=64)
def _ones(xp, shape, dtype, device):
    """Ones, made once per namespace, shape, dtype and device (only ever read)."""
    return xp.ones(shape, dtype=dtype, device=device)
