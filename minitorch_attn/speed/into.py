"""Operations that write their result into an array the caller has just made.

speed: every NumPy operation that returns a new array allocates it and makes one more
trip through memory to write it. Where a kernel holds a fresh temporary that nothing
else reads (the scores of one attention call, the ``-x`` of one SiLU), these helpers
overwrite it instead: the same numbers, one allocation fewer. NumPy and CuPy take
``out=`` and ``copyto``; the array API standard has neither, so on array-api-strict each
helper computes a new array, as the plain formula would.

The caller must own the array it passes: never a saved tensor, an input, or a view of one.
"""

from __future__ import annotations


def exp_(xp, x):
    """``exp(x)``, overwriting ``x`` where the namespace takes ``out=`` (NumPy, CuPy)."""
    try:
        return xp.exp(x, out=x)
    except TypeError:  # array-api-strict: the standard has no out=
        return xp.exp(x)


def fill_where_not_(xp, x, keep, value):
    """``where(keep, x, value)``, writing ``value`` into ``x`` where ``keep`` is False
    (``keep`` broadcasts against ``x``). speed: on the (16, 4, 64, 64) float32 scores of the
    default GPT with its causal mask, 0.60 ms for ``where`` against 0.22 ms in place."""
    copyto = getattr(xp, "copyto", None)          # NumPy, CuPy; not the array API standard
    if copyto is None:
        return xp.where(keep, x, xp.asarray(value, dtype=x.dtype, device=getattr(x, "device", None)))
    copyto(x, value, where=~keep)
    return x
