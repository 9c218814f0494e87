"""Grade a submission task by task: the student's code computes, the grader judges.

For assignment N, the grader first collects the instructor's tests in its own copy (no
student code there) to know which tests belong to each task. Student code then only ever
runs in a copy of *the student's own tree* (:meth:`.InstructorTree.student_tree`): their
code in every task of N (a task whose code cannot be read or does not compile: its stub),
the solutions of earlier assignments, stubs for every later one, the public tests; no
held-back test and no reference of N or later is on disk there. Then:

1. **the visible run** (:meth:`Grader.visible`): the public tests of every task of N in
   that tree. Its outcomes are the smoke tests that students see at once; they are worth
   no points.
2. **each task T on its own** (:meth:`Grader.grade_task`): T's code is read from the
   submission (:mod:`.submission`); a missing file, broken markers or a syntax error is
   T's 0, with the reason. In a fresh copy of the student's tree, under the sandbox
   (:mod:`.sandbox`), T's public tests run; then T's held-back tests run in the grader's own
   copy (:func:`.runner.run_held_back`, :mod:`.judge`), a trusted process that asks the
   student's library, in a worker under the sandbox in that copy, for values and compares
   them with the reference's.

T earns its points when every test the grader collected for T passed. The public tests'
outcomes are read from a report that the student's code could forge; the held-back ones
are the grader's own, on inputs drawn from a secret (:func:`.judge.seed`), so a task's
points always need code that computes the right values: every task must have held-back
tests (a :class:`GraderError` otherwise).

The other tasks of N are the student's own code, as in their tree; never the reference:
the student's process could read or call it. T's tests reach T's code only (where a check
needs another task's part, such as the engine of a backward of assignment 1 or the forward
of an attention backward, the held-back test's own process supplies it: see
``tests/instructor/expect.py``), so T's points depend on T's code alone; only where T's code
itself calls another task's (a softmax built on log_softmax) does a mistake there cost T too,
as it does when the student runs the tests. The selftest checks it (:mod:`.selftest`).

Time: each run (the visible one, then one per task) gets an equal share of ``budget``
(the platform's limit, less ``RESERVE``), and each test at most half a share, so that a
hang costs its own task and the grading always ends in time. A task's public tests get
``PUBLIC_SHARE`` of its share, its held-back tests the rest. The result of a task is the
same for the same code, so a :class:`Grader` remembers it (the selftest grades many
submissions that share most of their code).

A missing library the tests need is a :class:`~minitorch_attn.homework.instructor.GraderError`
(no score), never a 0. In a
student's own tree (``homework grade .`` there: no held-back tests, and their code where the
reference would be) only the public tests run.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import pathlib
import sys
import time

from . import hiding, judge, markers, probes, sandbox
from .instructor import INSTRUCTOR_TESTS, SECRET_FILE, GraderError, InstructorTree, SubmissionProblem, Workspace
from .runner import Run, collect, run_held_back, run_tests
from .submission import ungraded_notice

__all__ = ["Grader", "GraderError", "TaskResult"]

LOCAL_SECRET = "minitorch-attn local grading: not a secret"
SECRET_VARIABLE = "MINITORCH_ATTN_GRADING_SECRET"
RESERVE = 45.0  # seconds of the budget kept for starting, collecting and writing results
PUBLIC_SHARE = 0.4  # of a task's time, for its public tests (the held-back ones get the rest)


@dataclasses.dataclass
class TaskResult:
    """The grade of one task: its points if ``problem`` is None and every check passed.
    ``visible`` is the task's part of the visible run (None when there was none)."""

    task_id: str
    title: str
    points: float
    checks: list
    problem: str | None = None
    seconds: float = 0.0
    reused: bool = False  # the same code was graded before in this grader: its result again
    visible: Run | None = None
    diagnosis: str | None = None  # the catalogued mistake its probes name (:mod:`.probes`)
    notes: list = dataclasses.field(default_factory=list)  # code of its files outside the regions, not graded

    @property
    def passed(self):
        return self.problem is None and bool(self.checks) and all(c.passed for c in self.checks)

    @property
    def score(self):
        return self.points if self.passed else 0

    @property
    def failures(self):
        return [c for c in self.checks if not c.passed]


def task_limits(budget, runs, timeout):
    """``(seconds for each run, seconds for each test)``: ``runs`` equal shares of
    ``budget - RESERVE``, and a test at most half a share (and at most ``timeout``).

    Raises:
        ValueError: a budget too small to give each run 10 seconds.
    """
    share = (budget - RESERVE) / max(1, runs)
    if share < 10:
        raise ValueError(
            f"a budget of {budget:g} s is too small for {runs} runs: give at least {RESERVE + 10 * runs:g} s"
        )
    return share, min(timeout, share / 2)


class Grader:
    """Grades submissions against one instructor's tree. Use it as a context manager (it
    keeps its scratch copies, removed at the end).

    Args:
        tree: an :class:`InstructorTree` (or its root folder).
        timeout: the longest time of one test, in seconds.
        budget: the time the whole grading of one submission may take, in seconds
            (Gradescope's timeout for the assignment).
        secret: the held-back tests' secret (default: the release's, else
            $MINITORCH_ATTN_GRADING_SECRET, else a fixed local one).
        python: the Python that runs student code (default: this one).
        memory: the memory of the machine the grading runs on, in MB (Gradescope's default
            768); each process of student code may use that less what the grader keeps
            (:func:`.sandbox.student_memory`).
        require_isolation: refuse to grade (GraderError) when student code could reach the
            reference solutions or a reference library (:mod:`.hiding`); None: when
            ``$MINITORCH_ATTN_REQUIRE_ISOLATION`` is set (``run_autograder`` sets it).
    Raises:
        ValueError: a memory too small to leave student code its minimum.
        GraderError: when a library the tests need is missing, or when isolation is required
            and falls short (what, and the command that fixes it); from :meth:`grade`, when a task
            has no held-back test (its points would rest on a report student code writes).
    """

    def __init__(
        self,
        tree=None,
        timeout=60.0,
        budget=600.0,
        secret=None,
        python=None,
        memory=sandbox.PLATFORM_MEMORY_MB,
        require_isolation=None,
    ):
        self.tree = tree if isinstance(tree, InstructorTree) else InstructorTree(tree)
        self.tree.check_dependencies()
        self.timeout, self.budget = timeout, budget
        self.secret = secret or _release_secret(self.tree.root)
        self.python = python or sys.executable
        self.confinement = _confinement(self.python, memory, self.tree, require_isolation)
        self.signatures, self.not_probed = probes.load(self.tree.root)
        # a student's own tree (no held-back tests) holds their code, not a reference: nothing to judge with
        self.has_reference = (self.tree.root / INSTRUCTOR_TESTS).is_dir()
        self._workspace = None
        self._done = {}  # (task id, digest of the student's tree) -> TaskResult
        self._expected = None

    def grade(self, submission, assignment, visible=True, on_result=None):
        """``[TaskResult]`` for each task of assignment number ``assignment``, in order.
        With ``visible``, the visible run comes first; ``on_result(results so far)`` is
        called after each task (to write results.json as it goes)."""
        chosen = self.tree.assignment(assignment)
        for task in chosen["tasks"]:
            if not self.expected(task["id"]):
                raise GraderError(
                    f"no test in {self.tree.root}/tests carries the marker of task {task['id']} "
                    f"(@pytest.mark.{markers.marker_name(task['id'])})"
                )
            if self.has_reference and not self.held_back(task["id"]):
                raise GraderError(
                    f"task {task['id']} has no held-back test in {self.tree.root}/{INSTRUCTOR_TESTS}: "
                    f"its points would rest on a report that the student's code writes"
                )
        limit, test_timeout = task_limits(self.budget, len(chosen["tasks"]) + visible, self.timeout)
        shown = self.visible(submission, assignment, limit, test_timeout) if visible else {}
        ungraded = submission.ungraded(self.tree, assignment)
        results = []
        for task in chosen["tasks"]:
            result = self.grade_task(task, submission, limit, test_timeout)
            notes = ungraded_notice(ungraded, self.tree.files_of(task["id"]))
            results.append(dataclasses.replace(result, visible=shown.get(task["id"]), notes=notes))
            if on_result is not None:
                on_result(results)
        return results

    def expected(self, task_id, public_only=False):
        """The node ids of the instructor's tests of ``task_id`` (collected once, in the
        grader's copy); with ``public_only``, those of the student's tree only.

        Raises:
            GraderError: a test of the task is in a held-out file outside ``tests/instructor``
                (it would run nowhere: not beside the student's code, not in the judge).
        """
        if self._expected is None:
            self._expected = collect(self.workspace.base, limit=max(120.0, self.budget / 4))
        held_out = tuple(p.rstrip("/") for p in self.tree.manifest.get("held_out", []))
        found = self._expected.get(markers.marker_name(task_id), [])
        stray = [n for n in found if n.startswith(held_out) and not n.startswith(INSTRUCTOR_TESTS + "/")]
        if stray:
            raise GraderError(
                f"{stray[0]} carries the marker of task {task_id} but is in a held-out file "
                f"outside {INSTRUCTOR_TESTS}: move it there (held back) or out of the held-out list"
            )
        return [n for n in found if not (public_only and n.startswith(held_out))]

    def held_back(self, task_id):
        """The node ids of the held-back tests of ``task_id`` (``tests/instructor/``)."""
        return [n for n in self.expected(task_id) if n.startswith(INSTRUCTOR_TESTS + "/")]

    def student_tree(self, submission, number):
        """``{relative path: source}`` of the student's own tree for assignment ``number``:
        their code in each task whose code can be read and compiles, the stub elsewhere."""
        theirs = {}
        for task_id in sorted(self.tree.tasks_of(number)):
            try:
                blocks = submission.for_task(task_id, self.tree)
                self._compile(self.tree.spliced(task_id, blocks), task_id)
            except SubmissionProblem:
                continue
            theirs[task_id] = blocks
        return self.tree.student_tree(theirs, number)

    def grade_task(self, task, submission, limit=300.0, test_timeout=None):
        """Grade one task (a manifest entry) of ``submission``; see the module docstring."""
        start = time.monotonic()
        task_id = task["id"]
        number = int(task_id.split(".")[0])
        test_timeout = test_timeout or self.timeout

        def zero(problem):
            return TaskResult(task_id, task["title"], task["points"], [], problem, time.monotonic() - start)

        try:
            self._compile(self.tree.spliced(task_id, submission.for_task(task_id, self.tree)), task_id)
        except SubmissionProblem as problem:
            return zero(str(problem))
        sources = self.student_tree(submission, number)
        digest = hashlib.sha256(repr(sorted(sources.items())).encode()).hexdigest()
        if (task_id, digest) in self._done:
            return dataclasses.replace(self._done[(task_id, digest)], reused=True)
        stubbed = self.tree.tasks_of(number) | self.tree.tasks_of(number, later=True)
        folder = self.workspace.copy_with(sources, stubbed)
        try:
            public = run_tests(
                folder,
                [task_id],
                {task_id: self.expected(task_id, public_only=True)},
                test_timeout,
                limit * PUBLIC_SHARE,
                self.confinement,
                self.python,
            )[task_id]
            held = Run([])
            if self.has_reference:
                held = run_held_back(
                    self.workspace.base,
                    task_id,
                    self.held_back(task_id),
                    folder,
                    self.confinement,
                    judge.seed(self.secret, task_id, digest),
                    test_timeout,
                    max(limit * (1 - PUBLIC_SHARE), limit - (time.monotonic() - start)),
                    self.python,
                )
        finally:
            self.workspace.discard(folder)
        result = TaskResult(
            task_id,
            task["title"],
            task["points"],
            public.checks + held.checks,
            public.problem or held.problem,
            time.monotonic() - start,
        )
        result.diagnosis = probes.diagnose(self.signatures, task_id, result.checks, result.problem)
        self._done[(task_id, digest)] = result
        return result

    def visible(self, submission, assignment, limit, test_timeout):
        """``{task id: Run}`` of the public tests on the student's own tree (see the module docstring)."""
        tasks = sorted(self.tree.tasks_of(assignment))
        stubbed = set(tasks) | self.tree.tasks_of(assignment, later=True)
        folder = self.workspace.copy_with(self.student_tree(submission, assignment), stubbed)
        try:
            expected = {t: self.expected(t, public_only=True) for t in tasks}
            return run_tests(folder, tasks, expected, test_timeout, limit, self.confinement, self.python)
        finally:
            self.workspace.discard(folder)

    @staticmethod
    def _compile(sources, task_id):
        """SubmissionProblem naming the line when the task's code in ``sources`` does not compile."""
        for rel, text in sources.items():
            try:
                compile(text, rel, "exec")
            except SyntaxError as error:
                line = text.splitlines()[error.lineno - 1].strip() if error.lineno else ""
                raise SubmissionProblem(
                    f"syntax error in your code for task {task_id} in {rel} ({error.msg}), at the line `{line}`"
                ) from None
            except (RecursionError, MemoryError, OverflowError, ValueError) as error:  # nested too deep, a NUL byte
                raise SubmissionProblem(
                    f"your code for task {task_id} in {rel} cannot be compiled "
                    f"({type(error).__name__}: {str(error)[:200]})"
                ) from None

    @property
    def account(self):
        """``(uid, gid)`` of the account that runs student code, or None (the grader's own user)."""
        return self.confinement.account

    @property
    def isolation(self):
        """A sentence saying what student code ran under (user, network, memory)."""
        return self.confinement.why

    @property
    def workspace(self):
        if self._workspace is None:
            self._workspace = Workspace(self.tree)
            os.chmod(self._workspace.folder, 0o700)
        return self._workspace

    def close(self):
        if self._workspace is not None:
            self._workspace.close()
            self._workspace = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _confinement(python, memory, tree, required):
    """The :class:`.sandbox.Confinement` of student code on this machine, with the instructor's
    checkout out of its reach; GraderError naming what student code could still reach, and
    the command that fixes it, when isolation is ``required`` (or ``$MINITORCH_ATTN_REQUIRE_ISOLATION``
    is set) and it falls short (:func:`.hiding.isolation_problems`)."""
    confinement = sandbox.Confinement.of(python, memory, private=(tree.source,))
    if required or (required is None and os.environ.get("MINITORCH_ATTN_REQUIRE_ISOLATION")):
        solutions = [tree.source / rel for rel in tree.regions] if (tree.source / INSTRUCTOR_TESTS).is_dir() else []
        problems = hiding.isolation_problems(python, tree.source, solutions, confinement.hidden, confinement.account)
        if problems:
            raise GraderError("student code would reach what it must not: " + "; ".join(problems))
    return confinement


def _release_secret(root):
    """The secret of an autograder release (a file only root can read there), else
    ``$MINITORCH_ATTN_GRADING_SECRET``, else a fixed local one (not a secret: any student
    can grade their own tree with it)."""
    path = pathlib.Path(root) / SECRET_FILE
    if path.is_file():
        return path.read_text().strip()
    return os.environ.get(SECRET_VARIABLE) or LOCAL_SECRET
