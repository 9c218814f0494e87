"""Gradient-check entries for the linear map and the embedding lookup."""

import minitorch_attn as mt
import minitorch_attn.functional as F

from .suite import Entry

ENTRIES = [
    Entry("linear (bias, batched)", lambda d: [d.randn(2, 3, 4), d.randn(5, 4), d.randn(5)], F.linear),
    Entry("linear (no bias)", lambda d: [d.randn(3, 4), d.randn(2, 4)], F.linear),
    Entry("embedding (repeated indices)",
          lambda d: [mt.tensor([[0, 3, 3], [1, 0, 3]], device=d.device), d.randn(4, 3)], F.embedding),
]
