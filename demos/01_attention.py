# %% [markdown]
# # Sections 2-4: attention as a soft lookup, queries, keys and values, and the formula
#
# A dictionary lookup returns the value whose key equals the query. Attention softens it:
# the query is compared with *every* key, the scores become weights by a softmax, and the
# answer is the weighted average of all the values. Sharper scores make it a hard lookup again.
#
# In a Transformer the queries, keys and values are not given: each token's vector is
# multiplied by three learned matrices. Then comes the formula of the paper,
# `softmax(Q Kᵀ / √d_k) V`, which we check against a computation in plain NumPy.

# %%
"""Sections 2-4: attention as a soft lookup, Q/K/V as projections, scaled dot-product attention.

    python demos/01_attention.py [--device cpu|cuda] [--quick] [--seed N] [--out DIR]

1. A soft lookup in a table of four keys and values: the weights for one query at growing
   sharpness, and the answer, a weighted average of the values.
2. Queries, keys and values as three projections of the same tokens (d_model 512 -> d_k 64):
   without them every token's largest score is with itself, with them the scores are no
   longer symmetric.
3. softmax(Q Kᵀ / sqrt(d_k)) V for Q, K, V of shape (batch 2, heads 1, seq_len 5, d_k 64):
   shapes, weights, row sums, and the largest difference from an independent float64
   NumPy computation. Draws the lookup weights and one head's attention weights.
Source: Vaswani et al., arXiv:1706.03762, §3.2.1, eq. 1.
"""

import math

import numpy

import minitorch_attn as mt
import minitorch_attn.functional as F
from minitorch_attn import nn
from minitorch_attn.app.demo_common import pyplot, randn, save, setup

args, out = setup(__doc__, "01_attention")


def show(array):
    """An array printed with 3 decimals (without changing NumPy's print options for anyone else)."""
    return numpy.array2string(array, precision=3, suppress_small=True, floatmode="fixed")


float32_eps = float(numpy.finfo(numpy.float32).eps)

# %% [markdown]
# ## Section 2: a soft lookup
#
# Four keys point to the four directions of a compass; each carries a value, a temperature
# measured there. The query asks for "north, a little east". Multiplying the query by a
# sharpness makes the scores larger and the softmax closer to picking one key.

# %%
directions = ["north", "east", "south", "west"]
keys = numpy.array([[0.0, 1.0], [1.0, 0.0], [0.0, -1.0], [-1.0, 0.0]])  # (4 keys, 2)
values = numpy.array([[4.0], [12.0], [20.0], [9.0]])  # (4 values, 1): °C
query = numpy.array([0.4, 1.0])  # north, a little east
print(f"section 2: a soft lookup; keys {directions} with values (°C) {show(values.ravel())}")
lookups = {}
for sharpness in (1, 4, 16):
    q = mt.tensor((sharpness * query)[None, :], device=args.device)  # (1 query, 2)
    k, v = mt.tensor(keys, device=args.device), mt.tensor(values, device=args.device)
    weights = F.softmax(q @ k.transpose(0, 1), dim=-1)  # (1, 4)
    answer = weights @ v  # (1, 1)
    lookups[sharpness] = w = weights.numpy()[0]
    by_hand = float(w @ values[:, 0])  # the weighted average, in NumPy
    print(
        f"  sharpness {sharpness:>2}: weights {show(w)}  answer {answer.item():6.2f} °C "
        f"(weighted average by hand {by_hand:6.2f})"
    )
print(f"  the sharper the query, the closer the answer to the best key's value ({values[0, 0]:g} °C, north)")

# %% [markdown]
# ## Section 3: queries, keys and values are projections
#
# Each token's vector `x` (width `d_model` = 512) is multiplied by three learned matrices,
# `W_Q`, `W_K`, `W_V`, into a query, a key and a value of width `d_k` = 64 (one head). Why
# not compare the tokens themselves? Then the score of token *i* with token *j* is the same
# as *j*'s with *i*, and each token matches itself best, since `x·x` is a sum of squares.

# %%
d_model, d_k, tokens = 512, 64, 5
x = randn(args.rng, tokens, d_model, device=args.device)  # (5, 512)
W_Q, W_K, W_V = (nn.Linear(d_model, d_k, bias=False).to(args.device) for _ in range(3))
Q, K, V = W_Q(x), W_K(x), W_V(x)  # (5, 64) each
print(f"\nsection 3: x {x.shape} -> Q {Q.shape}, K {K.shape}, V {V.shape} by three learned (512, 64) projections")
for name, scores in (
    ("x xᵀ (no projections)", (x @ x.transpose(0, 1)).numpy()),
    ("Q Kᵀ (projections)", (Q @ K.transpose(0, 1)).numpy()),
):
    asymmetry = numpy.abs(scores - scores.T).max() / numpy.abs(scores).max()
    self_best = numpy.mean(scores.argmax(axis=-1) == numpy.arange(tokens))
    print(
        f"  {name:<22} largest score with itself in {100 * self_best:3.0f}% of the rows; "
        f"max |S - Sᵀ| / max |S| = {asymmetry:.2f}"
    )
print("  the projections let a token look for something other than what it offers")

# %% [markdown]
# ## Section 4: scaled dot-product attention
#
# `softmax(Q Kᵀ / √d_k) V`, batched over (batch, heads). The check below does not reuse
# our functions: it recomputes everything in float64 NumPy, so it can catch a mistake in them.

# %%
batch, heads, seq_len = 2, 1, 5
q, k, v = (randn(args.rng, batch, heads, seq_len, d_k, device=args.device) for _ in range(3))
output = F.scaled_dot_product_attention(q, k, v)  # (2, 1, 5, 64)
weights = F.attention_weights(q, k)  # (2, 1, 5, 5), scale 1/sqrt(64)
print(f"\nsection 4: Q, K, V shape: {q.shape}")
print(f"output shape: {output.shape}")
print(f"attention weights shape: {weights.shape}")

qn, kn, vn = (t.numpy().astype(numpy.float64) for t in (q, k, v))
raw = qn @ kn.swapaxes(-1, -2)  # (2, 1, 5, 5)
scores = raw / math.sqrt(d_k)
reference = numpy.exp(scores - scores.max(axis=-1, keepdims=True))
reference /= reference.sum(axis=-1, keepdims=True)
w = weights.numpy()
print(f"score std before / after dividing by sqrt({d_k}) = {math.sqrt(d_k):g}: {raw.std():.2f} / {scores.std():.2f}")
print("attention weights of batch 0, head 0 (row = query, column = key):")
print(show(w[0, 0]))
row_sums = w.sum(axis=-1)
print(
    f"row sums: min {row_sums.min():.6f}, max {row_sums.max():.6f} "
    f"(every row sums to 1: {bool(numpy.allclose(row_sums, 1.0, atol=1e-6))})"
)
for name, ours, ref in (("weights", w, reference), ("output", output.numpy(), reference @ vn)):
    tolerance = 8 * float32_eps * max(1.0, numpy.abs(ref).max())
    difference = numpy.abs(ours - ref).max()
    print(
        f"max |{name} - float64 NumPy|: {difference:.2e} (float32 rounding allows {tolerance:.1e}: "
        f"{'agrees' if difference <= tolerance else 'DISAGREES'})"
    )
spread = (scores.max(axis=-1) - scores.min(axis=-1)).mean()
print(
    f"tutorial: for random Q, K of this shape it prints weights between 0.156 and 0.231, which needs the scores "
    f"of a row within log(0.231 / 0.156) = {math.log(0.231 / 0.156):.2f} of each other; measured here: weights "
    f"{w.min():.3f} to {w.max():.3f}, the scaled scores of a row spanning {spread:.2f} on average"
)

# %% [markdown]
# ## The picture
#
# Left: the lookup's weights at each sharpness. Right: one head's attention weights; each
# row is a query and sums to 1.

# %%
plt = pyplot()
fig, axes = plt.subplots(1, 2, figsize=(10, 4), layout="constrained", gridspec_kw={"width_ratios": [1.1, 1]})
bar_width = 0.25
for i, (sharpness, lw) in enumerate(lookups.items()):
    axes[0].bar(numpy.arange(4) + (i - 1) * bar_width, lw, bar_width, label=f"sharpness {sharpness}")
axes[0].set_xticks(range(4), [f"{d}\n{t:g} °C" for d, t in zip(directions, values[:, 0])])
axes[0].set_xlabel("key (and its value)")
axes[0].set_ylabel("attention weight")
axes[0].set_ylim(0, 1.05)
axes[0].set_title("Section 2: query 'north, a little east'")
axes[0].legend(fontsize=8)
image = axes[1].imshow(w[0, 0], cmap="viridis", vmin=0.0)
for i in range(seq_len):
    for j in range(seq_len):
        axes[1].text(
            j,
            i,
            f"{w[0, 0, i, j]:.2f}",
            ha="center",
            va="center",
            fontsize=8,
            color="white" if w[0, 0, i, j] < 0.5 * w[0, 0].max() else "black",
        )
axes[1].set_xticks(range(seq_len))
axes[1].set_yticks(range(seq_len))
axes[1].set_xlabel("key position")
axes[1].set_ylabel("query position")
axes[1].set_title(f"Section 4: softmax(Q Kᵀ / √{d_k}), batch 0")
fig.colorbar(image, ax=axes[1], label="attention weight")
save(fig, out, "attention_weights.png")
