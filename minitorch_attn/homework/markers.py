"""Solution markers: find them, check them against the manifest, and replace them by stubs.

A region starts with a line ``# BEGIN SOLUTION <task id>`` and ends with the next line
``# END SOLUTION``; both lines are indented like the code between them. Regions do not
nest. A stub keeps the region's indentation and raises ``NotImplementedError`` with the
task's id and title and the name of the function it sits in.
"""

from __future__ import annotations

import dataclasses
import json
import pathlib
import re

PACKAGE_ROOT = pathlib.Path(__file__).resolve().parents[1]   # minitorch_attn/
PROJECT_ROOT = PACKAGE_ROOT.parent                           # the source checkout
MANIFEST_PATH = pathlib.Path(__file__).with_name("manifest.json")

BEGIN = re.compile(r"^(?P<indent>[ \t]*)# BEGIN SOLUTION (?P<task>\S+)\s*$")
END = re.compile(r"^[ \t]*# END SOLUTION\s*$")
DEFINITION = re.compile(r"^(?P<indent>[ \t]*)(?:async\s+)?(?:def|class)\s+(?P<name>\w+)")


class MarkerError(ValueError):
    """A marker that is not closed, not opened, nested, or names an unknown task."""


@dataclasses.dataclass
class Region:
    """One marked region: the file, its task, its lines ``[begin, end]`` (0-based, the
    marker lines included), its indentation and the enclosing function or class."""

    path: pathlib.Path
    task: str
    begin: int
    end: int
    indent: str
    owner: str
    code: list  # the lines strictly between the markers

    @property
    def where(self):
        return f"{self.path.name}:{self.begin + 1}"


def load_manifest(path=MANIFEST_PATH):
    """The manifest as a dict: ``{"assignments": [{"number", "title", "tasks": [...], ...}]}``."""
    return json.loads(pathlib.Path(path).read_text())


def tasks_by_id(manifest):
    """``{task id: (assignment, task)}`` for every task of the manifest."""
    return {task["id"]: (assignment, task)
            for assignment in manifest["assignments"] for task in assignment["tasks"]}


def find_regions(path):
    """Every marked region of one source file, in order. Raises MarkerError for an END
    without BEGIN, a BEGIN inside a region, or a region left open."""
    path = pathlib.Path(path)
    lines = path.read_text().splitlines()
    regions, open_at, owners = [], None, []
    for number, line in enumerate(lines):
        definition = DEFINITION.match(line)
        if definition and open_at is None:
            depth = len(definition["indent"])
            owners = [(d, n) for d, n in owners if d < depth] + [(depth, definition["name"])]
        begin, end = BEGIN.match(line), END.match(line)
        if begin:
            if open_at is not None:
                raise MarkerError(f"{path}:{number + 1}: BEGIN SOLUTION inside the region opened at line {open_at[0] + 1}")
            open_at = (number, begin["task"], begin["indent"])
        elif end:
            if open_at is None:
                raise MarkerError(f"{path}:{number + 1}: END SOLUTION without a BEGIN SOLUTION")
            start, task, indent = open_at
            owner = ".".join(n for _, n in owners) or "<module>"
            regions.append(Region(path, task, start, number, indent, owner, lines[start + 1:number]))
            open_at = None
    if open_at is not None:
        raise MarkerError(f"{path}:{open_at[0] + 1}: BEGIN SOLUTION {open_at[1]} is never closed")
    return regions


def all_regions(package_root=PACKAGE_ROOT):
    """Every marked region in the library's Python files."""
    regions = []
    for path in sorted(pathlib.Path(package_root).rglob("*.py")):
        regions.extend(find_regions(path))
    return regions


def check(manifest=None, package_root=PACKAGE_ROOT, project_root=PROJECT_ROOT):
    """Check markers against the manifest; returns a list of problems (empty when all is well):
    unknown task ids, tasks without a region, tasks without a test, tests that do not exist."""
    manifest = manifest or load_manifest()
    known = tasks_by_id(manifest)
    problems = []
    try:
        regions = all_regions(package_root)
    except MarkerError as exc:
        return [str(exc)]
    marked = {r.task for r in regions}
    for region in regions:
        if region.task not in known:
            problems.append(f"{region.where}: task {region.task} is not in the manifest")
    for task_id, (_, task) in known.items():
        if task_id not in marked:
            problems.append(f"task {task_id} has no marked region in the library")
        if not task.get("tests") and not task.get("gradcheck"):
            problems.append(f"task {task_id} has no test and no gradcheck entry")
        for node in task.get("tests", []):
            if not _test_exists(project_root, node):
                problems.append(f"task {task_id}: test {node} does not exist")
    return problems


def _test_exists(project_root, node):
    """``tests/test_x.py`` or ``tests/test_x.py::test_name`` names a file (and a test in it)."""
    file, _, name = node.partition("::")
    path = pathlib.Path(project_root) / file
    if not path.is_file():
        return False
    name = name.split("[")[0]
    return not name or re.search(rf"^\s*def {re.escape(name)}\(", path.read_text(), flags=re.M) is not None


def stub_text(region, title):
    """The line that replaces a region in a student's copy."""
    message = f"Task {region.task}: {title}. Implement this part of {region.owner} (its docstring explains what to compute)."
    return f"{region.indent}raise NotImplementedError({message!r})"


def strip_solutions(text, path, stub_tasks, titles):
    """The source ``text`` of ``path`` with every region of a task in ``stub_tasks`` replaced
    by a stub, and the marker lines of all other regions removed (their code kept)."""
    lines = text.splitlines()
    out, cursor = [], 0
    for region in find_regions(path):
        out.extend(lines[cursor:region.begin])
        if region.task in stub_tasks:
            out.append(stub_text(region, titles[region.task]))
        else:
            out.extend(region.code)
        cursor = region.end + 1
    out.extend(lines[cursor:])
    return "\n".join(out) + ("\n" if text.endswith("\n") else "")


def distinctive_lines(regions, project_root=PROJECT_ROOT, min_length=12):
    """Stripped lines of the regions' code that appear nowhere else in the project (outside
    marked regions, in any Python file): if one of them is found in a student tree, a
    solution leaked. Generic lines such as ``xp = ctx.xp`` are not distinctive."""
    outside = set()
    for path in sorted(pathlib.Path(project_root).rglob("*.py")):
        if any(part.startswith(".") or part in ("build", "runs") for part in path.relative_to(project_root).parts):
            continue
        lines = path.read_text().splitlines()
        inside = set()
        for region in find_regions(path):
            inside.update(range(region.begin, region.end + 1))
        outside.update(line.strip() for i, line in enumerate(lines) if i not in inside)
    found = set()
    for region in regions:
        for line in region.code:
            stripped = line.strip()
            if len(stripped) >= min_length and not stripped.startswith("#") and stripped not in outside:
                found.add(stripped)
    return found
