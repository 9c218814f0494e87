"""``minitorch-attn homework``: make a student tree, grade one, check the grading, release it.

    minitorch-attn homework make --out DIR --assignment N [--hide-derivations]
    minitorch-attn homework grade PATH --assignment N [--results FILE] [--budget S] [--memory MB]
    minitorch-attn homework selftest [--assignment N] [--accuracy FILE]
    minitorch-attn homework autograder --assignment N --out FILE.zip
    minitorch-attn homework check

A grader error (a library the tests need is missing, an unusable instructor's tree) ends
``grade`` with status 2 and no results.json: it is never a student's 0. Ctrl-C during
``grade`` stops the run in progress (and every process it started) and keeps the
results.json of the tasks graded so far.
"""

from __future__ import annotations

import os
import pathlib
import sys

from ..argtypes import folder, positive_float, positive_int
from . import markers
from .gradescope import write_autograder
from .instructor import INSTRUCTOR_TESTS, InstructorTree
from .make import make
from .markers import check
from .results import grade_submission, print_table
from .sandbox import GRADER_MEMORY_MB, PLATFORM_MEMORY_MB
from .selftest import selftest


def add_homework(subparsers):
    p = subparsers.add_parser("homework", help="make student versions of the engine, grade them, release to Gradescope")
    actions = p.add_subparsers(dest="action", required=True)

    make_parser = actions.add_parser("make", help="write the student tree of one assignment")
    make_parser.add_argument("--out", required=True, type=folder, help="a new (or empty) folder for the student tree")
    make_parser.add_argument("--assignment", type=positive_int, default=1, help="assignment number (default 1)")
    make_parser.add_argument(
        "--hide-derivations",
        action="store_true",
        help="derive mode: the docstrings keep the forward, the shapes and what the backward "
        "returns, not the backward's formulas; derivations/task_<id>.md sheets to hand in",
    )
    make_parser.set_defaults(run=_make)

    grade_parser = actions.add_parser(
        "grade",
        help="grade a submission task by task; writes results.json (Gradescope format)",
        description="Grade a submission (a student's folder, a zip of it, or just the edited files) "
        "against this tree's tests, each task on its own.",
    )
    grade_parser.add_argument("path", help="the submission: a folder, a .zip or a .py file")
    grade_parser.add_argument("--assignment", type=positive_int, required=True, help="assignment number")
    grade_parser.add_argument(
        "--results",
        help="where to write results.json (default: PATH/results.json for a folder, PATH.results.json beside a file)",
    )
    grade_parser.add_argument("--instructor", help="the instructor's tree (default: this source checkout)")
    grade_parser.add_argument("--timeout", type=positive_float, default=60.0, help="time limit of each test, seconds")
    grade_parser.add_argument(
        "--budget",
        type=positive_float,
        default=600.0,
        help="time limit of the whole grading, seconds, shared out among the tasks (default 600)",
    )
    grade_parser.add_argument(
        "--memory",
        type=positive_float,
        default=PLATFORM_MEMORY_MB,
        help=f"memory of the machine, MB; each process of student code may use it less "
        f"{GRADER_MEMORY_MB} (default {PLATFORM_MEMORY_MB}, Gradescope's)",
    )
    grade_parser.set_defaults(run=_grade)

    self_parser = actions.add_parser(
        "selftest", help="grade the reference (100), the stubs (0) and planted mutants (each loses its own task)"
    )
    self_parser.add_argument("--assignment", type=positive_int, default=None, help="one assignment (default: all)")
    self_parser.add_argument("--timeout", type=positive_float, default=60.0, help="time limit of each test, seconds")
    self_parser.add_argument(
        "--accuracy",
        default=None,
        metavar="FILE",
        help="also write the accuracy table of the probes' diagnoses (each catalogued mistake, "
        "the diagnosis it got) to FILE as Markdown, e.g. docs/teaching/accuracy.md",
    )
    self_parser.add_argument(
        "--hide-derivations",
        action="store_true",
        help="also grade the reference typed into a derive-mode student tree of each assignment",
    )
    self_parser.set_defaults(run=_selftest)

    zip_parser = actions.add_parser("autograder", help="write the Gradescope autograder zip of one assignment")
    zip_parser.add_argument("--assignment", type=positive_int, required=True, help="assignment number")
    zip_parser.add_argument("--out", required=True, help="the zip file to write")
    zip_parser.add_argument("--timeout", type=positive_float, default=60.0, help="time limit of each test, seconds")
    zip_parser.add_argument(
        "--budget",
        type=positive_float,
        default=600.0,
        help="the Gradescope timeout you will set for the assignment, seconds (default 600)",
    )
    zip_parser.add_argument(
        "--memory",
        type=positive_float,
        default=PLATFORM_MEMORY_MB,
        help=f"the memory of the assignment's Gradescope machine, MB (default {PLATFORM_MEMORY_MB}); "
        f"each process of student code may use it less {GRADER_MEMORY_MB}",
    )
    zip_parser.add_argument(
        "--hide-derivations",
        action="store_true",
        help="a release for a tree made with make --hide-derivations: the feedback also says "
        "whether each task's derivation sheet was handed in",
    )
    zip_parser.set_defaults(run=_autograder)

    check_parser = actions.add_parser("check", help="check the solution markers, test markers and manifest")
    check_parser.set_defaults(run=_check)


def _make(args):
    tasks = make(args.out, args.assignment, hide_derivations=args.hide_derivations)  # ValueError: main() reports it
    mode = "derive mode: derivations to write in derivations/" if args.hide_derivations else "guided mode"
    print(f"wrote assignment {args.assignment} to {args.out} ({mode}): tasks {', '.join(tasks)} are stubbed")
    return 0


def _grade(args):
    path = pathlib.Path(args.path)
    results_path = args.results or (
        path / "results.json" if path.is_dir() else path.with_name(path.name + ".results.json")
    )
    # root: student code runs under its own account with nothing of the instructor's in reach, or
    # not at all (GraderError naming what is in reach and the command that fixes it)
    root, reference = (
        os.geteuid() == 0,
        (pathlib.Path(args.instructor or markers.PROJECT_ROOT) / INSTRUCTOR_TESTS).is_dir(),
    )
    if reference and not root:
        print(
            "warning: the grader is not root, so student code runs as your own user and could read the reference "
            "solutions of this checkout: grade untrusted submissions as root (sudo)",
            file=sys.stderr,
        )
    _, graded = grade_submission(
        path,
        args.assignment,
        results_path,
        instructor=args.instructor,
        timeout=args.timeout,
        budget=args.budget,
        memory=args.memory,
        require_isolation=root and reference,
    )  # GraderError and bad input: main() reports them, status 2
    print_table(graded)
    print(f"wrote {results_path}")
    return 0


def _selftest(args):
    tree = InstructorTree()
    numbers = [args.assignment] if args.assignment else [a["number"] for a in tree.manifest["assignments"]]
    return (
        0
        if selftest(tree, numbers, timeout=args.timeout, accuracy=args.accuracy, hide_derivations=args.hide_derivations)
        else 1
    )


def _autograder(args):
    print(
        "resolving the grader's libraries with pip (setup.cfg's install_requires and test extra), for setup.sh ...",
        flush=True,
    )
    names = write_autograder(
        args.out,
        args.assignment,
        timeout=args.timeout,
        budget=args.budget,
        memory=args.memory,
        hide_derivations=args.hide_derivations,
    )
    print(
        f"wrote {args.out} ({len(names)} files): upload it as the autograder of assignment {args.assignment}, "
        f"with a Gradescope timeout of {args.budget:g} s"
    )
    return 0


def _check(args):
    problems = check()
    for problem in problems:
        print(problem)
    print("markers: ok" if not problems else f"markers: {len(problems)} problem(s)")
    return 1 if problems else 0
