"""The gradient-check suite: every gradient-check sample of the catalogue of operations.

Each record of :mod:`minitorch_attn.opinfo` lists samples whose inputs are drawn away from
kinks (ReLU at 0, ties in max); for each, :func:`minitorch_attn.check_gradients` compares the
hand-written backward with central finite differences under a random upstream gradient.
This module only turns those samples into :class:`Entry` s and chooses the tolerances.

Run every entry (``minitorch-attn gradcheck`` does the same from anywhere):

    python -m gradcheck                      # NumPy, float64
    python -m gradcheck --device strict      # array-api-strict on a non-default device
    python -m gradcheck --device cuda        # CuPy
    python -m gradcheck --dtype float32      # looser tolerances, see TOLERANCES

The pytest suite (tests/test_gradcheck_suite.py) runs the same entries. To add one, add a
sample to the op's record in ``minitorch_attn/opinfo/<topic>.py``.
"""

from __future__ import annotations

import dataclasses
import warnings
from typing import Callable

from ..opinfo import gradcheck_samples
from ..opinfo.record import Inputs
from .checker import check_gradients

# float64 is the dtype gradcheck is meant for; float32 analytic gradients are compared with
# float64 differences and can only agree to about sqrt(float32 eps) ~ 3e-4 relative.
TOLERANCES = {"float64": dict(eps=1e-6, atol=1e-5, rtol=1e-3),
              "float32": dict(eps=1e-3, atol=1e-2, rtol=1e-2)}


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
    """One entry per gradient-check sample of the catalogue, in the catalogue's order."""
    return [Entry(sample.name, sample.make, sample.call(record.op), sample.fast_mode, dict(sample.tolerances))
            for record, sample in gradcheck_samples()]


__all__ = ["TOLERANCES", "Entry", "Inputs", "entries"]
