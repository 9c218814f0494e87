"""Grade a student tree task by task and write a Gradescope ``results.json``.

The student's folder is copied to a temporary place, its ``tests/`` and ``gradcheck/`` are
replaced by the instructor's (the instructor-only tests included, and no student edit to a
test counts), and then, in a fresh Python process whose working directory is the copy (so
the student's ``minitorch_attn`` is the one imported):

1. pytest runs every test the manifest names for the assignment's tasks, once, writing a
   JUnit XML report that says which test passed;
2. every gradcheck entry the manifest names runs, once.

A task earns its points when all of its tests and gradcheck entries pass; the table and
``results.json`` give the first failure message of every task that did not.
Gradescope's format: ``{"score": total, "tests": [{"name", "score", "max_score", "output"}]}``.
"""

from __future__ import annotations

import importlib.util
import json
import pathlib
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ElementTree

from . import markers
from .make import STATE_FILE, assignment_by_number

GRADECHECK_SCRIPT = """
import json, sys
from minitorch_attn.gradcheck.suite import entries as all_entries
entries = {e.name: e for e in all_entries()}
results = {}
for name in json.loads(sys.argv[1]):
    try:
        report = entries[name].run()
        results[name] = None if report.passed else report.failure
    except KeyError:
        results[name] = "gradcheck entry not found: " + name
    except Exception as exc:
        results[name] = type(exc).__name__ + ": " + str(exc)
print(json.dumps(results))
"""


def grade(student_dir, assignment=None, manifest=None, project_root=markers.PROJECT_ROOT, timeout=1200):
    """Grade ``student_dir``; returns the Gradescope results dict (also written to
    ``student_dir/results.json``).

    Args:
        assignment: which assignment to grade; by default the one recorded in the tree.
    Raises:
        ValueError: if the folder is not a student tree and no assignment is given.
    """
    manifest = manifest or markers.load_manifest()
    if importlib.util.find_spec("pytest") is None:
        raise ValueError('grading runs the tests with pytest, which is not installed: pip install -e ".[test]"')
    student_dir = pathlib.Path(student_dir)
    if not (student_dir / "minitorch_attn").is_dir():
        raise ValueError(f"{student_dir} holds no minitorch_attn package to grade")
    if assignment is None:
        state = student_dir / STATE_FILE
        if not state.is_file():
            raise ValueError(f"{student_dir} has no {STATE_FILE}; pass the assignment number")
        assignment = json.loads(state.read_text())["assignment"]
    chosen = assignment_by_number(manifest, assignment)

    with tempfile.TemporaryDirectory() as scratch:
        work = pathlib.Path(scratch) / "tree"
        shutil.copytree(student_dir, work, ignore=shutil.ignore_patterns(
            "__pycache__", ".git", ".venv", "runs", "*.egg-info", ".pytest_cache", ".hypothesis", "results.json"))
        for graders in ("tests", "gradcheck"):  # the instructor's copies, instructor-only tests included:
            shutil.rmtree(work / graders, ignore_errors=True)  # a student's edits to them do not count
            shutil.copytree(project_root / graders, work / graders, ignore=shutil.ignore_patterns("__pycache__"))
        nodes = sorted({n for t in chosen["tasks"] for n in t.get("tests", [])})
        test_outcomes = run_tests(work, nodes, timeout)
        check_outcomes = _run_gradchecks(work, [n for t in chosen["tasks"] for n in t.get("gradcheck", [])], timeout)

    results = {"tests": [], "score": 0}
    for task in chosen["tasks"]:
        failures = []
        for node in task.get("tests", []):
            matched = {k: v for k, v in test_outcomes.items() if matches(k, node)}
            if not matched:
                failures.append(f"{node}: not run (missing or not collected)")
            failures += [f"{k}: {v}" for k, v in matched.items() if v is not None]
        failures += [f"gradcheck {n}: {check_outcomes.get(n)}" for n in task.get("gradcheck", [])
                     if check_outcomes.get(n) is not None]
        score = task["points"] if not failures else 0
        results["score"] += score
        results["tests"].append({
            "name": f"Task {task['id']}: {task['title']}",
            "score": score,
            "max_score": task["points"],
            "output": "all tests and gradient checks pass" if not failures else failures[0],
        })
    (student_dir / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    return results


def run_tests(work, files=(), timeout=1200):
    """Run pytest on ``files`` (test files or node ids; all tests when empty) in ``work``;
    returns ``{nodeid: None if it passed or was skipped, else its first failure line}``."""
    report = work / "junit.xml"
    command = [sys.executable, "-m", "pytest", "-q", "--tb=line", "-p", "no:cacheprovider", "-o", "addopts=",
               f"--junitxml={report}", "--rootdir", str(work), *files]
    done = subprocess.run(command, cwd=work, capture_output=True, text=True, timeout=timeout)
    if not report.is_file():  # pytest itself failed (not a test): no grade can be given
        raise RuntimeError(f"pytest did not run in {work}:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    outcomes = {}
    for case in ElementTree.parse(report).getroot().iter("testcase"):
        nodeid = case.get("classname", "").replace(".", "/") + ".py::" + case.get("name", "")
        problem = case.find("failure")
        if problem is None:
            problem = case.find("error")
        if case.find("skipped") is not None:
            outcomes[nodeid] = None
        elif problem is not None:
            outcomes[nodeid] = _first_line(problem.get("message") or problem.text or "failed")
        else:
            outcomes[nodeid] = None
    return outcomes


def matches(nodeid, wanted):
    """A manifest entry names a file, a test function (all its parameters) or one test."""
    if "::" not in wanted:
        return nodeid.startswith(wanted + "::")
    if "[" in wanted:
        return nodeid == wanted
    return nodeid.split("[")[0] == wanted


def _run_gradchecks(work, names, timeout):
    if not names:
        return {}
    done = subprocess.run([sys.executable, "-c", GRADECHECK_SCRIPT, json.dumps(names)], cwd=work,
                          capture_output=True, text=True, timeout=timeout)
    try:
        return json.loads(done.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        message = _first_line(done.stderr) or "the gradcheck suite did not run"
        return {name: message for name in names}


def _first_line(text):
    """The start of a failure message on one line (pytest's messages span several)."""
    return " ".join(line.strip() for line in str(text).splitlines() if line.strip())[:300]


def print_table(results, file=sys.stdout):
    """One row per task: id and title, points, passed/failed, first failure message."""
    print(f"{'task':<48} {'points':>9}  result  first failure", file=file)
    for row in results["tests"]:
        status = "passed" if row["score"] == row["max_score"] else "failed"
        message = "" if status == "passed" else row["output"][:100]
        print(f"{row['name'][:48]:<48} {row['score']:>4}/{row['max_score']:<4}  {status:<6}  {message}", file=file)
    total = sum(r["max_score"] for r in results["tests"])
    print(f"{'total':<48} {results['score']:>4}/{total:<4}", file=file)
