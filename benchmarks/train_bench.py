"""Training throughput of the character-level GPT: minitorch-attn against PyTorch (eager).

    python benchmarks/train_bench.py                    # the training job's default model and batch
    python benchmarks/train_bench.py --steps 10 --d-model 64 --num-layers 2
    python benchmarks/train_bench.py --device cuda      # our CuPy backend (PyTorch stays on CPU)

Both sides train the same model (GPT-2 block: Pre-LN, fused QKV without bias, causal
attention, tanh-GELU MLP, tied embeddings) with AdamW on the same random batches, one
forward + backward + clip + step per step; both use ``--threads`` threads (NumPy's BLAS
and PyTorch's intra-op pool). Timing alternates between the two, a few steps
at a time, so that a busy machine slows both alike; the first steps of each are warm-up
and not timed. Without PyTorch only our figure is printed.

Prints a table of milliseconds per step and tokens per second, and the ratio (the
project's target is at least 0.5x PyTorch's eager CPU throughput).
"""

from __future__ import annotations

import argparse
import os
import sys
import time


def _threads_from_argv(argv):
    """``--threads N`` read before NumPy is imported: BLAS fixes its thread count at load time."""
    for i, arg in enumerate(argv):
        if arg == "--threads" and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith("--threads="):
            return arg.split("=", 1)[1]
    return str(len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count())


os.environ["OPENBLAS_NUM_THREADS"] = os.environ["OMP_NUM_THREADS"] = _threads_from_argv(sys.argv)

import numpy  # noqa: E402

import minitorch_attn as mt  # noqa: E402
import minitorch_attn.functional as F  # noqa: E402
from minitorch_attn import nn, optim  # noqa: E402
from minitorch_attn.argtypes import usable_device  # noqa: E402


def ours(args, batches):
    model = nn.GPT(args.vocab, d_model=args.d_model, num_heads=args.num_heads, num_layers=args.num_layers,
                   max_seq_len=args.block_size).to(args.device)
    opt = optim.AdamW(model.parameters(), lr=1e-3)
    batches = [(mt.tensor(x, device=args.device), mt.tensor(y, device=args.device)) for x, y in batches]

    def step(i):
        x, y = batches[i % len(batches)]
        logits = model(x)
        loss = F.cross_entropy(logits.reshape(-1, args.vocab), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        optim.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        loss.item()  # wait for the device

    return step, model.num_parameters()


def theirs(args, batches):
    import torch

    class Block(torch.nn.Module):
        def __init__(self, d, h):
            super().__init__()
            self.h = h
            self.norm1, self.norm2 = torch.nn.LayerNorm(d), torch.nn.LayerNorm(d)
            self.qkv = torch.nn.Linear(d, 3 * d, bias=False)
            self.proj = torch.nn.Linear(d, d, bias=False)
            self.ffn = torch.nn.Sequential(torch.nn.Linear(d, 4 * d), torch.nn.GELU(approximate="tanh"),
                                           torch.nn.Linear(4 * d, d))

        def forward(self, x):
            b, t, d = x.shape
            q, k, v = (z.view(b, t, self.h, d // self.h).transpose(1, 2)
                       for z in self.qkv(self.norm1(x)).split(d, dim=-1))
            a = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
            return x + self.ffn(self.norm2(x))

    class GPT(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = torch.nn.Embedding(args.vocab, args.d_model)
            self.pos = torch.nn.Embedding(args.block_size, args.d_model)
            self.blocks = torch.nn.Sequential(*[Block(args.d_model, args.num_heads) for _ in range(args.num_layers)])
            self.norm = torch.nn.LayerNorm(args.d_model)

        def forward(self, idx):
            x = self.tok(idx) + self.pos(torch.arange(idx.shape[1]))
            return self.norm(self.blocks(x)) @ self.tok.weight.T

    torch.manual_seed(0)
    model = GPT()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    batches = [(torch.from_numpy(x), torch.from_numpy(y)) for x, y in batches]

    def step(i):
        x, y = batches[i % len(batches)]
        loss = torch.nn.functional.cross_entropy(model(x).reshape(-1, args.vocab), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()

    return step, sum(p.numel() for p in model.parameters())


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--d-model", type=int, default=128)
    parser.add_argument("--num-layers", type=int, default=4)
    parser.add_argument("--num-heads", type=int, default=4)
    parser.add_argument("--block-size", type=int, default=64)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--vocab", type=int, default=103, help="the default corpus has 103 characters")
    parser.add_argument("--steps", type=int, default=20, help="timed steps per side")
    parser.add_argument("--warmup", type=int, default=2, help="untimed steps per side")
    parser.add_argument("--device", default="cpu", type=usable_device, help="device of minitorch-attn")
    parser.add_argument("--threads", type=int, default=int(_threads_from_argv([])),
                        help="threads of NumPy's BLAS and of PyTorch (default: the cores this process may use)")
    args = parser.parse_args(argv)

    rng = numpy.random.default_rng(0)
    batches = []
    for _ in range(4):
        w = rng.integers(0, args.vocab, size=(args.batch_size, args.block_size + 1))
        batches.append((w[:, :-1], w[:, 1:]))
    sides = {"minitorch-attn (" + args.device + ")": ours(args, batches)}
    try:
        import torch

        torch.set_num_threads(args.threads)
        sides[f"PyTorch {torch.__version__} eager CPU, {args.threads} threads"] = theirs(args, batches)
    except ImportError:
        print("PyTorch is not installed: only minitorch-attn is measured (pip install torch)")

    seconds = dict.fromkeys(sides, 0.0)
    for name, (step, _) in sides.items():
        for i in range(args.warmup):
            step(i)
    done = 0
    while done < args.steps:  # alternate in rounds of a few steps
        chunk = min(5, args.steps - done)
        for name, (step, _) in sides.items():
            start = time.perf_counter()
            for i in range(chunk):
                step(done + i)
            seconds[name] += time.perf_counter() - start
        done += chunk

    tokens = args.batch_size * args.block_size
    print(f"GPT: d_model {args.d_model}, {args.num_layers} layers, {args.num_heads} heads, context "
          f"{args.block_size}, batch {args.batch_size} ({tokens} tokens/step), {args.steps} timed steps")
    print(f"{'':<44}{'params':>10}{'ms/step':>10}{'tokens/s':>11}")
    rates = {}
    for name, (_, params) in sides.items():
        per_step = seconds[name] / args.steps
        rates[name] = tokens / per_step
        print(f"{name:<44}{params:>10,}{per_step * 1e3:>10.1f}{rates[name]:>11,.0f}")
    if len(rates) == 2:
        a, b = rates.values()
        print(f"minitorch-attn / PyTorch throughput: {a / b:.2f}x")


if __name__ == "__main__":
    main()
