"""Exponentials with the row maximum subtracted: the numerically safe forms that the
softmax family (:mod:`minitorch_attn.functional.softmax`) and dense attention
(:mod:`minitorch_attn.functional.attention`) start from.

With ``m`` the maximum of a row, ``z = x - m``: the largest exponential is ``exp(0) = 1``,
so none overflows, and ``lse(x) = m + lse(z)`` for every constant ``m``, so the shift
changes no result and no gradient (``m`` needs no derivative of its own).
"""

from __future__ import annotations

import math

from ..speed import last_axis_sums


def _shifted_logsumexp(xp, x, axis):
    """``(z, lse_z)`` for a raw array: ``z = x - m`` with ``m`` the row maximum along
    ``axis``, and ``lse_z = log Σ_j exp(z_j)``, kept as a size-1 dim.

    ``lse(x) = m + lse_z``, but callers use ``z - lse_z`` (which is ``x - lse(x)``) so that
    a row far from 0, such as ``[-1e4, -1e4 - 1]`` in float32, keeps its digits: ``m + lse_z``
    would round ``lse_z`` to the coarse spacing of floats near ``m``.

    Why the shift: the largest exponential is ``exp(0) = 1``, so none overflows. Why it does
    not change the result or any gradient taken through it: ``lse(x) = m + lse(x - m)`` for
    every constant ``m``, so ``x - lse(x)`` is one and the same function of ``x`` whichever
    ``m`` the code picks, and ``m`` needs no derivative of its own.

    A row whose maximum is ``-inf`` (every entry ``-inf``) is shifted by 0 instead, and so
    is a row of length 0: their sum is 0 and their ``lse_z`` is ``-inf`` (the log of an
    empty sum), formed without taking ``log(0)``. A row holding NaN or ``+inf`` is shifted
    by its maximum like any other: ``x - m`` then holds NaN (``inf - inf``), so does the
    sum, and the whole row comes out NaN, as in PyTorch (a sum that is NaN is not an
    empty one).
    """
    z, _, total = _shifted_exp(xp, x, axis)
    return z, xp.where(total == 0, -math.inf, xp.log(xp.where(total == 0, 1.0, total)))


def _shifted_exp(xp, x, axis):
    """``(z, e, total)`` for a raw array: ``z = x - m`` (``m`` the row maximum along
    ``axis``, or 0 for a row of ``-inf`` or of length 0, as in :func:`_shifted_logsumexp`),
    ``e = exp(z)`` and ``total = Σ_j e_j``, kept as a size-1 dim. ``e / total`` is the
    softmax of the row; dense attention takes it so, without a second exponential."""
    m = xp.max(x, axis=axis, keepdims=True) if x.shape[axis] else xp.sum(x, axis=axis, keepdims=True)  # empty: 0
    shift = xp.where(m == -math.inf, 0.0, m)
    z = x - shift
    e = xp.exp(z)
    last = axis in (-1, x.ndim - 1)  # speed: a product with ones (_sums.py)
    total = last_axis_sums(xp, e) if last else xp.sum(e, axis=axis, keepdims=True)
    return z, e, total
