"""The instructor's tree, and the copy of it in which one task of a submission is graded.

Grading task T of a submission means: take a fresh copy of the instructor's tree (the
package with every reference solution, the tests with the held-back ones, the gradcheck
entries and checker, ``setup.cfg``) and replace the code of T's solution regions, and
only those, by the student's code for T. Nothing else of the submission reaches the
copy: not its tests or ``conftest.py``, not its ``setup.cfg`` or ``.homework.json``, not
its gradcheck checker or its package ``__init__.py``. So a task's points depend on that
task's code only, whatever the student did elsewhere, and a task left undone costs only
its own points.

Regions are matched by task id and order: the k-th ``BEGIN SOLUTION 2.1`` region of the
student's ``functional/softmax.py`` fills the k-th one of the instructor's, re-indented
to it. The instructor's tree may change between handing out and grading (docstrings,
code outside the regions): only the number of regions of a task in a file must stay.
"""

from __future__ import annotations

import compileall
import configparser
import importlib.metadata
import pathlib
import re
import shutil
import tempfile

from . import markers

COPIED = ("minitorch_attn", "tests", "gradcheck", "setup.cfg", "pyproject.toml")
SKIPPED = shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache", ".hypothesis", "results.json")


class GraderError(ValueError):
    """The grader cannot give a grade: its own setup is wrong (a missing dependency, an
    instructor's tree without tests or with broken markers). No score is written."""


class SubmissionProblem(Exception):
    """What makes one task of a submission ungradable; the task scores 0 with this message."""


class InstructorTree:
    """The instructor's checkout at ``root``: manifest, solution regions and tests.

    Raises:
        GraderError: if ``root`` lacks the package, the tests or setup.cfg, or its markers
            are broken.
    """

    def __init__(self, root=None):
        self.root = pathlib.Path(markers.PROJECT_ROOT if root is None else root).resolve()
        for name in ("minitorch_attn", "tests", "setup.cfg"):
            if not (self.root / name).exists():
                raise GraderError(f"{self.root} is not an instructor's tree (it has no {name}): grade from a "
                                  f"source checkout of the project (pip install -e) or pass --instructor")
        self.manifest = markers.load_manifest(self.root / "minitorch_attn" / "homework" / "manifest.json")
        self.titles = {t["id"]: t["title"] for a in self.manifest["assignments"] for t in a["tasks"]}
        self.regions = {}   # "minitorch_attn/functional/softmax.py" -> [Region, ...] in file order
        for path in sorted((self.root / "minitorch_attn").rglob("*.py")):
            try:
                found = markers.find_regions(path)
            except markers.MarkerError as exc:
                raise GraderError(f"the instructor's solution markers are broken: {exc}") from None
            if found:
                self.regions[path.relative_to(self.root).as_posix()] = found

    def assignment(self, number):
        """The manifest entry of assignment ``number``, after checking that each of its
        tasks has solution regions here (GraderError otherwise)."""
        chosen = markers.assignment_by_number(self.manifest, number)
        for task in chosen["tasks"]:
            if not self.files_of(task["id"]):
                raise GraderError(f"task {task['id']} has no solution region in {self.root}/minitorch_attn")
        return chosen

    def files_of(self, task_id):
        """The package files (relative paths) holding regions of ``task_id``."""
        return [rel for rel, regions in self.regions.items() if any(r.task == task_id for r in regions)]

    def spliced(self, task_id, blocks):
        """``{relative path: source}`` of the task's files, each region of ``task_id`` holding
        the student's code from ``blocks`` (``{relative path: [lines of each region]}``) and
        every other region the reference solution.

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
                    f"as handed out, but the submitted file has {len(theirs)}: keep every pair of SOLUTION lines")
            sources[rel] = splice((self.root / rel).read_text(), regions, task_id, theirs)
        return sources

    def requirements(self):
        """The distributions the tests need: setup.cfg's install_requires and its test extra."""
        config = configparser.ConfigParser()
        config.read(self.root / "setup.cfg")
        lines = (config.get("options", "install_requires", fallback="") + "\n"
                 + config.get("options.extras_require", "test", fallback=""))
        return [re.match(r"[A-Za-z0-9._-]+", line.strip())[0] for line in lines.splitlines() if line.strip()]

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
            raise GraderError(f"the tests need {', '.join(missing)}, not installed in this Python: "
                              f'pip install -e "{self.root}[test]"; nothing was graded')


def splice(text, regions, task_id, blocks):
    """``text`` (a file with ``regions``) with the code of the regions of ``task_id``
    replaced by ``blocks`` in order (each re-indented to its region), the other regions
    and the marker lines unchanged."""
    lines = text.splitlines()
    out, cursor, theirs = [], 0, iter(blocks)
    for region in regions:
        out.extend(lines[cursor:region.begin + 1])                       # up to BEGIN SOLUTION
        if region.task == task_id:
            out.extend(region.indent + line if line else "" for line in next(theirs))
        else:
            out.extend(region.code)
        cursor = region.end                                                 # from END SOLUTION on
    out.extend(lines[cursor:])
    return "\n".join(out) + "\n"


class Workspace:
    """A scratch folder with one compiled copy of the instructor's tree, from which each
    task's copy is made (a copy of a few hundred kilobytes, imported without recompiling
    the files it does not change). Use it as a context manager; it removes its folder."""

    def __init__(self, tree):
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
        self._count = 0

    def copy_with(self, sources):
        """A new copy of the instructor's tree with ``sources`` (``{relative path: text}``)
        written over it; returns its folder."""
        self._count += 1
        folder = self.folder / f"task-{self._count}"
        shutil.copytree(self.base, folder)
        for rel, text in sources.items():
            target = folder / rel
            target.write_text(text)
            for stale in (target.parent / "__pycache__").glob(f"{target.stem}.*.pyc"):
                stale.unlink()   # compiled from the instructor's version of this file
        return folder

    def close(self):
        self._scratch.cleanup()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
