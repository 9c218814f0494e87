"""Derive mode: student trees whose graded docstrings keep the forward, the shapes and what
the backward returns, but not the backward's formulas, which the student derives.

A docstring (or comment, or Markdown file) marks a derivation with two lines of their own::

    .. derivation 3.1 begin
    ... the derivation and the backward's formulas ...
    .. hint 3.1: the Jacobian of x̂ with respect to x is symmetric
    .. derivation end

(``.. x`` lines are reStructuredText comments: a docs build shows nothing of them.) In the
guided mode (the default) :func:`show` removes the marker lines and keeps the rest; in derive
mode :func:`hide` replaces each region of a task handed out by one line asking the student to
derive it, with the region's hints (``.. hint <task>: text``, a teacher's choice) kept as
``Hint: text`` lines, and the task's ``hints`` of the manifest after its first region.
Regions of earlier assignments (solved code) are shown.

``homework make --hide-derivations`` also writes ``derivations/task_<id>.md`` for each task
of the assignment (:func:`sheet`): a Markdown sheet with math that the student fills in and
hands in beside the code. :func:`leaks` finds, in a written tree, the lines that still give a
backward formula of a task handed out (the fingerprints of ``leaks.json``, :func:`fingerprints`).
"""

from __future__ import annotations

import json
import pathlib
import re
import zipfile

BEGIN = re.compile(r"^(?P<indent>[ \t]*(?:#\s*)?)\.\. derivation (?P<task>\S+) begin\s*$")
END = re.compile(r"^[ \t]*(?:#\s*)?\.\. derivation end\s*$")
HINT = re.compile(r"^(?P<indent>[ \t]*(?:#\s*)?)\.\. hint (?P<task>\S+): (?P<text>.*)$")
TEXT_SUFFIXES = (".py", ".md", ".rst", ".txt", ".cfg", ".toml", ".json")


class DerivationMarkerError(ValueError):
    """A derivation region that is not closed, not opened, or nested."""


def _regions(text, path):
    """``[(begin line, end line, task, indent)]`` (0-based, marker lines included)."""
    found, start = [], None
    for number, line in enumerate(text.splitlines()):
        opened, closed = BEGIN.match(line), END.match(line)
        if opened:
            if start is not None:
                raise DerivationMarkerError(f"{path}:{number + 1}: a derivation region opens inside another")
            start = (number, opened["task"], opened["indent"])
        elif closed:
            if start is None:
                raise DerivationMarkerError(f"{path}:{number + 1}: `.. derivation end` without a begin")
            found.append((start[0], number, start[1], start[2]))
            start = None
    if start is not None:
        raise DerivationMarkerError(f"{path}:{start[0] + 1}: derivation region of task {start[1]} is not closed")
    return found


def _rewrite(text, path, hidden, hints=None):
    """``text`` with the marker lines gone, and each region of a task in ``hidden`` replaced
    by the request to derive it and its hints (the region's own, and at the first region of
    the task in the text, ``hints[task]``: the manifest's)."""
    lines = text.splitlines()
    out, cursor, hinted = [], 0, set()
    for begin, end, task, indent in _regions(text, path):
        out.extend(lines[cursor:begin])
        body = lines[begin + 1 : end]
        if task in hidden:
            out.append(
                f"{indent}Derive this backward yourself (task {task}) and write the derivation in "
                f"derivations/task_{task.replace('.', '_')}.md."
            )
            out += [f"{m['indent']}Hint: {m['text']}" for m in map(HINT.match, body) if m]
            if task not in hinted:
                out += [f"{indent}Hint: {hint}" for hint in (hints or {}).get(task, [])]
                hinted.add(task)
        else:
            out += [line for line in body if not HINT.match(line)]
        cursor = end + 1
    out.extend(lines[cursor:])
    return "\n".join(out) + ("\n" if text.endswith("\n") else "")


def show(text, path="<text>"):
    """The guided text: marker and hint lines removed, every derivation kept."""
    return _rewrite(text, path, set())


def hide(text, tasks, path="<text>", hints=None):
    """The derive-mode text: the derivations of ``tasks`` replaced (see the module docstring);
    ``hints``: ``{task id: [hint, ...]}`` (the manifest's ``hints`` of each task)."""
    return _rewrite(text, path, set(tasks), hints)


def sheet(task, places):
    """The Markdown derivation sheet of a manifest ``task`` (``places``: where its code is)."""
    questions = task.get("derive") or [
        "Derive the gradient of the loss with respect to each input of the forward, "
        "step by step, from the forward's numbered lines (undo them in reverse)."
    ]
    lines = [
        f"# Derivation of task {task['id']}: {task['title']}",
        "",
        "Hand this sheet in with your code. Write math between dollar signs (`$...$`, `$$...$$`).",
        "",
        "Where the code goes: " + ", ".join(places),
        "",
        "Start from the forward (its numbered steps are in the docstring) and the upstream gradient "
        "$g = \\partial L / \\partial y$. Say which forward step each line of your backward undoes, "
        "and check your result with `python -m gradcheck` and the task's tests.",
        "",
    ]
    for number, question in enumerate(questions, 1):
        lines += [f"## {number}. {question}", "", "$$", "", "$$", ""]
    return "\n".join(lines)


def fingerprints(project_root):
    """``{task id: [strings that give its backward formula]}`` of ``leaks.json`` (held out of
    student trees: the strings are the formulas); empty when the file is missing."""
    path = pathlib.Path(project_root) / "minitorch_attn" / "homework" / "leaks.json"
    return json.loads(path.read_text())["leaks"] if path.is_file() else {}


def leaks(root, fingerprints):
    """``[(relative path, line number, fingerprint)]`` of the text files under ``root`` that
    contain one of ``fingerprints`` (strings that give a backward formula)."""
    root = pathlib.Path(root)
    found = []
    for path in sorted(root.rglob("*")):
        if not path.is_file() or path.suffix not in TEXT_SUFFIXES or ".homework" in path.parts:
            continue
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue
        for number, line in enumerate(text.splitlines(), 1):
            found += [(path.relative_to(root).as_posix(), number, f) for f in fingerprints if f in line]
    return found


MODE_FILE = "minitorch_attn/homework/derive_mode.txt"  # in an autograder zip of the derive mode


def sheet_name(task_id):
    """``task_3_1.md``: the file name of a task's derivation sheet."""
    return f"task_{task_id.replace('.', '_')}.md"


def sheet_notes(submission_path, tasks):
    """``{task id: a sentence}`` saying whether the derivation sheet of each manifest task in
    ``tasks`` was handed in (found anywhere in the submitted folder or zip) and written beyond
    the blank sheet; the teacher grades the sheets."""
    path = pathlib.Path(submission_path)
    found = {}
    if path.is_dir():
        for file in path.rglob("task_*.md"):
            if file.is_file() and not file.is_symlink():
                found.setdefault(file.name, file.read_text(errors="replace"))
    elif zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as archive:
            for info in archive.infolist():
                name = pathlib.PurePosixPath(info.filename).name
                if name.startswith("task_") and name.endswith(".md") and info.file_size < 2**20:
                    found.setdefault(name, archive.read(info).decode(errors="replace"))
    notes = {}
    for task in tasks:
        text = found.get(sheet_name(task["id"]))
        if text is None:
            notes[task["id"]] = (
                f"Derivation sheet derivations/{sheet_name(task['id'])}: not handed in "
                f"(your teacher grades the derivations)."
            )
        else:
            blank = {line.strip() for line in sheet(task, []).splitlines()}
            written = [
                line
                for line in text.splitlines()
                if line.strip() and line.strip() not in blank and not line.startswith("Where the code goes")
            ]
            notes[task["id"]] = (
                f"Derivation sheet derivations/{sheet_name(task['id'])}: handed in, "
                f"{len(written)} line(s) written (your teacher grades the derivations)."
            )
    return notes
