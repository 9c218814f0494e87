# %% [markdown]
# # Sections 5-7: multi-head attention, its shapes and its cost
#
# Multi-head attention runs `h` attentions side by side, each on its own slice of width
# `d_k = d_model / h` of the projected queries, keys and values, and mixes their outputs with
# one more projection `W_O`. We follow a batch through it shape by shape (section 6), build it
# as the tutorial's module (section 7: parameters, and what dropout does to the weights it
# returns), and measure the tutorial's claim that eight heads cost the same as one (section 5).

# %%
"""Sections 5-7: multi-head attention step by step, as a module, and what its heads cost.

    python demos/02_multihead.py [--device cpu|cuda] [--quick] [--seed N] [--out DIR]

Input (batch 4, seq_len 10, d_model 512), 8 heads of d_k = 64:

* section 6: the shape after each step (project, split, attend, merge, W_O), recomputed by
  hand from the module's weights and compared with its output;
* section 7: the parameter count of W_Q, W_K, W_V, W_O without bias (4 x 512 x 512 =
  1,048,576), and the row sums of the weights with the tutorial's dropout 0.1 in training mode;
* section 5: 1 head against 8 heads of the same d_model: multiply-adds, softmax entries and
  measured forward time (alternating, warmed-up runs) at growing sequence lengths.

Draws the eight heads' weights and the cost of 1 against 8 heads. Source: arXiv:1706.03762, §3.2.2.
"""

import numpy

import minitorch_attn as mt
import minitorch_attn.functional as F
from minitorch_attn import nn
from minitorch_attn.app.demo_common import log_ticks, pyplot, randn, save, setup, timed_pair

args, out = setup(__doc__, "02_multihead")
batch, seq_len, d_model, num_heads = 4, 10, 512, 8
mha = nn.MultiHeadAttention(d_model, num_heads, dropout=0.1).to(args.device)  # the tutorial's module
x = randn(args.rng, batch, seq_len, d_model, device=args.device)

# %% [markdown]
# ## Section 6: shape by shape
#
# The same computation as the module, written out with its own weights. The split is a
# reshape that cuts `d_model` into `h` slices of `d_k`, then a transpose that puts the heads
# beside the batch, so one batched matrix product serves every head at once.

# %%
d_k = d_model // num_heads
mha.eval()  # no dropout: comparable outputs
with mt.no_grad():
    steps = [("input x", x)]
    q, k, v = mha.W_q(x), mha.W_k(x), mha.W_v(x)  # 1. project
    steps.append(("1. project: Q = x W_Qᵀ (also K, V)", q))
    q_split = q.reshape(batch, seq_len, num_heads, d_k)  # 2. split d_model into h x d_k
    steps.append(("2. split: reshape to (batch, seq_len, h, d_k)", q_split))
    q, k, v = (t.reshape(batch, seq_len, num_heads, d_k).transpose(1, 2) for t in (q, k, v))
    steps.append(("   then transpose heads beside the batch", q))
    scores = q @ k.transpose(-2, -1) / d_k**0.5  # 3. attend, every head at once
    steps.append(("3. scores Q Kᵀ / √d_k, per head", scores))
    weights = F.softmax(scores, dim=-1)
    steps.append(("   weights = softmax(scores)", weights))
    context = weights @ v
    steps.append(("   context = weights V", context))
    merged = context.transpose(1, 2)  # 4. merge the heads
    steps.append(("4. merge: transpose back", merged))
    merged = merged.reshape(batch, seq_len, d_model)
    steps.append(("   reshape to (batch, seq_len, h d_k)", merged))
    by_hand = mha.W_o(merged)  # 5. mix the heads
    steps.append(("5. output = merged W_Oᵀ", by_hand))
    module_output, module_weights = mha(x, x, x)
print("section 6, shape after each step:")
for name, t in steps:
    print(f"  {name:<46} {t.shape}")
# The module's softmax divides each row's exponentials by their sum, F.softmax subtracts the
# row's log-sum-exp before one exponential: the same numbers up to a rounding or two of
# float32 (machine epsilon 1.2e-7, times the size of the values compared).
output_gap = numpy.abs(by_hand.numpy() - module_output.numpy()).max()
weight_gap = numpy.abs(weights.numpy() - module_weights.numpy()).max()
eps = numpy.finfo(numpy.float32).eps
within = (output_gap <= 8 * eps * numpy.abs(by_hand.numpy()).max()) and (weight_gap <= 8 * eps)
print(
    f"max |step by step - MultiHeadAttention(x, x, x)|: {output_gap:.2e} (output), {weight_gap:.2e} (weights); "
    f"within float32 rounding: {within}"
)

# %% [markdown]
# ## Section 7: the module
#
# Four projections of `512 x 512` without bias. The tutorial builds its module with dropout
# 0.1 and prints that the weights it returns sum to 1; but a module is in training mode when
# built, and its weights pass through dropout before it returns them, which zeroes some and
# scales the rest by `1 / 0.9`. Ours returns the weights before dropout (dropout still acts
# on the output).

# %%
mha.train()
with mt.no_grad():
    output, weights = mha(x, x, x)  # self-attention, training mode
print(f"\nsection 7: input shape: {x.shape}")
print(f"output shape: {output.shape}")
print(f"attention weights shape: {weights.shape}  (batch, heads, queries, keys); d_k = {mha.d_k}")
row_sums = weights.numpy().sum(axis=-1)
print(
    f"row sums: min {row_sums.min():.6f}, max {row_sums.max():.6f} "
    f"(every row sums to 1: {bool(numpy.allclose(row_sums, 1.0, atol=1e-5))})"
)
dropped = F.dropout(weights, 0.1, training=True).numpy().sum(axis=-1)
print(
    f"tutorial: 'Weights sum to 1.0: True' for its module in training mode, which returns the weights after "
    f"dropout 0.1; measured after dropout: rows sum to {dropped.min():.3f} .. {dropped.max():.3f}, "
    f"{numpy.mean(numpy.abs(dropped - 1) < 1e-5):.0%} of the {dropped.size} rows to 1"
)
if not args.quick:
    try:
        import torch
    except ImportError:
        torch = None
        print("PyTorch is not installed: skipped what torch.nn.MultiheadAttention returns")
    if torch is not None:
        torch.manual_seed(args.seed)  # its weights and dropout masks: the same seed, the same line
        reference = torch.nn.MultiheadAttention(d_model, num_heads, dropout=0.1, batch_first=True)
        tx = torch.tensor(x.numpy())
        _, tw = reference(tx, tx, tx, need_weights=True, average_attn_weights=False)
        ts = tw.detach().sum(dim=-1)
        print(
            f"torch.nn.MultiheadAttention(dropout=0.1) in training mode returns the weights after dropout: "
            f"rows sum to {ts.min().item():.3f} .. {ts.max().item():.3f}"
        )
for name, p in mha.named_parameters():
    print(f"  {name:<10} {str(p.shape):<12} {p.numel():>9,}")
print(f"parameters: {mha.num_parameters():,} (4 x {d_model} x {d_model} = {4 * d_model * d_model:,}, no bias)")

# %% [markdown]
# ## Section 5: do eight heads cost the same as one?
#
# With `d_k = d_model / h` the matrix products do the same number of multiply-adds for any
# `h`: the scores are `h` matrices of `T x T` from vectors of width `d_model / h`. But there
# are `h` times as many scores to exponentiate, normalize and keep, which matters once the
# sequence is long. We time one forward pass of each, alternating them.

# %%
lengths = [10, 64] if args.quick else [10, 256, 1024]
one_head = nn.MultiHeadAttention(d_model, 1, dropout=0.0).to(args.device)
eight_heads = nn.MultiHeadAttention(d_model, num_heads, dropout=0.0).to(args.device)
print(
    f"\nsection 5: 1 head (d_k = {d_model}) against {num_heads} heads (d_k = {d_k}), batch {batch}, "
    f"forward without weights; parameters {one_head.num_parameters():,} and {eight_heads.num_parameters():,}"
)
cost = []
for n in lengths:
    xs = randn(args.rng, batch, n, d_model, device=args.device)
    multiply_adds = batch * (4 * n * d_model * d_model + 2 * n * n * d_model)  # the same for any h
    with mt.no_grad():
        comparison = timed_pair(  # both lambdas run in this iteration, with its xs
            args,
            lambda: one_head(xs, xs, xs, need_weights=False),  # noqa: B023
            lambda: eight_heads(xs, xs, xs, need_weights=False),  # noqa: B023
        )
    cost.append((n, comparison.first, comparison.second, comparison.ratio))
    print(
        f"  T = {n:>4}: multiply-adds {multiply_adds:,} for both; softmax entries {batch * n * n:,} "
        f"against {batch * num_heads * n * n:,} ({num_heads}x)"
    )
    print(f"           {comparison.describe('1 head', f'{num_heads} heads')}")
print(
    f"tutorial: '{num_heads} heads ... same compute cost'. Measured: the same multiply-adds, {num_heads}x the "
    f"softmax entries; {num_heads} heads take {cost[0][3]:.2f}x the time of one at T = {lengths[0]} and "
    f"{cost[-1][3]:.2f}x at T = {lengths[-1]}"
)

# %% [markdown]
# ## The pictures
#
# The eight heads of the module (random weights, not trained: what trained heads look like
# is in the heatmaps demo), and the time of 1 against 8 heads.

# %%
plt = pyplot()
fig, axes = plt.subplots(2, 4, figsize=(10, 5.4), layout="constrained", sharex=True, sharey=True)
w = weights.numpy()[0]
for h, ax in enumerate(axes.flat):
    image = ax.imshow(w[h], cmap="viridis", vmin=0.0, vmax=w.max())
    ax.set_title(f"head {h}", fontsize=9)
    ax.set_xticks(range(0, seq_len, 3))
    ax.set_yticks(range(0, seq_len, 3))
for ax in axes[-1]:
    ax.set_xlabel("key position")
for ax in axes[:, 0]:
    ax.set_ylabel("query position")
fig.colorbar(image, ax=axes, label="attention weight", shrink=0.9)
fig.suptitle("Eight heads, one input (batch 0): each head weighs the keys differently (random weights)")
save(fig, out, "heads.png")

fig, ax = plt.subplots(figsize=(6, 3.8), layout="constrained")
n, t_one, t_eight, _ = (numpy.array(column) for column in zip(*cost))
ax.plot(n, t_one * 1e3, "o-", label=f"1 head (d_k = {d_model})")
ax.plot(n, t_eight * 1e3, "s-", label=f"{num_heads} heads (d_k = {d_k})")
ax.set_xscale("log")
ax.set_yscale("log")
log_ticks(ax.xaxis, at=n)
log_ticks(ax.yaxis)
ax.set_xlabel("sequence length T")
ax.set_ylabel("forward time (ms, median)")
ax.set_title(f"Same multiply-adds, {num_heads}x the softmax entries (batch {batch}, {args.device})")
ax.grid(alpha=0.3)
ax.legend(fontsize=8)
save(fig, out, "heads_cost.png")
