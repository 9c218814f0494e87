"""Run a task's tests: the public ones beside the student's code, the held-back ones in the grader's own copy.

    python -m pytest -c COPY/setup.cfg --rootdir COPY -o addopts= -p no:xdist -p no:cacheprovider
        -p pytest_timeout --timeout SECONDS
        -p minitorch_attn.homework.pytest_report --grading-report REPORT
        -m "task_2_1 and not cuda and not torch"  THE NODE IDS OF task_2_1'S TESTS

Two runs per task:

* **the public tests** (:func:`run_tests`) run in the copy that holds the student's code,
  under the sandbox (:func:`.sandbox.run`: another user when the grader is root, no network,
  a memory cap, its own session, a time limit, nothing left behind). The working directory
  is the copy, so its ``minitorch_attn`` is the one imported. What this run reports is
  written by a process the student's code runs in, so it can be forged: :func:`read_checks`
  takes from it only the outcome of the tests that the grader itself collected (in its own
  copy, before any student code ran), caps every message, and a test without a record failed.
* **the held-back tests** (:func:`run_held_back`) run in the grader's own copy of the whole
  instructor's tree, as the grader's user, with the judge plugin (:mod:`.judge`): no student
  code runs in that process; the tests reach the student's library in a worker under the
  sandbox, in the other copy, and compare its values with their references. Their report
  is the grader's own. A forged public "passed" gains nothing: a task's points also need
  its held-back tests.

Only the plugins named here run; tests that need a GPU or PyTorch are left out (a grade
must not depend on the machine, and every test that runs must pass: a skipped one counts
as failed).
"""

from __future__ import annotations

import dataclasses
import json
import pathlib
import sys

from . import judge, markers, sandbox
from .instructor import INSTRUCTOR_TESTS, GraderError

REPORT = ".grading-report.jsonl"
MAX_REPORT_BYTES = 16 * 2**20
MAX_MESSAGE_CHARS = 2_000
JUDGE_MARGIN = 5.0  # seconds a held-back test has beyond its wait for the student's process (its own work)


@dataclasses.dataclass
class Check:
    """One check of a task: a test's node id, ``passed``/``failed``/``skipped``, the failure
    message (capped), and where it failed."""

    nodeid: str
    outcome: str
    message: str = ""
    where: str = ""

    @property
    def passed(self):
        return self.outcome == "passed"

    @property
    def held_back(self):
        """A held-back check (``tests/instructor/``), not in the student's tree."""
        return self.nodeid.startswith(INSTRUCTOR_TESTS + "/")


@dataclasses.dataclass
class Run:
    """What one pytest run found: a check per expected test, and ``problem``, why the run
    as a whole went wrong (a crash, a hang), or None."""

    checks: list
    problem: str | None = None


def pytest_command(folder, selection, timeout, python=None):
    """The grader's pytest command line for ``folder``; the report goes to ``folder/.grading-report.jsonl``.
    It runs in one process: the tree's own ``addopts`` (two xdist workers for the project's
    suite) are replaced, and xdist is kept out."""
    folder = pathlib.Path(folder)
    return [
        python or sys.executable,
        "-m",
        "pytest",
        "-c",
        str(folder / "setup.cfg"),
        "--rootdir",
        str(folder),
        "-o",
        "addopts=",
        "-p",
        "no:xdist",
        "-p",
        "no:cacheprovider",
        "-p",
        "pytest_timeout",
        f"--timeout={timeout:g}",
        "-p",
        "minitorch_attn.homework.pytest_report",
        f"--grading-report={folder / REPORT}",
        "-q",
        "--tb=short",
        *selection,
    ]


def collect(folder, limit=300.0):
    """``{task marker: [test node ids]}`` of the instructor's tests, collected in the grader's
    own copy ``folder`` (no student code in it), so that a marker set in any way counts.

    Raises:
        GraderError: a test file of the instructor's tree cannot be collected.
    """
    (pathlib.Path(folder) / REPORT).unlink(missing_ok=True)
    finished = sandbox.run(
        pytest_command(folder, ["--collect-only", "-m", "not cuda and not torch", "tests"], 60), folder, limit
    )
    records = read_records(pathlib.Path(folder) / REPORT)
    errors = [f"{r.get('collect_error')}: {r.get('message')}" for r in records if "collect_error" in r]
    found = next((r for r in records if "selected" in r), None)
    if errors or found is None:
        raise GraderError(
            "the instructor's tests cannot be collected:\n" + ("\n".join(errors) or finished.stopped or finished.tail)
        )
    tasks = {}
    for nodeid in found["selected"]:
        for name in found["tasks"].get(nodeid, []):
            tasks.setdefault(name, []).append(nodeid)
    return tasks


def run_tests(folder, task_ids, expected, timeout, limit, confinement, python=None):
    """Run the tests of ``task_ids`` in the copy ``folder`` under the sandbox: exactly the
    node ids of ``expected[task id]``; returns ``{task id: Run}`` with one check per node id."""
    names = [markers.marker_name(t) for t in task_ids]
    nodeids = list(dict.fromkeys(nodeid for t in task_ids for nodeid in expected[t]))
    selection = ["-m", f"({' or '.join(names)}) and not cuda and not torch", *nodeids]
    (pathlib.Path(folder) / REPORT).unlink(missing_ok=True)  # one of an earlier run must not be read as this one's
    sandbox.hand_over(pathlib.Path(folder), confinement.account)
    finished = sandbox.run(pytest_command(folder, selection, timeout, python), folder, limit, confinement)
    records = read_records(pathlib.Path(folder) / REPORT)
    return {t: read_checks(records, expected[t], finished, confinement.memory) for t in task_ids}


def run_held_back(base, task_id, nodeids, folder, confinement, seed, timeout, limit, python=None):
    """Run the held-back tests ``nodeids`` of ``task_id`` in the grader's own copy ``base``
    with the judge plugin, on the student's library in the copy ``folder`` (its worker runs
    under ``confinement`` with ``python``; each test may wait for it ``timeout`` seconds, the
    whole run takes at most ``limit``); returns a :class:`Run` (with no check for no node id)."""
    if not nodeids:
        return Run([])
    base = pathlib.Path(base)
    spec = judge.write_spec(base.parent / "judge.json", folder, confinement, python or sys.executable, seed, timeout)
    selection = ["-m", f"{markers.marker_name(task_id)} and not cuda and not torch", *nodeids]
    command = pytest_command(base, selection, timeout + JUDGE_MARGIN) + [
        "-p",
        "minitorch_attn.homework.judge",
        f"--judge={spec}",
    ]
    (base / REPORT).unlink(missing_ok=True)
    finished = sandbox.run(command, base, limit, sandbox.NONE, also_clean=confinement.account)
    spec.unlink(missing_ok=True)
    return read_checks(read_records(base / REPORT), nodeids, finished, confinement.memory)


def read_records(path):
    """The JSON records of a report (at most ``MAX_REPORT_BYTES`` of it; lines that are not
    JSON objects are dropped)."""
    try:
        with sandbox.open_private(path) as file:
            text = file.read(MAX_REPORT_BYTES).decode("utf-8", errors="replace")
    except OSError:
        return []
    records = []
    for line in text.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict):
            records.append(record)
    return records


def read_checks(records, expected, finished, memory=None):
    """A :class:`Run` with one :class:`Check` per node id of ``expected``: its reported
    outcome when there is one, else a failure saying why the run did not get to it (naming
    the memory cap ``memory`` where it may be why)."""
    done, started = {}, []
    for record in records:
        test = record.get("test")
        if isinstance(test, str) and test in expected and test not in done:
            outcome = record.get("outcome") if record.get("outcome") in ("passed", "failed", "skipped") else "failed"
            message = _text(record.get("message"))
            if memory and "MemoryError" in message:
                message += f"\n(student code may use at most {memory >> 20} MB of memory per process)"
            done[test] = Check(test, outcome, message, _text(record.get("where"), 300))
        elif isinstance(record.get("started"), str):
            started.append(record["started"])
    exited = any("exit" in r for r in records)
    crash = finished.stopped or (None if exited else f"the test run crashed ({finished.crash(memory)})")
    last = started[-1] if started and started[-1] not in done else None
    checks = []
    for nodeid in expected:
        if nodeid in done:
            checks.append(done[nodeid])
        elif nodeid == last:
            checks.append(
                Check(nodeid, "failed", cap(f"the run ended during this test: {crash}\n... {finished.tail[-1500:]}"))
            )
        else:
            checks.append(Check(nodeid, "failed", "did not run: " + (crash or "the session stopped before it")))
    errors = [
        f"{_text(r.get('collect_error'), 200)} could not be collected: {_text(r.get('message'))}"
        for r in records
        if "collect_error" in r
    ]
    return Run(checks, cap("\n".join(errors)) or (crash if not done else None))


def _text(value, limit=MAX_MESSAGE_CHARS):
    return cap(value if isinstance(value, str) else "", limit)


def cap(text, limit=MAX_MESSAGE_CHARS):
    """``text`` without control characters (tabs and newlines kept), at most ``limit`` characters."""
    clean = "".join(c if c in "\n\t" or c.isprintable() else "\N{REPLACEMENT CHARACTER}" for c in text[: limit + 1])
    return clean if len(clean) <= limit else clean[:limit] + f" ... (cut at {limit} characters)"
