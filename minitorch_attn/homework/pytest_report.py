"""A pytest plugin for the grader: one JSON line per event, and no debugger.

The grader (:mod:`.runner`) loads it with ``-p minitorch_attn.homework.pytest_report
--grading-report FILE``. Each line of FILE is one JSON object, written and flushed as it
happens, so a run that crashes or hangs still says how far it got:

* ``{"package": DIR}``: the ``minitorch_attn`` these tests import (the grader checks that
  it is the copy being graded);
* ``{"selected": [nodeid, ...], "tasks": {nodeid: [task marker, ...]}}``: the tests
  chosen to run, and the homework task markers (``task_2_1``) each one carries;
* ``{"started": nodeid}``, then ``{"test": nodeid, "outcome", "message", "where"}`` with
  outcome ``passed``, ``failed`` or ``skipped`` (setup, call and teardown together);
* ``{"collect_error": nodeid, "message"}`` for a test file that cannot be imported;
* ``{"exit": status}`` when the session ends.

For the public tests the report is written by the process that runs the student's code,
so the grader reads it as a claim, not a verdict; for the held-back tests it is written by
the grader's own process, where no student code runs (see :mod:`.runner`).

``breakpoint()`` and ``pdb.set_trace()`` raise instead of waiting for a terminal that
is not there (the grader closes stdin).
"""

from __future__ import annotations

import json
import pathlib
import pdb
import sys

try:
    from pytest import hookimpl
except ImportError:  # imported for its documentation (the site's API reference), not as a plugin

    def hookimpl(**options):  # type: ignore[misc]
        return lambda hook: hook


MAX_MESSAGE_CHARS = 4_000
PACKAGE = pathlib.Path(__file__).resolve().parents[1]  # the minitorch_attn this run imports


class DebuggerCalled(RuntimeError):
    """``breakpoint()`` or ``pdb.set_trace()`` in graded code."""


def _no_debugger(*args, **kwargs):
    raise DebuggerCalled(
        "breakpoint() or pdb.set_trace() was called: graded code runs without a "
        "terminal, so a debugger would wait forever; remove the call"
    )


def pytest_addoption(parser):
    parser.addoption(
        "--grading-report",
        default=None,
        metavar="FILE",
        help="write one JSON line per test to FILE (used by minitorch-attn homework grade)",
    )


@hookimpl(trylast=True)  # after pytest's own debugging plugin has set its hooks
def pytest_configure(config):
    path = config.getoption("--grading-report")
    if path:
        pdb.set_trace = _no_debugger
        sys.breakpointhook = _no_debugger
        config.pluginmanager.register(GradingReport(path), "minitorch-attn-grading-report")


class GradingReport:
    """The hooks that write the report, registered only when --grading-report is given."""

    def __init__(self, path):
        self.file = open(path, "a", encoding="utf-8")
        self.phases = {}  # nodeid -> the setup/call/teardown reports that did not pass
        self.write(package=str(PACKAGE))

    def write(self, **record):
        self.file.write(json.dumps(record) + "\n")
        self.file.flush()

    def pytest_collectreport(self, report):
        if report.failed:
            self.write(collect_error=report.nodeid or "(session)", message=_message(report))

    def pytest_collection_finish(self, session):
        tasks = {
            item.nodeid: [m.name for m in item.iter_markers() if m.name.startswith("task_")] for item in session.items
        }
        self.write(selected=[item.nodeid for item in session.items], tasks=tasks)

    def pytest_runtest_logstart(self, nodeid, location):
        self.write(started=nodeid)

    def pytest_runtest_logreport(self, report):
        """Gather setup, call and teardown of one test; write it when its teardown ends."""
        phases = self.phases.setdefault(report.nodeid, [])
        if not report.passed:
            phases.append((report.when, report.outcome, _message(report), _where(report)))
        if report.when != "teardown":
            return
        del self.phases[report.nodeid]
        failed = [p for p in phases if p[1] == "failed"]
        when, outcome, message, where = (failed or phases or [(None, "passed", "", "")])[0]
        self.write(test=report.nodeid, outcome=outcome, when=when, message=message, where=where)

    def pytest_sessionfinish(self, session, exitstatus):
        self.write(exit=int(exitstatus))
        self.file.close()


def _message(report):
    """The exception message (or skip reason) of a failed or skipped report, at most
    ``MAX_MESSAGE_CHARS`` of it (a student's code may raise with megabytes of text)."""
    longrepr = report.longrepr
    if isinstance(longrepr, tuple):  # a skip: (path, lineno, reason)
        message = str(longrepr[2])
    elif getattr(longrepr, "reprcrash", None) is not None:
        message = longrepr.reprcrash.message
    else:
        message = str(longrepr)
    return message if len(message) <= MAX_MESSAGE_CHARS else message[:MAX_MESSAGE_CHARS] + " ... (cut)"


def _where(report):
    """``file:line`` of the test's own line that failed (in a ``test_*.py`` file, not in a
    helper it calls), and of the deepest line in the package when the error was raised
    there (``tests/test_x.py:12; minitorch_attn/ops.py:80``)."""
    entries = getattr(getattr(report.longrepr, "reprtraceback", None), "reprentries", None) or []
    places = [e.reprfileloc for e in entries if getattr(e, "reprfileloc", None) is not None]
    in_tests = [f"{p.path}:{p.lineno}" for p in places if pathlib.PurePath(p.path).name.startswith("test_")]
    in_package = [f"{p.path}:{p.lineno}" for p in places if "minitorch_attn" in pathlib.PurePath(p.path).parts]
    return "; ".join(dict.fromkeys(in_tests[-1:] + in_package[-1:]))
