"""Peak memory of attention: dense (naive) against flash, for growing sequence lengths.

    python benchmarks/attention_memory.py                    # N = 256 ... 16384, B=1, H=8, d=64, float32
    python benchmarks/attention_memory.py --max-seq 4096 --causal
    python benchmarks/attention_memory.py --device cuda      # CuPy's memory pool instead of tracemalloc

For each N, each implementation runs the forward alone (no graph) and the forward +
backward in a fresh measurement: on NumPy the peak is read from ``tracemalloc`` (NumPy
reports every array it allocates to it), on CuPy from the default memory pool
(``total_bytes()`` after ``free_all_blocks()``: the pool only grows, so this is the most
it held at once). The inputs, the upstream gradient and the gradients that the backward
leaves behind count; the interpreter's own memory does not.

Dense attention forms several (B, H, N, N) arrays (scores, weights, their gradients), so its
peak grows as N²; at N = 16384 one such float32 array is 8 GiB. The script estimates what
the dense path would need from the largest N it measured (peak scales as N²) and skips,
with that estimate, any N whose estimate exceeds ``--naive-limit-gib`` instead of running
the machine out of memory. Flash attention's peak grows linearly in N.

The peaks do not depend on threads or load; ``--threads N`` and ``--busy N`` are here as in
every benchmark (flash attention's pool keeps one chunk's tiles per thread alive at once).
"""

from __future__ import annotations

import argparse
import contextlib
import sys

import numpy

import minitorch_attn as mt
import minitorch_attn.functional as F
from minitorch_attn.app.measure import PeakMeter, busy, busy_flag
from minitorch_attn.argtypes import device_type, positive_int
from minitorch_attn.functional import flash_attention
from minitorch_attn.speed import keep_freed_memory

GIB = 2**30


def run_once(impl, N, mode, args, meter=True):
    """Allocate inputs and run ``impl`` inside the meter; return its peak in bytes."""
    attention = flash_attention if impl == "flash" else F.scaled_dot_product_attention
    rng = numpy.random.default_rng(0)
    shape = (args.batch, args.heads, N, args.dim)
    host = [rng.standard_normal(shape, dtype=numpy.float32) for _ in range(4)]
    with PeakMeter(args.device) if meter else contextlib.nullcontext() as measured:
        q, k, v = (mt.tensor(a, device=args.device, requires_grad=True) for a in host[:3])
        if mode == "fwd":
            with mt.no_grad():
                out = attention(q, k, v, is_causal=args.causal)
        else:
            out = attention(q, k, v, is_causal=args.causal)
            out.backward(mt.tensor(host[3], device=args.device))
        del q, k, v, out
    return measured.peak if meter else None


def main(argv=None):
    keep_freed_memory()  # as the minitorch-attn command does (minitorch_attn/speed/allocator.py)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu", type=device_type(("cpu", "cuda")), help="cpu or cuda")
    parser.add_argument("--batch", type=positive_int, default=1)
    parser.add_argument("--heads", type=positive_int, default=8)
    parser.add_argument("--dim", type=positive_int, default=64)
    parser.add_argument("--min-seq", type=positive_int, default=256)
    parser.add_argument("--max-seq", type=positive_int, default=16384)
    parser.add_argument("--causal", action="store_true")
    parser.add_argument(
        "--naive-limit-gib", type=float, default=4.0, help="skip dense attention where its estimated peak exceeds this"
    )
    parser.add_argument(
        "--threads",
        type=positive_int,
        default=None,
        help="CPU threads (default: the library's choice; the peaks do not depend on it)",
    )
    busy_flag(parser)
    args = parser.parse_args(argv)
    if args.threads:
        mt.set_num_threads(args.threads)
    with busy(args.busy):
        table(args)
    return 0


def table(args):
    """Print the table of peaks (see the module docstring)."""

    lengths = []
    N = args.min_seq
    while N <= args.max_seq:
        lengths.append(N)
        N *= 2
    print(
        f"peak memory of attention, float32, B={args.batch} H={args.heads} d={args.dim}, "
        f"causal={args.causal}, device={args.device} "
        f"({'CuPy memory pool' if args.device == 'cuda' else 'tracemalloc'})"
    )
    for impl in ("naive", "flash"):  # warm-up: lazy imports and first-call setup are not the kernels' memory
        for mode in ("fwd", "fwd+bwd"):
            run_once(impl, 64, mode, args, meter=False)
    print(f"{'N':>6} {'pass':<8} {'naive':>28} {'flash':>12} {'naive / flash':>14}")
    per_n2 = {}  # mode -> naive peak / N² at the largest N measured
    for N in lengths:
        for mode in ("fwd", "fwd+bwd"):
            flash_peak = run_once("flash", N, mode, args)
            estimate = per_n2.get(mode, 0.0) * N * N
            if estimate > args.naive_limit_gib * GIB:
                naive = f"skipped (would need {estimate / GIB:.0f} GiB)"
                ratio = f"{estimate / flash_peak:13.0f}~"
            else:
                naive_peak = run_once("naive", N, mode, args)
                per_n2[mode] = naive_peak / (N * N)
                naive = f"{naive_peak / 2**20:,.1f} MiB"
                ratio = f"{naive_peak / flash_peak:14.1f}"
            print(f"{N:>6} {mode:<8} {naive:>28} {flash_peak / 2**20:>8,.1f} MiB {ratio}", flush=True)
    print("~ : from the estimate. Flash's peak grows linearly in N; dense attention's as N².")


if __name__ == "__main__":
    sys.exit(main())
