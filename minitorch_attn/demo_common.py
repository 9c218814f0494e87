"""What the demos share: command-line flags, output folder, matplotlib, random inputs, the tutorial's LayerNorm.

Each demo script starts with ``args, out = setup(__doc__, "NAME", argv)``. The flags are::

    --device cpu|cuda   where the tensors live (cuda needs CuPy: pip install -e ".[cuda]")
    --quick             small shapes and few steps: seconds instead of minutes (the smoke test uses it)
    --seed N            seeds minitorch_attn and NumPy, so a run prints the same numbers again
    --out DIR           folder for the pictures (default runs/demos/NAME)
    --threads N         CPU threads (default: timed demos pick the fastest BLAS thread count for
                        each thing they time, see minitorch_attn.measure.alternating_medians)

Pictures are drawn with matplotlib's non-interactive Agg backend and saved as PNG.
"""

from __future__ import annotations

import argparse
import os

import numpy

import minitorch_attn as mt
from minitorch_attn.allocator import keep_freed_memory
from minitorch_attn.argtypes import positive_int, usable_device


def setup(doc, name, argv=None, extra=None):
    """Parse the demo's flags, seed every random generator and make the output folder.

    Args:
        doc: the demo's module docstring (its first line becomes the ``--help`` text).
        name: the demo's name, used for the default output folder ``runs/demos/NAME``.
        argv: the flags (default: ``sys.argv[1:]``).
        extra: optional ``f(parser)`` adding the demo's own flags.
    Returns:
        ``(args, out)``: the parsed flags (``args.rng`` is a seeded ``numpy.random.Generator``)
        and the output folder, which exists.
    """
    parser = argparse.ArgumentParser(prog=f"demos/{name}.py", description=doc,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", type=usable_device, choices=("cpu", "cuda"), default="cpu",
                        help="where the tensors live")
    parser.add_argument("--quick", action="store_true", help="small and fast (seconds)")
    parser.add_argument("--seed", type=int, default=0, help="seed for every random number")
    parser.add_argument("--out", metavar="DIR", default=os.path.join("runs", "demos", name),
                        help="folder for the pictures (default: %(default)s)")
    parser.add_argument("--threads", type=positive_int, default=None,
                        help="CPU threads for BLAS and flash attention (default: chosen by timing)")
    if extra is not None:
        extra(parser)
    args = parser.parse_args(argv)
    keep_freed_memory()  # speed: see minitorch_attn/allocator.py
    mt.set_num_threads(args.threads)
    mt.manual_seed(args.seed)
    args.rng = numpy.random.default_rng(args.seed)
    os.makedirs(args.out, exist_ok=True)
    return args, args.out


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


def save(fig, out, filename, dpi=100):
    """Save ``fig`` as ``out/filename``, close it and print the path."""
    path = os.path.join(out, filename)
    fig.savefig(path, dpi=dpi)
    pyplot().close(fig)
    print(f"picture: {path}")
    return path


def randn(rng, *shape, device="cpu", requires_grad=False):
    """A float32 Tensor of standard normal samples from the NumPy generator ``rng``
    (the same numbers on every device for the same seed)."""
    data = rng.standard_normal(shape).astype(numpy.float32)
    return mt.tensor(data, device=device, requires_grad=requires_grad)


def layer_norm_from_primitives(x, gamma, beta, eps=1e-5):
    """The tutorial's LayerNorm: every step a primitive op (mean, var, sqrt, ...), so autograd
    differentiates it step by step (``F.layer_norm`` is one Function with a closed-form backward)."""
    mean = x.mean(dim=-1, keepdim=True)
    var = x.var(dim=-1, keepdim=True, correction=0)   # biased variance, as LayerNorm
    x_hat = (x - mean) / (var + eps).sqrt()
    return gamma * x_hat + beta
