"""Input makers shared by the entries of :mod:`minitorch_attn.functional`."""

import numpy as np

import minitorch_attn as mt


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
