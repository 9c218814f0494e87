"""Gradient-check entries for GELU, ReLU (inputs away from its kink at 0) and dropout
(reseeded before every call, so the finite differences see the backward's mask)."""

import minitorch_attn.functional as F

from .suite import Entry
from ._inputs import seeded

ENTRIES = [
    Entry("gelu (exact)", lambda d: [d.randn(4, 5, scale=2.0)], F.gelu),
    Entry("gelu (tanh)", lambda d: [d.randn(4, 5, scale=2.0)], lambda x: F.gelu(x, approximate="tanh")),
    Entry("relu", lambda d: [d.away_from(4, 5)], F.relu),
    Entry("dropout (p=0.3)", lambda d: [d.randn(4, 6)], seeded(lambda x: F.dropout(x, 0.3))),
]
