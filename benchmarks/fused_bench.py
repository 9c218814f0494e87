"""The fused twins of ``minitorch_attn/speed/fused.py`` against the plain formulas, one core.

    python benchmarks/fused_bench.py                 # median of 7 rounds of 20 calls each
    python benchmarks/fused_bench.py --rounds 15

Per twin, the default GPT's arrays (float32): SiLU forward + backward on its (16, 64, 344)
gate, causal attention forward + backward on (16, 4, 64, 32), and one AdamW step over
the GPT's 34 parameters; plain (``speed.use_fused(False)``, the code the course reads)
and fused (``speed.use_fused()``, as the training job runs) in alternating rounds, the
median of the rounds' times. The two compute the same numbers bit for bit
(``tests/test_speed_fused.py``).
"""

from __future__ import annotations

from minitorch_attn.speed import keep_freed_memory  # noqa: E402

import argparse
import statistics
import time

import numpy

import minitorch_attn as mt
import minitorch_attn.functional as F
from minitorch_attn import optim, speed
from minitorch_attn.argtypes import positive_int


def cases(rng):
    """``{name: call}``: each call one forward + backward (or one optimizer step)."""
    def tensor(shape, grad=True):
        return mt.tensor(rng.standard_normal(shape).astype(numpy.float32), requires_grad=grad)

    x, gx = tensor((16, 64, 344)), tensor((16, 64, 344), False)
    q, k, v, go = tensor((16, 4, 64, 32)), tensor((16, 4, 64, 32)), tensor((16, 4, 64, 32)), tensor((16, 4, 64, 32), False)
    shapes = [(103, 128)] + [(384, 128), (128, 128), (344, 128), (344, 128), (128, 344)] * 3 + [(128,)] * 7 + [(64, 128)]
    params = [tensor(s) for s in shapes]
    for p in params:
        p.grad = tensor(p.shape, False)
    opt = optim.AdamW(params, lr=1e-3, weight_decay=0.1)
    return {"SiLU (16, 64, 344)": lambda: F.silu(x).backward(gx),
            "attention (16, 4, 64, 32), causal": lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True).backward(go),
            f"AdamW step, {len(params)} parameters": opt.step}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--rounds", type=positive_int, default=7)
    parser.add_argument("--calls", type=positive_int, default=20, help="calls per round")
    args = parser.parse_args(argv)
    keep_freed_memory()   # as the minitorch-attn command does
    mt.set_num_threads(1)
    print(f"ms a call, one thread, float32: median of {args.rounds} alternating rounds of {args.calls} calls")
    print(f"{'':<38} {'plain':>8} {'fused':>8} {'fused/plain':>12}")
    for name, call in cases(numpy.random.default_rng(0)).items():
        times = {False: [], True: []}
        for r in range(args.rounds + 1):
            for fused in ((False, True) if r % 2 == 0 else (True, False)):
                with speed.use_fused(fused):
                    start = time.perf_counter()
                    for _ in range(args.calls):
                        call()
                    if r:                                   # the first round warms up
                        times[fused].append((time.perf_counter() - start) / args.calls * 1e3)
        plain, fused = statistics.median(times[False]), statistics.median(times[True])
        print(f"{name:<38} {plain:8.2f} {fused:8.2f} {fused / plain:12.2f}", flush=True)


if __name__ == "__main__":
    main()
