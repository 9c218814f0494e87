"""Gradient-check entries for dense attention: masks, causality, GQA, dropout."""

import minitorch_attn as mt
import minitorch_attn.functional as F

from .suite import Entry
from ._inputs import float_mask, seeded

ENTRIES = [
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
    Entry("sdpa (-inf bias, bottom-right N_q > N_k)",
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
