"""Every op that exponentiates, at extreme logits: ±1000 in float64 and ±80 in float32.

exp(1000) overflows float64, so an op that exponentiates without first subtracting the
row maximum (softmax, log_softmax, cross-entropy, attention) or without a running maximum
(flash attention) returns NaN or inf here, while a stable one is exact to rounding. At
±80 in float32, log(softmax) underflows to -inf where log_softmax must stay finite.

The ops are the records of the catalogue that say ``exponentiates`` (``minitorch_attn/opinfo/``)
and the inputs their samples tagged ``extreme``; the references are the records' float64
NumPy formulas, forward and closed-form backward. The tolerance counts the rounding of
exp(s - max): the condition number of exp at s - max is |s - max|, so one rounding step per
unit of logit spread (two in the backward, which uses the softmax twice), plus the record's
own (``Sample.rounding_steps``). Forward and backward count for the tasks that write them
(4.1 and 4.2 for attention, say); a backward whose forward is another task's runs on this
process's forward, the student's backward asked for (:func:`~tests.instructor.expect.backward_of_task`).
"""

import numpy as np
import pytest

import minitorch_attn as mt
from minitorch_attn import opinfo
from minitorch_attn.opinfo.record import Inputs
from tests.instructor.expect import ASKED, backward_of_task, copied, expect_close, host, student_call


def _marker(task):
    return getattr(pytest.mark, f"task_{task.replace('.', '_')}")


def _cases():
    cases = []
    for record in opinfo.op_db():
        if not record.exponentiates:
            continue
        for sample in record.samples:
            if "extreme" not in sample.edges:
                continue
            for part, task in (("forward", record.forward_task or record.task), ("backward", record.task)):
                marks = [_marker(task)] if task else []
                for dtype in ("float64", "float32"):
                    cases.append(
                        pytest.param(record, sample, part, dtype, marks=marks, id=f"{sample.name} {part} {dtype}")
                    )
    return cases


def _shapes(values):
    return " ".join(str(tuple(v.shape)) for v in values if isinstance(v, mt.Tensor))


@pytest.mark.parametrize("record, sample, part, dtype", _cases())
def test_extreme_logits(student, rng, record, sample, part, dtype):
    inputs = sample.make(Inputs("cpu", dtype, seed=int(rng.integers(2**32))))
    arrays = [
        host(v)
        if isinstance(v, mt.Tensor) and v.dtype.startswith("float")
        else (v.numpy() if isinstance(v, mt.Tensor) else v)
        for v in inputs
    ]
    n_ops = sample.rounding_steps(record, dtype, backward=part == "backward")
    what = f"{sample.name} {{}}, inputs {_shapes(inputs)} {dtype}, logits within ±{Inputs.EXTREME[dtype]:g}"
    expected = record.ref(*arrays, **sample.kwargs)
    expected = list(expected) if isinstance(expected, tuple) else [expected]
    upstream = [rng.standard_normal(np.shape(e)) for e in expected]
    if part == "backward" and record.task in ASKED:  # their backward alone, on this process's forward
        theirs = copied(inputs)
        backward_of_task(student, record.task, _outputs(sample.call(record.op)(*theirs)), upstream)
    else:
        theirs = student.send(inputs)
        outputs = _outputs(student_call(student, record, sample)(*theirs))
        assert len(outputs) == len(expected), (
            f"{what.format('forward')}: {len(outputs)} outputs, expected {len(expected)}"
        )
        if part == "forward":
            for i, (ours, reference) in enumerate(zip(outputs, expected)):
                expect_close(ours, reference, what=what.format(f"forward (output {i})"), n_ops=n_ops, dtype=dtype)
            return
        student.module("minitorch_attn").backward(outputs, [mt.tensor(u, dtype=dtype) for u in upstream])
    gradients = record.ref_backward(upstream, *arrays, **sample.kwargs)
    for i, (mine, tensor, reference) in enumerate(zip(inputs, theirs, gradients)):
        if reference is not None and isinstance(mine, mt.Tensor) and mine.requires_grad:
            expect_close(tensor.grad, reference, what=what.format(f"gradient of input {i}"), n_ops=n_ops, dtype=dtype)


def _outputs(result):
    return list(result) if isinstance(result, (tuple, list)) else [result]


def test_every_op_that_exponentiates_is_tried():
    """The catalogue's word, checked: each record that exponentiates has extreme samples here."""
    tried = {case.values[0].name for case in _cases()}
    assert tried == {r.name for r in opinfo.op_db() if r.exponentiates}
    assert {"softmax", "log_softmax", "cross_entropy", "scaled_dot_product_attention", "flash_attention"} <= tried
