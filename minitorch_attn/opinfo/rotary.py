"""Records of rotary position embeddings, :mod:`minitorch_attn.functional.rotary`: both
pairings, explicit positions (a cache's offset, one row of positions per batch row)."""

import numpy as np

import minitorch_attn as mt
import minitorch_attn.functional as F

from .gradients import BY_LINEARITY
from .record import OneInput, OpInfo, Sample, register

EMPTY, BROADCAST = frozenset({"empty"}), frozenset({"broadcast"})


def np_rotary(x, positions=None, base=10000.0, interleaved=False):
    """Su et al. 2021, eq. 34: pair i of position m turned by the angle m θ_i, θ_i = base^(-2i/d)."""
    d = x.shape[-1]
    positions = np.arange(x.shape[-2]) if positions is None else np.asarray(positions, dtype=np.float64)
    angle = positions[..., None] * base ** (-np.arange(0, d, 2) / d)  # (..., seq, d/2)
    cos, sin = np.cos(angle), np.sin(angle)
    a, b = (x[..., 0::2], x[..., 1::2]) if interleaved else (x[..., : d // 2], x[..., d // 2 :])
    ra, rb = a * cos - b * sin, a * sin + b * cos
    if interleaved:
        return np.stack([ra, rb], axis=-1).reshape(x.shape)
    return np.concatenate([ra, rb], axis=-1)


RECORDS = register(
    __name__,
    [
        OpInfo(
            "rotary_embedding",
            F.rotary_embedding,
            ("F.rotary_embedding",),
            (
                Sample("rotary (split halves)", lambda d: [d.randn(2, 3, 5, 4)]),
                Sample(
                    "rotary (adjacent pairs, base 100)",
                    lambda d: [d.randn(2, 5, 6)],
                    kwargs=dict(base=100.0, interleaved=True),
                ),
                Sample(
                    "rotary (positions 7..11, as a cache)",
                    lambda d: [d.randn(1, 2, 5, 8), mt.arange(7, 12, device=d.device)],
                ),
                Sample(
                    "rotary (positions per batch row)",
                    lambda d: [d.randn(2, 4, 6), d.integers(0, 50, 2, 4)],
                    kwargs=dict(interleaved=True),
                    edges=BROADCAST,
                    gradcheck=True,
                ),
                Sample("rotary (no positions)", lambda d: [d.randn(2, 0, 4)], edges=EMPTY),
            ),
            "Su et al. 2021 (arXiv:2104.09864, §3.4.2, eq. 34): a rotation R(mθ); its backward is R(-mθ) g",
            ref=np_rotary,
            ref_backward=BY_LINEARITY,
            torch_ref=None,
            task=None,
            n_ops=64,
            not_differentiable_in=("positions",),
            one_input=OneInput(
                lambda x: F.rotary_embedding(mt.concat([x, x], dim=1).reshape(1, 2, 6)), of_ints="TypeError"
            ),
            forward="y = R(mθ) x, pairs rotated by position m",
            backward="dx = R(-mθ) g",
        ),
    ],
)
