"""Write a student tree for one assignment.

For assignment N:

* the tasks of assignments before N keep their solutions (each assignment stands on
  working code), with the marker lines removed;
* the tasks of assignment N, and of every later assignment, become stubs that raise
  ``NotImplementedError("Task N.k: ...")`` between their two SOLUTION marker lines,
  which stay: the student writes there, and the grader reads each task's code from
  there (no solution text is copied); the catalogue's reference answers of those tasks
  (its REFERENCE regions, :func:`.markers.hold_back`) are held back too;
* the test files that belong to later assignments are left out, as are the
  instructor-only files the manifest lists;
* a student README names the tasks in order, where each one is, and how to test it, and
  ``STUDENT.md`` (the teaching docs' student page) how to work and grade;
* the derivations in docstrings (:mod:`.derive`) are shown (the guided mode, the default), or,
  with ``hide_derivations``, those of the tasks handed out are replaced by a request to derive
  them, and ``derivations/task_<id>.md`` sheets are written for the student to hand in; the
  tree is then searched for the manifest's fingerprints of those backward formulas
  (``leaks.json``), and a leak is a ValueError.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import tempfile
import zipfile

from ..atomic import current_umask
from ..opinfo import gradcheck_names_of_task
from . import derive, markers
from .instructor import COPIED as GRADED
from .instructor import HANDOUT
from .markers import assignment_by_number

STUDENT_PAGE = "docs/teaching/student.md"
COPIED = ("minitorch_attn", "tests", "gradcheck", "demos", "benchmarks", "setup.cfg", "pyproject.toml", ".gitignore")


def make(out_dir, number, manifest=None, project_root=markers.PROJECT_ROOT, hide_derivations=False):
    """Write the student tree of assignment ``number`` into ``out_dir`` (which must not
    exist or be empty). Returns the list of stubbed task ids. ``hide_derivations``: the
    derive mode (see the module docstring).

    Raises:
        ValueError: unknown assignment, a non-empty ``out_dir``, marker problems, or (derive
            mode) a backward formula of a task handed out left in the tree.
    """
    manifest = manifest or markers.load_manifest()
    chosen = assignment_by_number(manifest, number)
    problems = markers.check(manifest, project_root / "minitorch_attn", project_root)
    if problems:
        raise ValueError("the solution markers have problems:\n  " + "\n  ".join(problems))
    out_dir = pathlib.Path(out_dir)
    if out_dir.exists() and any(out_dir.iterdir()):
        raise ValueError(f"{out_dir} is not empty; choose a new folder so nothing there is overwritten")

    later = [a for a in manifest["assignments"] if a["number"] > number]
    stub_tasks = {t["id"] for a in [chosen, *later] for t in a["tasks"]}
    titles = {t["id"]: t["title"] for a in manifest["assignments"] for t in a["tasks"]}
    hints = {t["id"]: t.get("hints", []) for a in manifest["assignments"] for t in a["tasks"]}
    left_out = {pathlib.Path(p) for a in later for p in a.get("test_files", [])}
    left_out |= {pathlib.Path(p) for p in manifest.get("held_out", [])}
    if hide_derivations:  # files that give a backward formula in code (a demo's NumPy reference)
        left_out |= {
            pathlib.Path(p) for a in [chosen, *later] for task in a["tasks"] for p in task.get("derive_held_out", [])
        }

    # the tree is made in a hidden folder beside out_dir and renamed into place once whole, so
    # a make that is stopped (Ctrl-C, SIGHUP, SIGTERM) or fails leaves no half-made tree
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    building = pathlib.Path(tempfile.mkdtemp(prefix=f".tmp-{out_dir.name}-", dir=out_dir.parent))
    try:
        building.chmod(0o777 & ~current_umask())  # mkdtemp's folder is private; a student tree is not
        for name in COPIED:
            source = project_root / name
            if source.is_dir():
                for path in sorted(source.rglob("*")):
                    relative = path.relative_to(project_root)
                    if path.is_dir() or "__pycache__" in relative.parts or _is_left_out(relative, left_out):
                        continue
                    _write(path, relative, building, stub_tasks, titles, hide_derivations, hints)
            elif source.is_file():
                _write(source, pathlib.Path(name), building, stub_tasks, titles, hide_derivations, hints)

        regions = markers.all_regions(project_root / "minitorch_attn")
        readme = student_readme(manifest, chosen, stub_tasks, regions, project_root, hide_derivations)
        (building / "README.md").write_text(readme)
        student_page = project_root / STUDENT_PAGE  # how to work, test and grade: in the tree itself
        if student_page.is_file():
            text = student_page.read_text()
            text = derive.hide(text, stub_tasks) if hide_derivations else derive.show(text)
            (building / "STUDENT.md").write_text(text)
        if hide_derivations:
            _write_sheets(building, chosen, regions, project_root)
            fingerprints = [f for task in stub_tasks for f in derive.fingerprints(project_root).get(task, [])]
            found = derive.leaks(building, fingerprints)
            if found:
                raise ValueError(
                    "the derive-mode tree still gives backward formulas: "
                    + "; ".join(f"{rel}:{line} has {f!r}" for rel, line, f in found[:20])
                )
        write_handout(building)
        if out_dir.exists():
            out_dir.rmdir()  # empty (checked above)
        os.replace(building, out_dir)
    except BaseException:
        shutil.rmtree(building, ignore_errors=True)
        raise
    return sorted(t["id"] for t in chosen["tasks"])


def write_handout(out_dir):
    """Keep the graded files of the tree just written (``instructor.COPIED``) in
    ``out_dir/.homework/handout.zip``: ``homework grade`` on the student's folder grades
    against them, so that only the code between the SOLUTION lines counts there too, as on
    the autograder (:class:`~.instructor.InstructorTree`)."""
    target = pathlib.Path(out_dir) / HANDOUT
    target.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
        for name in GRADED:
            source = pathlib.Path(out_dir) / name
            paths = sorted(source.rglob("*")) if source.is_dir() else [source]
            for path in paths:
                if path.is_file() and "__pycache__" not in path.parts:
                    archive.write(path, path.relative_to(out_dir).as_posix())


def _is_left_out(relative, left_out):
    return any(relative == p or p in relative.parents for p in left_out)


def _write(source, relative, out_dir, stub_tasks, titles, hide_derivations=False, hints=None):
    """Copy one file; library sources lose their solutions on the way, and every text file's
    derivations are shown or (``hide_derivations``) hidden (:mod:`.derive`; ``hints``: the
    manifest's hints of each task)."""
    target = out_dir / relative
    target.parent.mkdir(parents=True, exist_ok=True)
    if relative.suffix not in derive.TEXT_SUFFIXES or relative.parts[:2] == ("minitorch_attn", "homework"):
        shutil.copyfile(source, target)
        return
    text = source.read_text()
    if relative.parts[0] == "minitorch_attn" and relative.suffix == ".py":
        text = markers.hold_back(markers.strip_solutions(text, source, stub_tasks, titles), source, stub_tasks)
    target.write_text(derive.hide(text, stub_tasks, source, hints) if hide_derivations else derive.show(text, source))
    shutil.copymode(source, target)


def _write_sheets(out_dir, chosen, regions, project_root):
    """``derivations/task_<id>.md`` for each task of the assignment (:func:`.derive.sheet`)."""
    folder = pathlib.Path(out_dir) / "derivations"
    folder.mkdir()
    for task in chosen["tasks"]:
        places = sorted(
            {f"`{r.path.relative_to(project_root).as_posix()}`: `{r.owner}`" for r in regions if r.task == task["id"]}
        )
        (folder / f"task_{task['id'].replace('.', '_')}.md").write_text(derive.sheet(task, places))


def student_readme(manifest, chosen, stub_tasks, regions, project_root, hide_derivations=False):
    """The README of a student tree: the assignment, its tasks in order, how to check them
    (and, in derive mode, the derivations to write and hand in)."""
    lines = [
        f"# minitorch-attn, assignment {chosen['number']}: {chosen['title']}",
        "",
        chosen.get("description", ""),
        "",
        "## Set up",
        "",
        "```bash",
        'python3 -m venv .venv && . .venv/bin/activate && pip install -e ".[test]"',
        "```",
        "",
        "## Your tasks, in order",
        "",
        'Each task is a `raise NotImplementedError("Task ...")` between two lines',
        "`# BEGIN SOLUTION <task>` and `# END SOLUTION` in the library. The docstring around it",
        (
            "says what to compute and what the backward returns (you derive the backward pass);"
            if hide_derivations
            else "says what to compute and derives the backward pass;"
        )
        + " replace the `raise` with your code,",
        "**between the two SOLUTION lines**, and keep those lines: only the code between them is",
        "graded (a helper you need goes there too). Run a task's tests with the command under",
        "it, and every gradient check with `python -m gradcheck`. The catalogue's own answers for",
        "these tasks (its closed-form references in `minitorch_attn/opinfo/`) are held back in this",
        "folder and where your code is graded: the tests that compare with them are skipped here.",
        "",
    ]
    if hide_derivations:
        lines += [
            "## Derive the backward passes",
            "",
            "The docstrings give each forward as numbered steps, the shapes, and what the backward",
            "must return, but not the backward's formulas: derive them. For each task, write the",
            "derivation in `derivations/task_<task>.md` (Markdown, math between dollar signs), say which",
            "forward step each line of your backward undoes, then code it and check it with the tests and",
            "`python -m gradcheck`. Hand the `derivations/` folder in with your code.",
            "",
        ]
    for task in chosen["tasks"]:
        places = sorted(
            {f"`{r.path.relative_to(project_root).as_posix()}`: `{r.owner}`" for r in regions if r.task == task["id"]}
        )
        lines.append(f"### Task {task['id']}: {task['title']} ({task['points']} points)")
        lines.append("")
        if task.get("description"):
            lines += [task["description"], ""]
        lines += [
            "Where: " + ", ".join(places),
            "",
            "```bash",
            f"pytest -m {markers.marker_name(task['id'])}",
            "```",
            "",
        ]
        checks = gradcheck_names_of_task(task["id"])  # from the catalogue of operations
        if checks:
            lines.append("Gradient checks: " + ", ".join(f"`{g}`" for g in checks))
            lines.append("")
    later = sorted(stub_tasks - {t["id"] for t in chosen["tasks"]})
    if later:
        lines += [
            "## Later assignments",
            "",
            "Tests that fail with `Task` numbers " + ", ".join(later) + " belong to later "
            "assignments; leave them for now.",
            "",
        ]
    lines += [
        "## Grading",
        "",
        "Each task is graded in a run of its own, on your code for the whole assignment (this",
        "folder's). Its tests call that task's code directly, so a mistake or an unfinished task",
        "costs the points of its own task only (a backward is graded even while the engine or its",
        "forward is unfinished), unless your code for another task calls it (a softmax built on",
        "your log_softmax). A task's points need every one of its tests to pass, the ones above",
        "and a few held back by your instructor (the same kinds of checks, at extreme inputs and",
        "on tricky graphs, on inputs drawn anew for each submission). To see",
        "the table your instructor will see, minus the held-back tests:",
        "",
        "```bash",
        f"minitorch-attn homework grade . --assignment {chosen['number']}",
        "```",
        "",
        "Hand in this folder (or a zip of it, or just the files you edited"
        + (", with `derivations/`)." if hide_derivations else ")."),
        "",
        "How to work, test and grade: `STUDENT.md`.",
        "",
    ]
    return "\n".join(lines)
