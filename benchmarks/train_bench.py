"""Training throughput of the character-level GPT: minitorch-attn against PyTorch (eager) and
against the matmul floor, and the ``minitorch-attn train`` command idle, beside a busy
process, and against its own fixed thread settings.

    python benchmarks/train_bench.py                    # the training job's default model and batch
    python benchmarks/train_bench.py --busy 1           # the same with one core kept busy
    python benchmarks/train_bench.py --steps 10 --d-model 64 --num-layers 2 --skip-command
    python benchmarks/train_bench.py --device cuda      # our CuPy backend (PyTorch stays on CPU)

1. **Against PyTorch, equal threads.** Both sides train the same GPT (``minitorch_attn.nn.GPT``
   and its PyTorch twin ``minitorch_attn.app.torch_gpt.GPT`` with the same initial weights:
   the training job's block by default (``--norm``, ``--mlp``, ``--pos-encoding``), fused
   QKV without bias, causal attention, tied embeddings) with
   the training job's AdamW (decay on matrices only, ``make_optimizer``) and clipping, on
   the same batches, so their losses agree to float32 rounding (printed). One step is
   forward, cross-entropy, ``zero_grad``, backward, clip and AdamW; ours splits the batch
   into one part per thread as the training job does (``nn.SplitBatch``), and runs the
   fused twins of its formulas, as the training job does (``minitorch_attn/speed/fused.py``;
   ``--plain``: the formulas as written). Rows: 1 thread and
   one per core (``minitorch_attn.set_num_threads`` and ``torch.set_num_threads``), and
   minitorch-attn choosing its threads by timing, as the training job does. The sides
   alternate in rounds of a few steps (the order turning each round; each side's steps
   after a pause and one untimed step, since the threads of the side before may still be
   spinning: ``step_profile.settle``),
   and each figure is
   a median over the rounds: a busy machine slows both sides of a round alike. Each round
   also times the machine's float32 matmul peak at that thread count (one (1024, 1024)
   product): the **floor** is the step's matrix products (their GFLOP, counted) at that
   peak, and ``step / floor`` is taken round by round. Without PyTorch only our rows are
   printed. Targets: at least PyTorch's throughput at 1 and 2 threads on an idle machine;
   our step at most 1.6x the floor with 1 thread.
2. **The command, idle and busy.** ``minitorch-attn train`` (default model,
   ``--command-steps`` steps, its own thread choice) in plain processes, alternately on
   the machine as it is and beside one CPU-bound helper process; tokens/s from its
   ``metrics.json`` (validation excluded). Target: busy at least 0.85 of idle. Only
   without ``--busy`` (the idle run must be idle).
3. **The command's thread choice.** ``minitorch-attn train`` with its own thread choice,
   then with each fixed ``--threads N``, in alternating rounds. Target: with ``--busy 1``
   its own choice reaches at least 0.9x the best fixed setting.

``--busy N`` keeps N cores busy with helper processes during the whole script
(:func:`minitorch_attn.app.measure.busy`).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy
from step_profile import build_model, matmul_seconds, model_flags, recorded_products, settle

import minitorch_attn as mt
from minitorch_attn import nn, optim
from minitorch_attn.app.measure import busy, busy_flag
from minitorch_attn.app.train import make_optimizer, next_char_loss
from minitorch_attn.argtypes import positive_int, usable_device
from minitorch_attn.speed import (
    FastestThreads,
    available_cores,
    blas_threads,
    keep_freed_memory,
    use_fused,
)

TARGET_VS_TORCH = 1.0  # our tokens/s over PyTorch's, equal threads, idle
TARGET_FLOOR = 1.6  # our step / the matmul floor, 1 thread
TARGET_BUSY = 0.85  # the command beside one busy process, over the command idle
TARGET_VS_BEST = 0.9  # the command's own choice over its best fixed --threads, with --busy 1
LR, WEIGHT_DECAY, CLIP = 4e-3, 0.1, 1.0  # the training job's defaults


def ours(args, batches):
    mt.manual_seed(args.seed)
    model = build_model(args).to(args.device)
    opt = make_optimizer(model, LR, WEIGHT_DECAY)
    batches = [(mt.tensor(x, device=args.device), mt.tensor(y, device=args.device)) for x, y in batches]

    split = nn.SplitBatch(model, next_char_loss)  # as the train command: a part of the batch per thread

    def step(i):
        x, y = batches[i % len(batches)]
        with use_fused(not getattr(args, "plain", False)):  # as the train command (speed/fused.py)
            opt.zero_grad()
            loss = split.backward(x, y)  # loss.item() inside: waits for the device
            optim.clip_grad_norm_(model.parameters(), CLIP)
            opt.step()
        return loss

    return step, model


def theirs(args, batches, model, where="cpu"):
    """The PyTorch twin of ``model`` with its weights, on the torch device ``where``, and the
    same optimizer and step (``gpu_bench.py`` runs it on the GPU)."""
    import torch

    from minitorch_attn.app.export import torch_config
    from minitorch_attn.app.torch_gpt import GPT

    twin = GPT(**torch_config(model))  # as minitorch-attn export: the norms' epsilon too
    missing = twin.load_state_dict({k: torch.tensor(v.numpy()) for k, v in model.state_dict().items()}, strict=False)
    assert not missing.missing_keys and twin.lm_head.weight is twin.token_embedding.weight  # tied, as ours
    twin.to(where)
    decay = [p for p in twin.parameters() if p.ndim >= 2]
    no_decay = [p for p in twin.parameters() if p.ndim < 2]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": WEIGHT_DECAY}, {"params": no_decay, "weight_decay": 0.0}],
        lr=LR,
        betas=(0.9, 0.99),
    )
    batches = [(torch.from_numpy(x).to(where), torch.from_numpy(y).to(where)) for x, y in batches]

    def step(i):
        x, y = batches[i % len(batches)]
        loss = torch.nn.functional.cross_entropy(twin(x).reshape(-1, args.vocab), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(twin.parameters(), CLIP)
        opt.step()
        return loss.item()

    return step


def against_torch(args):
    """Part 1: our steps and PyTorch's, alternating, at 1 thread and one per core, against the floor."""
    rng = numpy.random.default_rng(args.seed)
    batches = []
    for _ in range(4):
        w = rng.integers(0, args.vocab, size=(args.batch_size, args.block_size + 1))
        batches.append((w[:, :-1], w[:, 1:]))
    step_ours, model = ours(args, batches)
    try:
        import torch

        step_torch = theirs(args, batches, model)
        version = torch.__version__
    except ImportError:
        print("PyTorch is not installed: only minitorch-attn is measured (pip install torch)")
        torch = step_torch = None
    first_losses = {"minitorch-attn": step_ours(0)} | ({} if torch is None else {"PyTorch": step_torch(0)})
    flop = sum(p[-1] for p in recorded_products(lambda: step_ours(1))) if args.device == "cpu" else None

    def ours_with(chooser):
        def step(i):
            with chooser:
                step_ours(i)

        return step

    def torch_with(n):
        def step(i):
            torch.set_num_threads(n)
            step_torch(i)

        return step

    counts = sorted({1, available_cores()})
    sides = {}  # name -> (step, threads for the floor)
    for n in counts:
        sides[f"minitorch-attn, {n} thread(s)"] = (ours_with(FastestThreads(candidates=(n,))), n)
        if torch is not None:
            sides[f"PyTorch {version} eager, {n} thread(s)"] = (torch_with(n), n)
    chooser = FastestThreads(candidates=counts, period=10 * args.steps)
    sides["minitorch-attn, threads chosen by timing"] = (ours_with(chooser), None)

    for step, _ in sides.values():
        for i in range(args.warmup):
            step(i)
    while chooser.choice is None:  # the chosen row's warm-up ends with its first trial
        sides["minitorch-attn, threads chosen by timing"][0](0)
    per_step = collections.defaultdict(list)  # name -> seconds per step, one entry per round
    peaks = collections.defaultdict(list)  # threads -> GFLOP/s, one entry per round
    done, round_ = 0, 0
    while done < args.steps:  # rounds of a few steps, the order turning each round
        chunk = min(5, args.steps - done)
        names = list(sides) if round_ % 2 == 0 else list(reversed(sides))
        for name in names:
            step, _ = sides[name]
            settle()  # the other side's threads (BLAS's, PyTorch's) may still be spinning
            step(done)  # untimed: this side's own threads and first allocations
            start = time.perf_counter()
            for i in range(chunk):
                step(done + i)
            per_step[name].append((time.perf_counter() - start) / chunk)
        if flop is not None:
            for n in counts:
                with blas_threads(n):
                    peaks[n].append(2.0 * 1024**3 / matmul_seconds() / 1e9)
        done += chunk
        round_ += 1

    tokens = args.batch_size * args.block_size
    print(
        f"GPT: {args.norm}, {args.mlp}, {args.pos_encoding} positions, d_model {args.d_model}, "
        f"{args.num_layers} layers, {args.num_heads} heads, context "
        f"{args.block_size}, batch {args.batch_size} ({tokens} tokens/step), {model.num_parameters():,} parameters, "
        f"{args.steps} timed steps per row in {round_} alternating rounds, {args.busy} busy helper process(es)"
    )
    losses = ", ".join(f"{k} {v:.6f}" for k, v in first_losses.items())
    print(f"first step's loss (same weights, same batch): {losses}")
    floor_head = f"{'x floor':>9}" if flop is not None else ""
    print(f"{'':<48}{'ms/step':>10}{'tokens/s':>11}{floor_head}")
    for name, (_, n) in sides.items():
        ms = statistics.median(per_step[name]) * 1e3
        floor = ""
        if flop is not None and n is not None:
            ratios = [s / (flop / (p * 1e9)) for s, p in zip(per_step[name], peaks[n])]
            floor = f"{statistics.median(ratios):>9.2f}"
        print(f"{name:<48}{ms:>10.1f}{tokens / ms * 1e3:>11,.0f}{floor}")
    print(f"(the chosen row ran {chooser.counts} steps per thread count, the first trial in its warm-up)")
    if flop is not None:
        print(
            f"floor: the step's {flop / 1e9:.2f} GFLOP of matrix products at the machine's float32 matmul peak, "
            f"median {', '.join(f'{statistics.median(peaks[n]):.1f} GFLOP/s at {n} thread(s)' for n in counts)}; "
            f"x floor is the median over the rounds of each round's step / floor"
        )
    if torch is not None:
        verdict = "" if args.busy == 0 else "  (the target is for an idle machine)"
        print(f"target: minitorch-attn / PyTorch >= {TARGET_VS_TORCH}x at equal threads{verdict}")
        for n in counts:
            mine, theirs_ = (
                per_step[f"minitorch-attn, {n} thread(s)"],
                per_step[f"PyTorch {version} eager, {n} thread(s)"],
            )
            ratio = statistics.median(t / m for m, t in zip(mine, theirs_))
            print(
                f"  {n} thread(s): {ratio:.2f}x  {'met' if ratio >= TARGET_VS_TORCH else 'NOT met'}"
                f"  (median of the rounds' ratios)"
            )
    if flop is not None:
        ratios = [s / (flop / (p * 1e9)) for s, p in zip(per_step["minitorch-attn, 1 thread(s)"], peaks[1])]
        ratio = statistics.median(ratios)
        print(
            f"target: minitorch-attn step / matmul floor <= {TARGET_FLOOR} at 1 thread: {ratio:.2f}  "
            f"{'met' if ratio <= TARGET_FLOOR else 'NOT met'}"
        )


def run_command(args, folder, name, threads=None):
    """One ``minitorch-attn train`` in a plain process; its tokens/s (validation excluded)."""
    out = os.path.join(folder, name)
    command = [
        sys.executable,
        "-m",
        "minitorch_attn.app.cli",
        "train",
        "--steps",
        str(args.command_steps),
        "--time-budget",
        "0",
        "--quiet",
        "--sample-tokens",
        "0",
        "--out",
        out,
        "--device",
        args.device,
    ]
    if threads is not None:
        command += ["--threads", str(threads)]
    done = subprocess.run(command, capture_output=True, text=True)  # its results are not the table's
    if done.returncode != 0:
        sys.exit(f"{' '.join(command)} failed:\n{done.stderr[-2000:]}")
    with open(os.path.join(out, "metrics.json"), encoding="utf-8") as f:
        return json.load(f)["tokens_per_s"]


def idle_and_busy(args):
    """Part 2: the command on the machine as it is, then beside one busy helper, in alternating rounds."""
    rates = {"no helper": [], "one busy helper beside it": []}
    with tempfile.TemporaryDirectory() as folder:
        for round_ in range(args.command_rounds):
            rates["no helper"].append(run_command(args, folder, f"idle-{round_}"))
            with busy(1):
                rates["one busy helper beside it"].append(run_command(args, folder, f"busy-{round_}"))
    medians = {k: statistics.median(r) for k, r in rates.items()}
    print(
        f"\nminitorch-attn train, default model, its own thread choice, {args.command_steps} steps, median of "
        f"{args.command_rounds} alternating rounds"
    )
    print(f"{'machine':<28}{'tokens/s':>10}")
    for name, rate in medians.items():
        print(f"{name:<28}{rate:>10,.0f}")
    ratio = medians["one busy helper beside it"] / medians["no helper"]
    print(
        f"target: busy / idle >= {TARGET_BUSY}: {ratio:.2f}  {'met' if ratio >= TARGET_BUSY else 'NOT met'}"
        f"  (idle: if nothing else ran on the machine)"
    )


def the_command(args):
    """Part 3: ``minitorch-attn train`` with its own thread choice against each fixed --threads."""
    settings = [None] + sorted({1, available_cores()})
    rates = {n: [] for n in settings}
    with tempfile.TemporaryDirectory() as folder:
        for round_ in range(args.command_rounds):
            for n in settings:
                rates[n].append(run_command(args, folder, f"{'chosen' if n is None else n}-{round_}", n))
    medians = {n: statistics.median(r) for n, r in rates.items()}
    best = max(n for n in settings if n is not None and medians[n] == max(medians[m] for m in settings if m))
    print(
        f"\nminitorch-attn train, default model, {args.command_steps} steps, median of {args.command_rounds} "
        f"alternating rounds, {args.busy} busy helper process(es)"
    )
    print(f"{'threads':<28}{'tokens/s':>10}")
    for n in settings:
        print(f"{'chosen by timing' if n is None else f'--threads {n}':<28}{medians[n]:>10,.0f}")
    ratio = medians[None] / medians[best]
    verdict = f"{'met' if ratio >= TARGET_VS_BEST else 'NOT met'}" if args.busy == 1 else "(the target is for --busy 1)"
    print(f"target: chosen / best fixed (--threads {best}) >= {TARGET_VS_BEST} with --busy 1: {ratio:.2f}  {verdict}")


def main(argv=None):
    keep_freed_memory()  # as the minitorch-attn command does (minitorch_attn/speed/allocator.py)
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    model_flags(parser, seed_help="the weights (both sides) and the batches")
    parser.add_argument("--steps", type=positive_int, default=40, help="timed steps per row")
    parser.add_argument("--warmup", type=positive_int, default=3, help="untimed steps per row")
    parser.add_argument("--device", default="cpu", type=usable_device, help="device of minitorch-attn")
    parser.add_argument("--command-steps", type=positive_int, default=150, help="steps of each train command")
    parser.add_argument("--command-rounds", type=positive_int, default=2, help="alternating rounds of the commands")
    parser.add_argument("--skip-command", action="store_true", help="only part 1 (against PyTorch and the floor)")
    parser.add_argument(
        "--plain",
        action="store_true",
        help="our step with the plain formulas only (speed.use_fused off; the train command turns it on)",
    )
    busy_flag(parser)
    args = parser.parse_args(argv)
    with busy(args.busy):
        against_torch(args)
        if not args.skip_command:
            if args.busy == 0:
                idle_and_busy(args)
            the_command(args)


if __name__ == "__main__":
    main()
