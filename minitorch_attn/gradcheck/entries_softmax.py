"""Gradient-check entries for the softmax family: softmax, log_softmax, cross_entropy."""

import minitorch_attn as mt
import minitorch_attn.functional as F

import numpy as np

from .suite import Entry
from ._inputs import with_neg_inf


def padded_logits(d, *shape):
    """Normal logits whose last row is all -inf (a padding position, ignored by its target)."""
    values = d.rng.standard_normal(shape)
    values[-1] = -np.inf
    return d._tensor(values)

ENTRIES = [
    Entry("softmax (dim -1)", lambda d: [d.randn(3, 5)], F.softmax),
    Entry("softmax (dim 0, 3-D)", lambda d: [d.randn(4, 2, 3)], lambda x: F.softmax(x, dim=0)),
    Entry("softmax (-inf entries)", lambda d: [with_neg_inf(d, 3, 6)], F.softmax),
    Entry("log_softmax", lambda d: [d.randn(3, 5, scale=3.0)], F.log_softmax),
    Entry("log_softmax (dim 1)", lambda d: [d.randn(2, 4, 3)], lambda x: F.log_softmax(x, dim=1)),
    Entry("cross_entropy (mean, ignore_index)",
          lambda d: [d.randn(6, 5), mt.tensor([0, 4, -100, 2, 2, -100], device=d.device)],
          F.cross_entropy),
    Entry("cross_entropy (N,C,d, smoothing,sum)", lambda d: [d.randn(2, 4, 3), d.integers(0, 4, 2, 3)],
          lambda x, t: F.cross_entropy(x, t, label_smoothing=0.1, reduction="sum")),
    Entry("cross_entropy (none)", lambda d: [d.randn(4, 3), mt.tensor([1, -1, 0, 2], device=d.device)],
          lambda x, t: F.cross_entropy(x, t, ignore_index=-1, reduction="none")),
    Entry("cross_entropy (weight,smooth,ignore)",
          lambda d: [d.randn(6, 5), mt.tensor([0, 4, -100, 2, 2, 1], device=d.device),
                     d.uniform(5, low=0.2, high=2.0, requires_grad=False)],
          lambda x, t, w: F.cross_entropy(x, t, weight=w, label_smoothing=0.2)),
    Entry("cross_entropy (weight, -inf padding)",
          lambda d: [padded_logits(d, 4, 3), mt.tensor([2, 0, 1, -100], device=d.device),
                     d.uniform(3, low=0.2, high=2.0, requires_grad=False)],
          lambda x, t, w: F.cross_entropy(x, t, weight=w, reduction="none")),
]
