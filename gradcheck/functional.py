"""Gradient-check entries for the Transformer operations of minitorch_attn.functional.

Inputs stay away from kinks (ReLU at 0). Random ops (dropout, attention dropout) reseed
before every call, so the finite differences see the same mask as the backward.
"""

import numpy as np

import minitorch_attn as mt
import minitorch_attn.functional as F

from . import Entry


def seeded(fn, seed=0):
    """``fn`` with :func:`mt.manual_seed` called first: one dropout mask for every evaluation."""
    def call(*args):
        mt.manual_seed(seed)
        return fn(*args)
    return call


def with_neg_inf(d, *shape):
    """Normal values with about a third set to -inf (never a whole row along the last dim)."""
    values = d.rng.standard_normal(shape)
    masked = d.rng.random(shape) < 0.35
    masked[..., 0] = False
    return d._tensor(np.where(masked, -np.inf, values))


def float_mask(d, *shape):
    """An additive attention bias with some -inf entries (never a whole row)."""
    bias = d.rng.standard_normal(shape)
    blocked = d.rng.random(shape) < 0.3
    blocked[..., 0] = False
    return d._tensor(np.where(blocked, -np.inf, bias), requires_grad=False)


ENTRIES = [
    # softmax family
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
    # activations and dropout
    Entry("gelu (exact)", lambda d: [d.randn(4, 5, scale=2.0)], F.gelu),
    Entry("gelu (tanh)", lambda d: [d.randn(4, 5, scale=2.0)], lambda x: F.gelu(x, approximate="tanh")),
    Entry("relu", lambda d: [d.away_from(4, 5)], F.relu),
    Entry("dropout (p=0.3)", lambda d: [d.randn(4, 6)], seeded(lambda x: F.dropout(x, 0.3))),
    # normalization
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
    # linear and embedding
    Entry("linear (bias, batched)", lambda d: [d.randn(2, 3, 4), d.randn(5, 4), d.randn(5)], F.linear),
    Entry("linear (no bias)", lambda d: [d.randn(3, 4), d.randn(2, 4)], F.linear),
    Entry("embedding (repeated indices)",
          lambda d: [mt.tensor([[0, 3, 3], [1, 0, 3]], device=d.device), d.randn(4, 3)], F.embedding),
    # attention
    Entry("sdpa", lambda d: [d.randn(2, 3, 4), d.randn(2, 5, 4), d.randn(2, 5, 3)],
          F.scaled_dot_product_attention),
    Entry("sdpa (causal, 4-D, scale)", lambda d: [d.randn(1, 2, 4, 3), d.randn(1, 2, 4, 3), d.randn(1, 2, 4, 3)],
          lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=0.7)),
    Entry("sdpa (bool mask, empty row)",
          lambda d: [d.randn(2, 3, 4), d.randn(2, 4, 4), d.randn(2, 4, 2),
                     mt.tensor([[True, False, True, False], [False] * 4, [True] * 4], device=d.device)],
          lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m)),
    Entry("sdpa (float mask with grad)",
          lambda d: [d.randn(2, 3, 4), d.randn(2, 4, 4), d.randn(2, 4, 2), d.randn(3, 4)],
          lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m)),
    Entry("sdpa (-inf bias, bottom-right L > S)",
          lambda d: [d.randn(2, 4, 3), d.randn(2, 3, 3), d.randn(2, 3, 3), float_mask(d, 2, 4, 3)],
          lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m)
          + F.scaled_dot_product_attention(q, k, v, is_causal=True, causal_alignment="bottom_right")),
    Entry("sdpa (GQA, broadcast mask)",
          lambda d: [d.randn(1, 4, 3, 2), d.randn(1, 2, 5, 2), d.randn(1, 2, 5, 3), d.mask(4, 1, 5)],
          lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m | (mt.arange(5, device=m.device) == 0),
                                                            enable_gqa=True)),
    Entry("sdpa (dropout 0.3)", lambda d: [d.randn(2, 3, 4), d.randn(2, 5, 4), d.randn(2, 5, 3)],
          seeded(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, dropout_p=0.3))),
    Entry("attention_weights (GQA, causal)", lambda d: [d.randn(1, 2, 3, 4), d.randn(1, 1, 3, 4)],
          lambda q, k: F.attention_weights(q, k, is_causal=True, enable_gqa=True)),
]
