"""The trusted side of the held-back checks: a pytest plugin that gives them the student's library.

    python -m pytest -c BASE/setup.cfg --rootdir BASE -p minitorch_attn.homework.judge --judge SPEC.json
        -p minitorch_attn.homework.pytest_report --grading-report REPORT  tests/instructor/...

The grader (:mod:`.runner`) runs the held-back tests, ``tests/instructor/``, in its own
copy of the instructor's tree (``BASE``: readable by root only when the grader is root), as
its own user. This process runs no student code: the tests reach it only through the
``student`` fixture (``tests/instructor/conftest.py``), a :class:`.remote.Student` whose worker
runs under the sandbox in the copy that holds the student's code, and which holds no
held-back test and no reference of the assignment. The tests choose the inputs, ask the
student's library for values and compare them with their own references, so the report
this process writes is the grader's, not a claim of the student's.

``SPEC.json`` (written by the grader, in its own folder)::

    {"folder": the student's copy, "confinement": (.sandbox.Confinement.to_json), "python": PATH,
     "seed": int, "timeout": seconds for one test}

``seed`` is the grading's secret seed (:func:`seed`): an HMAC of the release's secret,
the task and the student's code, so held-back inputs are new for new code and the same for
the same code (the same submission always gets the same grade). Each test draws from it
and its own id (the ``rng`` fixture).

Without ``--judge`` (the project's own test suite) the plugin is not loaded, and the
``student`` fixture is the library this process imports.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import pathlib

from . import remote, sandbox

PLUGIN = "minitorch-attn-judge"


def seed(secret, task_id, code):
    """The held-back checks' seed for ``task_id``: an HMAC of the task and the student's
    ``code`` for it (any text) under ``secret`` (bytes or str), as a non-negative 62-bit int."""
    key = secret.encode() if isinstance(secret, str) else bytes(secret)
    digest = hmac.new(key, f"{task_id}\n{code}".encode(), hashlib.sha256).digest()
    return int.from_bytes(digest[:8], "big") >> 2


def write_spec(path, folder, confinement, python, seed_value, timeout):
    """Write the plugin's SPEC.json to ``path``; returns it."""
    path = pathlib.Path(path)
    path.write_text(
        json.dumps(
            {
                "folder": str(folder),
                "confinement": confinement.to_json(),
                "python": str(python),
                "seed": int(seed_value),
                "timeout": float(timeout),
            }
        )
    )
    return path


def pytest_addoption(parser):
    parser.addoption(
        "--judge",
        default=None,
        metavar="SPEC",
        help="run the held-back tests on the student's library described in SPEC (the grader's)",
    )


def pytest_configure(config):
    path = config.getoption("--judge")
    if path:
        config.pluginmanager.register(Judge(json.loads(pathlib.Path(path).read_text())), PLUGIN)


class Judge:
    """The student's library for this session (``student``), the seed and a test's time."""

    def __init__(self, spec):
        self.seed = int(spec["seed"])
        self.timeout = float(spec["timeout"])
        self.student = remote.Student(
            pathlib.Path(spec["folder"]), sandbox.Confinement.from_json(spec["confinement"]), spec["python"]
        )

    def pytest_sessionfinish(self, session, exitstatus):
        self.student.close()


def judge_of(config):
    """The :class:`Judge` of this session, or None (no grader: the project's own suite)."""
    return config.pluginmanager.get_plugin(PLUGIN)
