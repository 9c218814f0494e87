"""The gradient-check suite: one entry per differentiable operation.

Each entry says how to draw valid inputs (away from kinks such as ReLU at 0 or ties in
max) and which tolerances apply, then :func:`minitorch_attn.check_gradients` compares the
hand-written backward with central finite differences under a random upstream gradient.

Run every entry (``minitorch-attn gradcheck`` does the same from anywhere):

    python -m gradcheck                      # NumPy, float64
    python -m gradcheck --device strict      # array-api-strict on a non-default device
    python -m gradcheck --device cuda        # CuPy
    python -m gradcheck --dtype float32      # looser tolerances, see TOLERANCES

The pytest suite (tests/test_gradcheck_suite.py) runs the same entries. Entries live in
one module per topic: ``entries_core.py`` for the primitive ops, ``entries_softmax.py``
for the softmax family, and so on; add a module to ``MODULES`` below to register it.
"""

from __future__ import annotations

import dataclasses
import importlib
import warnings
from typing import Callable

import numpy as np

from ..core.factories import tensor
from .checker import check_gradients

MODULES = tuple(f"minitorch_attn.gradcheck.entries_{topic}" for topic in (
    "core", "softmax", "activations", "normalization", "linear", "attention", "flash", "rotary"))

# float64 is the dtype gradcheck is meant for; float32 analytic gradients are compared with
# float64 differences and can only agree to about sqrt(float32 eps) ~ 3e-4 relative.
TOLERANCES = {"float64": dict(eps=1e-6, atol=1e-5, rtol=1e-3),
              "float32": dict(eps=1e-3, atol=1e-2, rtol=1e-2)}


class Inputs:
    """Draws the inputs of one entry on a chosen device and dtype, reproducibly.

    All draws come from one NumPy generator (host side) and are then placed on the
    device, so every device sees the same numbers for the same seed.
    """

    def __init__(self, device="cpu", dtype="float64", seed=0):
        self.device, self.dtype = device, dtype
        self.rng = np.random.default_rng(seed)

    def _tensor(self, values, requires_grad=True, dtype=None):
        return tensor(np.asarray(values), dtype=dtype or self.dtype, device=self.device,
                         requires_grad=requires_grad)

    def randn(self, *shape, requires_grad=True, scale=1.0):
        """Standard normal values times ``scale``."""
        return self._tensor(scale * self.rng.standard_normal(shape), requires_grad)

    def uniform(self, *shape, low=0.0, high=1.0, requires_grad=True):
        """Uniform values in ``[low, high)`` (e.g. positive inputs for log and sqrt)."""
        return self._tensor(self.rng.uniform(low, high, shape), requires_grad)

    def distinct(self, *shape, gap=0.1, requires_grad=True):
        """Values at least ``gap`` apart from each other in random order: no ties, so max,
        maximum and clamp are differentiable at every element (gap >> eps)."""
        n = int(np.prod(shape))
        values = (np.arange(n) - n / 2) * gap + self.rng.uniform(0, gap / 4, n)
        return self._tensor(self.rng.permutation(values).reshape(shape), requires_grad)

    def away_from(self, *shape, points=(0.0,), margin=0.05, requires_grad=True):
        """Normal values at least ``margin`` away from each of ``points`` (kinks)."""
        values = self.rng.standard_normal(shape)
        for p in points:
            close = np.abs(values - p) < margin
            values = np.where(close, p + np.where(values >= p, margin, -margin) * 2, values)
        return self._tensor(values, requires_grad)

    def integers(self, low, high, *shape):
        """An int64 tensor (indices, targets); never differentiated."""
        return tensor(self.rng.integers(low, high, shape), dtype="int64", device=self.device)

    def mask(self, *shape, p_true=0.7):
        """A bool tensor, True with probability ``p_true``."""
        return tensor(self.rng.random(shape) < p_true, device=self.device)


@dataclasses.dataclass
class Entry:
    """One check: ``fn(*make(inputs))`` is differentiated w.r.t. the inputs that require grad."""

    name: str
    make: Callable[[Inputs], list]
    fn: Callable
    fast_mode: bool = False
    tolerances: dict = dataclasses.field(default_factory=dict)  # per dtype overrides

    def run(self, device="cpu", dtype="float64", seed=0):
        """Draw inputs and run :func:`minitorch_attn.check_gradients`; returns its report."""
        options = dict(TOLERANCES[dtype])
        options.update(self.tolerances.get(dtype, {}))
        inputs = self.make(Inputs(device, dtype, seed))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # the float32 warning is the point of --dtype
            return check_gradients(self.fn, inputs, fast_mode=self.fast_mode, seed=seed, **options)


def entries():
    """Every registered entry, in module order."""
    found = []
    for name in MODULES:
        found.extend(importlib.import_module(name).ENTRIES)
    return found
