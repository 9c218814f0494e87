"""Grade a submission task by task, each task in isolation.

For each task of the assignment (see :mod:`.instructor` for the copy it runs in):

1. the student's code for the task is read from the submission (:mod:`.submission`); a
   missing file, broken markers or a syntax error in that code is the task's 0, with the
   reason;
2. it is spliced into a fresh copy of the instructor's tree, the reference solution in
   every other region;
3. the task's tests, those marked ``task_<id>`` (the held-back ones of
   ``tests/instructor/`` included), run in a subprocess (:mod:`.runner`).

A task earns its points when every one of its tests ran and passed; a skipped, failed,
timed-out or crashed test is a failure. The result of a task is the same for the same
code, so a :class:`Grader` remembers it: grading many submissions that share most of
their code (the planted mutants of ``homework selftest``) runs each distinct task once.

Before grading, the grader checks that every library the tests need is installed: a
missing one is a :class:`GraderError` (no score), never a 0 for the student.
"""

from __future__ import annotations

import dataclasses
import hashlib
import shutil
import time

from . import markers
from .instructor import GraderError, InstructorTree, SubmissionProblem, Workspace
from .runner import run_tests, task_files

__all__ = ["Grader", "GraderError", "TaskResult"]


@dataclasses.dataclass
class TaskResult:
    """The grade of one task: its points if ``problem`` is None and every check passed."""

    task_id: str
    title: str
    points: float
    checks: list
    problem: str | None = None
    seconds: float = 0.0
    reused: bool = False   # the same code was graded before in this grader: its result again

    @property
    def passed(self):
        return self.problem is None and bool(self.checks) and all(c.passed for c in self.checks)

    @property
    def score(self):
        return self.points if self.passed else 0

    @property
    def failures(self):
        return [c for c in self.checks if not c.passed]


class Grader:
    """Grades submissions against one instructor's tree. Use it as a context manager (it
    keeps one scratch copy of the instructor's tree, removed at the end).

    Args:
        tree: an :class:`InstructorTree` (or its root folder).
        timeout: the time limit of each test, in seconds.
    Raises:
        GraderError: when a library the tests need is missing.
    """

    def __init__(self, tree=None, timeout=60.0):
        self.tree = tree if isinstance(tree, InstructorTree) else InstructorTree(tree)
        self.tree.check_dependencies()
        self.timeout = timeout
        self._workspace = None
        self._done = {}   # (task id, digest of the spliced sources) -> TaskResult
        self._test_files = None

    def grade(self, submission, assignment):
        """``[TaskResult]`` for each task of assignment number ``assignment``, in order."""
        chosen = self.tree.assignment(assignment)
        for task in chosen["tasks"]:
            if not self.test_files(task["id"]):
                raise GraderError(f"no test in {self.tree.root}/tests carries the marker of task {task['id']} "
                                  f"(@pytest.mark.{markers.marker_name(task['id'])})")
        return [self.grade_task(task, submission) for task in chosen["tasks"]]

    def test_files(self, task_id):
        """The instructor's test files holding tests of ``task_id`` (collected once)."""
        if self._test_files is None:
            self._test_files = task_files(self.workspace.base, self.timeout)
        return self._test_files.get(markers.marker_name(task_id), [])

    def grade_task(self, task, submission):
        """Grade one task (a manifest entry) of ``submission``; see the module docstring."""
        start = time.monotonic()
        task_id = task["id"]

        def zero(problem):
            return TaskResult(task_id, task["title"], task["points"], [], problem, time.monotonic() - start)

        try:
            sources = self.tree.spliced(task_id, submission.for_task(task_id, self.tree))
        except SubmissionProblem as problem:
            return zero(str(problem))
        key = (task_id, hashlib.sha256(repr(sorted(sources.items())).encode()).hexdigest())
        if key in self._done:
            return dataclasses.replace(self._done[key], reused=True)
        for rel, text in sources.items():
            try:
                compile(text, rel, "exec")
            except SyntaxError as error:
                line = text.splitlines()[error.lineno - 1].strip() if error.lineno else ""
                return zero(f"syntax error in your code for task {task_id} in {rel} ({error.msg}), "
                            f"at the line `{line}`")
        folder = self.workspace.copy_with(sources)
        run = run_tests(folder, task_id, self.test_files(task_id), timeout=self.timeout)
        shutil.rmtree(folder, ignore_errors=True)
        result = TaskResult(task_id, task["title"], task["points"], run.checks, run.problem, time.monotonic() - start)
        self._done[key] = result
        return result

    @property
    def workspace(self):
        if self._workspace is None:
            self._workspace = Workspace(self.tree)
        return self._workspace

    def close(self):
        if self._workspace is not None:
            self._workspace.close()
            self._workspace = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
