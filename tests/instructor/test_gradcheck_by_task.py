"""The gradient checks of each task, on inputs the student cannot know in advance.

For each gradient-check sample of the catalogue of operations whose task is this one
(``minitorch_attn/opinfo/``), in float64 on NumPy, marked with the task: the inputs are
drawn from this test's ``rng`` (under the grader, from the grading's secret seed), and the
student's outputs and the gradients of ``sum(output * g)`` for a random ``g`` must equal
those of this process's library within ``REFERENCE_RTOL``. Under the grader that library is
the instructor's: the student's values are compared with the reference's. In the project's
own suite it is the library under test itself, and the finite-difference checks of the
same samples are ``tests/test_gradcheck_suite.py``'s.

Each check reaches its own task's code only. Where another task writes the op's forward
(attention: 4.1, 5.1), the outputs are a check of that task, and the gradients are the
backward task's alone; where a backward cannot run in the student's library without the
code of another task of its assignment (the engine of assignment 1, a forward of 4.1 or
5.1), the graph is this process's and the student's code is asked for the task's part
(:func:`~tests.instructor.expect.backward_of_task`).
"""

import pytest

import minitorch_attn as mt
from minitorch_attn import opinfo
from minitorch_attn.homework import markers
from minitorch_attn.opinfo.record import Inputs
from tests.instructor.expect import ASKED, REFERENCE_RTOL, backward_of_task, copied, expect_close, host, student_call

SAMPLES = {sample.name: (record, sample) for record, sample in opinfo.gradcheck_samples()}


def _case(task, name, part):
    return pytest.param(
        task,
        name,
        part,
        id=f"{task} {name}" + (" forward" if part == "forward" else ""),
        marks=getattr(pytest.mark, markers.marker_name(task)),
    )


CASES = [
    _case(task["id"], name, part)
    for assignment in markers.load_manifest()["assignments"]
    for task in assignment["tasks"]
    for name in opinfo.gradcheck_names_of_task(task["id"])
    for part in (["gradients"] if SAMPLES[name][0].forward_task not in (None, task["id"]) else ["both"])
]
CASES += [
    _case(record.forward_task, sample.name, "forward")
    for record, sample in opinfo.gradcheck_samples()
    if record.forward_task not in (None, record.task)
]


def test_every_task_with_a_record_has_gradient_checks():
    """A record that names a task gives it checks; a task no record names is one of the
    tasks whose tests are all their own (the engine's order, multi-head plumbing, a forward)."""
    tasks = {task["id"] for assignment in markers.load_manifest()["assignments"] for task in assignment["tasks"]}
    named = {record.task for record in opinfo.op_db() if record.task}
    assert named <= tasks, f"records name tasks the manifest lacks: {sorted(named - tasks)}"
    for task in named:
        assert opinfo.gradcheck_names_of_task(task), f"task {task} has a record but no gradient check"


@pytest.mark.parametrize("task, name, part", CASES)
def test_gradient_check_of_the_task(student, rng, task, name, part):
    """``part``: the outputs ("forward"), the gradients, or "both" (a task that writes both)."""
    record, sample = SAMPLES[name]
    seed = int(rng.integers(2**31))
    inputs = sample.make(Inputs("cpu", "float64", seed))
    shapes = ", ".join(str(tuple(t.shape)) for t in inputs if hasattr(t, "shape"))
    what = f"{name} {{}}, inputs {shapes} float64, drawn for this submission"
    mt.manual_seed(seed)  # random ops draw alike on both sides
    expected = _outputs(sample.call(record.op)(*inputs))
    roots = [i for i, o in enumerate(expected) if o.dtype in ("float32", "float64") and o.requires_grad]
    upstream = [rng.standard_normal(expected[i].shape) for i in roots]
    if part != "gradients" and task not in ASKED:  # the student's forward, and their backward through it
        theirs = student.send(inputs)
        student.module("minitorch_attn").manual_seed(seed)
        outputs = _outputs(student_call(student, record, sample)(*theirs))
        assert len(outputs) == len(expected), (
            f"{what.format('forward')}: {len(outputs)} outputs, expected {len(expected)}"
        )
        for i, (ours, reference) in enumerate(zip(outputs, expected)):
            expect_close(ours, host(reference), what=what.format(f"output {i}"), rtol=REFERENCE_RTOL)
        if part == "forward" or not roots:
            return
        student.module("minitorch_attn").backward([outputs[i] for i in roots], [mt.tensor(u) for u in upstream])
    elif roots:  # their backward alone, on this process's graph
        theirs = copied(inputs)
        mt.manual_seed(seed)
        backward_of_task(student, task, [_outputs(sample.call(record.op)(*theirs))[i] for i in roots], upstream)
    if not roots:
        return
    mt.backward([expected[i] for i in roots], [mt.tensor(u) for u in upstream])
    for i, (mine, tensor) in enumerate(zip(inputs, theirs)):
        if isinstance(mine, mt.Tensor) and mine.grad is not None:
            expect_close(tensor.grad, host(mine.grad), what=what.format(f"gradient of input {i}"), rtol=REFERENCE_RTOL)


def _outputs(result):
    return list(result) if isinstance(result, (tuple, list)) else [result]
