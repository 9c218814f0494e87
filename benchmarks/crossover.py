"""Where the pool starts to pay, per op: forward + backward at one thread and at two.

    python benchmarks/crossover.py                  # every op, float32, min of 15 runs each
    python benchmarks/crossover.py --ops flash,GELU --repeats 25
    python benchmarks/crossover.py --busy 1       # with one core kept busy

For each op that the speed layer splits over its pool of threads (the row-wise Functions
of ``minitorch_attn/speed/rows.py``, and flash attention's (batch, head) chunks), a row
per input size, from small to large, timing one forward + backward under a random
upstream gradient three ways, in turn (A B C, C B A, ...) after a warm-up, the minimum
of ``--repeats`` runs each:

* ``1 thread``: ``set_num_threads(1)``: BLAS and the pool one thread;
* ``2, pool``: ``set_num_threads(2)`` with the pool used at any size (the op in chunks);
* ``2, whole``: ``set_num_threads(2)`` with the pool never used (the op in one call, BLAS
  on two threads).

``now`` says which of the last two the op does at that size with the thresholds of
``minitorch_attn.speed.SPLITS`` (for flash attention, of the bytes of the scores it never
forms, ``KiB · N / E``); ``best`` which of the three was fastest. The threshold of
an op is the size from which ``2, pool`` beats both others on every larger size. The
machine these figures come from is shared, so single times are noisy; the minimum of
many runs is the least noisy figure, and still moves by 10-20% from run to run.
"""

from __future__ import annotations

import argparse
import time

import numpy

import minitorch_attn as mt
import minitorch_attn.functional as F
from minitorch_attn import speed
from minitorch_attn.app.measure import busy, busy_flag
from minitorch_attn.argtypes import positive_int
from minitorch_attn.speed import keep_freed_memory

OPS = {  # name: (the Function the table of speed.SPLITS knows it by, call, first input's shapes, more inputs)
    "GELU": ("GELU", lambda x: F.gelu(x, approximate="tanh"), [(b, 64, 512) for b in (1, 2, 4, 8, 16, 32, 64)], 0),
    "SiLU": ("SiLU", F.silu, [(b, 64, 344) for b in (1, 2, 4, 8, 16, 32, 64)], 0),
    "attention": (
        "ScaledDotProductAttention",
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
        [(b, 4, 64, 32) for b in (1, 2, 4, 8, 16, 32, 64)] + [(4, 4, 128, 64)],
        2,
    ),
    "LayerNorm": ("LayerNorm", lambda x: F.layer_norm(x, x.shape[-1:]), [(b, 128, 1024) for b in (2, 4, 8, 16, 32)], 0),
    "RMSNorm": ("RMSNorm", lambda x: F.rms_norm(x, x.shape[-1:]), [(b, 128, 1024) for b in (2, 4, 8, 16, 32)], 0),
    "flash": (
        "FlashAttention",
        lambda q, k, v: F.flash_attention(q, k, v),
        [(b, 128, 64) for b in (1, 2, 4, 8, 16, 32)]
        + [(2, 4, 256, 64), (4, 4, 256, 64), (1, 8, 512, 64), (1, 8, 1024, 64)],
        2,
    ),
}


def one_run(fn, tensors, upstream):
    for t in tensors:
        t.grad = None
    fn(*tensors).backward(upstream)


def timings(name, fn, shape, extra, repeats, rng):
    """``{config: min seconds}`` of one forward + backward, the three configs in turn."""
    tensors = [
        mt.tensor(rng.standard_normal(shape).astype(numpy.float32), requires_grad=True) for _ in range(1 + extra)
    ]
    upstream = mt.tensor(rng.standard_normal(fn(*tensors).shape).astype(numpy.float32))
    original = speed.SPLITS[name]
    configs = {
        "1 thread": (1, original),
        "2, pool": (2, speed.Split(0, original.chunk_bytes)),
        "2, whole": (2, speed.Split(2**62)),
    }
    best = dict.fromkeys(configs, float("inf"))
    order = list(configs)
    try:
        for repeat in range(repeats + 1):
            for config in order if repeat % 2 == 0 else order[::-1]:
                threads, split = configs[config]
                mt.set_num_threads(threads)
                speed.SPLITS[name] = split
                start = time.perf_counter()
                one_run(fn, tensors, upstream)
                elapsed = time.perf_counter() - start
                if repeat:  # the first round warms up
                    best[config] = min(best[config], elapsed)
    finally:
        speed.SPLITS[name] = original
        mt.set_num_threads(None)
    return best


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    parser.add_argument("--ops", default=",".join(OPS), help="comma-separated, of " + ", ".join(OPS))
    parser.add_argument("--repeats", type=positive_int, default=15, help="timed runs of each config")
    parser.add_argument("--seed", type=int, default=0)
    busy_flag(parser)
    args = parser.parse_args(argv)
    keep_freed_memory()  # as the minitorch-attn command does (minitorch_attn/speed/allocator.py)
    rng = numpy.random.default_rng(args.seed)
    print(
        f"forward + backward, float32, ms (min of {args.repeats}), {args.busy} busy helper process(es); "
        f"single rows are noisy on a shared machine"
    )
    print(f"{'op':<10} {'shape':<18} {'KiB':>7} {'1 thread':>9} {'2, pool':>9} {'2, whole':>9}  {'now':<6} best")
    with busy(args.busy):
        slower = table(args, rng)
    print(
        f"target: at two threads no call slower than at one (within {NOISE:.0%}, the noise of a min-of-N): "
        + ("met" if not slower else f"NOT met at {', '.join(slower)}")
    )


NOISE = 0.1


def table(args, rng):
    """Print a row per op and size; return the rows where the call, as it runs now at two
    threads, took longer than at one (beyond :data:`NOISE`)."""
    slower = []
    for op in args.ops.split(","):
        name, fn, shapes, extra = OPS[op]
        for shape in shapes:
            times = timings(name, fn, shape, extra, args.repeats, rng)
            kib = numpy.prod(shape) * 4 / 1024
            size = kib * 1024 * (shape[-2] / shape[-1] if op == "flash" else 1)  # flash: the scores' bytes
            now = "pool" if size >= speed.SPLITS[name].from_bytes else "whole"
            best = min(times, key=times.get)
            if times["2, pool" if now == "pool" else "2, whole"] > (1 + NOISE) * times["1 thread"]:
                slower.append(f"{op} {shape}")
            print(
                f"{op:<10} {str(shape):<18} {kib:7.0f} {times['1 thread'] * 1e3:9.3f} "
                f"{times['2, pool'] * 1e3:9.3f} {times['2, whole'] * 1e3:9.3f}  {now:<6} {best}",
                flush=True,
            )
    return slower


if __name__ == "__main__":
    main()
