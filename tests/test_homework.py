"""Homework scaffolding end to end: markers, student trees, grading.

Each assignment is generated into a temporary folder; no solution text may be in it;
its stubbed tasks must fail with their own message and every other test must pass;
grading the untouched solution tree gives full marks, and a planted shortcut loses
exactly its task's points.
"""

import json

import pytest

from minitorch_attn.homework import markers
from minitorch_attn.homework.grade import grade, matches, run_tests
from minitorch_attn.homework.make import make

ROOT = markers.PROJECT_ROOT
MANIFEST = markers.load_manifest()
NUMBERS = [a["number"] for a in MANIFEST["assignments"]]


def test_markers_agree_with_the_manifest():
    assert markers.check() == []


@pytest.mark.parametrize("source, problem", [
    ("x = 1\n# BEGIN SOLUTION 1.1\ny = 2\n", "never closed"),
    ("x = 1\n# END SOLUTION\n", "without a BEGIN"),
    ("# BEGIN SOLUTION 1.1\n# BEGIN SOLUTION 1.2\n# END SOLUTION\n", "inside the region"),
])
def test_broken_markers_are_reported(tmp_path, source, problem):
    path = tmp_path / "module.py"
    path.write_text(source)
    with pytest.raises(markers.MarkerError, match=problem):
        markers.find_regions(path)


def test_unknown_task_ids_and_unmarked_tasks_are_reported(tmp_path):
    package = tmp_path / "minitorch_attn"
    package.mkdir()
    (package / "m.py").write_text("def f():\n    # BEGIN SOLUTION 9.9\n    return 1\n    # END SOLUTION\n")
    problems = markers.check(MANIFEST, package, ROOT)
    assert any("task 9.9 is not in the manifest" in p for p in problems)
    assert any("task 1.1 has no marked region" in p for p in problems)


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
    assignment = next(a for a in MANIFEST["assignments"] if a["number"] == number)
    assert stubbed == sorted(t["id"] for t in assignment["tasks"])

    # no solution text of a stubbed task reaches the student
    later = {t["id"] for a in MANIFEST["assignments"] if a["number"] >= number for t in a["tasks"]}
    regions = [r for r in markers.all_regions() if r.task in later]
    secrets = markers.distinctive_lines(regions)
    assert secrets, "the regions should contain some distinctive code"
    for path in tree.rglob("*"):
        if path.is_file() and path.suffix in (".py", ".md", ".json", ".cfg"):
            lines = {line.strip() for line in path.read_text().splitlines()}
            leaked = sorted(secrets & lines)
            assert not leaked, f"{path.relative_to(tree)} contains solution code: {leaked[:3]}"
    assert not (tree / "tests" / "instructor").exists()
    readme = (tree / "README.md").read_text()
    for task in assignment["tasks"]:
        assert f"Task {task['id']}: {task['title']}" in readme

    # stubbed tasks fail with their message; every other test passes. A failing test must
    # either say which stubbed task stopped it or be one the manifest grades a stubbed task by.
    outcomes = run_tests(tree)
    assert outcomes, "the student tree's tests did not run"
    failures = {node: message for node, message in outcomes.items() if message is not None}
    graded_by_stub = [n for a in MANIFEST["assignments"] if a["number"] >= number
                      for t in a["tasks"] for n in t.get("tests", [])]
    wrong = {n: m for n, m in failures.items()
             if not any(f"Task {task}:" in m for task in later)
             and not any(matches(n, wanted) for wanted in graded_by_stub)}
    assert not wrong, f"tests failing for another reason than a stub: {list(wrong.items())[:3]}"
    for task in assignment["tasks"]:  # (a stub of an earlier task in the chain may stop it first)
        own = [n for n in failures if any(matches(n, wanted) for wanted in task.get("tests", []))]
        assert own, f"no test of task {task['id']} fails in the student tree"
    assert any(f"Task {assignment['tasks'][0]['id']}:" in m for m in failures.values())


def test_grading_the_solution_tree_gives_full_marks(tmp_path):
    import shutil

    tree = tmp_path / "solution"
    shutil.copytree(ROOT, tree, ignore=shutil.ignore_patterns(".git", "__pycache__", "runs", ".venv", "*.egg-info"))
    for number in NUMBERS:
        results = grade(tree, assignment=number)
        assert results["score"] == sum(t["max_score"] for t in results["tests"]), results
    saved = json.loads((tree / "results.json").read_text())
    assert {"score", "tests"} <= set(saved) and {"name", "score", "max_score", "output"} <= set(saved["tests"][0])


def test_a_planted_shortcut_loses_exactly_its_task(tmp_path):
    tree = tmp_path / "student"
    make(tree, 1)
    # a student who solved everything, but wrote the derivative of exp as 1 (a "gradient of ones")
    for name in ("core/autograd.py", "core/ops.py"):
        source = ROOT / "minitorch_attn" / name
        text = markers.strip_solutions(source.read_text(), source, set(), {})
        if name == "core/ops.py":
            exp_backward = "xp.exp(x))\n\n    @staticmethod\n    def derivative(xp, x, y):\n        return y\n"
            assert text.count(exp_backward) == 1
            text = text.replace(exp_backward, exp_backward.replace("return y", "return 1.0"))
        (tree / "minitorch_attn" / name).write_text(text)
    results = grade(tree)
    scores = {row["name"].split(":")[0]: (row["score"], row["max_score"]) for row in results["tests"]}
    assert scores.pop("Task 1.2")[0] == 0
    assert all(score == maximum for score, maximum in scores.values()), scores
    output = next(r["output"] for r in results["tests"] if r["name"].startswith("Task 1.2"))
    assert "test_task_1_2" in output or "exp" in output


def test_editing_the_tests_in_a_student_tree_does_not_change_the_grade(tmp_path):
    tree = tmp_path / "student"
    make(tree, 3)
    for path in (tree / "tests").glob("test_*.py"):
        path.write_text("def test_nothing():\n    pass\n")
    (tree / "minitorch_attn" / "gradcheck" / "entries_normalization.py").write_text("ENTRIES = []\n")
    results = grade(tree)
    assert results["score"] == 0
    assert all("NotImplementedError: Task 3." in row["output"] for row in results["tests"])


def test_grading_without_pytest_is_an_error_not_a_zero(tmp_path, monkeypatch):
    import importlib.util

    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "pytest" else real_find_spec(name, *a))
    with pytest.raises(ValueError, match="pytest, which is not installed"):
        grade(tmp_path, assignment=1)
