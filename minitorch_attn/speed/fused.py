"""Fused kernels: formulas of the training step computed with fewer passes over memory.

Each is the twin of a Function's plain lines, reached only through the switch of
:mod:`.switch` (off by default), and computes the same numbers bit for bit: the same
operations in the same order, only written into arrays the kernel has just made
(``out=``, ``-=``, ``/=``) instead of a new array per operation (an allocation and one
more trip through memory each). ``tests/test_speed_fused.py`` compares every twin with
its plain formula.

=================  ===========================================  ==================
twin               of                                           plain -> fused
=================  ===========================================  ==================
silu_sigmoid       ``SiLU.forward``'s ``s = σ(x)``              4.80 -> 2.41 ms
attention_weights  ``_attention_weights``: passes 1-3 of        9.99 -> 9.25 ms
                   ``ScaledDotProductAttention``
``adam_steps_``    ``Adam._update``'s steps 1-4                 3.99 -> 3.71 ms
=================  ===========================================  ==================

(one core, float32, ``python benchmarks/fused_bench.py``: forward + backward of the
default GPT's (16, 64, 344) SiLU gate and of its (16, 4, 64, 32) causal attention, and
one AdamW step over 24 parameters of its shapes; medians of alternating rounds on a busy
shared machine, which moves single figures by 10-30%.)

On array-api-strict, which has neither ``out=`` nor ``copyto``, each write is a new
array, as in the plain formula.
"""

from __future__ import annotations

import math

from .sums import last_axis_sums

EXP_CAP = 80.0  # the largest argument given to exp (e^80 is finite in float32), as in SiLU


def exp_(xp, x):
    """``exp(x)``, overwriting ``x`` where the namespace takes ``out=`` (NumPy, CuPy)."""
    try:
        return xp.exp(x, out=x)
    except TypeError:  # array-api-strict: the standard has no out=
        return xp.exp(x)


def fill_where_not_(xp, x, keep, value):
    """``where(keep, x, value)``, writing ``value`` into ``x`` where ``keep`` is False
    (``keep`` broadcasts against ``x``)."""
    copyto = getattr(xp, "copyto", None)  # NumPy, CuPy; not the array API standard
    if copyto is None:
        return xp.where(keep, x, xp.asarray(value, dtype=x.dtype, device=getattr(x, "device", None)))
    copyto(x, value, where=~keep)
    return x


def silu_sigmoid(backend, x):
    """``σ(x)`` as ``SiLU.forward`` computes it (``1 / (1 + e^-x)`` with ``e^-x`` capped
    at ``e^80``, and ``e^x`` where ``x < -80``), in fewer passes: the cap and the
    fallback are paid only when some ``x`` is below -80 or NaN (one reduction), and
    ``e^-x`` and ``1 + e^-x`` are written into ``-x``'s array."""
    xp = backend.xp
    low = x.size > 0 and not backend.all_false(~(x >= -EXP_CAP))
    e = exp_(xp, xp.minimum(-x, EXP_CAP) if low else -x)
    e += 1.0
    s = 1.0 / e
    if low:
        s = xp.where(x < -EXP_CAP, xp.exp(xp.minimum(x, -EXP_CAP)), s)
    return s


def attention_weights(xp, q, k_t, scale, bias, keeps):
    """``P = softmax(where(keep, scale · Q Kᵀ + bias, -inf))`` along the keys, as
    ``_attention_weights`` computes it (``k_t`` is ``Kᵀ`` as a row-major array, ``bias``
    None or added, ``keeps`` the boolean masks, each broadcasting against the scores):
    the masks, the shift by the row maximum, the exponential and the division are
    written into the scores' own array. A row with no key gets ``P = 0``."""
    S = scale * xp.matmul(q, k_t)
    if bias is not None:
        S = S + bias
    for keep in keeps:
        S = fill_where_not_(xp, S, keep, -xp.inf)
    m = xp.max(S, axis=-1, keepdims=True) if S.shape[-1] else xp.sum(S, axis=-1, keepdims=True)
    S -= xp.where(m == -math.inf, 0.0, m)
    e = exp_(xp, S)
    total = last_axis_sums(xp, e)
    e /= xp.where(total == 0, 1.0, total)
    return e


def adam_steps_(xp, p, grad, m, v, lr, beta1, beta2, eps, t):
    """Steps 1-4 of ``Adam._update`` written into ``m``, ``v`` and ``p`` (arrays of the
    optimizer's state and the parameter): the same operations in the same order
    (PyTorch's: ``p -= (lr / (1 - β1ᵗ)) (m / (sqrt(v) / sqrt(1 - β2ᵗ) + ε))``)."""
    m *= beta1
    m += (1 - beta1) * grad
    g2 = grad * grad
    g2 *= 1 - beta2
    v *= beta2
    v += g2
    denom = xp.sqrt(v)
    denom /= math.sqrt(1 - beta2**t)
    denom += eps
    step = m / denom
    step *= lr / (1 - beta1**t)
    p -= step
