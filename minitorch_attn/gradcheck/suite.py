"""The gradient-check suite: every gradient-check sample of the catalogue of operations.

Each record of :mod:`minitorch_attn.opinfo` lists samples whose inputs are drawn away from
kinks (ReLU at 0, ties in max); for each, :func:`minitorch_attn.check_gradients` compares the
hand-written backward with central finite differences under a random upstream gradient.
This module only turns those samples into :class:`Entry` s; the tolerances are derived for
each from float64 error analysis (see :mod:`.checker`).

Run every entry (``minitorch-attn gradcheck`` does the same from anywhere):

    python -m gradcheck                      # NumPy, float64
    python -m gradcheck --device strict      # array-api-strict on a non-default device
    python -m gradcheck --device cuda        # CuPy
    python -m gradcheck --dtype float32      # a float32 backward, up to its own rounding

The pytest suite (tests/test_gradcheck_suite.py) runs the same entries. To add one, add a
sample to the op's record in ``minitorch_attn/opinfo/<topic>.py``.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable

from ..opinfo import gradcheck_samples
from ..opinfo.record import Inputs
from .checker import check_gradients

# The dtypes the suite runs in. The numeric gradient is always taken in float64; a float32
# backward is compared with it up to its own rounding (the floor of the derived tolerance).
DTYPES = ("float64", "float32")


@dataclasses.dataclass
class Entry:
    """One check: ``fn(*make(inputs))`` is differentiated w.r.t. the inputs that require grad.

    ``n_ops`` is the rounding steps the op's results and gradients may be off by (its record's,
    see :meth:`~minitorch_attn.opinfo.Sample.rounding_steps`); the tolerances are derived from
    it and from the finite differences themselves (``derived=True`` of
    :func:`~minitorch_attn.gradcheck.check_gradients`, whose module docstring gives the
    analysis): for a well-conditioned op about 1e-8 of the gradient's size, so that a
    backward 0.1% off fails.
    """

    name: str
    make: Callable[[Inputs], list]
    fn: Callable
    fast_mode: bool = False
    n_ops: int = 16

    def run(self, device="cpu", dtype="float64", seed=0, differences_on=None):
        """Draw inputs and run :func:`minitorch_attn.check_gradients` with derived tolerances
        (its finite differences on ``differences_on``, default ``device``); returns its report."""
        if dtype not in DTYPES:
            raise ValueError(f"gradcheck suite: dtype must be one of {', '.join(DTYPES)}, not {dtype!r}")
        inputs = self.make(Inputs(device, dtype, seed))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # the float32 warning is the point of --dtype
            return check_gradients(
                self.fn,
                inputs,
                fast_mode=self.fast_mode,
                seed=seed,
                derived=True,
                n_ops=self.n_ops,
                differences_on=differences_on,
            )


def entries():
    """One entry per gradient-check sample of the catalogue, in the catalogue's order."""
    return [
        Entry(
            sample.name,
            sample.make,
            sample.call(record.op),
            sample.fast_mode,
            sample.rounding_steps(record, "float64", backward=True),
        )
        for record, sample in gradcheck_samples()
    ]


__all__ = ["DTYPES", "Entry", "Inputs", "entries"]
