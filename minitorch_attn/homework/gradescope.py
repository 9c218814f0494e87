"""Gradescope: the autograder zip, and what runs inside it.

``minitorch-attn homework autograder --assignment N --out autograder.zip`` writes the zip
that Gradescope's autograder specification asks for, to upload as a "programming
assignment" autograder. At its root:

* ``setup.sh``: run once while Gradescope builds the image: Python, a virtual environment
  in ``/autograder/venv`` with pinned libraries, this package, and the unprivileged user
  that runs student code (:mod:`.sandbox`). The pins are what pip resolves from
  ``setup.cfg``'s requirements when the zip is written (:func:`resolve_pins`), the same list
  that the preflight checks, so the two cannot drift apart;
* ``run_autograder``: run for each submission: a preflight that needs no library
  (:mod:`.preflight`), then grades ``/autograder/submission`` (the student's tree, a zip
  of it, or just the edited files) into ``/autograder/results/results.json``, task by
  task within ``--budget`` seconds (set the assignment's Gradescope timeout to it);
* ``minitorch_attn/homework/release_secret.txt``: a random secret, new in every zip, from
  which the held-back tests' inputs are drawn (readable by root only once grading starts);
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
import datetime
import json
import os
import pathlib
import secrets
import shlex
import subprocess
import sys
import tempfile
import zipfile

from ..argtypes import positive_float, positive_int
from ..stopping import stop_as_ctrl_c
from . import derive
from .grade import task_limits
from .instructor import SECRET_FILE, GraderError, InstructorTree
from .preflight import requirement_lines
from .results import grade_submission, print_table, write_results
from .runner import cap
from .sandbox import PLATFORM_MEMORY_MB, STUDENT_USER, student_memory

SHIPPED = ("minitorch_attn", "tests", "gradcheck", "setup.cfg", "pyproject.toml", "README.md")
LEFT_OUT_NAMES = {"mutants.json", "results.json", "release_secret.txt"}  # the selftest's catalogue is not needed
LEFT_OUT_FOLDERS = {"__pycache__", ".pytest_cache", ".hypothesis"}

# The Pythons of the images the teacher may choose: Ubuntu 22.04's (the pins are resolved for
# it) and 24.04's (each pin is checked to have a wheel for it).
TARGET_PYTHONS = ("3.10", "3.12")
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux2014_x86_64")  # Gradescope's images run x86-64 glibc Linux

SETUP_SH = """#!/usr/bin/env bash
# Gradescope runs this once, as root, while it builds the autograder's image (Ubuntu 22.04
# or 24.04; on 20.04, whose Python is 3.8, Python 3.10 comes from the deadsnakes archive):
# Python, a virtual environment with pinned libraries, minitorch-attn, and the unprivileged
# user that runs student code. No PyTorch: student code must not find a reference library.
# AUTOGRADER_ROOT, when set, replaces /autograder (the source folder is $AUTOGRADER_ROOT/source).
set -euo pipefail
root="${{AUTOGRADER_ROOT:-/autograder}}"
apt-get update -qq
apt-get install -y -qq python3 python3-venv python3-pip passwd
python=python3
if ! python3 -c 'import sys; sys.exit(sys.version_info < (3, 10))'; then
    apt-get install -y -qq software-properties-common
    add-apt-repository -y ppa:deadsnakes/ppa
    apt-get update -qq
    apt-get install -y -qq python3.10 python3.10-venv
    python=python3.10
fi
"$python" -m venv "$root/venv"
# setup.cfg's install_requires and test extra, as pip resolved them when the zip was written
# ({resolved}):
"$root/venv/bin/pip" install --quiet {pins}
"$root/venv/bin/pip" install --quiet --no-deps -e "$root/source"
id {user} >/dev/null 2>&1 || useradd --system --user-group --no-create-home --home-dir /nonexistent \\
    --shell /usr/sbin/nologin {user}
"""

RUN_AUTOGRADER = """#!/usr/bin/env bash
# Gradescope runs this for each submission: it grades /autograder/submission into
# /autograder/results/results.json. AUTOGRADER_ROOT, when set, replaces /autograder.
# The preflight needs no library: a missing one is reported in results.json.
set -uo pipefail
root="${{AUTOGRADER_ROOT:-/autograder}}"
python="$root/venv/bin/python"
[ -x "$python" ] || python=python3
cd "$root/source"
"$python" minitorch_attn/homework/preflight.py "$root/results/results.json" || exit 2
export MINITORCH_ATTN_REQUIRE_ISOLATION="${{MINITORCH_ATTN_REQUIRE_ISOLATION-1}}"
exec "$python" -m minitorch_attn.homework.gradescope --root "$root" --assignment {number} --timeout {timeout:g} \\
    --budget {budget:g} --memory {memory:g}
"""


def write_autograder(
    out, number, tree=None, timeout=60.0, budget=600.0, memory=PLATFORM_MEMORY_MB, pins=None, hide_derivations=False
):
    """Write the autograder zip of assignment ``number`` to ``out`` (atomically); returns
    the names it holds. Each zip holds a new random secret (``release_secret.txt``) from
    which the held-back checks' inputs are drawn; ``budget`` is the Gradescope timeout the teacher
    sets, ``memory`` the memory (MB) of the assignment's machine there. ``setup.sh`` installs
    ``pins`` (``["numpy==2.2.6", ...]``; default: :func:`resolve_pins` of the tree's
    ``setup.cfg``, so that every library the grader needs is installed). ``hide_derivations``:
    a release for a derive-mode tree (:mod:`.derive`): each task's feedback also says whether
    its derivation sheet was handed in.

    Raises:
        ValueError: an unknown assignment. GraderError: an unusable instructor's tree, or
        pins that pip cannot resolve.
    """
    tree = tree if isinstance(tree, InstructorTree) else InstructorTree(tree)
    tree.assignment(number)
    task_limits(budget, len(tree.assignment(number)["tasks"]) + 1, timeout)  # ValueError when too small
    student_memory(memory)  # likewise
    resolved = "given by the caller"
    if pins is None:
        pins = resolve_pins(requirement_lines(tree.root / "setup.cfg"))
        resolved = f"for CPython {' and '.join(TARGET_PYTHONS)} on x86-64 Linux, {datetime.date.today().isoformat()}"
    setup = SETUP_SH.format(pins=" ".join(shlex.quote(p) for p in pins), user=STUDENT_USER, resolved=resolved)
    out = pathlib.Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=".autograder-", suffix=".zip", dir=out.parent)
    os.close(handle)
    names = []
    try:
        with zipfile.ZipFile(temporary, "w", zipfile.ZIP_DEFLATED) as archive:
            scripts = {
                "setup.sh": setup,
                "run_autograder": RUN_AUTOGRADER.format(number=number, timeout=timeout, budget=budget, memory=memory),
            }
            for name, text in scripts.items():
                info = zipfile.ZipInfo(name)
                info.external_attr = 0o100755 << 16  # executable, as Gradescope runs them
                archive.writestr(info, text)
                names.append(name)
            for path in _shipped_files(tree.root):
                name = path.relative_to(tree.root).as_posix()
                archive.write(path, name)
                names.append(name)
            archive.writestr(SECRET_FILE, secrets.token_hex(32) + "\n")
            if hide_derivations:
                archive.writestr(derive.MODE_FILE, "derive mode: students hand in derivations/task_<id>.md\n")
                names.append(derive.MODE_FILE)
            names.append(SECRET_FILE)
        os.chmod(temporary, 0o600)  # it holds the secret
        os.replace(temporary, out)
    except BaseException:
        pathlib.Path(temporary).unlink(missing_ok=True)
        raise
    return names


def resolve_pins(requirements, pythons=TARGET_PYTHONS, platforms=PLATFORMS):
    """``["name==version", ...]``: every distribution that ``requirements`` need (their
    dependencies included), as pip resolves them for CPython ``pythons[0]`` on ``platforms``
    (binary wheels only, so that no image has to compile anything), each then checked to have
    a wheel for every other Python of ``pythons``. This is how ``setup.sh``'s pins follow
    ``setup.cfg``: a library added to the test extra is in the next zip written.

    Needs pip 22.2 or newer and the package index (the network). Dependencies that pip adds
    only on some Pythons (``tomli`` on 3.10) are not pinned: ``setup.sh`` lets pip add them.

    Raises:
        GraderError: pip cannot resolve them (no network, a requirement with no wheel for a
            target Python), with pip's own last words.
    """
    with tempfile.TemporaryDirectory(prefix="minitorch-attn-pins-") as scratch:
        report = pathlib.Path(scratch) / "report.json"
        platform = [f"--platform={name}" for name in platforms]

        def pip(python, *arguments):
            command = [
                sys.executable,
                "-m",
                "pip",
                "install",
                "--dry-run",
                "--quiet",
                "--ignore-installed",
                "--only-binary=:all:",
                "--implementation=cp",
                f"--python-version={python}",
                *platform,
                "--target",
                str(pathlib.Path(scratch) / "target"),
                *arguments,
            ]
            done = subprocess.run(command, capture_output=True, text=True)
            if done.returncode != 0:
                words = [line for line in done.stderr.splitlines() if not line.startswith("WARNING: Location")]
                raise GraderError(
                    f"pip could not resolve the grader's libraries ({' '.join(arguments[-3:])} ...) for "
                    f"Python {python}: {cap(chr(10).join(words[-8:]), 2_000)}"
                )

        pip(pythons[0], "--report", str(report), *requirements)
        installs = json.loads(report.read_text())["install"]
        pins = sorted(
            (f"{item['metadata']['name']}=={item['metadata']['version']}" for item in installs), key=str.lower
        )
        for python in pythons[1:]:
            pip(python, "--no-deps", *pins)
    return pins


def _shipped_files(root):
    for name in SHIPPED:
        source = root / name
        if source.is_file():
            yield source
        elif source.is_dir():
            for path in sorted(source.rglob("*")):
                folders = set(path.relative_to(root).parts[:-1])
                if (
                    path.is_file()
                    and not folders & LEFT_OUT_FOLDERS
                    and path.name not in LEFT_OUT_NAMES
                    and path.suffix != ".pyc"
                ):
                    yield path


def main(argv=None):
    """``python -m minitorch_attn.homework.gradescope --assignment N [--root DIR]``: what
    ``run_autograder`` runs. As root (Gradescope), it first makes the instructor's tree and
    the submission readable by root only, so that the student's account cannot read them.
    Exit status 0 when results.json was written; 2 when the grader could not grade: then
    results.json says so (its output starts with "The autograder could not grade") and
    gives no score. A SIGTERM (the platform stopping the grader) stops the run in progress, as Ctrl-C,
    and keeps the results.json of the tasks graded so far."""
    parser = argparse.ArgumentParser(prog="python -m minitorch_attn.homework.gradescope", description=main.__doc__)
    parser.add_argument("--assignment", type=positive_int, required=True)
    parser.add_argument(
        "--root",
        default=os.environ.get("AUTOGRADER_ROOT", "/autograder"),
        help="Gradescope's folder (default: $AUTOGRADER_ROOT or /autograder)",
    )
    parser.add_argument("--timeout", type=positive_float, default=60.0, help="time limit of each test, in seconds")
    parser.add_argument(
        "--budget",
        type=positive_float,
        default=600.0,
        help="the assignment's Gradescope timeout, in seconds (default 600)",
    )
    parser.add_argument(
        "--memory",
        type=positive_float,
        default=PLATFORM_MEMORY_MB,
        help=f"the memory of the assignment's Gradescope machine, MB (default {PLATFORM_MEMORY_MB})",
    )
    args = parser.parse_args(argv)
    root = pathlib.Path(args.root)
    stop_as_ctrl_c()  # SIGTERM (and SIGHUP) stop the grading as Ctrl-C does
    results = root / "results" / "results.json"
    if os.geteuid() == 0:
        for private, mode in (
            (root / "source", 0o700),
            (root / "submission", 0o700),
            (root / "submission_metadata.json", 0o600),
        ):  # earlier submissions' feedback
            if private.exists():
                os.chmod(private, mode)
        results.parent.mkdir(parents=True, exist_ok=True)
        os.chown(results.parent, 0, 0)
        os.chmod(results.parent, 0o755)  # root's: the student's account cannot write results.json
    try:
        _, graded = grade_submission(
            root / "submission",
            args.assignment,
            results,
            instructor=root / "source",
            timeout=args.timeout,
            budget=args.budget,
            memory=args.memory,
        )
    except (GraderError, ValueError) as error:
        print(f"the autograder could not grade: {error}", file=sys.stderr)
        write_grader_error(results, str(error))
        return 2
    print_table(graded)
    return 0


def write_grader_error(path, reason):
    """A results.json with no score that says why the autograder could not grade."""
    write_results(
        path,
        {
            "output": f"The autograder could not grade this submission (this is not your grade; "
            f"your instructor will regrade it): {cap(reason)}",
            "output_format": "text",
            "tests": [],
        },
    )


if __name__ == "__main__":
    sys.exit(main())
