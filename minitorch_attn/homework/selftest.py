"""``minitorch-attn homework selftest``: does the grading catch what it should?

For each assignment, grade

1. the reference solutions: every task must earn its points;
2. the stubs that ``homework make`` hands out: every task must score 0;
3. for each task T, T's reference with every other task of the assignment as handed out
   (its stub): T must earn its points. Its tests then reach no other task's code, so a
   task's points depend on its own code only: with 2., a task left as handed out costs its
   own points and no other task's, whichever others are solved (honest partial work scores
   exactly; in particular, the reference with one task stubbed loses that task's points
   and only those). One grading of T per task: about the cost of grading the reference,
   where grading the reference once per stubbed task would cost as many times that;
4. each planted mutant of the catalogue ``mutants.json`` (beside this file, held out of
   student trees): a realistic mistake in one task's code (no max shift in softmax, flash
   without its running maximum, a gradient added in place into a shared array, a reduction
   backward that only works for the last axis, a gradient of ones, a missing accumulation,
   a wrong term of a formula, ...). It must cost points in its own task. Only that task is
   graded: the others run the student's code of the whole assignment, mutant included,
   and may cost points where their code calls it, as they would for a student.

A mutant is a list of edits ``original -> mutated`` of the text inside the solution
regions of one task in one function (``owner``); each ``original`` must occur exactly once
there. When the reference solutions change, an edit whose text is gone is reported as
stale, so that the catalogue is updated rather than silently skipped.

Grading shares one :class:`Grader`, which runs each distinct (task, code) once (a result
it reuses is marked ``=`` in the table). The command prints a table per assignment and
fails (exit status 1) when a reference task loses points, a stub scores, a task alone
loses points (its tests need another task's code), a mutant escapes,
a mutant is stale, or an assignment has fewer than ``MIN_MUTANTS`` mutants.
"""

from __future__ import annotations

import dataclasses
import json
import pathlib
import sys
import tempfile
import time
import unicodedata

from ..atomic import write_atomically
from . import markers, probes
from .grade import Grader, task_limits
from .make import make
from .submission import Submission

MIN_MUTANTS = 5
ALONE = "alone"  # the kind of the rows of 3. in the module docstring


class StaleMutant(ValueError):
    """A mutant whose original text is not (or not once) in its task's regions any more."""


@dataclasses.dataclass
class Mutant:
    name: str
    kind: str
    task: str
    file: str
    owner: str
    edits: list  # [{"original": text, "mutated": text}, ...]

    def submission(self, reference, tree):
        """``reference`` with this mutant's edits applied to its task's regions in ``owner``."""
        regions = [r for r in tree.regions.get(self.file, []) if r.task == self.task]
        mine = [i for i, r in enumerate(regions) if r.owner == self.owner]
        if not mine:
            raise StaleMutant(f"{self.file} has no region of task {self.task} in {self.owner}")
        blocks = [list(lines) for lines in reference.blocks[(self.file, self.task)]]
        for edit in self.edits:
            texts = {i: "\n".join(blocks[i]) for i in mine}
            hits = [i for i in mine if texts[i].count(edit["original"]) == 1]
            if len(hits) != 1 or sum(t.count(edit["original"]) for t in texts.values()) != 1:
                raise StaleMutant(
                    f"`{edit['original']}` is not exactly once in task {self.task}'s code in "
                    f"{self.owner} ({self.file}): update mutants.json to the current solution"
                )
            blocks[hits[0]] = texts[hits[0]].replace(edit["original"], edit["mutated"]).split("\n")
        return reference.with_blocks(self.file, self.task, blocks)


def load_mutants(tree):
    """The catalogue of the instructor's tree, as :class:`Mutant` objects."""
    path = tree.root / "minitorch_attn" / "homework" / "mutants.json"
    return [Mutant(**entry) for entry in json.loads(path.read_text())["mutants"]]


def selftest(tree, numbers, timeout=60.0, file=sys.stdout, accuracy=None, hide_derivations=False):
    """Run the self-check for the assignments ``numbers``; True when all of it passed.

    It also checks the probes' diagnoses (:mod:`.probes`): each mutant must get the one
    :func:`.probes.expected` of it (its own name for a wrong term of a backward formula,
    none otherwise), and the reference, the stubs and each task solved alone none. The
    accuracy table is printed; with ``accuracy`` (a path), also written there as Markdown.

    With ``hide_derivations``, each assignment also grades the reference's code typed into a
    derive-mode student tree (:func:`derive_reference`): every task must earn its points, and
    no line of that tree may count as code outside the regions."""
    mutants = load_mutants(tree)
    ok = True
    table = []  # (assignment, case, task, the diagnosis expected, the diagnosis got)
    public_only = 0  # mistakes that no held-back check catches
    with Grader(tree, timeout) as grader, tempfile.TemporaryDirectory(prefix="minitorch-attn-derive-") as scratch:
        reference = Submission.reference(grader.tree)
        stubs = Submission.stubs(grader.tree)
        for number in numbers:
            start = time.monotonic()
            chosen = grader.tree.assignment(number)
            tasks = [t["id"] for t in chosen["tasks"]]
            print(f"\nassignment {number}: {chosen['title']}", file=file)
            print(f"{'case':<62} {'kind':<21} {'task':<5}" + "".join(f"{t:>8}" for t in tasks) + "  verdict", file=file)
            rows = [("reference", "-", None, reference), ("stubs (as handed out)", "-", None, stubs)]
            rows += [
                (f"only {t} solved (the other tasks as handed out)", ALONE, t, alone(reference, stubs, grader.tree, t))
                for t in tasks
            ]
            if hide_derivations:
                typed = derive_reference(grader.tree, number, pathlib.Path(scratch) / f"assignment{number}")
                notes = typed.ungraded(grader.tree, number)
                if notes:
                    ok = False
                    print(f"FAIL: the derive-mode tree has code outside the regions: {sorted(notes)}", file=file)
                rows.insert(1, (DERIVE_ROW, "-", None, typed))
            mine = [m for m in mutants if m.task in tasks]
            for mutant in mine:
                try:
                    rows.append((mutant.name, mutant.kind, mutant.task, mutant.submission(reference, grader.tree)))
                except StaleMutant as stale:
                    rows.append((mutant.name, mutant.kind, mutant.task, stale))
            for name, kind, own, submission in rows:
                if isinstance(submission, StaleMutant):
                    verdict, cells = f"STALE: {submission}", ["-"] * len(tasks)
                elif own is None:
                    graded = grader.grade(submission, number, visible=False)
                    verdict = _verdict(name, own, graded)
                    cells = [f"{r.score:g}/{r.points:g}" + ("=" if r.reused else " ") for r in graded]
                    table += [(number, name, r.task_id, None, r.diagnosis) for r in graded]
                else:
                    limit, per_test = task_limits(grader.budget, len(tasks), grader.timeout)
                    result = grader.grade_task(
                        next(t for t in chosen["tasks"] if t["id"] == own), submission, limit, per_test
                    )
                    verdict = _verdict(name, own, [result], kind)
                    cells = [
                        f"{result.score:g}/{result.points:g}" + ("=" if result.reused else " ") if t == own else "· "
                        for t in tasks
                    ]
                    must = None if kind == ALONE else probes.expected(grader.signatures, name)
                    table.append((number, name, own, must, result.diagnosis))
                ok &= verdict.startswith("ok")
                public_only += "by public checks only" in verdict
                print(
                    f"{_column(name, 62)} {kind[:21]:<21} {own or '-':<5}"
                    + "".join(f"{c:>8}" for c in cells)
                    + f"  {verdict}",
                    file=file,
                    flush=True,
                )
            if len(mine) < MIN_MUTANTS:
                ok = False
                print(
                    f"FAIL: assignment {number} has {len(mine)} mutants; the catalogue needs at least {MIN_MUTANTS}",
                    file=file,
                )
            print(
                f"({time.monotonic() - start:.0f} s; = marks a result reused: the same code was graded "
                f"before; · a task not graded for that mutant)",
                file=file,
            )
    wrong = [row for row in table if row[3] != row[4]]
    print("\n" + accuracy_table(table, markdown=False, not_probed=grader.not_probed), file=file)
    if wrong:
        ok = False
        for _, name, task, want, got in wrong:
            print(f"FAIL: {name} (task {task}) was diagnosed as {got or 'none'}, expected {want or 'none'}", file=file)
    if accuracy:
        write_atomically(accuracy, accuracy_table(table, markdown=True, not_probed=grader.not_probed).encode())
        print(f"wrote {accuracy}", file=file)
    if public_only:
        print(
            f"\n{public_only} planted mistake(s) are caught by public checks only: a student's process can forge "
            f"their report, so add a held-back check (tests/instructor/) for each",
            file=file,
        )
    print("\nselftest: " + ("ok" if ok else "FAILED"), file=file)
    return ok


def accuracy_table(table, markdown, not_probed=()):
    """The accuracy of the probes' diagnoses: one row per mutant (the diagnosis it must get,
    the one it got), then per assignment the number of diagnoses given to correct code and
    to stubs (must be 0). ``table``: rows ``(assignment, case, task, expected, got)``;
    ``not_probed``: the wrong backward terms that no probe isolates yet."""
    mutant_rows = [r for r in table if _clean_kind(r[1]) is None]
    clean = {}
    for number, name, _, _, got in table:
        if _clean_kind(name):
            kind = _clean_kind(name)
            counts = clean.setdefault((number, kind), [0, 0])
            counts[0] += 1
            counts[1] += got is not None
    right = sum(r[3] == r[4] for r in mutant_rows)
    named = sum(r[3] is not None for r in mutant_rows)
    if markdown:
        lines = [
            "# Accuracy of the probes' diagnoses",
            "",
            "Written by `minitorch-attn homework selftest --accuracy docs/teaching/accuracy.md`. Each planted "
            "mistake of `mutants.json`, graded alone in its task, and the mistake that the task's probes "
            "(`tests/instructor/test_probes.py`, `minitorch_attn/homework/probes.py`) named. A mistake that is "
            "not a wrong term of a backward formula must get none.",
            "",
            "| task | planted mistake | must get | got | |",
            "|---|---|---|---|---|",
        ]
        lines += [
            f"| {t} | {n} | {w or ('none (a backward term, no probe yet)' if n in not_probed else 'none')} "
            f"| {g or 'none'} | {'ok' if w == g else 'WRONG'} |"
            for _, n, t, w, g in mutant_rows
        ]
        lines += [
            "",
            "| assignment | correct code or stubs | tasks graded | diagnoses given (must be 0) |",
            "|---|---|---|---|",
        ]
        lines += [f"| {n} | {k} | {c[0]} | {c[1]} |" for (n, k), c in sorted(clean.items())]
        lines += [
            "",
            f"{right} of {len(mutant_rows)} mistakes got the diagnosis they must get ({named} of them "
            f"a named one, the rest none).",
        ]
        return "\n".join(lines) + "\n"
    lines = [f"accuracy of the probes' diagnoses: {right} of {len(mutant_rows)} mutants right ({named} must be named)"]
    lines += [
        f"  {t:<4} {_column(n, 62)} -> {g or 'none'}" + ("" if w == g else f"   WRONG, expected {w or 'none'}")
        for _, n, t, w, g in mutant_rows
    ]
    lines += [f"  assignment {n}, {k}: {c[1]} diagnoses in {c[0]} tasks graded" for (n, k), c in sorted(clean.items())]
    return "\n".join(lines)


def _clean_kind(name):
    """``"correct code"`` or ``"stubs"`` for the rows whose tasks must get no diagnosis, else None."""
    if name in ("reference", DERIVE_ROW) or name.startswith("only "):
        return "correct code"
    return "stubs" if name == "stubs (as handed out)" else None


DERIVE_ROW = "reference typed into the derive-mode tree"


def derive_reference(tree, number, folder):
    """The :class:`Submission` of a derive-mode student tree of assignment ``number``
    (``homework make --hide-derivations``, written to ``folder``) with the reference's code
    typed between the SOLUTION lines of that assignment's tasks."""
    make(folder, number, project_root=tree.root, hide_derivations=True)
    mine, stubbed = tree.tasks_of(number), tree.tasks_of(number) | tree.tasks_of(number, later=True)
    for rel, regions in tree.regions.items():
        path = pathlib.Path(folder) / rel
        text = path.read_text()
        lines = text.splitlines()
        handed_out = markers.find_regions(rel, text)  # the stubs: earlier tasks are solved, without markers
        regions = [r for r in regions if r.task in stubbed]
        for theirs, ours in sorted(zip(handed_out, regions, strict=True), key=lambda pair: -pair[0].begin):
            if ours.task in mine:
                lines[theirs.begin + 1 : theirs.end] = ours.code
        path.write_text("\n".join(lines) + "\n")
    return Submission.from_path(folder, tree)


def alone(reference, stubs, tree, task_id):
    """``stubs`` (the assignment as handed out) with the reference's code in ``task_id``'s regions."""
    for rel in tree.files_of(task_id):
        stubs = stubs.with_blocks(rel, task_id, reference.blocks[(rel, task_id)])
    return stubs


def _verdict(name, own, graded, kind="-"):
    """``ok ...`` or what went wrong, for one row of the table."""
    if kind == ALONE:
        mine = graded[0]
        return "ok" if mine.passed else f"FAIL: task {own} needs another task's code: {_first(mine)}"
    if own is None and name in ("reference", DERIVE_ROW):
        lost = [r for r in graded if not r.passed]
        return "ok" if not lost else f"FAIL: the reference loses task {lost[0].task_id}: {_first(lost[0])}"
    if own is None:
        scored = [r for r in graded if r.score > 0]
        return "ok" if not scored else f"FAIL: a stub scores in task {scored[0].task_id}"
    mine = next(r for r in graded if r.task_id == own)
    if mine.passed:
        return "ESCAPED: no check of its task fails"
    if mine.problem is None and not any(c.held_back for c in mine.failures):
        # the public tests run in the student's own process, whose report can be forged
        return f"FAIL: caught by public checks only ({_first(mine)}), no held-back one"
    return f"ok, caught by {_first(mine)}"


def _first(result):
    if result.problem:
        return result.problem.splitlines()[0][:100]
    return result.failures[0].nodeid.split("::")[-1] if result.failures else "?"


def _column(text, width):
    """``text`` cut or padded to ``width`` columns on a terminal: a combining accent (the hat
    of x̂) takes no column of its own, so it is not counted."""
    out, used = [], 0
    for char in text:
        wide = 0 if unicodedata.combining(char) else 1
        if used + wide > width:
            break
        out.append(char)
        used += wide
    return "".join(out) + " " * (width - used)
