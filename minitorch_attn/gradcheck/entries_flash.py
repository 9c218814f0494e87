"""Gradient-check entries for flash attention (minitorch_attn.flash).

Blocks are tiny (2 or 3) on lengths 5 to 7, so every entry runs several query and key
blocks, ragged last blocks and, when causal, skipped and diagonal-crossing tiles. Dropout
reseeds before every call, so the finite differences see the same keep-mask as the
backward. Entries that return the log-sum-exp check its gradient too.
"""

import numpy as np

import minitorch_attn as mt
from minitorch_attn.functional import flash_attention

from .suite import Entry
from ._inputs import seeded


def flash(**options):
    """``flash_attention`` with tiny blocks (overridable) and the given options."""
    options = {"block_size_q": 2, "block_size_k": 3, **options}
    return lambda q, k, v, *mask: flash_attention(q, k, v, *mask, **options)


def padding_mask(d, batch, S):
    """A key-padding mask ``(batch, 1, 1, S)``: the last keys of each sequence are padding
    (at least one key kept per sequence)."""
    lengths = d.rng.integers(1, S + 1, batch)
    keep = np.arange(S)[None, :] < lengths[:, None]
    return mt.tensor(keep[:, None, None, :], device=d.device)


def bias_with_neg_inf(d, *shape):
    """An additive bias that requires grad, about a quarter -inf (never a whole row)."""
    values = d.rng.standard_normal(shape)
    blocked = d.rng.random(shape) < 0.25
    blocked[..., 0] = False
    return d._tensor(np.where(blocked, -np.inf, values))


ENTRIES = [
    Entry("flash (N_q > N_k, ragged blocks, lse)",
          lambda d: [d.randn(2, 2, 7, 3), d.randn(2, 2, 5, 3), d.randn(2, 2, 5, 2)],
          flash(return_lse=True)),
    Entry("flash (N_q < N_k, blocks 1 and 4)",
          lambda d: [d.randn(1, 2, 5, 3), d.randn(1, 2, 7, 3), d.randn(1, 2, 7, 4)],
          flash(block_size_q=1, block_size_k=4)),
    Entry("flash (causal, top-left, scale)",
          lambda d: [d.randn(2, 1, 7, 3), d.randn(2, 1, 7, 3), d.randn(2, 1, 7, 2)],
          flash(is_causal=True, scale=0.7, return_lse=True)),
    Entry("flash (causal, bottom-right, N_q < N_k)",
          lambda d: [d.randn(1, 2, 5, 3), d.randn(1, 2, 7, 3), d.randn(1, 2, 7, 3)],
          flash(is_causal=True, causal_alignment="bottom_right", return_lse=True)),
    Entry("flash (causal, bottom-right, N_q > N_k)",  # the first N_q - N_k queries see no key: out 0
          lambda d: [d.randn(1, 2, 7, 2), d.randn(1, 2, 5, 2), d.randn(1, 2, 5, 3)],
          flash(is_causal=True, causal_alignment="bottom_right")),
    Entry("flash (key-padding mask)",
          lambda d: [d.randn(2, 2, 5, 3), d.randn(2, 2, 6, 3), d.randn(2, 2, 6, 2), padding_mask(d, 2, 6)],
          flash(return_lse=True)),
    Entry("flash (additive -inf mask, grad)",
          lambda d: [d.randn(2, 2, 5, 3), d.randn(2, 2, 6, 3), d.randn(2, 2, 6, 2), bias_with_neg_inf(d, 2, 1, 5, 6)],
          flash()),
    Entry("flash (GQA, broadcast bias, grad)",
          lambda d: [d.randn(1, 4, 5, 3), d.randn(1, 2, 6, 3), d.randn(1, 2, 6, 2), d.randn(4, 1, 6)],
          flash(enable_gqa=True, return_lse=True)),
    Entry("flash (GQA, causal)",
          lambda d: [d.randn(2, 6, 5, 2), d.randn(2, 2, 5, 2), d.randn(2, 2, 5, 3)],
          flash(enable_gqa=True, is_causal=True)),
    Entry("flash (dropout 0.3, causal)",
          lambda d: [d.randn(1, 2, 6, 3), d.randn(1, 2, 6, 3), d.randn(1, 2, 6, 2)],
          seeded(flash(dropout_p=0.3, is_causal=True))),
]
