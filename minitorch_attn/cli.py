"""The ``minitorch-attn`` command.

    minitorch-attn gradcheck [--device cpu] [--dtype float64]   run the gradient-check suite

Each subcommand is one ``add_<name>(subparsers)`` function below that registers its
arguments and the function that runs it.
"""

from __future__ import annotations

import argparse
import os
import sys


def add_gradcheck(subparsers):
    p = subparsers.add_parser("gradcheck", add_help=False,
                              help="run the gradient-check suite (from a source checkout); see python -m gradcheck -h")
    p.set_defaults(run=_run_gradcheck, passes_extra=True)


def _run_gradcheck(args):
    sys.path.insert(0, os.getcwd())
    try:
        from gradcheck.__main__ import main as gradcheck_main
    except ModuleNotFoundError:
        print("minitorch-attn gradcheck: the gradcheck/ suite ships with the source; run this "
              "from the project's root folder", file=sys.stderr)
        return 2
    return gradcheck_main(args.extra)


SUBCOMMANDS = [add_gradcheck]


def main(argv=None):
    parser = argparse.ArgumentParser(prog="minitorch-attn", description="A readable autograd engine for attention.")
    subparsers = parser.add_subparsers(dest="command", required=True)
    for add in SUBCOMMANDS:
        add(subparsers)
    args, extra = parser.parse_known_args(argv)
    if extra and not getattr(args, "passes_extra", False):
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    args.extra = extra
    return args.run(args) or 0


if __name__ == "__main__":
    sys.exit(main())
