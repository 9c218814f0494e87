"""Section 14: flash attention against standard attention, like for like.

    python demos/07_flash.py [--device cpu|cuda] [--quick] [--seed N] [--out DIR] [--lengths 256,512,...]

One multi-head attention layer (d_model 512, 8 heads, one fused QKV projection; --quick: 128, 4) with the
same weights in two versions: the standard path (scores, softmax and weights as full
(seq_len x seq_len) matrices, kept for the backward) and flash attention (blockwise, online
softmax, never forms them; arXiv:2307.08691). The tutorial's benchmark compared a causal
model with a non-causal one; here both are causal, then both are not. For several sequence
lengths it measures the time of a forward + backward pass and its peak memory (allocations
traced by tracemalloc on NumPy, the memory pool on CuPy), checks that the outputs agree,
and plots peak memory and time against sequence length.
"""

import sys

import numpy

from minitorch_attn import nn
from minitorch_attn.demo_common import pyplot, randn, save, setup
from minitorch_attn.measure import alternating_medians, peak_memory


def add_flags(parser):
    parser.add_argument("--lengths", default=None,
                        help="comma-separated sequence lengths (default 256,512,1024,2048; --quick 32,64)")


def forward_backward(model, x, upstream, is_causal):
    """A function running one forward and backward pass of ``model`` on ``x`` (self-attention)."""
    def step():
        x.grad = None
        model.zero_grad()
        output, _ = model(x, x, x, is_causal=is_causal, need_weights=False)
        output.backward(upstream)
        return output

    return step


def main(argv=None):
    args, out = setup(__doc__, "07_flash", argv, extra=add_flags)
    lengths = [int(n) for n in (args.lengths or ("32,64" if args.quick else "256,512,1024,2048")).split(",")]
    repeats = 1 if args.quick else 5
    d_model, num_heads = (128, 4) if args.quick else (512, 8)
    standard = nn.MultiHeadAttention(d_model, num_heads, dropout=0.0, fused_qkv=True, attn_impl="naive")
    flash = nn.MultiHeadAttention(d_model, num_heads, dropout=0.0, fused_qkv=True, attn_impl="flash")
    flash.load_state_dict(standard.state_dict())                  # the same weights
    models = {"standard": standard.to(args.device), "flash": flash.to(args.device)}
    print(f"MultiHeadAttention(d_model={d_model}, num_heads={num_heads}, fused_qkv=True), batch 1, "
          f"float32, {args.device}; wall time of one forward + backward, median of {repeats} alternating "
          f"run(s) after a warm-up, each at its fastest BLAS thread count; peak memory of one more run")

    results = {}  # (causal, impl) -> [(seq_len, seconds, peak bytes)]
    for is_causal in (True, False):
        worst = 0.0
        print(f"\n{'causal' if is_causal else 'not causal'}:")
        print(f"{'seq_len':>8} | {'standard ms':>12} {'peak MiB':>9} | {'flash ms':>9} {'peak MiB':>9} | "
              f"{'time ratio':>10} {'memory ratio':>12}")
        for seq_len in lengths:
            x = randn(args.rng, 1, seq_len, d_model, device=args.device, requires_grad=True)
            upstream = randn(args.rng, 1, seq_len, d_model, device=args.device)
            steps = {name: forward_backward(model, x, upstream, is_causal) for name, model in models.items()}
            outputs = {name: step().numpy() for name, step in steps.items()}   # also the warm-up runs
            # the two alternate, run by run, so that a busy machine slows both alike
            times, _ = alternating_medians(steps, repeats, args.device, warmup=0)
            row = {name: (times[name], peak_memory(step, args.device)) for name, step in steps.items()}
            for name in steps:
                results.setdefault((is_causal, name), []).append((seq_len, *row[name]))
            (ts, ms), (tf, mf) = row["standard"], row["flash"]
            print(f"{seq_len:>8} | {ts * 1e3:12.1f} {ms / 2**20:9.1f} | {tf * 1e3:9.1f} {mf / 2**20:9.1f} | "
                  f"{tf / ts:10.2f} {mf / ms:12.2f}")
            worst = max(worst, float(numpy.abs(outputs["flash"] - outputs["standard"]).max()))
        print(f"max |flash - standard| of the outputs over all lengths: {worst:.2e} (float32)")

    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for (is_causal, name), rows in results.items():
        n, seconds, peak = zip(*rows)
        style = dict(marker="o", linestyle="-" if name == "flash" else "--",
                     color="tab:blue" if name == "flash" else "tab:red", alpha=1.0 if is_causal else 0.5)
        label = f"{name}, {'causal' if is_causal else 'not causal'}"
        axes[0].plot(n, numpy.array(peak) / 2**20, label=label, **style)
        axes[1].plot(n, numpy.array(seconds) * 1e3, label=label, **style)
    axes[0].set_ylabel("peak memory of forward + backward (MiB)")
    axes[1].set_ylabel("time of forward + backward (ms)")
    for ax in axes:
        ax.set_xticks(lengths, [str(n) for n in lengths])
        ax.set_ylim(bottom=0)
        ax.set_xlabel("sequence length")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f"Flash vs standard multi-head attention (d_model {d_model}, {num_heads} heads, {args.device})")
    fig.tight_layout()
    save(fig, out, "flash_memory.png")


if __name__ == "__main__":
    sys.exit(main())
