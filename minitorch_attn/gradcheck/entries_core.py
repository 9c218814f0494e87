"""Gradient-check entries for the engine and the primitive operations of minitorch_attn.core."""

import minitorch_attn as mt

from .suite import Entry


class FirstOnly(mt.Function):
    """``f(a, b) = 2a``: ``b`` takes part only through its shape, so its gradient is zero
    and backward says so with ``None``, which the engine treats as a zero gradient."""

    @staticmethod
    def forward(ctx, a, b):
        return a * 2

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output * 2, None


def first_only_of_a_non_leaf(a, b):
    """``FirstOnly(a, exp(b)) + b``: the None reaches a node that is not a leaf, and ``b``
    still gets its gradient (1) along the other path."""
    return FirstOnly.apply(a, b.exp()) + b

ENTRIES = [
    Entry("add (broadcast)", lambda d: [d.randn(3, 4), d.randn(4)], lambda a, b: a + b),
    Entry("sub (broadcast)", lambda d: [d.randn(2, 1, 3), d.randn(4, 1)], lambda a, b: a - b),
    Entry("mul (broadcast)", lambda d: [d.randn(2, 1, 4, 3), d.randn(2, 1, 4, 1)], lambda a, b: a * b),
    Entry("mul (same node twice)", lambda d: [d.randn(3, 2)], lambda a: a * a),
    Entry("div", lambda d: [d.randn(3, 4), d.uniform(3, 4, low=0.5, high=2.0)], lambda a, b: a / b),
    Entry("neg", lambda d: [d.randn(5)], lambda a: -a),
    Entry("pow (scalar exponent)", lambda d: [d.uniform(4, 3, low=0.5, high=2.0)], lambda a: a ** 2.5),
    Entry("exp", lambda d: [d.randn(3, 4)], mt.exp),
    Entry("log", lambda d: [d.uniform(3, 4, low=0.2, high=3.0)], mt.log),
    Entry("sqrt", lambda d: [d.uniform(3, 4, low=0.2, high=3.0)], mt.sqrt),
    Entry("tanh", lambda d: [d.randn(3, 4)], mt.tanh),
    Entry("abs", lambda d: [d.away_from(3, 4)], mt.abs),
    Entry("maximum", lambda d: [d.distinct(3, 4), d.distinct(3, 4)], mt.maximum),
    Entry("minimum (broadcast)", lambda d: [d.distinct(3, 4), d.distinct(4)], mt.minimum),
    Entry("clamp", lambda d: [d.away_from(4, 5, points=(-0.5, 0.5))], lambda a: a.clamp(-0.5, 0.5)),
    Entry("matmul", lambda d: [d.randn(3, 4), d.randn(4, 2)], mt.matmul),
    Entry("matmul (batched, broadcast)", lambda d: [d.randn(2, 1, 3, 4), d.randn(3, 4, 2)], mt.matmul),
    Entry("matmul (1-D @ 2-D)", lambda d: [d.randn(4), d.randn(4, 3)], mt.matmul),
    Entry("matmul (batched @ 1-D)", lambda d: [d.randn(2, 3, 4), d.randn(4)], mt.matmul),
    Entry("sum (dim, keepdim)", lambda d: [d.randn(2, 3, 4)], lambda a: a.sum(dim=(0, 2), keepdim=True)),
    Entry("sum (all)", lambda d: [d.randn(2, 3)], lambda a: a.sum()),
    Entry("mean (dim)", lambda d: [d.randn(2, 3, 4)], lambda a: a.mean(dim=-1)),
    Entry("max (dim, no ties)", lambda d: [d.distinct(3, 5)], lambda a: a.max(dim=1)),
    Entry("var (dim, unbiased)", lambda d: [d.randn(3, 6)], lambda a: a.var(dim=1)),
    Entry("var (biased, keepdim)", lambda d: [d.randn(2, 3, 4)], lambda a: a.var(dim=(1, 2), keepdim=True, correction=0)),
    Entry("reshape", lambda d: [d.randn(2, 6)], lambda a: a.reshape(3, -1)),
    Entry("transpose", lambda d: [d.randn(2, 3, 4)], lambda a: a.transpose(0, 2)),
    Entry("permute", lambda d: [d.randn(2, 3, 4)], lambda a: a.permute(1, 2, 0)),
    Entry("unsqueeze/squeeze", lambda d: [d.randn(3, 1, 2)], lambda a: a.squeeze(1).unsqueeze(0)),
    Entry("expand", lambda d: [d.randn(3, 1)], lambda a: a.expand(2, 3, 4)),
    Entry("getitem (slices, None, ...)", lambda d: [d.randn(4, 5, 3)], lambda a: a[None, 1:3, ..., ::2]),
    Entry("getitem (integer tensor, repeats)", lambda d: [d.randn(5, 3), d.integers(0, 5, 2, 4)],
          lambda a, idx: a[idx]),
    Entry("concat", lambda d: [d.randn(2, 3), d.randn(2, 1)], lambda a, b: mt.concat([a, b], dim=1)),
    Entry("stack", lambda d: [d.randn(2, 3), d.randn(2, 3)], lambda a, b: mt.stack([a, b], dim=1)),
    Entry("split/chunk", lambda d: [d.randn(5, 2)], lambda a: tuple(p * (i + 1) for i, p in enumerate(a.chunk(3)))),
    Entry("where", lambda d: [d.mask(3, 4), d.randn(3, 4), d.randn(4)], mt.where),
    Entry("masked_fill", lambda d: [d.randn(3, 4), d.mask(1, 4)], lambda a, m: a.masked_fill(m, -2.0)),
    Entry("tril/triu", lambda d: [d.randn(2, 4, 4)], lambda a: mt.tril(a, -1) + 2 * mt.triu(a, 1)),
    Entry("cast to float64", lambda d: [d.randn(3)], lambda a: a.double() * 2),
    Entry("custom Function returning None", lambda d: [d.randn(2, 3), d.randn(2, 3)], first_only_of_a_non_leaf),
]
