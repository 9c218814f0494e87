"""The gradient checks of each task: the gradient-check samples of the catalogue of
operations whose task is this one (``minitorch_attn/opinfo/``), in float64 on NumPy, marked
with the task. A failure carries the checker's own line ("gradient of input 1 (shape (3,
5)) is wrong at element (2, 1): analytic ..., numeric ...")."""

import pytest

from minitorch_attn import opinfo
from minitorch_attn.gradcheck.suite import Inputs, entries
from minitorch_attn.homework import markers

ENTRIES = {entry.name: entry for entry in entries()}
CASES = [pytest.param(task["id"], name, id=f"{task['id']} {name}",
                      marks=getattr(pytest.mark, markers.marker_name(task["id"])))
         for assignment in markers.load_manifest()["assignments"] for task in assignment["tasks"]
         for name in opinfo.gradcheck_names_of_task(task["id"])]


def test_every_task_with_a_record_has_gradient_checks():
    """A record that names a task gives it checks; a task no record names is one of the
    tasks whose tests are all their own (the engine's order, multi-head plumbing, a forward)."""
    tasks = {task["id"] for assignment in markers.load_manifest()["assignments"] for task in assignment["tasks"]}
    named = {record.task for record in opinfo.op_db() if record.task}
    assert named <= tasks, f"records name tasks the manifest lacks: {sorted(named - tasks)}"
    for task in named:
        assert opinfo.gradcheck_names_of_task(task), f"task {task} has a record but no gradient check"


@pytest.mark.parametrize("task, name", CASES)
def test_gradient_check_of_the_task(task, name):
    entry = ENTRIES[name]
    shapes = ", ".join(str(tuple(t.shape)) for t in entry.make(Inputs()) if hasattr(t, "shape"))
    report = entry.run(device="cpu", dtype="float64")
    assert report.passed, f"gradcheck {name!r} (inputs {shapes}, float64): {report.failure}"
