"""A graded submission as Gradescope's ``results.json``, and as a table for a terminal.

The format (Gradescope's autograder specification)::

    {"score": 70, "execution_time": 41.2, "output": "...",
     "tests": [{"name", "score", "max_score", "status", "output", "visibility"}, ...]}

Each task gives two entries:

* ``Task 2.1 (smoke test): ...``, ``visibility: "visible"``, worth 0 points: whether the
  tests the student has in their own folder pass on their own code (the visible run of
  :mod:`.grade`, where nothing held back is on disk), with every failure; students see it
  as soon as they submit;
* ``Task 2.1: ...``, ``visibility: "after_published"``, worth the task's points: every
  check, the held-back ones included, each failure listed in full (the test, its message
  with the op, input shape, forward or gradient and the worst element, such as
  "rms_norm (weight) gradient of input 0, inputs (3, 6), (6,) float64: 13 of 18 elements
  wrong; worst at (2, 1): yours ..., expected ...", and where it failed). Students see it
  once the instructor publishes the grades.

The file is written atomically (a temporary file renamed over it), so a reader never
sees half of one, after each task (so that a grading stopped from outside keeps what was
earned), and it is removed before grading starts, so a grading that stops with a
:class:`~minitorch_attn.homework.instructor.GraderError` never leaves an older result in place.
Every output is capped, and the
whole near ``MAX_RESULTS_CHARS``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib
import sys
import tempfile
import textwrap
import time

from . import derive
from .grade import Grader, GraderError
from .runner import cap
from .sandbox import PLATFORM_MEMORY_MB
from .submission import Submission

MAX_RESULTS_CHARS = 1_000_000  # all of results.json's text together, about
MAX_GROUPS = 12  # kinds of failure listed for one task


def grade_submission(
    path,
    assignment,
    results_path,
    instructor=None,
    timeout=60.0,
    budget=600.0,
    memory=PLATFORM_MEMORY_MB,
    require_isolation=None,
):
    """Grade the submission at ``path`` (folder, zip or file) for assignment ``assignment``
    and write ``results_path``, after each task (so that a grading stopped from outside,
    Ctrl-C or SIGTERM, keeps the points already earned); returns ``(results dict, [TaskResult])``.
    ``require_isolation`` as :class:`.Grader` takes it.

    Raises:
        GraderError: the grader cannot grade here (nothing is left written).
        ValueError: an unknown assignment or a path that does not exist.
    """
    results_path = pathlib.Path(results_path)
    results_path.unlink(missing_ok=True)
    start = time.monotonic()
    try:
        with Grader(instructor, timeout, budget, memory=memory, require_isolation=require_isolation) as grader:
            chosen = grader.tree.assignment(assignment)
            submission = Submission.from_path(path, grader.tree)

            def progress(done):
                write_results(results_path, gradescope_results(chosen, done, time.monotonic() - start, isolation))

            isolation = grader.isolation.replace("student code ran ", "", 1)
            graded = grader.grade(submission, assignment, on_result=progress)
            if (grader.tree.root / derive.MODE_FILE).is_file():  # derive mode: say which sheets came in
                sheets = derive.sheet_notes(path, chosen["tasks"])
                graded = [dataclasses.replace(r, notes=[*r.notes, sheets[r.task_id]]) for r in graded]
    except GraderError:
        results_path.unlink(missing_ok=True)  # a grader that cannot grade gives no grade
        raise
    results = gradescope_results(chosen, graded, time.monotonic() - start, isolation)
    write_results(results_path, results)
    return results, graded


def gradescope_results(chosen, graded, seconds, isolation=""):
    """The results.json dict of one graded assignment (see the module docstring); tasks
    not graded yet are listed with 0 points and say so; ``isolation`` says what student code
    ran under (:attr:`.Grader.isolation`). At most ``MAX_RESULTS_CHARS`` of output."""
    tests = []
    done = {r.task_id: r for r in graded}
    for task in chosen["tasks"]:
        result = done.get(task["id"])
        if result is None:
            for name, visibility, points in (
                (f"Task {task['id']} (smoke test): {task['title']}", "visible", 0),
                (f"Task {task['id']}: {task['title']}", "after_published", task["points"]),
            ):
                tests.append(
                    {
                        "name": name,
                        "score": 0,
                        "max_score": points,
                        "status": "failed",
                        "visibility": visibility,
                        "output": "Not graded yet: the grading stopped before "
                        "this task (a time limit of the platform?).",
                    }
                )
            continue
        if result.visible is not None:
            public = result.visible.checks
            smoke_passed = result.visible.problem is None and bool(public) and all(c.passed for c in public)
            smoke = describe(result, public_only=True)
        else:
            public = [c for c in result.checks if not c.held_back]
            smoke_passed = result.problem is None and bool(public) and all(c.passed for c in public)
            smoke = describe(result, public_only=True)
        smoke = "\n".join([*result.notes, smoke]) if result.notes else smoke
        tests.append(
            {
                "name": f"Task {result.task_id} (smoke test): {result.title}",
                "score": 0,
                "max_score": 0,
                "status": "passed" if smoke_passed else "failed",
                "visibility": "visible",
                "output": smoke,
            }
        )
        tests.append(
            {
                "name": f"Task {result.task_id}: {result.title}",
                "score": result.score,
                "max_score": result.points,
                "status": "passed" if result.passed else "failed",
                "visibility": "after_published",
                "output": describe(result),
            }
        )
    score, maximum = sum(r.score for r in graded), sum(t["points"] for t in chosen["tasks"])
    summary = (
        f"Assignment {chosen['number']}: {chosen['title']}. Score {score}/{maximum}.\n"
        "Each task is graded in a run of its own, on your own code for the whole assignment (as in your "
        "folder): a mistake costs the task it is in, and the tasks whose code calls it (a backward that "
        "calls your engine, cross_entropy calling your log_softmax). A task's points need all of its "
        "checks to pass. The smoke tests are the tests in your own folder, run on your own code; the full "
        "result of each task, with the held-back checks, is shown when the grades are published."
        + (f"\nYour code ran {isolation}." if isolation else "")
    )
    share = max(2_000, (MAX_RESULTS_CHARS - len(summary)) // max(1, len(tests)))
    for test in tests:
        test["output"] = cap(test["output"], share)
    return {
        "score": score,
        "execution_time": round(seconds, 1),
        "output": summary,
        "output_format": "text",
        "tests": tests,
    }


def describe(result, public_only=False):
    """Every failing check of a task (the first ``MAX_GROUPS`` kinds of failure): its test,
    message and place. Checks that failed the same way share one message. With
    ``public_only``, the task's visible run (or its public checks when there was none)."""
    if public_only and result.visible is not None:
        checks, problem = result.visible.checks, result.visible.problem
    else:
        checks = [c for c in result.checks if not (public_only and c.held_back)]
        problem = result.problem
    failures = [c for c in checks if not c.passed]
    scope = "tests in your folder" if public_only else "checks"
    lines = [] if problem is None else [f"No points for this task: {problem}" if not public_only else problem]
    if checks and not failures:
        lines.append(f"All {len(checks)} {scope} passed.")
    elif failures:
        lines.append(f"{len(failures)} of {len(checks)} {scope} failed:")
    if not public_only and result.diagnosis:
        lines.append(f"The probes of this task name the mistake: {result.diagnosis}.")
    groups = {}
    for check in failures:
        skipped = " (skipped, which counts as failed)" if check.outcome == "skipped" else ""
        groups.setdefault((check.message.strip() or "(no message)", check.where), []).append(check.nodeid + skipped)
    for number, ((message, where), names) in enumerate(groups.items()):
        if number == MAX_GROUPS:
            lines.append(f"\n... and {len(groups) - MAX_GROUPS} more kinds of failure")
            break
        lines += [""] + [f"FAILED {name}" for name in names] + [textwrap.indent(message, "    ")]
        lines += [f"    at {where}"] if where else []
    return "\n".join(lines)


def write_results(path, results):
    """Write ``results`` as JSON to ``path`` atomically (a temporary file, then a rename)."""
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=".results-", suffix=".json", dir=path.parent)
    try:
        with os.fdopen(handle, "w") as file:
            json.dump(results, file, indent=2)
            file.write("\n")
        os.chmod(temporary, 0o644)
        os.replace(temporary, path)
    except BaseException:
        pathlib.Path(temporary).unlink(missing_ok=True)
        raise


def print_table(graded, file=sys.stdout):
    """One row per task (points, passed/failed, first failure), then every failure in full."""
    print(f"{'task':<52} {'points':>9}  result  first failure", file=file)
    for result in graded:
        status = "passed" if result.passed else "failed"
        first = "" if result.passed else (result.problem or result.failures[0].message or "failed").splitlines()[0][:80]
        name = f"{result.task_id} {result.title}"[:52]
        print(f"{name:<52} {result.score:>4}/{result.points:<4}  {status:<6}  {first}", file=file)
    print(f"{'total':<52} {sum(r.score for r in graded):>4}/{sum(r.points for r in graded):<4}", file=file)
    for note in dict.fromkeys(note for result in graded for note in result.notes):
        print(f"\nnote: {note}", file=file)
    for result in graded:
        if not result.passed:
            print(f"\n--- task {result.task_id}\n{describe(result)}", file=file)
