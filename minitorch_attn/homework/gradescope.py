"""Gradescope: the autograder zip, and what runs inside it.

``minitorch-attn homework autograder --assignment N --out autograder.zip`` writes the zip
that Gradescope's autograder specification asks for, to upload as a "programming
assignment" autograder. At its root:

* ``setup.sh``: run once while Gradescope builds the image: Python, a virtual environment
  in ``/autograder/venv``, and this package with its test extra;
* ``run_autograder``: run for each submission: grades ``/autograder/submission`` (the
  student's tree, a zip of it, or just the edited files) into
  ``/autograder/results/results.json``;
* the instructor's tree (package with the reference solutions and manifest, tests with
  the held-back ones, ``gradcheck/``, ``setup.cfg``, ``pyproject.toml``, ``README.md``),
  which Gradescope unpacks into ``/autograder/source``.

``run_autograder`` calls ``python -m minitorch_attn.homework.gradescope`` from
``/autograder/source``. The root folder is ``$AUTOGRADER_ROOT`` when set (else
``/autograder``), so the same script runs on any machine against a folder laid out as
Gradescope's, without root rights.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import sys
import tempfile
import zipfile

from .instructor import GraderError, InstructorTree
from .results import grade_submission, print_table

SHIPPED = ("minitorch_attn", "tests", "gradcheck", "setup.cfg", "pyproject.toml", "README.md")
LEFT_OUT_NAMES = {"mutants.json", "results.json"}   # the selftest's catalogue is not needed to grade
LEFT_OUT_FOLDERS = {"__pycache__", ".pytest_cache", ".hypothesis"}

SETUP_SH = """#!/usr/bin/env bash
# Gradescope runs this once, as root, while it builds the autograder's image: Python, a
# virtual environment, and minitorch-attn with the libraries its tests need.
set -euo pipefail
apt-get update -qq
apt-get install -y -qq python3 python3-venv python3-pip
python3 -m venv /autograder/venv
/autograder/venv/bin/pip install --quiet -e "/autograder/source[test]"
"""

RUN_AUTOGRADER = """#!/usr/bin/env bash
# Gradescope runs this for each submission: it grades /autograder/submission into
# /autograder/results/results.json. AUTOGRADER_ROOT, when set, replaces /autograder.
set -euo pipefail
root="${{AUTOGRADER_ROOT:-/autograder}}"
python="$root/venv/bin/python"
[ -x "$python" ] || python=python3
cd "$root/source"
exec "$python" -m minitorch_attn.homework.gradescope --root "$root" --assignment {number} --timeout {timeout:g}
"""


def write_autograder(out, number, tree=None, timeout=60.0):
    """Write the autograder zip of assignment ``number`` to ``out`` (atomically); returns
    the names it holds.

    Raises:
        ValueError: an unknown assignment. GraderError: an unusable instructor's tree.
    """
    tree = tree if isinstance(tree, InstructorTree) else InstructorTree(tree)
    tree.assignment(number)
    out = pathlib.Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=".autograder-", suffix=".zip", dir=out.parent)
    os.close(handle)
    names = []
    try:
        with zipfile.ZipFile(temporary, "w", zipfile.ZIP_DEFLATED) as archive:
            scripts = {"setup.sh": SETUP_SH, "run_autograder": RUN_AUTOGRADER.format(number=number, timeout=timeout)}
            for name, text in scripts.items():
                info = zipfile.ZipInfo(name)
                info.external_attr = 0o100755 << 16          # executable, as Gradescope runs them
                archive.writestr(info, text)
                names.append(name)
            for path in _shipped_files(tree.root):
                name = path.relative_to(tree.root).as_posix()
                archive.write(path, name)
                names.append(name)
        os.chmod(temporary, 0o644)
        os.replace(temporary, out)
    except BaseException:
        pathlib.Path(temporary).unlink(missing_ok=True)
        raise
    return names


def _shipped_files(root):
    for name in SHIPPED:
        source = root / name
        if source.is_file():
            yield source
        elif source.is_dir():
            for path in sorted(source.rglob("*")):
                folders = set(path.relative_to(root).parts[:-1])
                if (path.is_file() and not folders & LEFT_OUT_FOLDERS and path.name not in LEFT_OUT_NAMES
                        and path.suffix != ".pyc"):
                    yield path


def main(argv=None):
    """``python -m minitorch_attn.homework.gradescope --assignment N [--root DIR]``: what
    ``run_autograder`` runs. Exit status 0 when results.json was written, 2 when the
    grader could not grade (then there is no results.json, and Gradescope reports the
    autograder as failed instead of giving a 0)."""
    parser = argparse.ArgumentParser(prog="python -m minitorch_attn.homework.gradescope", description=main.__doc__)
    parser.add_argument("--assignment", type=int, required=True)
    parser.add_argument("--root", default=os.environ.get("AUTOGRADER_ROOT", "/autograder"),
                        help="Gradescope's folder (default: $AUTOGRADER_ROOT or /autograder)")
    parser.add_argument("--timeout", type=float, default=60.0, help="time limit of each test, in seconds")
    args = parser.parse_args(argv)
    root = pathlib.Path(args.root)
    try:
        _, graded = grade_submission(root / "submission", args.assignment, root / "results" / "results.json",
                                     instructor=root / "source", timeout=args.timeout)
    except (GraderError, ValueError) as error:
        print(f"the autograder could not grade: {error}", file=sys.stderr)
        return 2
    print_table(graded)
    return 0


if __name__ == "__main__":
    sys.exit(main())
