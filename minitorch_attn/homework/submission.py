"""Read what a student hands in: their code for each task, region by region.

A submission may be

* a folder with the student's tree (the folder ``homework make`` wrote, edited), or a
  folder above it;
* a zip file of such a folder;
* just the edited files (``softmax.py`` alone, or several), loose in a folder or zipped.

Each file of the instructor's package that holds solution regions is looked for in the
submission: at its own path (``minitorch_attn/functional/softmax.py``), else as a file of
the same name whose ``BEGIN SOLUTION`` markers name tasks of that file (so
``attention.py`` with task 4.3 inside is ``nn/attention.py``), else as a file of any name
whose markers name only that file's tasks (renamed on upload). From each file found,
only the code between the markers is kept. Symbolic links are never followed, hidden folders
and virtual environments are not searched.
"""

from __future__ import annotations

import contextlib
import pathlib
import tempfile
import zipfile

from . import derive, markers
from .instructor import SubmissionProblem

MAX_UNZIPPED_BYTES = 200 * 2**20
NOT_SEARCHED = {"__pycache__", "site-packages", "node_modules", "build", "dist"}


class Submission:
    """The student's code: ``blocks[(relative path, task id)]`` lists the lines of each
    region of that task in that file, in order and without the markers' indentation;
    ``problems[relative path]`` says why a file could not be read (missing, broken markers)."""

    def __init__(self, blocks, problems=None, source="", texts=None):
        self.blocks = blocks
        self.problems = problems or {}
        self.source = source
        self.texts = texts or {}  # {relative path: (path in the submission, its whole text)}

    def for_task(self, task_id, tree):
        """``{relative path: [region lines, ...]}`` of the task's files.

        Raises:
            SubmissionProblem: a file of the task is missing, unreadable or has no region of it.
        """
        found = {}
        for rel in tree.files_of(task_id):
            if rel in self.problems:
                raise SubmissionProblem(self.problems[rel])
            if (rel, task_id) not in self.blocks:
                raise SubmissionProblem(
                    f"{rel} has no `# BEGIN SOLUTION {task_id}` region: write the task's code between "
                    f"its SOLUTION lines, as handed out"
                )
            found[rel] = self.blocks[(rel, task_id)]
        return found

    def with_blocks(self, rel, task_id, blocks):
        """A copy with the regions of ``task_id`` in ``rel`` replaced (for planted mutants)."""
        changed = dict(self.blocks)
        changed[(rel, task_id)] = blocks
        return Submission(changed, self.problems, self.source, self.texts)

    def ungraded(self, tree, number):
        """``{relative path: (path in the submission, [(line number, line), ...])}``: the code
        lines of the submitted files of assignment ``number``'s tasks that are outside their
        SOLUTION regions and not in the file as handed out (:func:`.markers.ungraded_lines`).
        The grader keeps only the regions, so this code is not graded: the student is told
        (:func:`ungraded_notice`)."""
        stubbed = tree.tasks_of(number) | tree.tasks_of(number, later=True)
        hints = {t["id"]: t.get("hints", []) for a in tree.manifest["assignments"] for t in a["tasks"]}
        found = {}
        for rel, (where, text) in sorted(self.texts.items()):
            if rel in self.problems or not any(r.task in tree.tasks_of(number) for r in tree.regions[rel]):
                continue
            handed_out = markers.strip_solutions((tree.root / rel).read_text(), rel, stubbed, tree.titles)
            with contextlib.suppress(markers.MarkerError, derive.DerivationMarkerError):
                # handed out in the guided mode or the derive mode (docstrings differ, code does not;
                # the derive mode adds the manifest's hints, as homework make does)
                lines = min(
                    (
                        markers.ungraded_lines(text, mode, rel)
                        for mode in (derive.show(handed_out, rel), derive.hide(handed_out, stubbed, rel, hints))
                    ),
                    key=len,
                )
                if lines:
                    found[rel] = (where, lines)
        return found

    @classmethod
    def reference(cls, tree):
        """The instructor's own solutions."""
        blocks = {}
        for rel, regions in tree.regions.items():
            blocks.update(_blocks(rel, regions))
        return cls(blocks, source="reference")

    @classmethod
    def stubs(cls, tree):
        """What ``homework make`` hands out: a ``raise NotImplementedError`` in every region."""
        blocks = {}
        for rel, regions in tree.regions.items():
            for region in regions:
                stub = markers.stub_text(region, tree.titles.get(region.task, "")).strip()
                blocks.setdefault((rel, region.task), []).append([stub])
        return cls(blocks, source="stubs")

    @classmethod
    def from_path(cls, path, tree):
        """Read a submission folder, zip file or single file (see the module docstring).

        Raises:
            ValueError: if ``path`` does not exist or is an unreadable zip.
        """
        path = pathlib.Path(path)
        if not path.exists():
            raise ValueError(f"{path} does not exist")
        with tempfile.TemporaryDirectory(prefix="minitorch-attn-submission-") as scratch:
            files = _python_files(path, pathlib.Path(scratch))
            located = _locate(files, tree)
            blocks, problems, texts = {}, {}, {}
            for rel, regions in tree.regions.items():
                tasks = sorted({r.task for r in regions})
                if rel not in located:
                    problems[rel] = (
                        f"the submission has no {rel} (nor a {pathlib.PurePath(rel).name} with the "
                        f"SOLUTION markers of task {', '.join(tasks)})"
                    )
                    continue
                try:
                    found = markers.find_regions(rel, located[rel][1])
                except markers.MarkerError as exc:
                    problems[rel] = (
                        f"{exc}: keep the `# BEGIN SOLUTION` / `# END SOLUTION` lines as they were "
                        f"handed out and write your code between them"
                    )
                    continue
                blocks.update(_blocks(rel, found))
                texts[rel] = located[rel]
        return cls(blocks, problems, source=str(path), texts=texts)


def ungraded_notice(ungraded, task_files=None):
    """The lines a student reads about the code that is outside the SOLUTION regions
    (``ungraded`` as :meth:`Submission.ungraded` gives it), one per run of consecutive lines
    (a helper function is one note), for the files in ``task_files`` (default: all); empty
    when there is none."""
    notes = []
    for rel, (where, lines) in ungraded.items():
        if task_files is not None and rel not in task_files:
            continue
        runs = []
        for number, line in lines:
            if runs and number <= runs[-1][1] + 2:  # a blank or comment line between is the same run
                runs[-1][1] = number
            else:
                runs.append([number, number, line])
        for first, last, line in runs[:5]:
            span = f"line {first}" if first == last else f"lines {first}-{last}"
            notes.append(
                f"{where} {span}, `{line[:80]}`{' ...' if first != last else ''}, is outside the SOLUTION "
                f"lines and is not graded: the grader takes only the code between `# BEGIN SOLUTION` and "
                f"`# END SOLUTION` and the rest of the file as handed out. Move it between the SOLUTION "
                f"lines of the task that uses it (an import or a helper may go there too)."
            )
        if len(runs) > 5:
            notes.append(
                f"{where}: {len(runs) - 5} more piece(s) of code outside the SOLUTION lines are not graded either."
            )
    return notes


def _blocks(rel, regions):
    """``{(rel, task): [body of each region of the task, in order]}``."""
    blocks = {}
    for region in regions:
        blocks.setdefault((rel, region.task), []).append(region.body())
    return blocks


def _python_files(path, scratch, depth=0, budget=None):
    """``[(path inside the submission, text)]`` of every Python file of the submission;
    zip files (the submission itself or inside it, two levels deep) are unpacked into
    ``scratch``, all of them together at most ``MAX_UNZIPPED_BYTES`` (``budget``: what is left)."""
    budget = [MAX_UNZIPPED_BYTES] if budget is None else budget
    if path.is_file() and zipfile.is_zipfile(path):
        path = _unzip(path, scratch / "submission", budget)
    if path.is_file():
        return [(pathlib.PurePath(path.name), _read(path))] if path.suffix == ".py" and not path.is_symlink() else []
    found = []
    for number, inner in enumerate(sorted(_walk(path, ".zip"))):
        if depth < 2 and zipfile.is_zipfile(inner):
            inside = _python_files(
                _unzip(inner, scratch / f"zip{number}", budget), scratch / f"in{number}", depth + 1, budget
            )
            found += [(pathlib.PurePath(inner.name) / p, text) for p, text in inside]
    return found + [(p.relative_to(path), _read(p)) for p in sorted(_walk(path, ".py"))]


def _walk(folder, suffix):
    """Regular files with ``suffix`` under ``folder``: no links, hidden folders or environments."""
    for path in folder.iterdir():
        if path.is_symlink() or path.name.startswith(".") or path.name in NOT_SEARCHED:
            continue
        if path.is_dir():
            if not (path / "pyvenv.cfg").exists():
                yield from _walk(path, suffix)
        elif path.suffix == suffix and path.is_file():
            yield path


def _read(path):
    return path.read_bytes().decode("utf-8", errors="replace")


def _unzip(path, target, budget):
    try:
        with zipfile.ZipFile(path) as archive:
            budget[0] -= sum(info.file_size for info in archive.infolist())
            if budget[0] < 0:
                raise ValueError(
                    f"the submission's zip files unpack to more than {MAX_UNZIPPED_BYTES >> 20} MB "
                    f"together ({path.name} among them)"
                )
            archive.extractall(target)  # zipfile drops absolute paths and '..' parts
    except zipfile.BadZipFile as exc:
        raise ValueError(f"{path} is not a readable zip file: {exc}") from None
    return target


def _locate(files, tree):
    """``{instructor's relative path: (submitted path, text)}``. Each file of the
    instructor's with solution regions is found at its own path (the shallowest match),
    else as the one remaining file of the same name whose markers name some of its tasks
    and no other, else (a file renamed on upload) as the one remaining file whose markers
    name only tasks of that file."""
    located, used = {}, set()

    def take(rel, candidates):
        if candidates:
            located[rel] = min(candidates, key=lambda item: len(item[0].parts))
            used.add(located[rel][0])

    for rel in tree.regions:
        parts = pathlib.PurePath(rel).parts
        take(rel, [(p, t) for p, t in files if p.parts[-len(parts) :] == parts])
    for same_name in (True, False):
        for rel, regions in tree.regions.items():
            tasks = {r.task for r in regions}
            candidates = [
                (p, t)
                for p, t in files
                if p not in used
                and _tasks_in(t)
                and _tasks_in(t) <= tasks
                and (p.name == pathlib.PurePath(rel).name or not same_name)
            ]
            if rel not in located and len(candidates) == 1:
                take(rel, candidates)
    return located


def _tasks_in(text):
    return {m["task"] for m in map(markers.BEGIN.match, text.splitlines()) if m}


__all__ = ["Submission", "SubmissionProblem", "ungraded_notice"]
