"""The gradient-check suite proves: a backward 0.1% off fails it, for every op of the catalogue.

Each mutant gives the Function that makes an op's output (the root of its graph) a backward
that returns its gradients times 1.001, then runs the suite's entry of the op's smallest
gradient-check sample (one per op, to keep the cost down); the entry must fail. PyTorch's
fixed ``rtol=1e-3`` lets all but one of these mutants pass; the suite's derived tolerances
(``minitorch_attn/gradcheck/checker.py``) are about 1e-8 of the gradient's size. The same
mutant must also fail the comparison with the record's closed-form gradients, the check
that holds where PyTorch is not installed.
"""

import numpy as np
import pytest

import minitorch_attn as mt
from minitorch_attn import opinfo
from minitorch_attn.gradcheck.suite import Entry
from minitorch_attn.opinfo.held_back import HeldBack
from minitorch_attn.opinfo.record import Inputs
from tests.conftest import float64_tolerance
from tests.test_opinfo import raw_reference_gradients, run

OFF_BY = 1.001


def _size(sample):
    return sum(int(np.prod(t.shape)) for t in sample.make(Inputs()) if isinstance(t, mt.Tensor))


def smallest_sample(record):
    """The record's gradient-check sample with the fewest input elements, a plain call of the
    op where it has one (a composition's root may be another op's node)."""
    samples = [s for s in record.samples if s.gradcheck]
    return min(samples, key=lambda s: (s.fn is not None, _size(s)))


def root_functions(record, sample):
    """The Function classes whose nodes make the sample's outputs."""
    out = sample.call(record.op)(*sample.make(Inputs()))
    outs = out if isinstance(out, (tuple, list)) else (out,)
    return {o.grad_fn.function for o in outs if isinstance(o, mt.Tensor) and o.grad_fn is not None}


def scaled(backward):
    """``backward`` with every gradient it returns times :data:`OFF_BY`."""

    def mutant(ctx, *grad_outputs):
        grads = backward(ctx, *grad_outputs)
        if isinstance(grads, tuple):
            return tuple(None if g is None else g * OFF_BY for g in grads)
        return None if grads is None else grads * OFF_BY

    return staticmethod(mutant)


RECORDS = [record for record in opinfo.op_db() if any(s.gradcheck for s in record.samples)]


@pytest.mark.parametrize("record", RECORDS, ids=[record.name for record in RECORDS])
def test_a_backward_scaled_by_1_001_fails_the_suite(record, monkeypatch):
    sample = smallest_sample(record)
    functions = root_functions(record, sample)
    assert functions, f"{record.name}: {sample.name!r} makes no node to mutate"
    entry = Entry(
        sample.name,
        sample.make,
        sample.call(record.op),
        sample.fast_mode,
        sample.rounding_steps(record, "float64", backward=True),
    )
    assert entry.run().passed, f"{sample.name}: fails before it is mutated"
    assert sample.fn is not None or agrees_with_the_closed_form(record, sample) is not False
    for function in functions:
        monkeypatch.setattr(function, "backward", scaled(function.backward))
    report = entry.run()
    assert not report.passed, (
        f"{record.name}: a backward 0.1% off passes {sample.name!r} "
        f"(largest share of its tolerance used: {report.error_ratio:.3g})"
    )
    if sample.fn is None:
        assert agrees_with_the_closed_form(record, sample) is not True, f"{record.name}: the closed form misses it"


def agrees_with_the_closed_form(record, sample):
    """Whether the backward equals ``record.ref_backward`` on ``sample``, as tests/test_opinfo.py
    asks; None where that reference is a homework answer held back (a student's tree)."""
    inputs, _, grads, upstream = run(record, sample)
    try:
        expected = raw_reference_gradients(record, sample, inputs, upstream)
    except HeldBack:
        return None
    steps = sample.rounding_steps(record, "float64", backward=True)
    return all(
        np.allclose(g.numpy(), e, rtol=0, atol=float64_tolerance(e, steps, "float64"))
        for g, e in zip(grads, expected)
        if g is not None
    )
