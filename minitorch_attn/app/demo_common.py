"""What the demos share: flags (on the command line and in notebooks), readable pictures,
random inputs, the tutorial's LayerNorm.

Each demo script starts with ``args, out = setup(__doc__, "NAME")``. The flags are::

    --device cpu|cuda   where the tensors live (cuda needs CuPy: pip install -e ".[cuda12]" or ".[cuda13]")
    --quick             small shapes and few steps: seconds instead of minutes (the smoke test uses it)
    --seed N            seeds minitorch_attn and NumPy, so a run prints the same numbers again
    --out DIR           folder for the pictures (default runs/demos/NAME)
    --threads N         CPU threads for BLAS and flash attention (default: the library's choice)

A demo is also a Jupyter notebook (its ``# %%`` cells; ``minitorch-attn demo --notebooks DIR``
writes them). A notebook's kernel has a command line of its own, so there the flags come
from the environment variable ``MINITORCH_ATTN_DEMO_FLAGS`` (e.g. ``--quick``; unset: none).

Pictures are drawn with matplotlib's non-interactive Agg backend and saved as PNG by
:func:`save`, which first checks that a learner can read them (:func:`picture_problems`).
When ``--quick`` shrinks a demo below the size its lesson needs, the demo says so with
:func:`quick_caveat`.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys

import numpy

import minitorch_attn as mt
from minitorch_attn.app.data import load_corpus
from minitorch_attn.app.measure import alternate
from minitorch_attn.argtypes import device_help, device_type, positive_int
from minitorch_attn.atomic import write_atomically
from minitorch_attn.speed import keep_freed_memory
from minitorch_attn.stopping import stop_as_ctrl_c

FLAGS_VARIABLE = "MINITORCH_ATTN_DEMO_FLAGS"
DEMO_DEVICES = ("cpu", "cuda")  # the devices of --device (the strict device proves the engine, not the demos)
MIN_POINTS = 8  # the smallest text in a picture, in points at its saved size


def in_notebook():
    """Whether this runs in a Jupyter kernel (a notebook of a demo) rather than as a script."""
    return os.path.basename(sys.argv[0]).startswith("ipykernel")


def demo_argv():
    """The demo's flags: the command line's, or in a Jupyter kernel (whose command line is
    the kernel's own) the words of ``$MINITORCH_ATTN_DEMO_FLAGS``."""
    if in_notebook():
        return shlex.split(os.environ.get(FLAGS_VARIABLE, ""))
    return sys.argv[1:]


def setup(doc, name, argv=None, extra=None):
    """Parse the demo's flags, seed every random generator and make the output folder.

    Args:
        doc: the demo's module docstring (its first line becomes the ``--help`` text).
        name: the demo's name, used for the default output folder ``runs/demos/NAME``.
        argv: the flags (default: :func:`demo_argv`).
        extra: optional ``f(parser)`` adding the demo's own flags.
    Returns:
        ``(args, out)``: the parsed flags (``args.rng`` is a seeded ``numpy.random.Generator``)
        and the output folder, which exists.
    """
    parser = argparse.ArgumentParser(
        prog=f"demos/{name}.py", description=doc, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--device",
        type=device_type(DEMO_DEVICES),
        default="cpu",
        metavar="{cpu,cuda}",
        help=f'where the tensors live: {device_help(DEMO_DEVICES)} (cuda needs CuPy: pip install -e ".[cuda]")',
    )
    parser.add_argument("--quick", action="store_true", help="small and fast (seconds)")
    parser.add_argument("--seed", type=int, default=0, help="seed for every random number")
    parser.add_argument(
        "--out",
        metavar="DIR",
        default=os.path.join("runs", "demos", name),
        help="folder for the pictures (default: %(default)s)",
    )
    parser.add_argument(
        "--threads",
        type=positive_int,
        default=None,
        help="CPU threads for BLAS and flash attention (default: chosen by timing)",
    )
    if extra is not None:
        extra(parser)
    args = parser.parse_args(demo_argv() if argv is None else argv)
    keep_freed_memory()  # speed: see minitorch_attn/speed/allocator.py
    if not in_notebook():  # a kernel has its own ways to stop
        stop_as_ctrl_c()  # closing the terminal (SIGHUP) and kill (SIGTERM) stop as Ctrl-C does
    mt.set_num_threads(args.threads)
    mt.manual_seed(args.seed)
    args.rng = numpy.random.default_rng(args.seed)
    os.makedirs(args.out, exist_ok=True)
    return args, args.out


def quick_caveat(args, lesson):
    """With ``--quick``, print that the sizes are too small to show ``lesson`` (a phrase),
    so a quick run never passes off the opposite result as the lesson. Returns whether it printed."""
    if args.quick:
        print(f"[--quick] these sizes are too small to show {lesson}: run without --quick to see it")
    return args.quick


def timed_pair(args, first, second, repeats=None):
    """:func:`~minitorch_attn.app.measure.alternate` on the demo's device with the demos' budget:
    with ``--quick`` 3 rounds; otherwise at least 5 (or ``repeats``), and more until each
    function has been timed for half a second in all."""
    if args.quick:
        return alternate(first, second, repeats or 3, args.device, min_seconds=0.0)
    return alternate(first, second, repeats or 5, args.device, min_seconds=0.5)


def quick_training_flags(folder):
    """The ``minitorch-attn train`` flags of a seconds-long run, for ``--quick``: a tiny model
    (2 layers of width 32) trained 15 steps on the first 20,000 characters of the default
    corpus, which this writes to ``folder/excerpt.txt``."""
    excerpt = os.path.join(folder, "excerpt.txt")
    with open(excerpt, "w", encoding="utf-8") as f:
        f.write(load_corpus()[:20_000])
    return [
        "--text",
        excerpt,
        "--steps",
        "15",
        "--time-budget",
        "0",
        "--warmup-steps",
        "5",
        "--d-model",
        "32",
        "--num-layers",
        "2",
        "--num-heads",
        "2",
        "--batch-size",
        "8",
        "--eval-interval",
        "1000",
        "--sample-tokens",
        "20",
    ]


def pyplot():
    """``matplotlib.pyplot`` on the Agg backend (writes files, never opens a window).

    Raises:
        SystemExit: with the install command, when matplotlib is missing.
    """
    try:
        import matplotlib
    except ImportError:
        raise SystemExit('the demos draw with matplotlib: pip install -e ".[demos]"') from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def log_ticks(axis, at=None):
    """Label a log-scale ``axis`` (``ax.xaxis`` or ``ax.yaxis``) in plain numbers (``20``,
    ``0.5``): at the values ``at`` only, or else at 1, 2 and 5 times each power of ten, so
    that a short range still shows several labels."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, LogLocator, NullFormatter, NullLocator

    if at is None:
        axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    else:
        axis.set_major_locator(FixedLocator(at))
        axis.set_minor_locator(NullLocator())
    axis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    axis.set_minor_formatter(NullFormatter())


def drawn_texts(fig):
    """Draw ``fig`` and return the texts that were drawn, non-empty (titles, labels, tick
    labels inside the axes' limits, legends, colour bars, annotations)."""
    from matplotlib.text import Text

    drawn = []
    draw = Text.draw

    def record(text, renderer):  # Text.draw runs only for what the figure actually draws
        if text.get_visible() and text.get_text().strip():
            drawn.append(text)
        return draw(text, renderer)

    Text.draw = record
    try:
        fig.canvas.draw()
    finally:
        Text.draw = draw
    return drawn


def picture_problems(fig):
    """What would keep a learner from reading ``fig`` at its current size and dpi: texts
    under ``MIN_POINTS`` points, texts cut by the picture's edge, texts overlapping each
    other. Returns one line per problem (empty: none found)."""
    texts = drawn_texts(fig)
    renderer = fig.canvas.get_renderer()
    boxes = numpy.array([t.get_window_extent(renderer).extents for t in texts]).reshape(-1, 4)
    width, height = fig.canvas.get_width_height()
    problems = [
        f"{t.get_text()!r} is {t.get_fontsize():.1f} pt (under {MIN_POINTS})"
        for t in texts
        if t.get_fontsize() < MIN_POINTS
    ]
    cut = (boxes[:, 0] < -1) | (boxes[:, 1] < -1) | (boxes[:, 2] > width + 1) | (boxes[:, 3] > height + 1)
    problems += [f"{texts[i].get_text()!r} is cut by the picture's edge" for i in numpy.flatnonzero(cut)]
    # two boxes overlap when each starts before the other ends, on both axes (1 pixel of slack)
    x0, y0, x1, y1 = (boxes[:, i] for i in range(4))
    overlap = (
        (x0[:, None] < x1[None, :] - 1)
        & (x0[None, :] < x1[:, None] - 1)
        & (y0[:, None] < y1[None, :] - 1)
        & (y0[None, :] < y1[:, None] - 1)
    )
    for i, j in zip(*numpy.nonzero(numpy.triu(overlap, k=1))):
        problems.append(f"{texts[i].get_text()!r} overlaps {texts[j].get_text()!r}")
    return problems


def save(fig, out, filename, dpi=100):
    """Save ``fig`` as the PNG ``out/filename`` at ``dpi`` (atomically), close it and print the
    path; first print a ``picture check`` line for each problem :func:`picture_problems`
    finds at that size. In a notebook the picture is also shown below the cell (and so on
    the documentation site's page of the demo)."""
    fig.set_dpi(dpi)
    for problem in picture_problems(fig)[:10]:
        print(f"picture check, {filename}: {problem}")
    path = os.path.join(out, filename)
    write_atomically(path, lambda f: fig.savefig(f, dpi=dpi, format="png"), suffix=".png")
    pyplot().close(fig)
    print(f"picture: {path}")
    if in_notebook():
        from IPython.display import Image, display

        display(Image(filename=path))
    return path


def normalize_over(x, dims, eps=1e-5):
    """``(x - mean) / sqrt(var + eps)`` with the mean and the (biased) variance taken over
    ``dims``, in primitive ops that autograd differentiates step by step. Over the features
    (``dims=(-1,)``) this is LayerNorm before its γ and β; over the batch (``(0,)``, or
    ``(0, 1)`` with a sequence axis) it is BatchNorm in training mode."""
    mean = x.mean(dim=dims, keepdim=True)
    var = x.var(dim=dims, keepdim=True, correction=0)
    return (x - mean) / (var + eps).sqrt()


def randn(rng, *shape, device="cpu", requires_grad=False):
    """A float32 Tensor of standard normal samples from the NumPy generator ``rng``
    (the same numbers on every device for the same seed)."""
    data = rng.standard_normal(shape).astype(numpy.float32)
    return mt.tensor(data, device=device, requires_grad=requires_grad)


def layer_norm_from_primitives(x, gamma, beta, eps=1e-5):
    """The tutorial's LayerNorm: every step a primitive op (mean, var, sqrt, ...), so autograd
    differentiates it step by step (``F.layer_norm`` is one Function with a closed-form backward)."""
    mean = x.mean(dim=-1, keepdim=True)
    var = x.var(dim=-1, keepdim=True, correction=0)  # biased variance, as LayerNorm
    x_hat = (x - mean) / (var + eps).sqrt()
    return gamma * x_hat + beta
