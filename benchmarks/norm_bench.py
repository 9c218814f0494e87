"""Speed of LayerNorm and RMSNorm, forward + backward: minitorch-attn against PyTorch.

    python benchmarks/norm_bench.py                     # x (32, 512, 1024) float32
    python benchmarks/norm_bench.py --busy 1            # the same with one core kept busy
    python benchmarks/norm_bench.py --shape 16,64,128 --threads 1
    python benchmarks/norm_bench.py --malloc default    # glibc's own malloc settings

Each row times ``F.layer_norm`` / ``F.rms_norm`` (with weight, and bias for LayerNorm) and
PyTorch's functions on the same input, forward + backward under a random upstream
gradient, in one process, in turn (ours, PyTorch, ours, ...) after a warm-up; medians of
``--repeats`` runs. Both use their default threads (``--threads N`` fixes both): PyTorch its
intra-op pool; minitorch-attn computes inputs larger than a few cache-sized chunks of
rows on its pool of one thread per core (``minitorch_attn/speed/rows.py``: LayerNorm and RMSNorm
declare themselves row-wise).
Without PyTorch only our times are printed. Target: LayerNorm at (32, 512, 1024) float32
within 1.2x of PyTorch.

Both libraries share the process, so they share its ``malloc``: by default the setting the
``minitorch-attn`` command makes (``keep_freed_memory``, minitorch_attn/speed/allocator.py);
``--malloc default`` keeps glibc's own, which a PyTorch program has. With glibc's own every
64 MiB array of this shape is faulted in page by page, in both libraries alike.
"""

from __future__ import annotations

import argparse
import sys

import numpy

import minitorch_attn as mt
import minitorch_attn.functional as F
from minitorch_attn.app.measure import alternating_medians, busy, busy_flag
from minitorch_attn.argtypes import positive_int
from minitorch_attn.speed import keep_freed_memory

TARGET = 1.2  # LayerNorm fwd+bwd, ours / PyTorch, at (32, 512, 1024) float32


def runners(shape, rng):
    """``{name: fn}``: one forward + backward of each norm, ours and (if installed) PyTorch's."""
    d = shape[-1]
    x_np, g_np = (rng.standard_normal(shape).astype(numpy.float32) for _ in range(2))
    w_np, b_np = (rng.standard_normal(d).astype(numpy.float32) for _ in range(2))
    x, w, b = (mt.tensor(a, requires_grad=True) for a in (x_np, w_np, b_np))
    g = mt.tensor(g_np)

    def ours(norm):
        def run():
            x.grad = w.grad = b.grad = None
            y = F.layer_norm(x, (d,), w, b) if norm == "LayerNorm" else F.rms_norm(x, (d,), w, eps=1e-6)
            y.backward(g)

        return run

    fns = {("LayerNorm", "minitorch-attn"): ours("LayerNorm"), ("RMSNorm", "minitorch-attn"): ours("RMSNorm")}
    try:
        import torch
    except ImportError:
        return fns
    xt, wt, bt = (torch.tensor(a, requires_grad=True) for a in (x_np, w_np, b_np))
    gt = torch.tensor(g_np)

    def theirs(norm):
        def run():
            xt.grad = wt.grad = bt.grad = None
            if norm == "LayerNorm":
                y = torch.nn.functional.layer_norm(xt, (d,), wt, bt)
            else:
                y = torch.nn.functional.rms_norm(xt, (d,), wt, eps=1e-6)
            y.backward(gt)

        return run

    fns[("LayerNorm", "PyTorch")] = theirs("LayerNorm")
    fns[("RMSNorm", "PyTorch")] = theirs("RMSNorm")
    return fns


def _shape(text):
    """``"32,512,1024"`` -> ``(32, 512, 1024)``; argparse reports a bad one in one line."""
    try:
        shape = tuple(int(n) for n in text.split(","))
    except ValueError:
        shape = ()
    if not shape or min(shape) < 1:
        raise argparse.ArgumentTypeError(f"expected positive integers separated by commas, got {text!r}")
    return shape


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--shape",
        type=_shape,
        default=(32, 512, 1024),
        help="shape of x, comma-separated positive integers (normalized: the last)",
    )
    parser.add_argument("--repeats", type=positive_int, default=7, help="timed runs of each")
    parser.add_argument(
        "--threads",
        type=positive_int,
        default=None,
        help="threads of both libraries (default: each library's own choice)",
    )
    parser.add_argument(
        "--malloc",
        choices=("kept", "default"),
        default="kept",
        help="kept: freed memory stays in the process, as the minitorch-attn command sets "
        "it (default); default: glibc's own settings",
    )
    busy_flag(parser)
    args = parser.parse_args(argv)
    if args.malloc == "kept":
        keep_freed_memory()  # as the minitorch-attn command does (minitorch_attn/speed/allocator.py)
    shape = args.shape
    if args.threads:
        mt.set_num_threads(args.threads)
        try:
            import torch

            torch.set_num_threads(args.threads)
        except ImportError:
            pass
    fns = runners(shape, numpy.random.default_rng(0))
    with busy(args.busy):
        medians, _ = alternating_medians(fns, args.repeats)

    threads = f"{args.threads} threads" if args.threads else "each library's own threads"
    print(
        f"forward + backward, x {shape} float32, {threads}, {args.busy} busy helper process(es), "
        f"malloc {args.malloc}, median of {args.repeats} alternating runs after a warm-up"
    )
    print(f"{'norm':<10} {'minitorch-attn ms':>18} {'PyTorch ms':>11} {'x torch':>8}")
    for norm in ("LayerNorm", "RMSNorm"):
        ours = medians[(norm, "minitorch-attn")]
        theirs = medians.get((norm, "PyTorch"))
        ratio = f"{ours / theirs:8.2f}" if theirs else f"{'-':>8}"
        print(f"{norm:<10} {ours * 1e3:18.1f} {theirs * 1e3 if theirs else float('nan'):11.1f} {ratio}")
    if ("LayerNorm", "PyTorch") in medians and shape == (32, 512, 1024):
        ratio = medians[("LayerNorm", "minitorch-attn")] / medians[("LayerNorm", "PyTorch")]
        print(f"target: LayerNorm <= {TARGET}x PyTorch: {ratio:.2f}x  {'met' if ratio <= TARGET else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
