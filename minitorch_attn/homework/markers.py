"""Solution markers: find them, check them against the manifest, and replace them by stubs.

A region starts with a line ``# BEGIN SOLUTION <task id>`` and ends with the next line
``# END SOLUTION``; both lines are indented like the code between them. Regions do not
nest. A stub keeps the two marker lines and puts between them one line that raises
``NotImplementedError`` with the task's id and title and the name of the function it sits
in: the student writes the task's code between the markers, and the grader reads it back
from there (:mod:`.submission`).

Each task's tests carry the pytest marker ``task_<id with _ for .>`` (``task_2_1``),
registered in ``setup.cfg``; :func:`check` says when a task has no region, no test or no
registered marker.

A *reference* region, between ``# BEGIN REFERENCE <task id>`` and ``# END REFERENCE`` at
module level in ``minitorch_attn/opinfo/``, holds reference answers of a task that the
catalogue uses to check it (a closed-form backward). :func:`hold_back` replaces each
definition there by a stand-in of the same name that raises ``HeldBack`` when called
(:mod:`minitorch_attn.opinfo.held_back`): student trees, and the copies a student's code is
graded in, never hold the answers of the tasks still to do.
"""

from __future__ import annotations

import ast
import configparser
import dataclasses
import difflib
import json
import pathlib
import re

PACKAGE_ROOT = pathlib.Path(__file__).resolve().parents[1]  # minitorch_attn/
PROJECT_ROOT = PACKAGE_ROOT.parent  # the source checkout
MANIFEST_PATH = pathlib.Path(__file__).with_name("manifest.json")

BEGIN = re.compile(r"^(?P<indent>[ \t]*)# BEGIN SOLUTION (?P<task>\S+)\s*$")
END = re.compile(r"^[ \t]*# END SOLUTION\s*$")
REFERENCE_BEGIN = re.compile(r"^(?P<indent>[ \t]*)# BEGIN REFERENCE (?P<task>\S+)\s*$")
REFERENCE_END = re.compile(r"^[ \t]*# END REFERENCE\s*$")
REFERENCE_HOME = "opinfo"  # the package folder whose modules may hold reference regions
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

    def body(self):
        """The code between the markers without the markers' indentation (blank lines empty)."""
        return [dedent_line(line, self.indent) for line in self.code]


def dedent_line(line, indent):
    """``line`` without the leading ``indent`` (a line indented less keeps what it has)."""
    if not line.strip():
        return ""
    return line[len(indent) :] if line.startswith(indent) else line


def marker_name(task_id):
    """The pytest marker of a task: ``"2.1"`` -> ``"task_2_1"``."""
    return "task_" + task_id.replace(".", "_")


def load_manifest(path=MANIFEST_PATH):
    """The manifest as a dict: ``{"assignments": [{"number", "title", "tasks": [...], ...}]}``."""
    return json.loads(pathlib.Path(path).read_text())


def tasks_by_id(manifest):
    """``{task id: (assignment, task)}`` for every task of the manifest."""
    return {task["id"]: (assignment, task) for assignment in manifest["assignments"] for task in assignment["tasks"]}


def assignment_by_number(manifest, number):
    """The manifest entry of assignment ``number``; ValueError listing the valid numbers."""
    numbers = [a["number"] for a in manifest["assignments"]]
    for assignment in manifest["assignments"]:
        if assignment["number"] == number:
            return assignment
    raise ValueError(f"no assignment {number}; the manifest has {', '.join(map(str, numbers))}")


def find_regions(path, text=None, begin_marker=BEGIN, end_marker=END, kind="SOLUTION"):
    """Every marked region of one source file (or of ``text``, named ``path``), in order
    (SOLUTION regions; REFERENCE regions with :func:`find_references`). Raises MarkerError
    for an END without BEGIN, a BEGIN inside a region, or a region left open."""
    path = pathlib.Path(path)
    lines = (path.read_text() if text is None else text).splitlines()
    regions, open_at, owners = [], None, []
    for number, line in enumerate(lines):
        definition = DEFINITION.match(line)
        if definition and open_at is None:
            depth = len(definition["indent"])
            owners = [(d, n) for d, n in owners if d < depth] + [(depth, definition["name"])]
        begin, end = begin_marker.match(line), end_marker.match(line)
        if begin:
            if open_at is not None:
                raise MarkerError(
                    f"{path}:{number + 1}: BEGIN {kind} inside the region opened at line {open_at[0] + 1}"
                )
            open_at = (number, begin["task"], begin["indent"])
        elif end:
            if open_at is None:
                raise MarkerError(f"{path}:{number + 1}: END {kind} without a BEGIN {kind}")
            start, task, indent = open_at
            owner = ".".join(n for _, n in owners) or "<module>"
            regions.append(Region(path, task, start, number, indent, owner, lines[start + 1 : number]))
            open_at = None
    if open_at is not None:
        raise MarkerError(f"{path}:{open_at[0] + 1}: BEGIN {kind} {open_at[1]} is never closed")
    return regions


def find_references(path, text=None):
    """Every reference region of one source file (see the module docstring), in order."""
    return find_regions(path, text, REFERENCE_BEGIN, REFERENCE_END, "REFERENCE")


def defined_names(region):
    """The names a reference region defines at module level (functions, classes, assignments).

    Raises:
        MarkerError: if the region is indented, does not parse, or holds anything else.
    """
    if region.indent:
        raise MarkerError(f"{region.where}: a REFERENCE region must be at module level")
    try:
        body = ast.parse("\n".join(region.code)).body
    except SyntaxError as exc:
        raise MarkerError(f"{region.where}: the REFERENCE region does not parse: {exc.msg}") from None
    names = []
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.append(node.name)
        elif isinstance(node, ast.Assign) and all(isinstance(t, ast.Name) for t in node.targets):
            names += [t.id for t in node.targets]
        elif not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)):  # a comment string is fine
            raise MarkerError(
                f"{region.where}: a REFERENCE region holds only definitions (line {region.begin + 1 + node.lineno})"
            )
    return names


def hold_back(text, path, tasks):
    """``text`` (of ``path``) with each reference region of a task in ``tasks`` replaced by
    stand-ins of the names it defines (``name = held_back("2.1", "name")``, see
    :mod:`minitorch_attn.opinfo.held_back`), and every REFERENCE marker line removed (the
    code of the other reference regions kept)."""
    regions = find_references(path, text)
    if not regions:
        return text
    lines = text.splitlines()
    out, cursor = [], 0
    for region in regions:
        out.extend(lines[cursor : region.begin])
        if region.task in tasks:
            out.append(f"from minitorch_attn.opinfo.held_back import held_back  # task {region.task}'s answers")
            out += [f"{name} = held_back({region.task!r}, {name!r})" for name in defined_names(region)]
        else:
            out.extend(region.code)
        cursor = region.end + 1
    out.extend(lines[cursor:])
    return "\n".join(out) + ("\n" if text.endswith("\n") else "")


def all_regions(package_root=PACKAGE_ROOT):
    """Every marked region in the library's Python files."""
    regions = []
    for path in sorted(pathlib.Path(package_root).rglob("*.py")):
        regions.extend(find_regions(path))
    return regions


def registered_markers(setup_cfg):
    """The marker names declared in ``[tool:pytest] markers`` of a setup.cfg."""
    config = configparser.ConfigParser()
    config.read(setup_cfg)
    declared = config.get("tool:pytest", "markers", fallback="")
    return {line.split(":")[0].strip() for line in declared.splitlines() if line.strip()}


def files_with_marker(project_root, task_id):
    """The test files (under ``tests/``) that mention the task's marker, sorted."""
    name = marker_name(task_id)
    return sorted(
        p for p in (pathlib.Path(project_root) / "tests").rglob("test_*.py") if re.search(rf"\b{name}\b", p.read_text())
    )


def check(manifest=None, package_root=PACKAGE_ROOT, project_root=PROJECT_ROOT):
    """Check markers against the manifest; returns a list of problems (empty when all is well):
    unknown task ids, tasks without a region, tasks whose pytest marker is not registered in
    setup.cfg, tasks that no test carries the marker of."""
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
    for path in sorted(pathlib.Path(package_root).rglob("*.py")):
        try:
            references = find_references(path)
            for region in references:
                defined_names(region)
        except MarkerError as exc:
            problems.append(str(exc))
            continue
        for region in references:
            if region.task not in known:
                problems.append(f"{region.where}: REFERENCE of task {region.task}, which is not in the manifest")
            if path.parent.name != REFERENCE_HOME:
                problems.append(f"{region.where}: REFERENCE regions belong in minitorch_attn/{REFERENCE_HOME}/")
    registered = registered_markers(pathlib.Path(project_root) / "setup.cfg")
    for task_id in known:
        if task_id not in marked:
            problems.append(f"task {task_id} has no marked region in the library")
        if marker_name(task_id) not in registered:
            problems.append(f"task {task_id}: the pytest marker {marker_name(task_id)} is not registered in setup.cfg")
        if not files_with_marker(project_root, task_id):
            problems.append(f"task {task_id}: no test carries @pytest.mark.{marker_name(task_id)}")
    return problems


def stub_text(region, title):
    """The line that replaces a region's code in a student's copy."""
    message = (
        f"Task {region.task}: {title}. Write this part of {region.owner} here, between the "
        f"SOLUTION lines (its docstring explains what to compute)."
    )
    return f"{region.indent}raise NotImplementedError({message!r})"


def strip_solutions(text, path, stub_tasks, titles):
    """The source ``text`` of ``path`` with the code of every region of a task in
    ``stub_tasks`` replaced by a stub (its marker lines kept), and the marker lines of all
    other regions removed (their code kept)."""
    lines = text.splitlines()
    out, cursor = [], 0
    for region in find_regions(path, text):
        out.extend(lines[cursor : region.begin])
        if region.task in stub_tasks:
            out += [lines[region.begin], stub_text(region, titles[region.task]), lines[region.end]]
        else:
            out.extend(region.code)
        cursor = region.end + 1
    out.extend(lines[cursor:])
    return "\n".join(out) + ("\n" if text.endswith("\n") else "")


def outside_lines(text, path="<text>"):
    """``[(line number, line)]`` (from 1) of ``text``'s lines outside every marked region (the
    marker lines count as inside). Raises MarkerError as :func:`find_regions` does."""
    inside = set()
    for region in find_regions(path, text):
        inside.update(range(region.begin, region.end + 1))
    return [(number + 1, line) for number, line in enumerate(text.splitlines()) if number not in inside]


def ungraded_lines(theirs, handed_out, path="<text>"):
    """``[(line number, stripped line)]`` of the code lines of ``theirs`` (a submitted file)
    outside its SOLUTION regions that ``handed_out`` (the file as handed out) does not have
    there: code the grader never sees, since it keeps only the regions. Blank lines, comments
    and changes of indentation are not counted.

    Raises:
        MarkerError: broken markers in either text.
    """
    ours = [line.strip() for _, line in outside_lines(handed_out, path)]
    their_lines = outside_lines(theirs, path)
    matcher = difflib.SequenceMatcher(None, ours, [line.strip() for _, line in their_lines], autojunk=False)
    added = []
    for tag, _, _, first, last in matcher.get_opcodes():
        if tag in ("insert", "replace"):
            added += [
                (number, line.strip())
                for number, line in their_lines[first:last]
                if line.strip() and not line.strip().startswith("#")
            ]
    return added


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
