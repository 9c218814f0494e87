"""``minitorch-attn homework``: make a student tree, grade one, or check the markers.

    minitorch-attn homework make --out DIR [--assignment N]
    minitorch-attn homework grade DIR [--assignment N]
    minitorch-attn homework check
"""

from __future__ import annotations

from ..argtypes import folder, positive_int
from .grade import grade, print_table
from .make import make
from .markers import check


def add_homework(subparsers):
    p = subparsers.add_parser("homework", help="make student versions of the engine and grade them")
    actions = p.add_subparsers(dest="action", required=True)

    make_parser = actions.add_parser("make", help="write the student tree of one assignment")
    make_parser.add_argument("--out", required=True, type=folder, help="a new (or empty) folder for the student tree")
    make_parser.add_argument("--assignment", type=positive_int, default=1, help="assignment number (default 1)")
    make_parser.set_defaults(run=_make)

    grade_parser = actions.add_parser("grade", help="grade a student tree; writes DIR/results.json (Gradescope format)")
    grade_parser.add_argument("dir", help="the student's folder")
    grade_parser.add_argument("--assignment", type=positive_int, default=None,
                       help="assignment number (default: the one recorded in the folder)")
    grade_parser.set_defaults(run=_grade)

    check_parser = actions.add_parser("check", help="check the solution markers against the manifest")
    check_parser.set_defaults(run=_check)


def _make(args):
    tasks = make(args.out, args.assignment)  # bad input raises ValueError: main() reports it
    print(f"wrote assignment {args.assignment} to {args.out}: tasks {', '.join(tasks)} are stubbed")
    return 0


def _grade(args):
    results = grade(args.dir, assignment=args.assignment)  # bad input raises ValueError: main() reports it
    print_table(results)
    print(f"wrote {args.dir}/results.json")
    return 0


def _check(args):
    problems = check()
    for problem in problems:
        print(problem)
    print("markers: ok" if not problems else f"markers: {len(problems)} problem(s)")
    return 1 if problems else 0
