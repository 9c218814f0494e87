"""Run one task's tests in a graded copy: pytest in a subprocess, with the instructor's
configuration only.

    python -m pytest -c COPY/setup.cfg --rootdir COPY -p no:cacheprovider
        -p pytest_timeout --timeout SECONDS
        -p minitorch_attn.homework.pytest_report --grading-report REPORT
        -m "task_2_1 and not cuda and not torch"  FILES THAT MENTION task_2_1

* The working directory is the copy, so its ``minitorch_attn`` is the one imported (the
  report says which one was, and the grader checks it).
* Only the plugins named here run (entry-point plugins are off), ``PYTEST_ADDOPTS`` and
  ``PYTEST_PLUGINS`` are dropped, stdin is closed, and the run is a process group of its
  own so that it can be stopped whole.
* Tests that need a GPU or PyTorch are left out: a grade must not depend on the machine,
  and every test that runs must pass (a skipped one counts as failed).
* Each test has a time limit (pytest-timeout): a test over it fails with "Timeout". A
  hang outside any test (while collecting, or a thread that never ends) stops the run
  ``GRACE`` seconds after the session reported its end, or ``limit`` seconds after it began.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib
import signal
import subprocess
import sys
import time

from . import markers
from .instructor import GraderError

GRACE = 30.0
DROPPED_ENVIRONMENT = ("PYTEST_ADDOPTS", "PYTEST_PLUGINS", "PYTHONSAFEPATH", "PYTHONBREAKPOINT", "PYTHONINSPECT")


@dataclasses.dataclass
class Check:
    """One test of a task: its node id, ``passed``/``failed``/``skipped``, the whole
    failure message, and where it failed (``tests/x.py:12; minitorch_attn/y.py:40``)."""

    nodeid: str
    outcome: str
    message: str = ""
    where: str = ""

    @property
    def passed(self):
        return self.outcome == "passed"

    @property
    def held_back(self):
        """An instructor-only test (``tests/instructor/``), not in the student's tree."""
        return self.nodeid.startswith("tests/instructor/")


@dataclasses.dataclass
class Run:
    """What one pytest run found: a check per selected test, and ``problem``, why the run
    as a whole went wrong (a test file that did not import, a crash, a hang), or None."""

    checks: list
    problem: str | None = None


def task_files(folder, timeout=60.0):
    """``{task marker: [test files]}``: which files hold tests of each task, found by
    collecting ``tests/`` once in ``folder`` (an instructor's tree), so that a marker set
    in any way (decorator, ``pytestmark``, ``pytest.param(marks=...)``) counts.

    Raises:
        GraderError: a test file of the instructor's tree cannot be collected.
    """
    records, returncode, stopped, tail = _launch(folder, ["--collect-only", "-m", "not cuda and not torch", "tests"],
                                                 timeout, limit=max(300.0, 10 * timeout))
    errors = [f"{r['collect_error']}: {r['message']}" for r in records if "collect_error" in r]
    found = next((r for r in records if "selected" in r), None)
    if errors or found is None:
        raise GraderError("the instructor's tests cannot be collected:\n" + ("\n".join(errors) or stopped or tail))
    files = {}
    for nodeid, names in found["tasks"].items():
        for name in names:
            files.setdefault(name, set()).add(nodeid.split("::")[0])
    return {name: sorted(paths) for name, paths in files.items()}


def run_tests(folder, task_id, files, timeout=60.0, limit=None):
    """Run the tests of ``task_id`` in ``files`` (relative to ``folder``); returns a :class:`Run`.

    Raises:
        GraderError: pytest refused the command line, selected no test, or imported
            another ``minitorch_attn`` than the one in ``folder``.
    """
    selection = ["-m", f"{markers.marker_name(task_id)} and not cuda and not torch", *files]
    records, returncode, stopped, tail = _launch(folder, selection, timeout, limit or max(300.0, 10 * timeout))
    return _interpret(records, pathlib.Path(folder).resolve(), returncode, stopped, tail, task_id)


def _launch(folder, selection, timeout, limit):
    """Run pytest in ``folder`` with the grader's options and ``selection``; returns the
    report's records, the exit status, why the run was stopped (or None) and the end of
    its output."""
    folder = pathlib.Path(folder).resolve()
    report, output = folder / ".grading-report.jsonl", folder / ".grading-output.txt"
    report.unlink(missing_ok=True)
    command = [sys.executable, "-m", "pytest", "-c", str(folder / "setup.cfg"), "--rootdir", str(folder),
               "-p", "no:cacheprovider", "-p", "pytest_timeout", f"--timeout={timeout:g}",
               "-p", "minitorch_attn.homework.pytest_report", f"--grading-report={report}", "-q", "--tb=short",
               *selection]
    environment = {k: v for k, v in os.environ.items() if k not in DROPPED_ENVIRONMENT}
    environment["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    with open(output, "w") as sink:
        process = subprocess.Popen(command, cwd=folder, stdin=subprocess.DEVNULL, stdout=sink,
                                   stderr=subprocess.STDOUT, env=environment, start_new_session=True)
        stopped = _wait(process, report, limit)
    return _records(report), process.returncode, stopped, output.read_text(errors="replace")[-3000:]


def _wait(process, report, limit):
    """Wait for the run; stop its process group when it hangs, or when this wait ends by an
    exception such as Ctrl-C (the run has a session of its own, so a Ctrl-C typed in the
    terminal never reaches it: left alone it would go on in the background). When pytest
    exits by itself, what is left of its group (processes a student's code started) is
    stopped too. Returns why it was stopped, or None."""
    start, ended = time.monotonic(), None
    try:
        while process.poll() is None:
            now = time.monotonic()
            if ended is None and report.is_file() and '"exit"' in report.read_text(errors="replace"):
                ended = now
            if now - start > limit:
                return _stop(process, f"the test run was stopped after {limit:g} s in all")
            if ended is not None and now - ended > GRACE:
                return _stop(process, f"the tests ended but the process did not exit within {GRACE:g} s "
                                      f"(a thread that never stops?)")
            time.sleep(0.1)
        return _stop(process, None)
    except BaseException:
        _stop(process, "interrupted")
        raise


def _stop(process, reason):
    """Kill the run's whole process group, wait for it and return ``reason``."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:  # it ended by itself meanwhile
        pass
    process.wait()
    return reason


def _records(report):
    if not report.is_file():
        return []
    records = []
    for line in report.read_text(errors="replace").splitlines():
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:   # the last line of a run killed while writing it
            break
    return records


def _interpret(records, folder, returncode, stopped, tail, task_id):
    if not records:
        if returncode == 4:
            raise GraderError(f"pytest refused the grader's command line:\n{tail}")
        return Run([], stopped or f"pytest did not start (exit status {returncode}):\n{tail}")
    package = next((pathlib.Path(r["package"]) for r in records if "package" in r), None)
    if package is not None and package != folder / "minitorch_attn":
        raise GraderError(f"the tests imported minitorch_attn from {package}, not from the graded copy {folder}")
    exit_status = next((r["exit"] for r in records if "exit" in r), None)
    selected = next((r["selected"] for r in records if "selected" in r), [])
    if exit_status == 5 or (exit_status == 0 and not selected):
        raise GraderError(f"no test carries the marker of task {task_id} in the instructor's tests")
    done = {r["test"]: Check(r["test"], r["outcome"], r["message"], r["where"]) for r in records if "test" in r}
    started = [r["started"] for r in records if "started" in r]
    last = started[-1] if started and started[-1] not in done else None
    crash = stopped or (f"the test run crashed (exit status {returncode})" if exit_status is None else None)
    checks = []
    for nodeid in selected:
        if nodeid in done:
            checks.append(done[nodeid])
        elif nodeid == last:
            checks.append(Check(nodeid, "failed", f"the run ended during this test: {crash}\n{tail}"))
        else:
            checks.append(Check(nodeid, "failed", "did not run: " + (crash or "the session stopped before it")))
    errors = [f"{r['collect_error']} could not be collected: {r['message']}" for r in records if "collect_error" in r]
    problem = "\n".join(errors) or (crash if not checks else None)
    return Run(checks, problem)
