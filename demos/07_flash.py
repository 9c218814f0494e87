# %% [markdown]
# # Section 14: flash attention against standard attention, like for like
#
# Standard attention forms the `T x T` matrix of scores of every head, its softmax, and keeps
# the weights for the backward pass: memory that grows with the square of the sequence length.
# Flash attention computes the same output block by block with an *online* softmax (a running
# maximum and sum), never holding more than one block of scores, and recomputes those blocks
# in the backward pass.
#
# The tutorial's benchmark timed a causal flash model against a non-causal standard one. Here
# both run the same layer with the same weights, causal against causal and then non-causal
# against non-causal, alternating after a warm-up; and we check the tutorial's numbers.

# %%
"""Section 14: flash attention against standard attention, like for like.

    python demos/07_flash.py [--device cpu|cuda] [--quick] [--seed N] [--out DIR] [--lengths 256,512,...]

One multi-head attention layer (d_model 512, 8 heads, one fused QKV projection; --quick:
128, 4) with the same weights in two versions: the standard path (scores, softmax and weights
as full (seq_len x seq_len) matrices, kept for the backward) and flash attention (blockwise,
online softmax, never forms them; arXiv:2307.08691). Both causal, then both not. For several
sequence lengths it measures the time of a forward + backward pass (alternating, warmed-up
runs) and its peak memory (allocations traced by tracemalloc on NumPy, the memory pool on
CuPy), checks that the outputs agree, checks the tutorial's figures, and plots peak memory
and time against sequence length.
"""

import numpy

from minitorch_attn import nn
from minitorch_attn.app.demo_common import pyplot, quick_caveat, randn, save, setup, timed_pair
from minitorch_attn.app.measure import peak_memory
from minitorch_attn.argtypes import positive_int


def add_flags(parser):
    parser.add_argument(
        "--lengths",
        default=None,
        type=lambda text: [positive_int(n) for n in text.split(",")],
        help="comma-separated sequence lengths (default 256,512,1024,2048; --quick 32,64)",
    )


args, out = setup(__doc__, "07_flash", extra=add_flags)

# %% [markdown]
# ## The tutorial's numbers
#
# How many numbers are the attention weights of one sequence of 4096 tokens in 8 heads?

# %%
heads, tokens = 8, 4096
per_head = tokens * tokens
print(
    f"tutorial: '4096 x 4096 x 8 ... over 1 billion numbers'. Counted: {per_head * heads:,} "
    f"({per_head * heads / 1e9:.3f} billion; {per_head * heads * 4 / 2**20:,.0f} MiB in float32), per sequence"
)
print(f"tutorial: '4096² = 16M per head': {per_head:,} (right)")
print(
    "tutorial: flash needs '~4096 per head': it keeps the output (4096 x d_k) and one log-sum-exp per "
    "query (4096), so it grows linearly with the length, as measured below"
)

# %% [markdown]
# ## The measurement
#
# For each length, one forward + backward pass of each version: timed alternately after a
# warm-up, then its peak memory.


# %%
def forward_backward(model, x, upstream, is_causal):
    """A function running one forward and backward pass of ``model`` on ``x`` (self-attention)."""

    def step():
        x.grad = None
        model.zero_grad()
        output, _ = model(x, x, x, is_causal=is_causal, need_weights=False)
        output.backward(upstream)
        return output

    return step


lengths = args.lengths or ([32, 64] if args.quick else [256, 512, 1024, 2048])
d_model, num_heads = (128, 4) if args.quick else (512, 8)
standard = nn.MultiHeadAttention(d_model, num_heads, dropout=0.0, fused_qkv=True, attn_impl="naive")
flash = nn.MultiHeadAttention(d_model, num_heads, dropout=0.0, fused_qkv=True, attn_impl="flash")
flash.load_state_dict(standard.state_dict())  # the same weights
standard, flash = standard.to(args.device), flash.to(args.device)
print(
    f"\nMultiHeadAttention(d_model={d_model}, num_heads={num_heads}, fused_qkv=True), batch 1, float32, "
    f"{args.device}; forward + backward, alternating rounds after a warm-up"
)

results = {}  # (causal, "standard" or "flash") -> [(seq_len, seconds, peak bytes)]
more_memory = []
for is_causal in (True, False):
    worst = 0.0
    print(f"\n{'causal' if is_causal else 'not causal'}:")
    print(
        f"{'seq_len':>8} | {'standard':>10} {'peak MiB':>9} | {'flash':>10} {'peak MiB':>9} | "
        f"{'time ratio flash / standard':>27} {'memory ratio':>12}"
    )
    for seq_len in lengths:
        x = randn(args.rng, 1, seq_len, d_model, device=args.device, requires_grad=True)
        upstream = randn(args.rng, 1, seq_len, d_model, device=args.device)
        steps = {
            "standard": forward_backward(standard, x, upstream, is_causal),
            "flash": forward_backward(flash, x, upstream, is_causal),
        }
        worst = max(worst, float(numpy.abs(steps["flash"]().numpy() - steps["standard"]().numpy()).max()))
        timing = timed_pair(args, steps["standard"], steps["flash"])
        memory = {name: peak_memory(step, args.device) for name, step in steps.items()}
        results.setdefault((is_causal, "standard"), []).append((seq_len, timing.first, memory["standard"]))
        results.setdefault((is_causal, "flash"), []).append((seq_len, timing.second, memory["flash"]))
        if memory["flash"] >= memory["standard"]:
            more_memory.append(seq_len)
        print(
            f"{seq_len:>8} | {timing.first * 1e3:8.1f} ms {memory['standard'] / 2**20:9.1f} | "
            f"{timing.second * 1e3:8.1f} ms {memory['flash'] / 2**20:9.1f} | "
            f"{timing.ratio:27.2f} {memory['flash'] / memory['standard']:12.2f}"
            + (f"   noisy: ratio of the medians {timing.second / timing.first:.2f}" if timing.noisy else "")
        )
    print(f"max |flash - standard| of the outputs over all lengths: {worst:.2e} (float32)")
    for name in ("standard", "flash"):
        rows = results[(is_causal, name)]
        growth = [b[2] / a[2] for a, b in zip(rows, rows[1:])]
        print(
            f"  {name:<8} peak memory grows {', '.join(f'{g:.1f}x' for g in growth)} from one length to the next "
            f"(lengths x {lengths[1] / lengths[0]:g}: linear would be {lengths[1] / lengths[0]:g}x, "
            f"quadratic {(lengths[1] / lengths[0]) ** 2:g}x; the layer's weights and their gradients "
            "add a fixed part to both)"
        )
if more_memory:
    print(
        f"at {sorted(set(more_memory))} tokens flash used as much memory as standard or more: its blocks and "
        "saved statistics cost more than the small T x T matrices they replace"
    )
quick_caveat(args, "flash attention's memory advantage, which appears at a few hundred tokens")
print(
    f"tutorial: flash is '2-4x faster ... 5-20x less memory' on an A100 GPU with fused CUDA kernels; the ratios "
    f"above are this engine's blockwise {'NumPy' if args.device == 'cpu' else 'CuPy'} code on {args.device}"
)

# %% [markdown]
# ## The picture
#
# Peak memory and time against sequence length. Causal and non-causal runs of one version
# often coincide in memory: the hollow markers are the non-causal ones.

# %%
plt = pyplot()
fig, axes = plt.subplots(1, 2, figsize=(10, 4.4), layout="constrained")
for (is_causal, name), rows in results.items():
    n, seconds, peak = (numpy.array(column) for column in zip(*rows))
    style = dict(
        color="tab:blue" if name == "flash" else "tab:red",
        linestyle="-" if is_causal else "--",
        marker="o" if is_causal else "s",
        markersize=5 if is_causal else 9,
        markerfacecolor=None if is_causal else "none",
    )
    label = f"{name}, {'causal' if is_causal else 'not causal'}"
    axes[0].plot(n, peak / 2**20, label=label, **style)
    axes[1].plot(n, seconds * 1e3, label=label, **style)
axes[0].set_ylabel("peak memory of forward + backward (MiB)")
axes[0].set_title("Peak memory")
axes[1].set_ylabel("time of forward + backward (ms, median)")
axes[1].set_title("Time")
for ax in axes:
    ax.set_xticks(lengths, [str(n) for n in lengths])
    ax.set_ylim(bottom=0)
    ax.set_xlabel("sequence length")
    ax.grid(alpha=0.3)
handles, labels = axes[0].get_legend_handles_labels()
fig.legend(handles, labels, loc="outside lower center", ncols=4, fontsize=8)
fig.suptitle(f"Flash vs standard multi-head attention (d_model {d_model}, {num_heads} heads, {args.device})")
save(fig, out, "flash_memory.png")
