"""minitorch-attn on a CUDA GPU (CuPy) against PyTorch on the same GPU: attention and a training step.

    python benchmarks/gpu_bench.py --out DIR attention    # flash and dense fwd+bwd against torch's SDPA
    python benchmarks/gpu_bench.py --out DIR step         # a training step of the default GPT
    python benchmarks/gpu_bench.py --device cpu attention --seq 128 --repeats 1   # rehearsal, no GPU

``attention``: ``F.flash_attention`` and ``F.scaled_dot_product_attention`` (dense: it
forms the (N, N) weights) forward + backward (a random upstream gradient), causal and
not, against ``torch.nn.functional.scaled_dot_product_attention`` on the same GPU (its
own choice of kernel), float32, B=1 H=8 d=64 at each ``--seq`` (default 4096 and 8192).
Each figure is the median of ``--repeats`` calls after one untimed call (CuPy compiles
its kernels on first use), with the GPU's queued work finished before and after each
call. Peak device memory: for CuPy the high-water mark of its memory pool during the
calls (the pool's bytes held from the GPU, emptied before: an upper bound of the bytes
in use at once), for PyTorch ``torch.cuda.max_memory_allocated``; both count the inputs.
Target: flash forward+backward at most 3x PyTorch's time at N = 8192.

``step``: one training step of ``minitorch-attn train``'s default GPT (forward,
cross-entropy, ``zero_grad``, backward, ``clip_grad_norm_``, AdamW; each step ends with
the loss read to the host, so a step's time is the GPU's) against its PyTorch twin
(``minitorch_attn.app.torch_gpt.GPT`` with the same weights, optimizer and batches) on the
same GPU, in alternating rounds. Target: at most 5x PyTorch eager's time per step.

Every table is printed and written to ``--out`` (``attention.txt``/``.json``,
``step.txt``/``.json``). On ``--device cpu`` the same code runs with PyTorch on the CPU
and no memory figures: the rehearsal of ``benchmarks/gpu_check.sh --dry-run``.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import time

import numpy
import train_bench  # beside this script
from step_profile import build_model, model_flags  # beside this script

import minitorch_attn as mt
import minitorch_attn.functional as F
from minitorch_attn import nn, optim
from minitorch_attn.app.measure import synchronize
from minitorch_attn.app.train import make_optimizer, next_char_loss
from minitorch_attn.argtypes import positive_int

TARGET_FLASH = 3.0  # flash fwd+bwd over torch's SDPA at N = 8192
TARGET_STEP = 5.0  # our step over torch eager's, same GPU
LR, WEIGHT_DECAY, CLIP = 4e-3, 0.1, 1.0  # the training job's defaults


def torch_device(device):
    return "cuda" if device == "cuda" else "cpu"


def median_seconds(run, device, repeats, sync_torch):
    """The median of ``repeats`` timed calls of ``run()`` after one untimed call."""
    run()
    samples = []
    for _ in range(repeats):
        synchronize(device)
        sync_torch()
        start = time.perf_counter()
        run()
        synchronize(device)
        sync_torch()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


class PeakMemory:
    """The peak device memory of the calls inside ``with``, in bytes (None on the CPU)."""

    def __init__(self, side, device):
        self.side, self.device, self.peak = side, device, None

    def __enter__(self):
        if self.device != "cuda":
            return self
        if self.side == "torch":
            import torch

            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        else:
            import cupy

            cupy.cuda.Device().synchronize()
            cupy.get_default_memory_pool().free_all_blocks()  # the pool then holds only what is in use
        return self

    def __exit__(self, *exc):
        if self.device != "cuda":
            return
        if self.side == "torch":
            import torch

            torch.cuda.synchronize()
            self.peak = torch.cuda.max_memory_allocated()
        else:
            import cupy

            cupy.cuda.Device().synchronize()
            self.peak = cupy.get_default_memory_pool().total_bytes()


# ---- attention ----------------------------------------------------------------------------------------
def attention(args):
    rng = numpy.random.default_rng(0)
    results = []
    for n in args.seq:
        shape = (args.batch, args.heads, n, args.dim)
        arrays = [rng.standard_normal(shape).astype(numpy.float32) for _ in range(4)]
        for causal in (False, True):
            for name, (run, sync) in runners(args, arrays, causal).items():
                side = "torch" if name == "torch" else "ours"
                with PeakMemory(side, args.device) as memory:
                    seconds = median_seconds(run, args.device, args.repeats, sync)
                results.append({"impl": name, "N": n, "causal": causal, "ms": seconds * 1e3, "peak_bytes": memory.peak})
    head = (
        f"attention forward+backward, float32, B={args.batch} H={args.heads} d={args.dim}, "
        f"device={args.device}, median of {args.repeats} calls after one untimed call"
    )
    lines = [head, f"{'impl':<8}{'N':>7} {'causal':<7}{'ms':>10}{'peak MiB':>11}{'x torch':>9}"]
    for r in results:
        ref = [t["ms"] for t in results if t["impl"] == "torch" and t["N"] == r["N"] and t["causal"] == r["causal"]]
        r["x_torch"] = r["ms"] / ref[0] if ref else None
        peak = f"{r['peak_bytes'] / 2**20:,.0f}" if r["peak_bytes"] is not None else "-"
        ratio = f"{r['x_torch']:.2f}" if r["x_torch"] is not None else "-"
        lines.append(f"{r['impl']:<8}{r['N']:>7} {str(r['causal']):<7}{r['ms']:>10.2f}{peak:>11}{ratio:>9}")
    at = max(args.seq)
    for r in results:
        if r["impl"] == "flash" and r["N"] == at and r["x_torch"] is not None:
            met = "met" if r["x_torch"] <= TARGET_FLASH else "NOT met"
            lines.append(
                f"target: flash fwd+bwd <= {TARGET_FLASH}x torch's SDPA at N = {at} "
                f"(set for N = 8192 on cuda), causal={r['causal']}: {r['x_torch']:.2f}x  {met}"
            )
    report(args.out, "attention", lines, {"config": vars_of(args), "rows": results})


def runners(args, arrays, causal):
    """``{name: (run, sync_torch)}``: flash, dense and (when PyTorch is there) torch's SDPA."""
    q, k, v = (mt.tensor(a, device=args.device, requires_grad=True) for a in arrays[:3])
    upstream = mt.tensor(arrays[3], device=args.device)

    def ours(fn):
        def run():
            for t in (q, k, v):
                t.grad = None
            fn(q, k, v, is_causal=causal).backward(upstream)

        return run, lambda: None

    blocks = {"block_size_q": args.block_q, "block_size_k": args.block_k}  # None: flash's default tiles
    found = {
        "flash": ours(functools.partial(F.flash_attention, **blocks)),
        "dense": ours(F.scaled_dot_product_attention),
    }
    try:
        import torch
    except ImportError:
        print("PyTorch is not installed: only minitorch-attn is measured")
        return found
    where = torch_device(args.device)
    tq, tk, tv = (torch.tensor(a, device=where, requires_grad=True) for a in arrays[:3])
    tg = torch.tensor(arrays[3], device=where)

    def run():
        for t in (tq, tk, tv):
            t.grad = None
        torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, is_causal=causal).backward(tg)

    found["torch"] = (run, torch.cuda.synchronize if where == "cuda" else (lambda: None))
    return found


# ---- a training step ----------------------------------------------------------------------------------
def step(args):
    rng = numpy.random.default_rng(args.seed)
    windows = [rng.integers(0, args.vocab, size=(args.batch_size, args.block_size + 1)) for _ in range(4)]
    batches = [(w[:, :-1], w[:, 1:]) for w in windows]
    mt.manual_seed(args.seed)
    model = build_model(args).to(args.device)
    opt = make_optimizer(model, LR, WEIGHT_DECAY)
    ours_batches = [(mt.tensor(x, device=args.device), mt.tensor(y, device=args.device)) for x, y in batches]
    split = nn.SplitBatch(model, next_char_loss)

    def ours(i):
        x, y = ours_batches[i % len(ours_batches)]
        opt.zero_grad()
        loss = split.backward(x, y)  # loss.item() inside: waits for the GPU
        optim.clip_grad_norm_(model.parameters(), CLIP)
        opt.step()
        return loss

    sides = {"minitorch-attn": ours}
    try:
        sides[f"PyTorch {__import__('torch').__version__} eager"] = theirs(args, batches, model)
    except ImportError:
        print("PyTorch is not installed: only minitorch-attn is measured")
    first = {name: side(0) for name, side in sides.items()}
    for side in sides.values():
        for i in range(1, args.warmup + 1):
            side(i)
    per_step = {name: [] for name in sides}
    done, round_ = 0, 0
    while done < args.steps:  # rounds of a few steps, the order turning each round
        chunk = min(5, args.steps - done)
        for name in list(sides) if round_ % 2 == 0 else list(reversed(sides)):
            start = time.perf_counter()
            for i in range(chunk):
                sides[name](done + i)  # each ends with its loss on the host
            per_step[name].append((time.perf_counter() - start) / chunk)
        done += chunk
        round_ += 1
    tokens = args.batch_size * args.block_size
    lines = [
        f"training step of the default GPT ({args.norm}, {args.mlp}, {args.pos_encoding} positions, d_model "
        f"{args.d_model}, {args.num_layers} layers, {args.num_heads} heads, context {args.block_size}, batch "
        f"{args.batch_size}: {tokens} tokens/step, {model.num_parameters():,} parameters) on {args.device}, "
        f"{args.steps} timed steps per side in {round_} alternating rounds",
        "first step's loss (same weights, same batch): " + ", ".join(f"{k} {v:.6f}" for k, v in first.items()),
        f"{'':<32}{'ms/step':>10}{'tokens/s':>11}",
    ]
    rows = []
    for name, samples in per_step.items():
        ms = statistics.median(samples) * 1e3
        rows.append({"side": name, "ms_per_step": ms, "tokens_per_s": tokens / ms * 1e3})
        lines.append(f"{name:<32}{ms:>10.2f}{tokens / ms * 1e3:>11,.0f}")
    if len(rows) == 2:
        ratio = rows[0]["ms_per_step"] / rows[1]["ms_per_step"]
        met = "met" if ratio <= TARGET_STEP else "NOT met"
        lines.append(
            f"target: minitorch-attn step <= {TARGET_STEP}x PyTorch eager's on the same device: {ratio:.2f}x  {met}"
        )
    report(args.out, "step", lines, {"config": vars_of(args), "first_loss": first, "rows": rows})


def theirs(args, batches, model):
    """The PyTorch twin of ``model`` (its weights) on the same device, with the same step
    (``train_bench.theirs`` on this device)."""
    return train_bench.theirs(args, batches, model, where=torch_device(args.device))


# ---- output -------------------------------------------------------------------------------------------
def vars_of(args):
    return {k: v for k, v in vars(args).items() if k not in ("run", "out")}


def report(out, name, lines, data):
    """Print the table and write it, and its figures as JSON, into ``out`` (when given)."""
    print("\n".join(lines), flush=True)
    if out:
        os.makedirs(out, exist_ok=True)
        with open(os.path.join(out, f"{name}.txt"), "w", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
        with open(os.path.join(out, f"{name}.json"), "w", encoding="utf-8") as f:
            json.dump(data, f, indent=2)


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    parser.add_argument("--out", default=None, help="folder for the tables and their JSON")
    sub = parser.add_subparsers(required=True)
    att = sub.add_parser("attention", formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    att.add_argument("--seq", type=positive_int, nargs="+", default=[4096, 8192])
    att.add_argument("--batch", type=positive_int, default=1)
    att.add_argument("--heads", type=positive_int, default=8)
    att.add_argument("--dim", type=positive_int, default=64)
    att.add_argument("--repeats", type=positive_int, default=3)
    att.add_argument("--block-q", type=positive_int, default=None, help="flash's block_size_q (default: its own)")
    att.add_argument("--block-k", type=positive_int, default=None, help="flash's block_size_k (default: its own)")
    att.set_defaults(run=attention)
    st = sub.add_parser("step", formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    model_flags(st)
    st.add_argument("--steps", type=positive_int, default=20, help="timed steps per side")
    st.add_argument("--warmup", type=positive_int, default=3, help="untimed steps per side first")
    st.set_defaults(run=step)
    args = parser.parse_args(argv)
    if args.device == "cpu":  # the rehearsal: one thread each, on a machine shared with others
        mt.set_num_threads(1)
        try:
            import torch

            torch.set_num_threads(1)
        except ImportError:
            pass
    args.run(args)


if __name__ == "__main__":
    main()
