"""Gradient-check entries for LayerNorm and RMSNorm."""

import minitorch_attn.functional as F

from .suite import Entry

ENTRIES = [
    Entry("layer_norm (weight, bias)", lambda d: [d.randn(3, 6), d.randn(6), d.randn(6)],
          lambda x, w, b: F.layer_norm(x, (6,), w, b)),
    Entry("layer_norm (2 trailing dims)", lambda d: [d.randn(2, 3, 2, 2), d.randn(2, 2), d.randn(2, 2)],
          lambda x, w, b: F.layer_norm(x, (2, 2), w, b)),
    Entry("layer_norm (no affine, shifted)", lambda d: [d.randn(3, 5, scale=0.1)],
          lambda x: F.layer_norm(x + 100.0, 5)),
    Entry("rms_norm (weight)", lambda d: [d.randn(3, 6), d.randn(6)],
          lambda x, w: F.rms_norm(x, (6,), w)),
    Entry("rms_norm (2 dims, eps, no weight)", lambda d: [d.randn(2, 2, 3)],
          lambda x: F.rms_norm(x, (2, 3), eps=1e-5)),
]
