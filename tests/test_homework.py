"""Homework scaffolding: markers, student trees, reading submissions, isolated grading,
results.json, the Gradescope autograder, and the planted-mistake catalogue.

Most checks work on the sources the grader would run (no pytest subprocess); a few grade
end to end: the issue's four escapes, a hang, a debugger call and a crash, the cheats,
and a Gradescope run. The whole catalogue of planted mistakes is graded by
``minitorch-attn homework selftest``, which ``.ci/run`` runs for every assignment.
"""

import importlib.metadata
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import time
import zipfile

import pytest

from minitorch_attn.homework import markers, sandbox
from minitorch_attn.homework.grade import Grader, TaskResult
from minitorch_attn.homework.gradescope import write_autograder
from minitorch_attn.homework.instructor import GraderError, InstructorTree, SubmissionProblem, splice, splice_all
from minitorch_attn.homework.make import make
from minitorch_attn.homework.results import describe, grade_submission
from minitorch_attn.homework.runner import Check, read_checks
from minitorch_attn.homework.selftest import MIN_MUTANTS, _verdict, load_mutants
from minitorch_attn.homework.submission import Submission
from minitorch_attn.opinfo.held_back import HeldBack

ROOT = markers.PROJECT_ROOT
MANIFEST = markers.load_manifest()
NUMBERS = [a["number"] for a in MANIFEST["assignments"]]
TREE = InstructorTree()
REFERENCE = Submission.reference(TREE)
SOFTMAX, NORMS = "minitorch_attn/functional/softmax.py", "minitorch_attn/functional/normalization.py"


def task(task_id):
    return markers.tasks_by_id(MANIFEST)[task_id][1]


def mutant(name):
    found = [m for m in load_mutants(TREE) if m.name == name]
    assert found, f"no mutant {name!r} in mutants.json"
    return found[0]


def solve(folder, blocks):
    """Write ``{(relative path, task): [region lines, ...]}`` into the SOLUTION regions of a student tree."""
    for (rel, task_id), code in blocks.items():
        path = folder / rel
        path.write_text(splice(path.read_text(), markers.find_regions(path), task_id, code))


@pytest.fixture(scope="module")
def grader():
    with Grader(TREE) as shared:
        yield shared


# ---- markers, manifest, student trees -----------------------------------------------------------
def test_markers_agree_with_the_manifest():
    assert markers.check() == []


@pytest.mark.parametrize(
    "source, problem",
    [
        ("x = 1\n# BEGIN SOLUTION 1.1\ny = 2\n", "never closed"),
        ("x = 1\n# END SOLUTION\n", "without a BEGIN"),
        ("# BEGIN SOLUTION 1.1\n# BEGIN SOLUTION 1.2\n# END SOLUTION\n", "inside the region"),
    ],
)
def test_broken_markers_are_reported(tmp_path, source, problem):
    path = tmp_path / "module.py"
    path.write_text(source)
    with pytest.raises(markers.MarkerError, match=problem):
        markers.find_regions(path)


def test_unknown_task_ids_unmarked_tasks_and_unregistered_markers_are_reported(tmp_path):
    package = tmp_path / "minitorch_attn"
    package.mkdir()
    (package / "m.py").write_text("def f():\n    # BEGIN SOLUTION 9.9\n    return 1\n    # END SOLUTION\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "setup.cfg").write_text("[tool:pytest]\nmarkers =\n    task_1_2: one task\n")
    problems = markers.check(MANIFEST, package, tmp_path)
    assert any("task 9.9 is not in the manifest" in p for p in problems)
    assert any("task 1.1 has no marked region" in p for p in problems)
    assert any("task_1_1 is not registered" in p for p in problems)
    assert not any("task_1_2 is not registered" in p for p in problems)
    assert any("no test carries @pytest.mark.task_1_2" in p for p in problems)


REFERENCE_SOURCE = (
    "import numpy as np\n\n\n# BEGIN REFERENCE 2.1\ndef np_softmax_backward(grads, x):\n"
    "    return [grads[0]]\n\n\nnp_other = np_softmax_backward\n# END REFERENCE\n\n\n"
    "# BEGIN REFERENCE 1.4\ndef np_max_backward(grads, x):\n    return [x]\n# END REFERENCE\n"
    "RECORD = (np_softmax_backward, np_max_backward)\n"
)


def test_a_reference_answer_is_held_back_where_its_task_is_to_do(tmp_path):
    """The catalogue's answer of a task still to do becomes a stand-in of the same name that
    raises HeldBack when called; a done task's answer stays, and no marker line is left."""
    held = markers.hold_back(REFERENCE_SOURCE, "opinfo/m.py", {"2.1", "3.1"})
    assert "REFERENCE" not in held and "grads[0]]" not in held and "return [x]" in held
    namespace = {}
    exec(compile(held, "m.py", "exec"), namespace)
    for name in ("np_softmax_backward", "np_other"):
        with pytest.raises(HeldBack, match=f"{name} is a reference answer of task 2.1, held back"):
            namespace[name]([1.0], 2.0)
    assert namespace["RECORD"][1]([1.0], 2.0) == [2.0]
    assert markers.hold_back(REFERENCE_SOURCE, "opinfo/m.py", set()).count("def ") == 2


@pytest.mark.parametrize(
    "source, problem",
    [
        ("# BEGIN REFERENCE 2.1\nprint('hi')\n# END REFERENCE\n", "holds only definitions"),
        ("def f():\n    # BEGIN REFERENCE 2.1\n    x = 1\n    # END REFERENCE\n", "must be at module level"),
        ("# BEGIN REFERENCE 9.9\nx = 1\n# END REFERENCE\n", "task 9.9, which is not in the manifest"),
        ("# BEGIN REFERENCE 2.1\nx = 1\n", "never closed"),
    ],
)
def test_broken_reference_regions_are_reported(tmp_path, source, problem):
    package = tmp_path / "minitorch_attn" / "opinfo"
    package.mkdir(parents=True)
    (package / "m.py").write_text(source)
    (tmp_path / "tests").mkdir()
    (tmp_path / "setup.cfg").write_text("[tool:pytest]\nmarkers =\n")
    assert any(problem in p for p in markers.check(MANIFEST, package.parent, tmp_path))


def test_reference_regions_belong_in_the_catalogue(tmp_path):
    (tmp_path / "m.py").write_text("# BEGIN REFERENCE 2.1\nx = 1\n# END REFERENCE\n")
    assert any("belong in minitorch_attn/opinfo/" in p for p in markers.check(MANIFEST, tmp_path, tmp_path))


def test_make_refuses_a_folder_with_files(tmp_path):
    (tmp_path / "keep.txt").write_text("mine")
    with pytest.raises(ValueError, match="not empty"):
        make(tmp_path, NUMBERS[0])
    assert (tmp_path / "keep.txt").read_text() == "mine"
    with pytest.raises(ValueError, match="no assignment 99"):
        make(tmp_path / "new", 99)


@pytest.mark.parametrize("number", NUMBERS)
def test_student_tree_of_each_assignment(tmp_path, number):
    tree = tmp_path / f"assignment{number}"
    stubbed = make(tree, number)
    assignment = markers.assignment_by_number(MANIFEST, number)
    assert stubbed == sorted(t["id"] for t in assignment["tasks"])

    # no solution text of this or a later assignment reaches the student, nor the held-back files
    later = {t["id"] for a in MANIFEST["assignments"] if a["number"] >= number for t in a["tasks"]}
    secrets = markers.distinctive_lines([r for r in markers.all_regions() if r.task in later])
    assert secrets, "the regions should contain some distinctive code"
    for path in tree.rglob("*"):
        if path.is_file() and path.suffix in (".py", ".md", ".json", ".cfg"):
            leaked = sorted(secrets & {line.strip() for line in path.read_text().splitlines()})
            assert not leaked, f"{path.relative_to(tree)} contains solution code: {leaked[:3]}"
    assert not (tree / "tests" / "instructor").exists()
    assert not (tree / "minitorch_attn" / "homework" / "mutants.json").exists()
    for path in sorted((ROOT / "minitorch_attn" / "opinfo").glob("*.py")):  # nor the catalogue's answers
        theirs = (tree / path.relative_to(ROOT)).read_text()
        assert not markers.find_references(path, theirs)
        for region in markers.find_references(path):
            for name in markers.defined_names(region):
                held = f"{name} = held_back({region.task!r}, {name!r})"
                assert (held in theirs) == (region.task in later), f"{path.name}: {name} of task {region.task}"
    readme = (tree / "README.md").read_text()
    for t in assignment["tasks"]:
        assert f"Task {t['id']}: {t['title']}" in readme and f"pytest -m {markers.marker_name(t['id'])}" in readme
    assert f"homework grade . --assignment {number}" in readme

    # the grader reads back, for each task, exactly the stubs that were handed out
    handed_out, stubs = Submission.from_path(tree, TREE), Submission.stubs(TREE)
    for t in assignment["tasks"]:
        assert handed_out.for_task(t["id"], TREE) == stubs.for_task(t["id"], TREE)


def test_derive_mode_hides_the_derivations_of_the_tasks_handed_out(tmp_path):
    """``make --hide-derivations``: the graded docstrings keep the forward, say what the
    backward returns and ask for the derivation; no fingerprint of leaks.json is left (make
    raises otherwise), a sheet per task, the held-back files stay out, and the reference's
    code in that tree is read back with no code outside the regions."""
    from minitorch_attn.homework import derive

    guided, derived = tmp_path / "guided", tmp_path / "derive"
    make(guided, 3)
    make(derived, 3, hide_derivations=True)
    theirs = (derived / NORMS).read_text()
    assert "1.  μ    = sum(x) / n" in theirs and "Backward: ``(dx, dw, db)``" in theirs
    assert "Derive this backward yourself (task 3.1)" in theirs and "Hint: " in theirs
    assert "5-1. dx = rstd" not in theirs and "5-1. dx = rstd" in (guided / NORMS).read_text()
    assert ".. derivation" not in (guided / NORMS).read_text() + theirs
    for task in ("3_1", "3_2"):
        assert "$$" in (derived / "derivations" / f"task_{task}.md").read_text()
    assert not (guided / "derivations").exists()
    assert "Derive the backward passes" in (derived / "README.md").read_text()
    fingerprints = [f for task in ("3.1", "3.2") for f in derive.fingerprints(ROOT)[task]]
    assert fingerprints and not derive.leaks(derived, fingerprints) and derive.leaks(guided, fingerprints)
    for held in ("leaks.json", "signatures.json", "mutants.json"):
        assert not (derived / "minitorch_attn" / "homework" / held).exists()
    assert derive.hide("a\n.. derivation 9.9 begin\nsecret\n.. hint 9.9: look\n.. derivation end\nb\n", {"9.9"}) == (
        "a\nDerive this backward yourself (task 9.9) and write the derivation in derivations/task_9_9.md."
        "\nHint: look\nb\n"
    )
    assert derive.show("a\n.. derivation 9.9 begin\nsecret\n.. hint 9.9: look\n.. derivation end\n") == "a\nsecret\n"
    with pytest.raises(derive.DerivationMarkerError, match="not closed"):
        derive.show(".. derivation 9.9 begin\n")
    submission = Submission.from_path(derived, TREE)
    assert not submission.ungraded(TREE, 3)
    tasks = markers.assignment_by_number(MANIFEST, 3)["tasks"]  # what the autograder of the derive mode says
    (derived / "derivations" / "task_3_1.md").write_text(derive.sheet(tasks[0], []) + "$$dx = ?$$\n")
    (derived / "derivations" / "task_3_2.md").unlink()
    notes = derive.sheet_notes(derived, tasks)
    assert "handed in, 1 line(s) written" in notes["3.1"] and "not handed in" in notes["3.2"]


@pytest.mark.parametrize("number", [1, 2, 3, 4, 5, 6])
def test_every_assignment_s_derive_mode_tree_gives_no_backward_formula(tmp_path, number):
    """Each assignment's derive-mode tree is made (make raises where a fingerprint of
    leaks.json is left, and every task with a backward formula has fingerprints), asks for
    the derivation of its backward tasks, and the tree as handed out, the manifest's hints
    included, is read back with no code outside the regions."""
    from minitorch_attn.homework import derive

    fingerprints = derive.fingerprints(ROOT)
    assert {"1.2", "1.3", "1.4", "1.5", "2.1", "2.2", "2.3", "3.1", "3.2", "4.2", "5.2", "6.1"} <= set(fingerprints)
    make(tmp_path / "derive", number, hide_derivations=True)
    tasks = [t["id"] for t in markers.assignment_by_number(MANIFEST, number)["tasks"]]
    text = "".join(p.read_text() for p in (tmp_path / "derive" / "minitorch_attn").rglob("*.py"))
    assert all(f"Derive this backward yourself (task {t})" in text for t in tasks if t in fingerprints)
    assert not Submission.from_path(tmp_path / "derive", TREE).ungraded(TREE, number)


# ---- reading a submission and splicing it --------------------------------------------------------
def test_student_code_runs_in_the_student_s_own_tree():
    """The sources student code runs in: their code in every task of the assignment (the
    stub where it cannot be used), earlier assignments' solutions, later ones' stubs; never
    a reference of this assignment or a later one."""
    broken = REFERENCE.with_blocks(SOFTMAX, "2.2", [["return x +"], REFERENCE.blocks[(SOFTMAX, "2.2")][1]])
    with Grader(TREE) as grader:
        sources = grader.student_tree(broken, 2)
    softmax = sources[SOFTMAX]
    assert softmax.count("raise NotImplementedError('Task 2.2:") == 2  # code that does not compile: the stub
    assert "NotImplementedError('Task 2.1" not in softmax and "NotImplementedError('Task 2.3" not in softmax
    assert softmax == splice_all(
        (ROOT / SOFTMAX).read_text(),
        TREE.regions[SOFTMAX],
        {t: REFERENCE.blocks[(SOFTMAX, t)] for t in ("2.1", "2.3")},
        TREE.tasks_of(2),
        TREE.titles,
    )
    assert "NotImplementedError('Task 4." in sources["minitorch_attn/functional/attention.py"]
    assert "minitorch_attn/core/autograd.py" not in sources  # assignment 1: as in the base


def test_splicing_follows_the_instructor_tree_when_it_changes(tmp_path):
    """A tree handed out earlier is graded against the instructor's current files: regions
    are matched by task and order, and re-indented, whatever moved around them."""
    instructor = tmp_path / "instructor"
    for name in ("minitorch_attn", "tests", "setup.cfg"):
        (shutil.copytree if (ROOT / name).is_dir() else shutil.copy)(ROOT / name, instructor / name)
    path = instructor / SOFTMAX
    moved = path.read_text().replace("class Softmax(Function):\n", "class Softmax(Function):\n    # New line.\n")
    assert "# New line." in moved, f"{SOFTMAX} has no class Softmax(Function) to insert a line into"
    path.write_text(moved)
    changed = InstructorTree(instructor)
    student = REFERENCE.with_blocks(SOFTMAX, "2.1", [["return 'forward'"], ["  return 'backward'"]])
    source = changed.spliced("2.1", student.for_task("2.1", changed))[SOFTMAX]
    assert "New line." in source
    assert "        return 'forward'\n" in source and "          return 'backward'\n" in source
    with pytest.raises(SubmissionProblem, match="should have 2 region"):
        changed.spliced("2.1", {SOFTMAX: [["pass"]]})


def test_a_submission_may_be_a_tree_a_zip_or_the_edited_files(tmp_path):
    tree = tmp_path / "hw4"
    make(tree, 4)
    solve(tree, {(rel, t): REFERENCE.blocks[(rel, t)] for rel, t in REFERENCE.blocks if t.startswith("4.")})
    expected = {t: REFERENCE.for_task(t, TREE) for t in ("4.1", "4.2", "4.3")}
    loose = tmp_path / "loose"
    loose.mkdir()
    shutil.copy(tree / "minitorch_attn/functional/attention.py", loose / "attention.py")
    shutil.copy(tree / "minitorch_attn/nn/attention.py", loose / "attention (1).py")  # renamed on upload
    zipped_tree = shutil.make_archive(str(tmp_path / "tree"), "zip", tmp_path, "hw4")
    zipped_files = tmp_path / "files.zip"
    with zipfile.ZipFile(zipped_files, "w") as archive:
        archive.write(tree / "minitorch_attn/functional/attention.py", "attention.py")
        archive.write(tree / "minitorch_attn/nn/attention.py", "nn/attention.py")
    for path in (tree, pathlib.Path(zipped_tree), zipped_files, loose):
        submission = Submission.from_path(path, TREE)
        assert {t: submission.for_task(t, TREE) for t in expected} == expected, path
    only_functional = Submission.from_path(loose / "attention.py", TREE)
    assert only_functional.for_task("4.2", TREE) == expected["4.2"]
    with pytest.raises(SubmissionProblem, match="no minitorch_attn/nn/attention.py"):
        only_functional.for_task("4.3", TREE)


def test_a_linked_file_is_not_read(tmp_path):
    """A symbolic link to the instructor's solution is not a submission of it."""
    (tmp_path / "softmax.py").symlink_to(ROOT / SOFTMAX)
    with pytest.raises(SubmissionProblem, match="no minitorch_attn/functional/softmax.py"):
        Submission.from_path(tmp_path, TREE).for_task("2.1", TREE)


def test_broken_markers_cost_only_the_tasks_of_their_file(tmp_path):
    tree = tmp_path / "hw3"
    make(tree, 3)
    path = tree / NORMS
    path.write_text(path.read_text().replace("# END SOLUTION", "", 1))
    submission = Submission.from_path(tree, TREE)
    for t in ("3.1", "3.2"):
        with pytest.raises(SubmissionProblem, match="keep the `# BEGIN SOLUTION`"):
            submission.for_task(t, TREE)
    assert submission.for_task("4.1", TREE)  # another file: read as usual


def test_a_syntax_error_is_its_task_zero_with_the_line(grader):
    broken = REFERENCE.with_blocks(NORMS, "3.2", [["return x +"], REFERENCE.blocks[(NORMS, "3.2")][1]])
    result = grader.grade_task(task("3.2"), broken)
    assert result.score == 0 and "syntax error" in result.problem and "`return x +`" in result.problem


# ---- the four escapes of the issue lose points in their own task ------------------------------------
@pytest.mark.parametrize(
    "name, task_id",
    [
        ("softmax without the max shift", "2.1"),
        ("flash forward without the running maximum", "5.1"),
        ("leaf gradients added in place into a shared array", "1.1"),
        ("mean backward only works for the last axis", "1.4"),
    ],
)
def test_the_issue_escapes_lose_their_own_task(grader, name, task_id):
    planted = mutant(name).submission(REFERENCE, TREE)
    result = grader.grade_task(task(task_id), planted)
    assert result.score == 0 and result.failures, f"{name}: still {result.score}/{result.points}"


def test_a_task_that_calls_the_catalogue_s_answer_gets_nothing_from_it(grader):
    """The catalogue's closed forms of a task still to do are held back in the copy a student's
    code runs in: a softmax that calls them fails its task, with a message that says so."""
    forward, backward = REFERENCE.blocks[(SOFTMAX, "2.1")]
    borrowed = [
        "from minitorch_attn.opinfo import softmax as answers",
        "p = ctx.xp.asarray(answers.np_softmax(x, dim), dtype=x.dtype)",
    ]
    with Grader(TREE) as quick:  # a test of each file of the task's public ones is enough
        quick._expected = {"task_2_1": _one_of_each_file(grader.expected("2.1", public_only=True))}
        result = quick.grade_task(task("2.1"), REFERENCE.with_blocks(SOFTMAX, "2.1", [borrowed, backward]))
    assert result.score == 0 and any("held back" in c.message for c in result.failures), [
        c.message for c in result.failures
    ][:2]


# ---- points land on the right task ---------------------------------------------------------------------
@pytest.mark.parametrize(
    "solved, stubbed",
    [
        ("3.1", "3.2"),  # layer_norm never calls rms_norm
        ("2.3", "2.1"),  # cross_entropy is its own fused computation: no softmax in it
    ],
)
def test_a_solved_task_earns_its_points_whatever_the_tasks_it_does_not_call(grader, solved, stubbed):
    """Partial work is scored: a task earns its points with the other tasks of the
    submission left as handed out, where its code does not call theirs."""
    submission = Submission.stubs(TREE)
    for rel in TREE.files_of(solved):
        submission = submission.with_blocks(rel, solved, REFERENCE.blocks[(rel, solved)])
    assert submission.for_task(stubbed, TREE) == Submission.stubs(TREE).for_task(stubbed, TREE)
    result = grader.grade_task(task(solved), submission)
    assert result.score == result.points, [c.message for c in result.failures][:2]


def _one_of_each_file(nodeids, most=6):
    """The first test of each file among ``nodeids`` (at most ``most``): a quick grading of a task."""
    first = {}
    for nodeid in nodeids:
        first.setdefault(nodeid.split("::")[0], nodeid)
    return list(first.values())[:most]


def test_a_task_earns_its_points_with_the_tasks_its_checks_need_as_handed_out(grader):
    """A task's points depend on its own code only: with every other task of its assignment
    left as handed out, the task's checks still reach its code alone, the grader's side
    supplying the rest. Task 1.4's reductions backpropagate through the engine (task 1.1)
    and its sum over broadcast dims (1.3); task 4.2's attention backward reads what the
    forward (4.1) saved. Quick: a test of each file, collected by the shared grader."""
    chosen = ("1.4", "4.2")
    with Grader(TREE) as quick:
        quick._expected = {
            markers.marker_name(t): _one_of_each_file(grader.expected(t, public_only=True))
            + _one_of_each_file(grader.held_back(t))
            for t in chosen
        }
        for solved in chosen:
            submission = Submission.stubs(TREE)
            for rel in TREE.files_of(solved):
                submission = submission.with_blocks(rel, solved, REFERENCE.blocks[(rel, solved)])
            result = quick.grade_task(task(solved), submission)
            assert len({c.nodeid.split("::")[0] for c in result.checks}) >= 3, solved
            assert result.score == result.points, (solved, [c.message for c in result.failures][:2])


# ---- the cheats of the issue have no effect ----------------------------------------------------------
def _append(path, text):
    path.write_text(path.read_text() + text)


CHEATS = {  # the issue's cheats, each of which raised an untouched or buggy tree to 50-100/100
    "a root conftest.py passing every report": lambda tree: (tree / "conftest.py").write_text(
        "import pytest\n\n@pytest.hookimpl(hookwrapper=True)\ndef pytest_runtest_makereport(item, call):\n"
        "    outcome = yield\n    outcome.get_result().outcome = 'passed'\n"
    ),
    "a gradient checker that accepts anything": lambda tree: _append(
        tree / "minitorch_attn/gradcheck/checker.py",
        "\ncheck_gradients = lambda *a, **k: GradcheckReport(0.0, 0.0, None)\ngradcheck = lambda *a, **k: True\n",
    ),
    "numpy.testing patched in __init__.py": lambda tree: _append(
        tree / "minitorch_attn/__init__.py",
        "\nimport numpy.testing\nnumpy.testing.assert_allclose = lambda *a, **k: None\n",
    ),
    ".homework.json naming another assignment": lambda tree: (tree / ".homework.json").write_text(
        json.dumps({"assignment": 1})
    ),
    "edited tests": lambda tree: (tree / "tests/test_functional.py").write_text("def test_nothing():\n    pass\n"),
}


@pytest.fixture(scope="module")
def handed_out(tmp_path_factory):
    """The untouched student tree of assignment 3."""
    tree = tmp_path_factory.mktemp("handed_out") / "hw3"
    make(tree, 3)
    return tree


@pytest.mark.parametrize("cheat", CHEATS)
def test_a_cheat_outside_the_solution_regions_never_reaches_the_graded_copy(tmp_path, handed_out, cheat):
    cheating = shutil.copytree(handed_out, tmp_path / "cheating")
    CHEATS[cheat](cheating)
    for t in ("3.1", "3.2"):  # what the grader runs for each task is the same, so is the grade
        assert TREE.spliced(t, Submission.from_path(cheating, TREE).for_task(t, TREE)) == TREE.spliced(
            t, Submission.from_path(handed_out, TREE).for_task(t, TREE)
        )


def test_an_untouched_tree_with_every_cheat_scores_zero(tmp_path, handed_out, grader):
    tree = shutil.copytree(handed_out, tmp_path / "cheating")
    for cheat in CHEATS.values():
        cheat(tree)
    graded = grader.grade(Submission.from_path(tree, TREE), 3)
    assert [r.score for r in graded] == [0, 0]
    assert all("NotImplementedError: Task 3." in r.failures[0].message for r in graded)


# ---- crashes, hangs, debuggers: that task's 0, with the reason; the others graded ----------------------
def test_a_hang_a_debugger_and_a_crash_each_cost_their_own_task(tmp_path):
    tree = tmp_path / "hw2"
    make(tree, 2)
    forward_21, backward_21 = REFERENCE.blocks[(SOFTMAX, "2.1")]
    forward_22, backward_22 = REFERENCE.blocks[(SOFTMAX, "2.2")]
    forward_23, backward_23 = REFERENCE.blocks[(SOFTMAX, "2.3")]
    hang_once = [
        "import builtins",
        "if not hasattr(builtins, 'hung_once'):",
        "    builtins.hung_once = True",
        "    while True:",
        "        pass",
    ]
    solve(
        tree,
        {
            (SOFTMAX, "2.1"): [hang_once + forward_21, backward_21],
            (SOFTMAX, "2.2"): [["breakpoint()"] + forward_22, backward_22],
            (SOFTMAX, "2.3"): [["import os", "os._exit(3)"] + forward_23, backward_23],
        },
    )
    (tree / "results.json").write_text('{"score": 100}')  # an older result is replaced
    results, graded = grade_submission(
        tree, 2, tree / "results.json", timeout=3, budget=300
    )  # a share past a loaded start-up
    outputs = {r.task_id: "\n".join(c.message for c in r.failures) + (r.problem or "") for r in graded}
    assert [r.score for r in graded] == [0, 0, 0]
    assert "Timeout" in outputs["2.1"]
    assert "breakpoint() or pdb.set_trace() was called" in outputs["2.2"]
    assert "crashed (the process ended with exit status 3)" in outputs["2.3"]
    assert json.loads((tree / "results.json").read_text()) == results


def test_ctrl_c_while_a_task_is_graded_stops_its_run_and_what_it_started(tmp_path):
    # the run has a session of its own (a terminal's Ctrl-C never reaches it): the grader
    # must stop it, or it would go on in the background after the command has ended
    started = tmp_path / "started"
    code = (
        "import os, signal, subprocess, time; p = subprocess.Popen(['sleep', '120'], start_new_session=True); "
        f"open({str(started)!r}, 'w').write(str(p.pid)); os.kill(os.getppid(), signal.SIGINT); time.sleep(120)"
    )
    with pytest.raises(KeyboardInterrupt):
        sandbox.run([sys.executable, "-c", code], tmp_path, limit=100)
    assert not _alive(int(started.read_text()))


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="reads /proc")
def test_processes_a_run_leaves_behind_are_stopped_with_it(tmp_path):
    # student code may start a process that outlives the run, also one that left its session
    started = tmp_path / "started"
    code = (
        "import os, subprocess, sys; p = subprocess.Popen(['sleep', '120'], start_new_session=True); "
        f"open({str(started)!r}, 'w').write(str(p.pid))"
    )
    assert sandbox.run([sys.executable, "-c", code], tmp_path, limit=100).stopped is None
    assert not _alive(int(started.read_text()))


def _alive(pid):
    """Whether ``pid`` runs (a zombie does not), looking again for a while: a reaper may be slow."""
    for _ in range(200):
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] in "ZX":
                    return False
        except FileNotFoundError:
            return False
        time.sleep(0.05)
    return True


def test_a_skipped_test_counts_as_failed():
    records = [
        {"package": "/x/minitorch_attn"},
        {"selected": ["tests/t.py::a", "tests/t.py::b"], "tasks": {}},
        {"test": "tests/t.py::a", "outcome": "passed", "message": "", "where": ""},
        {"test": "tests/t.py::b", "outcome": "skipped", "message": "needs X", "where": ""},
        {"exit": 0},
    ]
    run = read_checks(records, ["tests/t.py::a", "tests/t.py::b"], sandbox.Finished(0, None, ""))
    result = TaskResult("2.1", "softmax", 30, run.checks)
    assert [c.outcome for c in run.checks] == ["passed", "skipped"] and result.score == 0


def test_a_mistake_caught_by_public_checks_only_fails_the_selftest():
    """A student's process can forge the report of the public tests: a planted mistake needs a
    held-back check (tests/instructor/) that catches it, or the self-test fails."""
    public = Check("tests/test_ops.py::test_max", "failed", "differs")
    held = Check("tests/instructor/test_shortcuts.py::test_task_1_4", "failed", "differs")
    only_public = TaskResult("1.4", "reductions", 15, [public])
    assert _verdict("max ties", "1.4", [only_public]).startswith("FAIL: caught by public checks only")
    assert _verdict("max ties", "1.4", [TaskResult("1.4", "reductions", 15, [public, held])]).startswith("ok")


def test_a_test_without_a_record_failed_and_records_of_other_tests_are_ignored():
    records = [{"test": "tests/t.py::other", "outcome": "passed"}, {"test": "tests/t.py::a", "outcome": "maybe"}]
    run = read_checks(records, ["tests/t.py::a", "tests/t.py::b"], sandbox.Finished(0, None, ""))
    assert [c.outcome for c in run.checks] == ["failed", "failed"] and [c.nodeid for c in run.checks] == [
        "tests/t.py::a",
        "tests/t.py::b",
    ]


def test_a_missing_library_is_a_grader_error_not_a_zero(tmp_path, monkeypatch):
    real = importlib.metadata.version

    def version(name):
        if name == "array-api-strict":
            raise importlib.metadata.PackageNotFoundError(name)
        return real(name)

    monkeypatch.setattr(importlib.metadata, "version", version)
    old = tmp_path / "results.json"
    old.write_text('{"score": 100}')
    with pytest.raises(GraderError, match="the tests need array-api-strict"):
        grade_submission(ROOT, 1, old)
    assert not old.exists()  # no grade given, and no older one left to be mistaken for it


# ---- Gradescope ---------------------------------------------------------------------------------------
def test_the_autograder_zip_grades_a_submission_in_a_gradescope_layout(tmp_path):
    """Gradescope's layout, rooted in a temporary folder: source (the unpacked zip),
    run_autograder beside it, the submission (just the edited file), results/."""
    names = write_autograder(tmp_path / "autograder.zip", 3, pins=["numpy"])  # setup.sh is not run here
    assert {"setup.sh", "run_autograder", "setup.cfg", "README.md"} <= set(names)
    assert not [n for n in names if n.endswith("mutants.json") or "__pycache__" in n]
    root = tmp_path / "autograder"
    with zipfile.ZipFile(tmp_path / "autograder.zip") as archive:
        archive.extractall(root / "source")
    shutil.copy(root / "source" / "run_autograder", root / "run_autograder")
    student = tmp_path / "student"
    make(student, 3)
    buggy = mutant("rms_norm backward without the x̂ term").submission(REFERENCE, TREE)
    solve(student, {(NORMS, t): buggy.blocks[(NORMS, t)] for t in ("3.1", "3.2")})
    (root / "submission").mkdir()
    shutil.copy(student / NORMS, root / "submission" / "normalization.py")
    environment = dict(
        os.environ,
        AUTOGRADER_ROOT=str(root),
        MINITORCH_ATTN_REQUIRE_ISOLATION="",
        PATH=f"{pathlib.Path(sys.executable).parent}:{os.environ['PATH']}",
    )
    done = subprocess.run(
        ["bash", str(root / "run_autograder")],
        cwd=root,
        env=environment,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    results = json.loads((root / "results" / "results.json").read_text())

    assert {"score", "execution_time", "output", "tests"} <= set(results) and results["score"] == 60
    for test in results["tests"]:
        assert {"name", "score", "max_score", "status", "output", "visibility"} <= set(test)
        assert test["visibility"] == ("visible" if "(smoke test)" in test["name"] else "after_published")
        broken = "3.2" in test["name"]
        assert test["status"] == ("failed" if broken else "passed") and test["score"] == test["max_score"] * (
            not broken
        )
    graded = next(t for t in results["tests"] if t["name"].startswith("Task 3.2:"))
    assert graded["score"] == 0 and len(graded["output"]) > 300
    # the probes name the mistake (signatures.json ships in the zip, held out of the student's copies)
    assert "The probes of this task name the mistake: rms_norm backward without the x̂ term." in graded["output"]
    assert re.search(
        r"rms_norm \(weight\) gradient of input 0, inputs \(3, 6\), \(6,\) float64, drawn for this "
        r"submission: \d+ of 18 elements wrong; worst at \(\d+, \d+\): yours",
        graded["output"],
    )
    assert re.search(
        r"rms_norm over normalized_shape \(.*\) \((with|no) weight\) gradient of x, input \(2, 3, 4, 2\) "
        r"float64: \d+ of 48 elements wrong",
        graded["output"],
    )  # op, shape, gradient
    smoke = next(t for t in results["tests"] if t["name"].startswith("Task 3.2 (smoke test)"))
    assert "tests/instructor" not in smoke["output"] and "FAILED tests/test_functional.py::" in smoke["output"]


# ---- the catalogue of planted mistakes ---------------------------------------------------------------
def test_every_mutant_applies_to_its_own_task_only():
    mutants = load_mutants(TREE)
    for number in NUMBERS:
        tasks = {t["id"] for t in markers.assignment_by_number(MANIFEST, number)["tasks"]}
        assert sum(m.task in tasks for m in mutants) >= MIN_MUTANTS, f"assignment {number}"
    for m in mutants:
        planted = m.submission(REFERENCE, TREE)  # raises StaleMutant when its text is gone
        changed = {key for key in planted.blocks if planted.blocks[key] != REFERENCE.blocks[key]}
        assert changed == {(m.file, m.task)}, m.name
    kinds = {m.kind for m in mutants}
    assert {
        "overflow",
        "shared array changed",
        "saved array changed",
        "reduction axis",
        "gradient of ones",
        "missing accumulation",
        "formula term",
        "special value",
        "option combination",
        "normalized rank",
        "broadcasting",
    } <= kinds


def test_check_results_report_every_failure_in_full():
    long_message = "gradient of input 1 (shape (3, 5)) is wrong at element (2, 1): " + "x" * 400
    result = TaskResult(
        "2.1",
        "softmax",
        30,
        [
            Check("tests/instructor/test_a.py::t", "failed", long_message, "here:1"),
            Check("tests/test_b.py::u", "skipped", "no GPU"),
        ],
    )
    assert long_message in describe(result)
    public = describe(result, public_only=True)
    assert "test_a" not in public and "skipped, which counts as failed" in public


def test_the_selftest_table_counts_columns_not_combining_accents():
    import unicodedata

    from minitorch_attn.homework.selftest import _column

    cell = _column("without the x̂ mean(dx̂ x̂) term", 40)
    assert sum(not unicodedata.combining(c) for c in cell) == 40
    assert _column("abcdef", 3) == "abc"


def test_the_reference_passes_the_extreme_logit_tests_whatever_the_grading_seed():
    # the held-back inputs are drawn from the grading's secret seed, so a tolerance that the
    # exact computation can exceed at some seeds takes an honest student's points by chance:
    # at seed 277 attention's key gradient was 2,200 roundings off, over the 2,063 allowed
    import numpy as np

    from minitorch_attn.homework.remote import Local
    from tests.instructor import test_extreme_logits

    failures = []
    for case in test_extreme_logits._cases():
        for seed in [*range(40), 277]:
            try:
                test_extreme_logits.test_extreme_logits(Local(), np.random.default_rng([seed, 1]), *case.values)
            except AssertionError as error:
                failures.append(f"seed {seed}: {error}")
    assert not failures, "\n".join(failures[:5])
