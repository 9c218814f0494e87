"""Speed of attention: dense (naive) against flash against PyTorch, forward and forward+backward.

    python benchmarks/attention_bench.py                        # B=1, H=8, N=2048, d=64, float32
    python benchmarks/attention_bench.py --busy 1               # the same with one core kept busy
    python benchmarks/attention_bench.py --seq 1024 --threads 1
    python benchmarks/attention_bench.py --device cuda --seq 8192   # CuPy against PyTorch's CUDA SDPA

Rows: ``naive`` is ``F.scaled_dot_product_attention`` (forms the (N, N) weights), ``flash``
is ``flash_attention`` (blockwise, tiles of the default size unless --block-q/--block-k),
``products`` is flash attention's matrix products *alone* (the same tiles, chunks, thread
pool and causal skipping, two products per tile forward and five backward, nothing else:
no softmax, no bookkeeping), the floor that flash on NumPy cannot go below, and ``torch``
is ``torch.nn.functional.scaled_dot_product_attention`` (skipped when PyTorch is not
installed). Each is timed causal and not, forward alone (no graph) and forward +
backward (a random upstream gradient), on the same shapes. Columns: median milliseconds,
achieved GFLOP/s and the ratio to PyTorch's time (lower is better, 1.00 = parity).

GFLOP/s counts the nominal work of FlashAttention's papers for every row: forward
``4 B H L S d`` (the products Q Kᵀ and P V), forward+backward 3.5 times that (the
backward's five products), both halved when causal. A row doing more work (the naive
backward recomputes nothing but the flash backward recomputes P) is still measured against
that same count, so the column compares times, not implementations' honesty.

Fairness on the CPU: each implementation runs in a fresh, plain process (no environment
variable), with the threads each library picks by itself: PyTorch its intra-op pool of one
thread per core; naive attention NumPy's BLAS as loaded; flash attention its own pool of
one thread per core over (batch, head) chunks, with a one-thread BLAS inside it (see
:mod:`minitorch_attn.speed.threads`). ``--threads N`` fixes both libraries to N threads instead
(``torch.set_num_threads`` and ``minitorch_attn.set_num_threads``). Rounds alternate
between the implementations, so a busy machine slows them alike; the medians over all
rounds are reported. ``--busy N`` keeps N cores busy with helper processes for the whole
run (:func:`minitorch_attn.app.measure.busy`), the reproducible form of "a machine doing
something else".

The last lines compare flash forward+backward with PyTorch against the project's targets:
on the CPU at most 1.0x in a plain process and 1.2x with ``--busy 1`` (B=1, H=8, N=2048,
d=64); on CUDA (CuPy against PyTorch's CUDA SDPA) at most 3x at N = 8192.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import subprocess
import sys
import time

from minitorch_attn.app.measure import busy, busy_flag, synchronize
from minitorch_attn.argtypes import device_type, positive_int

IMPLEMENTATIONS = ("naive", "flash", "products", "torch")
CONFIGS = [(causal, mode) for causal in (False, True) for mode in ("fwd", "fwd+bwd")]
# the most flash fwd+bwd may take, in PyTorch's times: on the CPU per --busy N, on CUDA at N = 8192
TARGETS = {("cpu", 0): 1.0, ("cpu", 1): 1.2, ("cuda", 0): 3.0}


def flops(args, causal, mode):
    forward = 4 * args.batch * args.heads * args.seq * args.seq * args.dim
    return forward * (3.5 if mode == "fwd+bwd" else 1.0) * (0.5 if causal else 1.0)


# ---- one implementation, in its own process -----------------------------------------------------------
def worker(args):
    """Time one implementation on every config; print {"causal,mode": [seconds, ...]} as JSON."""
    import numpy

    rng = numpy.random.default_rng(0)
    shape = (args.batch, args.heads, args.seq, args.dim)
    arrays = [rng.standard_normal(shape).astype(numpy.float32) for _ in range(4)]
    if args.worker == "torch":
        run, sync = _torch_runner(args, arrays)
    elif args.worker == "products":
        run, sync = _products_runner(args, arrays)
    else:
        run, sync = _ours_runner(args, arrays)
    times = {}
    for causal, mode in CONFIGS:
        run(causal, mode)  # warm-up (allocations, BLAS, CUDA kernels' compilation)
        sync()
        samples = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            run(causal, mode)
            sync()
            samples.append(time.perf_counter() - start)
        times[f"{causal},{mode}"] = samples
    print(json.dumps(times))


def _ours_runner(args, arrays):
    import minitorch_attn as mt
    import minitorch_attn.functional as F

    mt.keep_freed_memory()  # as the minitorch-attn command does (minitorch_attn/speed/allocator.py)

    q, k, v = (mt.tensor(a, device=args.device, requires_grad=True) for a in arrays[:3])
    upstream = mt.tensor(arrays[3], device=args.device)
    if args.threads:
        mt.set_num_threads(args.threads)
    blocks = {}
    if args.worker == "flash":
        blocks = {"block_size_q": args.block_q, "block_size_k": args.block_k}

    def attention(causal):
        if args.worker == "flash":
            return F.flash_attention(q, k, v, is_causal=causal, **blocks)
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

    def run(causal, mode):
        for t in (q, k, v):
            t.grad = None
        if mode == "fwd":
            with mt.no_grad():
                attention(causal)
        else:
            attention(causal).backward(upstream)

    return run, functools.partial(synchronize, args.device)


def _products_runner(args, arrays):
    """Flash attention's loops with every line but the matrix products taken out: what its
    time would be if the softmax and the bookkeeping between the products were free."""
    import minitorch_attn as mt
    from minitorch_attn import speed
    from minitorch_attn.core.backend import get_backend
    from minitorch_attn.functional._flash_tiles import _tile_visibility
    from minitorch_attn.functional.flash import default_block_sizes

    mt.keep_freed_memory()
    if args.threads:
        mt.set_num_threads(args.threads)
    xp = get_backend(args.device).xp
    Q, K, V, dO = (xp.asarray(a) for a in arrays)
    K_T, V_T = (xp.asarray(a.swapaxes(-1, -2).copy()) for a in arrays[1:3])
    default_q, default_k = default_block_sizes(args.seq, args.seq)
    bq, bk = args.block_q or default_q, args.block_k or default_k
    threads = speed.threads_for("FlashAttention", get_backend(args.device), Q.nbytes)

    def tiles(causal):
        offset = 0 if causal else None
        return [
            (i0, j0)
            for i0 in range(0, args.seq, bq)
            for j0 in range(0, args.seq, bk)
            if _tile_visibility(offset, i0, min(i0 + bq, args.seq), j0, min(j0 + bk, args.seq)) != "none"
        ]

    def chunk_products(c, causal, mode):
        q, kt, k, v, vt, do = (speed.take(a, c) for a in (Q, K_T, K, V, V_T, dO))
        for i0, j0 in tiles(causal):
            i, j = slice(i0, i0 + bq), slice(j0, j0 + bk)
            S = xp.matmul(q[..., i, :], kt[..., j])  # forward: S = Q Kᵀ
            xp.matmul(S, v[..., j, :])  #          O += P V
            if mode == "fwd+bwd":
                S = xp.matmul(q[..., i, :], kt[..., j])  # backward: S again
                xp.matmul(xp.matrix_transpose(S), do[..., i, :])  #   the four products
                dS = xp.matmul(do[..., i, :], vt[..., j])  #   of a tile, in the
                xp.matmul(dS, k[..., j, :])  #   shapes of Algorithm
                xp.matmul(xp.matrix_transpose(dS), q[..., i, :])  #   2 (task 5.2)

    def run(causal, mode):
        chunks = speed.batch_chunks(Q.shape[:-2], threads)
        speed.run_on_threads(threads, [functools.partial(chunk_products, c, causal, mode) for c in chunks])

    return run, functools.partial(synchronize, args.device)


def _torch_runner(args, arrays):
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    device = "cuda" if args.device == "cuda" else "cpu"
    q, k, v = (torch.tensor(a, device=device, requires_grad=True) for a in arrays[:3])
    upstream = torch.tensor(arrays[3], device=device)

    def run(causal, mode):
        for t in (q, k, v):
            t.grad = None
        if mode == "fwd":
            with torch.no_grad():
                torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
        else:
            torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal).backward(upstream)

    def sync():
        if device == "cuda":
            torch.cuda.synchronize()

    return run, sync


# ---- the table ------------------------------------------------------------------------------------------
def available(impl, device):
    if impl != "torch":
        return True
    try:
        import torch
    except ImportError:
        return False
    return device != "cuda" or torch.cuda.is_available()


def measure(args, impl):
    """Run one round of ``impl`` in a fresh process; return its JSON, or None if it failed."""
    command = [
        sys.executable,
        os.path.abspath(__file__),
        "--worker",
        impl,
        "--device",
        args.device,
        "--batch",
        str(args.batch),
        "--heads",
        str(args.heads),
        "--seq",
        str(args.seq),
        "--dim",
        str(args.dim),
        "--repeats",
        str(args.repeats),
    ]
    for flag, value in (("--threads", args.threads), ("--block-q", args.block_q), ("--block-k", args.block_k)):
        if value:
            command += [flag, str(value)]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        print(f"{impl}: failed\n{done.stderr[-2000:]}", file=sys.stderr)
        return None
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu", type=device_type(("cpu", "cuda")), help="cpu or cuda")
    parser.add_argument("--batch", type=positive_int, default=1)
    parser.add_argument("--heads", type=positive_int, default=8)
    parser.add_argument("--seq", type=positive_int, default=2048)
    parser.add_argument("--dim", type=positive_int, default=64)
    parser.add_argument(
        "--threads",
        type=positive_int,
        default=None,
        help="CPU threads for every implementation (default: each library's own choice)",
    )
    parser.add_argument("--repeats", type=positive_int, default=3, help="timed calls per round")
    parser.add_argument("--rounds", type=positive_int, default=3, help="alternating rounds of all implementations")
    parser.add_argument("--block-q", type=positive_int, default=None, help="flash's block_size_q (default: tuned)")
    parser.add_argument("--block-k", type=positive_int, default=None, help="flash's block_size_k (default: tuned)")
    parser.add_argument("--only", default=None, help="comma-separated implementations to run")
    busy_flag(parser)
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return worker(args)

    chosen = [i for i in IMPLEMENTATIONS if args.only is None or i in args.only.split(",")]
    impls = [i for i in chosen if available(i, args.device)]
    samples = {impl: {} for impl in impls}
    with busy(args.busy):
        for _ in range(args.rounds):
            for impl in impls:
                result = measure(args, impl)
                for key, values in (result or {}).items():
                    samples[impl].setdefault(key, []).extend(values)

    threads = f"{args.threads} threads" if args.threads else "threads of each library's own choice"
    print(
        f"attention, float32, B={args.batch} H={args.heads} L=S={args.seq} d={args.dim}, "
        f"device={args.device}, {threads}, {args.busy} busy helper process(es), "
        f"median of {args.rounds} x {args.repeats} calls"
    )
    if "torch" not in impls:
        print("(PyTorch not available: no ratio column)")
    print(f"{'impl':<8} {'causal':<7} {'pass':<8} {'ms':>9} {'GFLOP/s':>9} {'x torch':>8}")
    for causal, mode in CONFIGS:
        key = f"{causal},{mode}"
        reference = statistics.median(samples["torch"][key]) if samples.get("torch", {}).get(key) else None
        for impl in impls:
            if key not in samples[impl]:
                print(f"{impl:<8} {str(causal):<7} {mode:<8} {'failed':>9}")
                continue
            seconds = statistics.median(samples[impl][key])
            ratio = f"{seconds / reference:8.2f}" if reference else f"{'-':>8}"
            print(
                f"{impl:<8} {str(causal):<7} {mode:<8} {seconds * 1e3:9.1f} "
                f"{flops(args, causal, mode) / seconds / 1e9:9.1f} {ratio}"
            )
    print_targets(args, samples)
    return 0


def print_targets(args, samples):
    """Flash forward+backward against PyTorch, beside the project's target for this load."""
    target = TARGETS.get((args.device, args.busy))
    if target is None or not {"flash", "torch"} <= samples.keys():
        return
    print(
        f"target: flash fwd+bwd <= {target:.1f}x PyTorch on {args.device} with --busy {args.busy}"
        + (" (set for N = 8192)" if args.device == "cuda" else " (set for B=1 H=8 N=2048 d=64)")
    )
    for causal in (False, True):
        key = f"{causal},fwd+bwd"
        if key in samples["flash"] and key in samples["torch"]:
            ratio = statistics.median(samples["flash"][key]) / statistics.median(samples["torch"][key])
            floor = ""
            if key in samples.get("products", {}):
                products = statistics.median(samples["products"][key]) / statistics.median(samples["torch"][key])
                floor = f"  (its matrix products alone: {products:.2f}x)"
            print(f"  causal={causal!s:<5} {ratio:5.2f}x  {'met' if ratio <= target else 'NOT met'}{floor}")


if __name__ == "__main__":
    sys.exit(main())
