"""The autograder as released: setup.sh's pins follow setup.cfg, the preflight says what is
true, and a student's own grade (``homework grade`` in their folder) equals the autograder's
for the same files: only the code between the SOLUTION lines counts, on both sides."""

from __future__ import annotations

import importlib.metadata
import json
import pathlib
import re
import subprocess
import sys
import zipfile

import pytest

from minitorch_attn.homework import gradescope, markers, preflight
from minitorch_attn.homework.gradescope import write_autograder
from minitorch_attn.homework.instructor import HANDOUT, InstructorTree, splice
from minitorch_attn.homework.make import make
from minitorch_attn.homework.results import grade_submission
from minitorch_attn.homework.submission import Submission

ROOT = markers.PROJECT_ROOT
TREE = InstructorTree()
REFERENCE = Submission.reference(TREE)
SOFTMAX = "minitorch_attn/functional/softmax.py"
REQUIREMENTS = preflight.requirement_lines(ROOT / "setup.cfg")
INSTALLED = [
    f"{preflight.NAME.match(line)[0]}=={importlib.metadata.version(preflight.NAME.match(line)[0])}"
    for line in REQUIREMENTS
]


def solve(folder, blocks):
    for (rel, task_id), code in blocks.items():
        path = folder / rel
        path.write_text(splice(path.read_text(), markers.find_regions(path), task_id, code))


# ---- setup.sh: one source of truth ----------------------------------------------------------------------
def test_setup_sh_installs_every_requirement_of_setup_cfg(tmp_path):
    # the test extra gained pytest-xdist and expecttest after the pins were written by hand, and
    # every submission got "could not grade": the pins now come from setup.cfg itself
    write_autograder(tmp_path / "a.zip", 1, pins=INSTALLED)
    with zipfile.ZipFile(tmp_path / "a.zip") as archive:
        setup = archive.read("setup.sh").decode()
    pinned = preflight.pinned_in_text(setup)
    for line in REQUIREMENTS:
        assert preflight.canonical(preflight.NAME.match(line)[0]) in pinned, line
    assert "pytest-xdist" in pinned and "expecttest" in pinned
    assert '"$root/venv/bin/pip" install --quiet --no-deps -e "$root/source"' in setup
    assert "useradd" in setup and not re.search(r"(?<![A-Za-z])torch", setup)  # no PyTorch for student code
    assert subprocess.run(["bash", "-n"], input=setup, text=True).returncode == 0


def test_the_pins_are_what_pip_resolves_from_setup_cfg(monkeypatch):
    calls = []

    def pip(command, capture_output, text):
        calls.append(command)
        if "--report" in command:
            report = command[command.index("--report") + 1]
            pathlib.Path(report).write_text(
                json.dumps(
                    {
                        "install": [
                            {"metadata": {"name": "numpy", "version": "2.2.6"}},
                            {"metadata": {"name": "Pygments", "version": "2.21.0"}},
                        ]
                    }
                )
            )
        return subprocess.CompletedProcess(command, 0, "", "")

    monkeypatch.setattr(gradescope.subprocess, "run", pip)
    assert gradescope.resolve_pins(REQUIREMENTS) == ["numpy==2.2.6", "Pygments==2.21.0"]
    first, second = calls
    assert "--python-version=3.10" in first and first[-len(REQUIREMENTS) :] == REQUIREMENTS
    assert "--only-binary=:all:" in first and "--dry-run" in first
    assert (
        "--python-version=3.12" in second
        and "--no-deps" in second
        and second[-2:] == ["numpy==2.2.6", "Pygments==2.21.0"]
    )


def test_a_resolution_that_fails_is_a_grader_error_with_pips_words(monkeypatch):
    monkeypatch.setattr(
        gradescope.subprocess,
        "run",
        lambda command, **_: subprocess.CompletedProcess(
            command, 1, "", "WARNING: Location 'x' is ignored\nERROR: No matching distribution found for numpy>=2.0"
        ),
    )
    with pytest.raises(gradescope.GraderError, match="No matching distribution found for numpy") as error:
        gradescope.resolve_pins(REQUIREMENTS)
    assert "Location" not in str(error.value)


@pytest.mark.parametrize("pinned", [False, True])
def test_the_preflight_says_why_a_library_is_missing_and_what_to_do(tmp_path, pinned):
    (tmp_path / "setup.cfg").write_text("[options]\ninstall_requires =\n    numpy>=2.0\n    no-such-library-here>=1\n")
    (tmp_path / "setup.sh").write_text(
        "pip install 'numpy==2.2.6'" + (" 'no_such.library-here==1.0'" if pinned else "")
    )
    results = tmp_path / "results" / "results.json"
    done = subprocess.run(
        [sys.executable, str(ROOT / "minitorch_attn/homework/preflight.py"), str(results)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr
    output = json.loads(results.read_text())["output"]
    assert "no-such-library-here" in output and "rebuild the autograder (its setup.sh installs them)" not in output
    if pinned:
        assert "setup.sh installs them (no_such.library-here==1.0)" in output and "build output" in output
    else:
        assert "does not install no-such-library-here" in output and "homework autograder" in output


# ---- one grading rule: only the SOLUTION regions count, locally and on the autograder -------------------
@pytest.fixture(scope="module")
def outside_code(tmp_path_factory):
    """A student tree of assignment 2, every task solved, task 2.1's code using a name that the
    student defined above the regions (outside the SOLUTION lines)."""
    tree = tmp_path_factory.mktemp("outside") / "hw2"
    make(tree, 2)
    forward, backward = REFERENCE.blocks[(SOFTMAX, "2.1")]
    solve(
        tree,
        {
            (SOFTMAX, "2.1"): [["shift_rows = SHIFT_ROWS"] + forward, backward],
            **{(SOFTMAX, t): REFERENCE.blocks[(SOFTMAX, t)] for t in ("2.2", "2.3")},
        },
    )
    path = tree / SOFTMAX
    text = path.read_text()
    head = text.index("import math\n")
    path.write_text(text[:head] + "import math\nSHIFT_ROWS = True   # mine\n" + text[head + len("import math\n") :])
    return tree


def test_code_outside_the_regions_scores_the_same_locally_and_on_the_autograder(outside_code, tmp_path):
    assert (outside_code / HANDOUT).is_file()
    _, local = grade_submission(outside_code, 2, tmp_path / "local.json", instructor=outside_code, budget=300)
    _, graded = grade_submission(outside_code, 2, tmp_path / "autograder.json", instructor=ROOT, budget=300)
    assert [r.score for r in local] == [r.score for r in graded] == [0, 30, 40]
    line = next(
        n for n, text in enumerate((outside_code / SOFTMAX).read_text().splitlines(), 1) if "SHIFT_ROWS =" in text
    )
    for results in ("local.json", "autograder.json"):
        smoke = json.loads((tmp_path / results).read_text())["tests"][0]
        assert smoke["name"].startswith("Task 2.1 (smoke test)") and smoke["visibility"] == "visible"
        assert smoke["output"].startswith(
            f"{SOFTMAX} line {line}, `SHIFT_ROWS = True   # mine`, is outside the SOLUTION lines and is not graded"
        )


def test_only_the_lines_outside_the_regions_that_were_not_handed_out_are_named():
    handed_out = (
        "import math\n\ndef f(x):\n    # BEGIN SOLUTION 2.1\n    raise NotImplementedError\n    # END SOLUTION\n"
    )
    theirs = (
        "import math\nimport itertools\n# a comment of mine\n\ndef f(x):\n    # BEGIN SOLUTION 2.1\n"
        "    return helper(x)\n    # END SOLUTION\n\ndef helper(x):\n    return x\n"
    )
    assert markers.ungraded_lines(theirs, handed_out) == [
        (2, "import itertools"),
        (10, "def helper(x):"),
        (11, "return x"),
    ]
    assert markers.ungraded_lines(handed_out, handed_out) == []


def test_a_student_tree_is_graded_against_its_handout_not_its_edited_files(tmp_path):
    tree = tmp_path / "hw2"
    make(tree, 2)
    (tree / "tests" / "conftest.py").write_text("import pytest\npytest.exit('mine')\n")  # edited, not graded
    graded = InstructorTree(tree)
    assert graded.source == tree.resolve() and graded.root != graded.source
    assert (graded.root / "tests" / "conftest.py").read_text() != "import pytest\npytest.exit('mine')\n"
    assert InstructorTree(ROOT).root == ROOT.resolve()  # the instructor's own tree is itself


def test_zips_inside_a_zip_share_one_budget(tmp_path, monkeypatch):
    # each zip was held to 200 MB alone: an outer zip of many inner ones could fill the disk
    from minitorch_attn.homework import submission

    monkeypatch.setattr(submission, "MAX_UNZIPPED_BYTES", 3_000)
    inner = tmp_path / "inner.zip"
    with zipfile.ZipFile(inner, "w") as archive:
        archive.writestr("a.py", "x = 1\n" * 300)  # 1,800 bytes: one fits, two do not
    outer = tmp_path / "outer.zip"
    with zipfile.ZipFile(outer, "w") as archive:
        archive.write(inner, "one.zip")
        archive.write(inner, "two.zip")
    with pytest.raises(ValueError, match="unpack to more than"):
        Submission.from_path(outer, TREE)
