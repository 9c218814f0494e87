"""Run tests and probes in a graded copy, and read back what they say without trusting it.

    python -m pytest -c COPY/setup.cfg --rootdir COPY -p no:cacheprovider
        -p pytest_timeout --timeout SECONDS
        -p minitorch_attn.homework.pytest_report --grading-report REPORT
        -m "task_2_1 and not cuda and not torch"  THE NODE IDS OF task_2_1'S TESTS

Every command on a student's code goes through :func:`.sandbox.run` (another user when
the grader is root, its own session, a time limit, nothing left behind). The working
directory is the copy, so its ``minitorch_attn`` is the one imported. Only the plugins
named here run; tests that need a GPU or PyTorch are left out (a grade must not depend on
the machine, and every test that runs must pass: a skipped one counts as failed).

What such a run reports is written by a process the student's code runs in, so it can be
forged: :func:`read_checks` takes from it only the outcome of the tests that the grader
itself collected (in its own copy, before any student code ran), caps every message, and
a test without a record failed. A forged "passed" gains nothing on its own: a task's points
also need its probes (:mod:`.probes`), which the grader compares itself.
"""

from __future__ import annotations

import dataclasses
import json
import pathlib
import shutil
import sys

from . import markers, probes, sandbox
from .instructor import GraderError

REPORT = ".grading-report.jsonl"
MAX_REPORT_BYTES = 16 * 2 ** 20
MAX_MESSAGE_CHARS = 2_000


@dataclasses.dataclass
class Check:
    """One check of a task: a test's node id (or ``probe: <entry>``), ``passed``/``failed``/
    ``skipped``, the failure message (capped), and where it failed."""

    nodeid: str
    outcome: str
    message: str = ""
    where: str = ""

    @property
    def passed(self):
        return self.outcome == "passed"

    @property
    def held_back(self):
        """An instructor-only check (``tests/instructor/`` or a probe), not in the student's tree."""
        return self.nodeid.startswith(("tests/instructor/", "probe: "))


@dataclasses.dataclass
class Run:
    """What one pytest run found: a check per expected test, and ``problem``, why the run
    as a whole went wrong (a crash, a hang), or None."""

    checks: list
    problem: str | None = None


def pytest_command(folder, selection, timeout, python=None):
    """The grader's pytest command line for ``folder``; the report goes to ``folder/.grading-report.jsonl``."""
    folder = pathlib.Path(folder)
    return [python or sys.executable, "-m", "pytest", "-c", str(folder / "setup.cfg"), "--rootdir", str(folder),
            "-p", "no:cacheprovider", "-p", "pytest_timeout", f"--timeout={timeout:g}",
            "-p", "minitorch_attn.homework.pytest_report", f"--grading-report={folder / REPORT}",
            "-q", "--tb=short", *selection]


def collect(folder, limit=300.0):
    """``{task marker: [test node ids]}`` of the instructor's tests, collected in the grader's
    own copy ``folder`` (no student code in it), so that a marker set in any way counts.

    Raises:
        GraderError: a test file of the instructor's tree cannot be collected.
    """
    (pathlib.Path(folder) / REPORT).unlink(missing_ok=True)
    finished = sandbox.run(pytest_command(folder, ["--collect-only", "-m", "not cuda and not torch", "tests"], 60),
                           folder, limit)
    records = read_records(pathlib.Path(folder) / REPORT)
    errors = [f"{r.get('collect_error')}: {r.get('message')}" for r in records if "collect_error" in r]
    found = next((r for r in records if "selected" in r), None)
    if errors or found is None:
        raise GraderError("the instructor's tests cannot be collected:\n"
                          + ("\n".join(errors) or finished.stopped or finished.tail))
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
    (pathlib.Path(folder) / REPORT).unlink(missing_ok=True)   # one of an earlier run must not be read as this one's
    sandbox.hand_over(pathlib.Path(folder), confinement.account)
    finished = sandbox.run(pytest_command(folder, selection, timeout, python), folder, limit, confinement)
    records = read_records(pathlib.Path(folder) / REPORT)
    return {t: read_checks(records, expected[t], finished) for t in task_ids}


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


def read_checks(records, expected, finished):
    """A :class:`Run` with one :class:`Check` per node id of ``expected``: its reported
    outcome when there is one, else a failure saying why the run did not get to it."""
    done, started = {}, []
    for record in records:
        test = record.get("test")
        if isinstance(test, str) and test in expected and test not in done:
            outcome = record.get("outcome") if record.get("outcome") in ("passed", "failed", "skipped") else "failed"
            done[test] = Check(test, outcome, _text(record.get("message")), _text(record.get("where"), 300))
        elif isinstance(record.get("started"), str):
            started.append(record["started"])
    exited = any("exit" in r for r in records)
    crash = finished.stopped or (None if exited else f"the test run crashed (exit status {finished.returncode})")
    last = started[-1] if started and started[-1] not in done else None
    checks = []
    for nodeid in expected:
        if nodeid in done:
            checks.append(done[nodeid])
        elif nodeid == last:
            checks.append(Check(nodeid, "failed", cap(f"the run ended during this test: {crash}\n"
                                                      f"... {finished.tail[-1500:]}")))
        else:
            checks.append(Check(nodeid, "failed", "did not run: " + (crash or "the session stopped before it")))
    errors = [f"{_text(r.get('collect_error'), 200)} could not be collected: {_text(r.get('message'))}"
              for r in records if "collect_error" in r]
    return Run(checks, cap("\n".join(errors)) or (crash if not done else None))


def run_probes(folder, names, seed, limit, confinement, python=None):
    """Run the probe worker on ``names`` in ``folder`` (see :mod:`.probes`); returns
    ``(saved values as probes.load gives them, why the run was stopped or None)``."""
    folder = pathlib.Path(folder)
    spec = probes.write_spec(folder, names, seed)
    out = folder / ".probes"
    shutil.rmtree(out, ignore_errors=True)   # values of an earlier run must not be read as this one's
    out.mkdir()
    sandbox.hand_over(folder, confinement.account)
    finished = sandbox.run([python or sys.executable, "-m", "minitorch_attn.homework.probes", str(spec), str(out)],
                           folder, limit, confinement)
    stopped = finished.stopped or (None if finished.returncode == 0 else
                                   f"the probes' process ended with status {finished.returncode}")
    return probes.load(out, len(names)), stopped


def _text(value, limit=MAX_MESSAGE_CHARS):
    return cap(value if isinstance(value, str) else "", limit)


def cap(text, limit=MAX_MESSAGE_CHARS):
    """``text`` without control characters (tabs and newlines kept), at most ``limit`` characters."""
    clean = "".join(c if c in "\n\t" or c.isprintable() else "\N{REPLACEMENT CHARACTER}" for c in text[:limit + 1])
    return clean if len(clean) <= limit else clean[:limit] + f" ... (cut at {limit} characters)"
