"""The ``minitorch-attn demo`` command: list and run the tutorial's demos.

    minitorch-attn demo --list                  one line per demo, in the tutorial's order
    minitorch-attn demo NAME [--quick] [...]    run demos/NAME.py with the flags that follow

A demo is named by its file (``01_attention``), by the file without its number
(``attention``) or by its number (``1``). The demos are scripts, not part of the installed
package: they are found in the ``demos/`` folder of a source checkout (next to the package)
or in the current folder.
"""

from __future__ import annotations

import ast
import runpy
import sys
from pathlib import Path


def demos_folder():
    """The ``demos/`` folder of the source checkout this package runs from, else
    ``./demos``; None when neither exists."""
    for folder in (Path(__file__).resolve().parents[1] / "demos", Path.cwd() / "demos"):
        if folder.is_dir():
            return folder
    return None


def available_demos(folder):
    """``{stem: path}`` of every demo script in ``folder`` (``*.py`` not starting with ``_``), sorted."""
    return {path.stem: path for path in sorted(folder.glob("*.py")) if not path.name.startswith("_")}


def summary(path):
    """The first line of a script's docstring (empty when it has none)."""
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    return doc.strip().splitlines()[0] if doc.strip() else ""


def find_demo(name, demos):
    """The path of the demo called ``name`` (its stem, its stem without the number, or its
    number), or None."""
    for stem, path in demos.items():
        number, _, rest = stem.partition("_")
        if name == stem or (number.isdigit() and name in (rest, number, str(int(number)))):
            return path
    return None


def run_demo(path, argv):
    """Run the script at ``path`` as ``python path *argv`` would, in this process; returns
    its exit status. (A demo imports only the installed package, never its own folder.)"""
    saved_argv = sys.argv
    sys.argv = [str(path), *argv]
    try:
        runpy.run_path(str(path), run_name="__main__")
    except SystemExit as stop:  # sys.exit(main()) at the end of every script
        if isinstance(stop.code, str):
            print(stop.code, file=sys.stderr)
            return 1
        return stop.code or 0
    finally:
        sys.argv = saved_argv
    return 0


def add_demo(subparsers):
    p = subparsers.add_parser(
        "demo", help="run one of the tutorial's demos (see --list)", add_help=False,
        description="Run a demo of demos/ (from a source checkout); the flags after NAME go to the demo "
                    "(--device, --quick, --seed, --out, ...; see minitorch-attn demo NAME --help).")
    p.add_argument("name", nargs="?", help="demo to run, e.g. 01_attention, attention or 1")
    p.add_argument("--list", action="store_true", help="list the demos and exit")
    p.set_defaults(run=_run_demo, passes_extra=True)


def _run_demo(args):
    folder = demos_folder()
    if folder is None:
        print("minitorch-attn demo: no demos/ folder found. The demos ship with the source, not with "
              "the installed package: run this from the project's root folder (a clone of the "
              "repository, installed with pip install -e \".[demos]\").", file=sys.stderr)
        return 2
    demos = available_demos(folder)
    if args.list or args.name is None:
        asked_help = "-h" in args.extra or "--help" in args.extra
        if args.name is None and not args.list and not asked_help:
            print("minitorch-attn demo: give a demo's NAME, or --list", file=sys.stderr)
            return 2
        if asked_help:
            print("usage: minitorch-attn demo --list | NAME [--device cpu|cuda] [--quick] [--seed N] [--out DIR] ...\n")
        print(f"demos in {folder}:")
        for stem, path in demos.items():
            print(f"  {stem:<18} {summary(path)}")
        print("run one with: minitorch-attn demo NAME [--device cpu|cuda] [--quick] [--seed N] [--out DIR]")
        return 0
    path = find_demo(args.name, demos)
    if path is None:
        print(f"minitorch-attn demo: no demo called {args.name!r}; the demos are: {', '.join(demos)}",
              file=sys.stderr)
        return 2
    return run_demo(path, args.extra)
