"""The gradient checks of each task: the entries the manifest lists under it, in float64 on
NumPy, marked with the task. A failure carries the checker's own line ("gradient of input
1 (shape (3, 5)) is wrong at element (2, 1): analytic ..., numeric ...")."""

import pytest

from minitorch_attn.gradcheck.suite import Inputs, entries
from minitorch_attn.homework import markers

ENTRIES = {entry.name: entry for entry in entries()}
CASES = [pytest.param(task["id"], name, id=f"{task['id']} {name}",
                      marks=getattr(pytest.mark, markers.marker_name(task["id"])))
         for assignment in markers.load_manifest()["assignments"] for task in assignment["tasks"]
         for name in task.get("gradcheck", [])]


@pytest.mark.parametrize("task, name", CASES)
def test_gradient_check_of_the_task(task, name):
    assert name in ENTRIES, f"task {task}: the manifest names a gradcheck entry {name!r} that does not exist"
    entry = ENTRIES[name]
    shapes = ", ".join(str(tuple(t.shape)) for t in entry.make(Inputs()) if hasattr(t, "shape"))
    report = entry.run(device="cpu", dtype="float64")
    assert report.passed, f"gradcheck {name!r} (inputs {shapes}, float64): {report.failure}"
