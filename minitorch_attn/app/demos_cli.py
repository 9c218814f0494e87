"""The ``minitorch-attn demo`` command: list and run the tutorial's demos, or write them as notebooks.

    minitorch-attn demo --list                  one line per demo (and the tutorial's sections it retells)
    minitorch-attn demo NAME [--quick] [...]    run demos/NAME.py with the flags that follow
    minitorch-attn demo --notebooks DIR         write every demo as DIR/NAME.ipynb

A demo is named by its file (``01_attention``), by the file without its number
(``attention``) or by its number (``1``). The demos are scripts, not part of the installed
package: they are found in the ``demos/`` folder of a source checkout (next to the package)
or in the current folder. Each is written in jupytext's percent format (``# %%`` code
cells, ``# %% [markdown]`` prose), so the same file is also a notebook.
"""

from __future__ import annotations

import ast
import runpy
import sys
from pathlib import Path

from ..argtypes import print_error
from ..atomic import write_atomically

# The tutorial's sections, in our own short words.
SECTIONS = {
    1: "why attention replaced recurrence",
    2: "attention as a soft lookup",
    3: "queries, keys and values are projections",
    4: "scaled dot-product attention",
    5: "why several heads, and what they cost",
    6: "inside multi-head attention, shape by shape",
    7: "multi-head attention as a module",
    8: "LayerNorm against BatchNorm",
    9: "LayerNorm step by step",
    10: "Pre-LN against Post-LN",
    11: "RMSNorm",
    12: "the Transformer encoder block",
    13: "self-, causal and cross-attention",
    14: "flash attention",
    15: "reading attention heatmaps",
    16: "common mistakes",
}

# Which sections each demo retells, by its name without the number. A demo that is not
# here goes beyond the tutorial (as an empty tuple does).
DEMO_SECTIONS = {
    "why_attention": (1,),
    "attention": (2, 3, 4),
    "multihead": (5, 6, 7),
    "layernorm": (8, 9),
    "norm_speed": (11,),
    "encoder": (12,),
    "masks": (13,),
    "flash": (14,),
    "heatmaps": (15,),
    "scaling": (4, 16),
    "pre_post_ln": (10,),
    "mistakes": (16,),
    "graph": (9,),  # the autograd graph of section 9's LayerNorm
    "modern_block": (11,),  # section 11's RMSNorm in the LLaMA-style block around it
    "hooks": (4, 12),  # the gradients of section 4's attention and section 12's stack, watched by hooks
    "pretrained": (1, 15),  # section 1's sentence read by the heads of a pretrained GPT-2, as section 15 reads heatmaps
}

# The kernel a written notebook asks for: the Python that Jupyter runs it with.
KERNELSPEC = {"name": "python3", "display_name": "Python 3", "language": "python"}


def demos_folder():
    """The ``demos/`` folder of the source checkout this package runs from, else
    ``./demos``; None when neither exists."""
    for folder in (Path(__file__).resolve().parents[2] / "demos", Path.cwd() / "demos"):
        if folder.is_dir():
            return folder
    return None


def available_demos(folder):
    """``{stem: path}`` of every demo script in ``folder`` (``*.py`` not starting with ``_``), sorted."""
    return {path.stem: path for path in sorted(folder.glob("*.py")) if not path.name.startswith("_")}


def short_name(stem):
    """``"01_attention" -> "attention"``; a stem without a number stays as it is."""
    number, _, rest = stem.partition("_")
    return rest if number.isdigit() else stem


def sections_of(stem):
    """The tutorial's sections that the demo ``stem`` retells (empty: beyond the tutorial)."""
    return DEMO_SECTIONS.get(short_name(stem), ())


def section_label(sections):
    """``(2, 3, 4) -> "§2-4"``, ``(4, 16) -> "§4, 16"``, ``() -> "beyond"``."""
    if not sections:
        return "beyond"
    if list(sections) == list(range(sections[0], sections[-1] + 1)) and len(sections) > 2:
        return f"§{sections[0]}-{sections[-1]}"
    return "§" + ", ".join(str(s) for s in sections)


def summary(path):
    """The first line of a script's docstring (empty when it has none)."""
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    return doc.strip().splitlines()[0] if doc.strip() else ""


def find_demo(name, demos):
    """The path of the demo called ``name`` (its stem, its stem without the number, or its
    number), or None."""
    for stem, path in demos.items():
        number = stem.partition("_")[0]
        if name in (stem, short_name(stem)) or (number.isdigit() and name in (number, str(int(number)))):
            return path
    return None


def run_demo(path, argv):
    """Run the script at ``path`` as ``python path *argv`` would, in this process; returns
    its exit status. (A demo imports only the installed package, never its own folder.)"""
    saved_argv = sys.argv
    sys.argv = [str(path), *argv]
    try:
        runpy.run_path(str(path), run_name="__main__")
    except SystemExit as stop:  # argparse's errors and --help, or a script's sys.exit(status)
        if isinstance(stop.code, str):  # a message, e.g. the install command of a missing package
            print_error(f"minitorch-attn demo {path.stem}", stop.code)
            return 1
        return stop.code or 0
    finally:
        sys.argv = saved_argv
    return 0


def print_list(folder, demos):
    """Print each demo with its sections and summary, then each section with its demos."""
    print(f"demos in {folder} (§ = the tutorial's sections each retells):")
    for stem, path in demos.items():
        print(f"  {stem:<18} {section_label(sections_of(stem)):<9} {summary(path)}")
    print("the tutorial's sections, each with its demos:")
    for number, title in SECTIONS.items():
        names = [short_name(stem) for stem in demos if number in sections_of(stem)]
        print(f"  {number:>2}. {title:<45} {', '.join(names) or '(no demo)'}")
    print("run one with: minitorch-attn demo NAME [--device cpu|cuda] [--quick] [--seed N] [--out DIR]")
    print('as notebooks: minitorch-attn demo --notebooks DIR (needs pip install -e ".[notebooks]")')


def notebook(path):
    """The notebook of the demo script at ``path`` (an ``nbformat`` node: its ``# %%`` cells),
    with the kernel it runs on. Needs jupytext (the ``notebooks`` extra)."""
    import jupytext

    nb = jupytext.read(path)
    nb.metadata["kernelspec"] = dict(KERNELSPEC)
    return nb


def write_notebooks(demos, out):
    """Write every demo as ``out/STEM.ipynb`` (without outputs); returns the exit status."""
    try:
        import jupytext
    except ImportError:
        return print_error(
            "minitorch-attn demo", 'writing notebooks (--notebooks) needs jupytext: pip install -e ".[notebooks]"'
        )
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    for stem, path in demos.items():
        target = out / f"{stem}.ipynb"
        write_atomically(target, jupytext.writes(notebook(path), fmt="ipynb").encode("utf-8"))  # never half a notebook
        print(f"notebook: {target}")
    print(
        "in a notebook the demo's flags come from $MINITORCH_ATTN_DEMO_FLAGS, e.g. "
        "MINITORCH_ATTN_DEMO_FLAGS=--quick jupyter lab"
    )
    return 0


def add_demo(subparsers):
    p = subparsers.add_parser(
        "demo",
        help="run one of the tutorial's demos (see --list)",
        add_help=False,
        description="Run a demo of demos/ (from a source checkout); the flags after NAME go to the demo "
        "(--device, --quick, --seed, --out, ...; see minitorch-attn demo NAME --help).",
    )
    p.add_argument("name", nargs="?", help="demo to run, e.g. 01_attention, attention or 1")
    p.add_argument("--list", action="store_true", help="list the demos and exit")
    p.add_argument("--notebooks", metavar="DIR", help="write every demo as a Jupyter notebook into DIR")
    p.set_defaults(run=_run_demo, passes_extra=True)


def _run_demo(args):
    folder = demos_folder()
    if folder is None:
        return print_error(
            "minitorch-attn demo",
            "no demos/ folder found. The demos ship with the source, not "
            "with the installed package: run this from the project's root folder (a clone of "
            'the repository, installed with pip install -e ".[demos]").',
        )
    demos = available_demos(folder)
    if args.notebooks is not None:
        return write_notebooks(demos, args.notebooks)
    if args.list or args.name is None:
        asked_help = "-h" in args.extra or "--help" in args.extra
        if args.name is None and not args.list and not asked_help:
            return print_error("minitorch-attn demo", "give a demo's NAME, or --list")
        if asked_help:
            print(
                "usage: minitorch-attn demo --list | --notebooks DIR | NAME [--device cpu|cuda] [--quick] "
                "[--seed N] [--out DIR] ...\n"
            )
        print_list(folder, demos)
        return 0
    path = find_demo(args.name, demos)
    if path is None:
        return print_error("minitorch-attn demo", f"no demo called {args.name!r}; the demos are: {', '.join(demos)}")
    return run_demo(path, args.extra)
