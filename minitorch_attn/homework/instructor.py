"""The instructor's tree, and the copies of it in which a submission is graded.

The student's code runs in a copy of the instructor's tree made as the student's own tree
is (:meth:`InstructorTree.student_tree`): the package with the student's code in every
solution region of the assignment graded, the reference solutions of earlier assignments
(handed out anyway) and stubs for every later one; the public tests, the gradcheck entries
and checker, ``setup.cfg``. No held-back test, no reference of the assignment or of a
later one, no release secret. Nothing else of the submission reaches the copy: not its
tests or ``conftest.py``, not its ``setup.cfg`` or ``.homework.json``, not its gradcheck
checker or its package ``__init__.py``: only the code between the SOLUTION lines.

The held-back tests run in the grader's own copy of the whole instructor's tree
(``Workspace.base``, which no student code can enter) and reach the student's code in
the other copy through :mod:`.judge`.

Regions are matched by task id and order: the k-th ``BEGIN SOLUTION 2.1`` region of the
student's ``functional/softmax.py`` fills the k-th one of the instructor's, re-indented
to it. The instructor's tree may change between handing out and grading (docstrings,
code outside the regions): only the number of regions of a task in a file must stay.
"""

from __future__ import annotations

import compileall
import importlib.metadata
import os
import pathlib
import shutil
import tempfile
import zipfile

from . import markers, preflight

COPIED = ("minitorch_attn", "tests", "gradcheck", "setup.cfg", "pyproject.toml")
SKIPPED = shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache", ".hypothesis", "results.json")
INSTRUCTOR_TESTS = "tests/instructor"
HANDOUT = ".homework/handout.zip"  # in a student tree: the graded files as handed out (homework make)
SECRET_FILE = "minitorch_attn/homework/release_secret.txt"  # in an autograder zip only
NEVER_COPIED = (
    "minitorch_attn/homework/mutants.json",
    "minitorch_attn/homework/leaks.json",
    "minitorch_attn/homework/signatures.json",
    SECRET_FILE,
)  # into a copy that student code runs in


class GraderError(ValueError):
    """The grader cannot give a grade: its own setup is wrong (a missing dependency, an
    instructor's tree without tests or with broken markers). No score is written."""


class SubmissionProblem(Exception):
    """What makes one task of a submission ungradable; the task scores 0 with this message."""


class InstructorTree:
    """The instructor's checkout at ``root``: manifest, solution regions and tests.

    A student's own tree (no held-back tests, and a ``HANDOUT`` that ``homework make``
    wrote) stands for the tree *as handed out*: ``root`` is then a private copy of that
    handout, not the student's edited files, so that grading it keeps only the code between
    the SOLUTION lines of a submission, as the autograder does (``source`` is the folder given).

    Raises:
        GraderError: if ``root`` lacks the package, the tests or setup.cfg, or its markers
            are broken.
    """

    def __init__(self, root=None):
        self.source = pathlib.Path(markers.PROJECT_ROOT if root is None else root).resolve()
        self.root, self._handout = self.source, None
        if not (self.source / INSTRUCTOR_TESTS).is_dir() and (self.source / HANDOUT).is_file():
            self._handout = tempfile.TemporaryDirectory(prefix="minitorch-attn-handout-")
            with zipfile.ZipFile(self.source / HANDOUT) as archive:
                archive.extractall(self._handout.name)
            self.root = pathlib.Path(self._handout.name)
        for name in ("minitorch_attn", "tests", "setup.cfg"):
            if not (self.root / name).exists():
                raise GraderError(
                    f"{self.root} is not an instructor's tree (it has no {name}): grade from a "
                    f"source checkout of the project (pip install -e) or pass --instructor"
                )
        self.manifest = markers.load_manifest(self.root / "minitorch_attn" / "homework" / "manifest.json")
        self.titles = {t["id"]: t["title"] for a in self.manifest["assignments"] for t in a["tasks"]}
        self.regions = {}  # "minitorch_attn/functional/softmax.py" -> [Region, ...] in file order
        for path in sorted((self.root / "minitorch_attn").rglob("*.py")):
            try:
                found = markers.find_regions(path)
            except markers.MarkerError as exc:
                raise GraderError(f"the instructor's solution markers are broken: {exc}") from None
            if found:
                self.regions[path.relative_to(self.root).as_posix()] = found
        self.references = [
            path.relative_to(self.root).as_posix()  # files with REFERENCE regions
            for path in sorted((self.root / "minitorch_attn" / markers.REFERENCE_HOME).glob("*.py"))
            if markers.find_references(path)
        ]

    def assignment(self, number):
        """The manifest entry of assignment ``number``, after checking that each of its
        tasks has solution regions here (GraderError otherwise)."""
        chosen = markers.assignment_by_number(self.manifest, number)
        for task in chosen["tasks"]:
            if not self.files_of(task["id"]):
                raise GraderError(f"task {task['id']} has no solution region in {self.root}/minitorch_attn")
        return chosen

    def tasks_of(self, number, later=False):
        """Ids of the tasks of assignment ``number`` (with ``later``: of every assignment after it)."""
        return {
            t["id"]
            for a in self.manifest["assignments"]
            if (a["number"] > number if later else a["number"] == number)
            for t in a["tasks"]
        }

    def files_of(self, task_id):
        """The package files (relative paths) holding regions of ``task_id``."""
        return [rel for rel, regions in self.regions.items() if any(r.task == task_id for r in regions)]

    def spliced(self, task_id, blocks, stubbed=()):
        """``{relative path: source}`` of the task's files, each region of ``task_id`` holding
        the student's code from ``blocks`` (``{relative path: [lines of each region]}``) and
        every other region the reference solution (or its stub, for the tasks in ``stubbed``).

        Raises:
            SubmissionProblem: when the student's file has another number of regions of the task.
        """
        sources = {}
        for rel in self.files_of(task_id):
            regions = self.regions[rel]
            expected = sum(r.task == task_id for r in regions)
            theirs = blocks[rel]
            if len(theirs) != expected:
                raise SubmissionProblem(
                    f"{rel} should have {expected} region(s) `# BEGIN SOLUTION {task_id}` ... `# END SOLUTION` "
                    f"as handed out, but the submitted file has {len(theirs)}: keep every pair of SOLUTION lines"
                )
            sources[rel] = splice((self.root / rel).read_text(), regions, task_id, theirs, stubbed, self.titles)
        return sources

    def student_tree(self, theirs, number):
        """``{relative path: source}`` of every package file with a region of assignment
        ``number`` or a later one, as the student has it: the code of ``theirs`` (``{task id:
        {relative path: [lines of each region]}}``, tasks of ``number``) in its regions, every
        other region of ``number`` and of later assignments its stub, earlier ones the
        reference's."""
        stubbed = self.tasks_of(number) | self.tasks_of(number, later=True)
        sources = {}
        for rel, regions in self.regions.items():
            if any(r.task in stubbed for r in regions):
                replacements = {task: blocks[rel] for task, blocks in theirs.items() if rel in blocks}
                sources[rel] = splice_all((self.root / rel).read_text(), regions, replacements, stubbed, self.titles)
        return sources

    def requirements(self):
        """The distributions the tests need: setup.cfg's install_requires and its test extra
        (:func:`.preflight.requirement_lines`, the list the autograder's pins are resolved from)."""
        return [preflight.NAME.match(line)[0] for line in preflight.requirement_lines(self.root / "setup.cfg")]

    def check_dependencies(self):
        """GraderError naming every requirement of the tests that is not installed: a
        missing library would fail or skip tests and score a correct solution 0."""
        missing = []
        for name in self.requirements():
            try:
                importlib.metadata.version(name)
            except importlib.metadata.PackageNotFoundError:
                missing.append(name)
        if missing:
            raise GraderError(
                f"the tests need {', '.join(missing)}, not installed in this Python: "
                f'pip install -e "{self.root}[test]"; nothing was graded'
            )


def splice(text, regions, task_id, blocks, stubbed=(), titles=None):
    """``text`` (a file with ``regions``) with the code of the regions of ``task_id``
    replaced by ``blocks`` in order (each re-indented to its region), the regions of the
    tasks in ``stubbed`` replaced by their stub, the other regions and the marker lines
    unchanged."""
    return splice_all(text, regions, {task_id: blocks} if task_id else {}, stubbed, titles)


def splice_all(text, regions, replacements, stubbed=(), titles=None):
    """``text`` with the regions of each task in ``replacements`` (``{task: [lines of each
    region]}``) holding that code, those of ``stubbed`` their stub, and the others as they are."""
    lines = text.splitlines()
    out, cursor = [], 0
    theirs = {task: iter(blocks) for task, blocks in replacements.items()}
    for region in regions:
        out.extend(lines[cursor : region.begin + 1])  # up to BEGIN SOLUTION
        if region.task in theirs:
            out.extend(region.indent + line if line else "" for line in next(theirs[region.task]))
        elif region.task in stubbed:
            out.append(markers.stub_text(region, (titles or {}).get(region.task, "")))
        else:
            out.extend(region.code)
        cursor = region.end  # from END SOLUTION on
    out.extend(lines[cursor:])
    return "\n".join(out) + "\n"


class Workspace:
    """The grader's own scratch folder (mode 0700: no other user can enter it) with one
    compiled copy of the instructor's tree, ``base``, and the copies student code runs in.

    ``base`` holds every reference solution and the held-back tests; no student code ever
    runs there (the grader collects the tests and runs the held-back ones in it). Each copy
    for student code is made from the *graded base* of an assignment (:meth:`graded_base`):
    ``base`` with every region of the ``stubbed`` tasks (that assignment's and the later
    ones) replaced by its stub, their reference answers in the catalogue held back
    (:func:`.markers.hold_back`), and without the held-out files (``tests/instructor`` among
    them), the selftest's catalogue and the release secret; the student's code is then
    written over it (:meth:`copy_with`). Use it as a context manager; it removes its folder."""

    def __init__(self, tree):
        self.tree = tree
        self._scratch = tempfile.TemporaryDirectory(prefix="minitorch-attn-grading-")
        self.folder = pathlib.Path(self._scratch.name)
        self.base = self.folder / "instructor"
        self.base.mkdir()
        for name in COPIED:
            source = tree.root / name
            if source.is_dir():
                shutil.copytree(source, self.base / name, ignore=SKIPPED)
            elif source.is_file():
                shutil.copy2(source, self.base / name)
        compileall.compile_dir(self.base, quiet=2)
        self._bases = {}

    def graded_base(self, stubbed):
        """The copy of ``base`` that copies for student code are made from (see the class docstring)."""
        key = frozenset(stubbed)
        if key not in self._bases:
            folder = self.folder / f"graded-{len(self._bases)}"
            shutil.copytree(self.base, folder)
            for rel, regions in self.tree.regions.items():
                if any(r.task in key for r in regions):
                    _write_source(
                        folder / rel, splice_all((self.base / rel).read_text(), regions, {}, key, self.tree.titles)
                    )
            for rel in self.tree.references:  # the catalogue's answers of those tasks
                _write_source(folder / rel, markers.hold_back((folder / rel).read_text(), rel, key))
            for rel in [*self.tree.manifest.get("held_out", []), INSTRUCTOR_TESTS, *NEVER_COPIED]:
                path = folder / rel
                if path.is_dir() and not path.is_symlink():
                    shutil.rmtree(path)
                else:
                    path.unlink(missing_ok=True)
                    for compiled in (path.parent / "__pycache__").glob(f"{path.stem}.*.pyc"):  # its bytecode too
                        compiled.unlink()
            self._bases[key] = folder
        return self._bases[key]

    def copy_with(self, sources, stubbed):
        """A new copy of the graded base with ``sources`` (``{relative path: text}``) written
        over it; returns its folder (remove it with :meth:`discard`). The copy sits in a
        folder of its own that other users may pass through but not list (mode 0711), outside
        the grader's own folder: the student's account must reach the copy, and nothing else."""
        holder = pathlib.Path(tempfile.mkdtemp(prefix="minitorch-attn-task-"))
        os.chmod(holder, 0o711)
        folder = holder / "tree"
        shutil.copytree(self.graded_base(stubbed), folder)
        os.chmod(folder, 0o700)  # closed until it is handed to the student's account (sandbox.hand_over)
        for rel, text in sources.items():
            _write_source(folder / rel, text)
        return folder

    @staticmethod
    def discard(folder):
        """Remove a copy made by :meth:`copy_with`, whatever the student's code left in it."""
        shutil.rmtree(pathlib.Path(folder).parent, ignore_errors=True)

    def close(self):
        self._scratch.cleanup()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _write_source(target, text):
    """Write a library file, and drop its compiled version (of the instructor's text)."""
    target.write_text(text)
    for stale in (target.parent / "__pycache__").glob(f"{target.stem}.*.pyc"):
        stale.unlink()
