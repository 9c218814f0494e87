"""Rotary position embedding (RoPE), with a hand-written backward.

RoPE (Su et al., "RoFormer", arXiv:2104.09864, §3.4.2, eq. 34) gives attention its sense of
order without adding anything to the token embeddings: each query and key vector is cut
into ``d / 2`` pairs, and pair ``i`` of the vector at position ``m`` is rotated by the angle
``m θ_i``, with ``θ_i = base^(-2i/d)`` (``base`` = 10,000 in the paper). A rotation keeps
lengths, and rotating both ``q`` (at ``m``) and ``k`` (at ``n``) leaves their dot product
depending on ``m - n`` only::

    <R(m θ) q, R(n θ) k> = <q, R((n - m) θ) k>

so attention scores see relative positions, at any distance, with no parameter.

Which coordinates form a pair is a convention, and models differ:

* ``interleaved=False`` (the default): pair ``i`` is ``(x_i, x_{i + d/2})``, the two halves
  of the vector, as GPT-NeoX, LLaMA in Hugging Face transformers and most code today;
* ``interleaved=True``: pair ``i`` is ``(x_{2i}, x_{2i+1})``, adjacent coordinates, as the
  paper's eq. 34, GPT-J and Meta's original LLaMA code.

The two conventions give different numbers for the same weights (they permute the
coordinates), so a model must be run with the one it was trained with. The name of the
flag is that of FlashAttention's ``apply_rotary_emb``.
"""

from __future__ import annotations

import math
import numbers

from ..core.autograd import Function
from ..core.factories import arange
from ..core.ops import broadcast_shapes
from ..core.tensor import Tensor
from ._checks import _check_flag, _check_float


def _rotate(xp, x, cos, sin, interleaved):
    """Rotate every pair ``(a, b)`` of the last dim of ``x`` by the angle whose cosine and
    sine are ``cos, sin`` (``(..., d/2)``, broadcast against the pairs)::

        a' = a cos - b sin
        b' = a sin + b cos
    """
    if interleaved:  # pairs (x_2i, x_2i+1)
        pairs = xp.reshape(x, (*x.shape[:-1], x.shape[-1] // 2, 2))
        a, b = pairs[..., 0], pairs[..., 1]
        rotated = xp.stack([a * cos - b * sin, a * sin + b * cos], axis=-1)
        return xp.reshape(rotated, x.shape)
    half = x.shape[-1] // 2  # pairs (x_i, x_i+d/2): x = [a, b]
    a, b = x[..., :half], x[..., half:]
    # speed: the same two lines over whole rows, [a, b] [cos, cos] + [b, a] [-sin, sin],
    # instead of six products and sums over half rows (strided views) and a concat of the
    # halves: 0.60 -> 0.21 ms for float32 (16, 4, 64, 32) queries; the same numbers, since
    # a cos + b (-sin) is a cos - b sin in floating point too
    out = x * xp.concat([cos, cos], axis=-1)
    swapped = xp.concat([b, a], axis=-1)
    swapped *= xp.concat([-sin, sin], axis=-1)
    out += swapped
    return out


class RotaryEmbedding(Function):
    r"""RoPE (arXiv:2104.09864, §3.4.2, eqs. 34-35) of ``x (..., T, d)`` at ``positions``.

    Forward::

        1. θ_i   = base^(-2i/d),  i = 0 .. d/2 - 1        (float64)
        2. φ_ti  = position_t · θ_i                        (..., T, d/2)
        3. y     = R(φ) x: each pair (a, b) -> (a cos φ - b sin φ, a sin φ + b cos φ)

    Backward: step 3 is linear in x with an orthogonal matrix (a block of 2 x 2 rotations),
    so :math:`dx = R(\varphi)^\top g`, and the transpose of a rotation is the rotation by
    minus the angle. 3: :math:`dx = R(-\varphi)\,g`, for each pair :math:`(g_a, g_b)` of ``g``:

    .. math::

        dx_a = g_a \cos\varphi + g_b \sin\varphi,
        \qquad
        dx_b = -g_a \sin\varphi + g_b \cos\varphi

    2-1: the angles are constants: positions get no gradient.

    The angles are computed in float64 and rounded once to ``x``'s dtype, so float32
    rotations stay accurate at positions in the thousands.
    """

    @staticmethod
    def forward(ctx, x, positions, base=10000.0, interleaved=False):
        xp = ctx.xp
        d = x.shape[-1]
        i = xp.arange(d // 2, dtype=xp.float64, device=ctx.backend.device)
        theta = xp.exp(i * (-2.0 * math.log(base) / max(d, 1)))  # 1 (d = 0: no pairs, i empty)
        angles = xp.astype(positions, xp.float64)[..., None] * theta  # 2
        cos, sin = xp.astype(xp.cos(angles), x.dtype), xp.astype(xp.sin(angles), x.dtype)
        ctx.save_for_backward(cos, sin)
        ctx.interleaved = interleaved
        return _rotate(xp, x, cos, sin, interleaved)  # 3

    @staticmethod
    def backward(ctx, grad_output):
        cos, sin = ctx.saved_tensors
        return _rotate(ctx.xp, grad_output, cos, -sin, ctx.interleaved), None  # 3: R(-φ) g


def rotary_embedding(
    x: Tensor, positions: Tensor | None = None, base: float = 10000.0, interleaved: bool = False
) -> Tensor:
    """Rotary position embedding (RoPE; Su et al., arXiv:2104.09864, §3.4.2): rotate each
    pair of coordinates of ``x`` by its position times a fixed frequency.

    Apply it to the queries and the keys of attention (not to the values), after the
    projections and the split into heads; their dot products then depend only on how far
    apart the two positions are.

    Args:
        x: ``(..., seq_len, d)``, e.g. ``(batch, heads, seq_len, d_k)``; float32 or float64;
            ``d`` even.
        positions: the position of each row, an int (or float) Tensor of shape ``(seq_len,)``
            or broadcastable to ``x.shape[:-1]``, on ``x``'s device; default
            ``arange(seq_len)``. Pass ``arange(offset, offset + seq_len)`` for tokens that
            continue a cached sequence. Positions get no gradient.
        base: the base of the frequencies ``θ_i = base^(-2i/d)`` (10,000 in the paper and
            LLaMA 2; larger bases rotate slower and reach further).
        interleaved: False (default): pairs ``(x_i, x_{i+d/2})``, the split halves of
            GPT-NeoX and LLaMA in Hugging Face transformers. True: adjacent pairs
            ``(x_{2i}, x_{2i+1})``, as the paper's eq. 34 and GPT-J.
    Returns:
        a Tensor like ``x`` (shape and dtype).
    Raises:
        TypeError: if ``x`` is not a float Tensor, or ``positions`` is not a Tensor of
            numbers (or None).
        ValueError: if ``x`` has fewer than 2 dims or an odd last dim, ``positions`` does
            not broadcast to ``x.shape[:-1]``, or ``base`` is not a finite number > 0.

    Catalogue record: ``opinfo/rotary.py`` (its samples, references and checks).
    """
    _check_float(x, "rotary_embedding")
    if x.ndim < 2 or x.shape[-1] % 2:
        raise ValueError(f"rotary_embedding: expected x of shape (..., seq_len, d) with an even d, got {x.shape}")
    if isinstance(base, bool) or not isinstance(base, numbers.Real) or not 0 < base < math.inf:
        raise ValueError(f"rotary_embedding: base must be a finite number > 0, got {base!r}")
    _check_flag(interleaved, "rotary_embedding: interleaved")
    if positions is None:
        positions = arange(x.shape[-2], device=x.device)
    if not isinstance(positions, Tensor) or positions.dtype == "bool":
        raise TypeError(
            f"rotary_embedding: positions must be a Tensor of ints or floats (or None), "
            f"got {getattr(positions, 'dtype', type(positions).__name__)}"
        )
    rows = tuple(x.shape[:-1])
    if broadcast_shapes(tuple(positions.shape), rows) != rows:
        raise ValueError(
            f"rotary_embedding: positions of shape {positions.shape} do not broadcast to "
            f"x's rows {rows} (expected (seq_len,) = ({x.shape[-2]},) or x.shape[:-1])"
        )
    return RotaryEmbedding.apply(x, positions, base=float(base), interleaved=interleaved)


__all__ = ["rotary_embedding"]  # what minitorch_attn.functional exports
