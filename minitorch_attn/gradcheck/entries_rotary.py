"""Gradient-check entries for rotary position embeddings (both pairings, explicit positions)."""

import minitorch_attn as mt
import minitorch_attn.functional as F

from .suite import Entry

ENTRIES = [
    Entry("rotary (split halves)", lambda d: [d.randn(2, 3, 5, 4)],
          F.rotary_embedding),
    Entry("rotary (adjacent pairs, base 100)", lambda d: [d.randn(2, 5, 6)],
          lambda x: F.rotary_embedding(x, base=100.0, interleaved=True)),
    Entry("rotary (positions 7..11, as a cache)", lambda d: [d.randn(1, 2, 5, 8)],
          lambda x: F.rotary_embedding(x, mt.arange(7, 12, device=x.device))),
    Entry("rotary (positions per batch row)", lambda d: [d.randn(2, 4, 6), d.integers(0, 50, 2, 4)],
          lambda x, positions: F.rotary_embedding(x, positions, interleaved=True)),
]
