# %% [markdown]
# # Section 13: self-, causal and cross-attention
#
# One attention module, three ways to call it. In self-attention the queries, keys and
# values all come from one sequence, and every token sees every other. Causal
# self-attention adds a mask so that token *i* sees only tokens *j ≤ i*: what a model that
# writes one token after another must obey. In cross-attention the queries come from one
# sequence (a decoder's) and the keys and values from another (an encoder's output).

# %%
"""Section 13: the causal mask, and self-, causal and cross-attention.

    python demos/06_masks.py [--device cpu|cuda] [--quick] [--seed N] [--out DIR]

Prints the 5 x 5 causal mask (True = query i may attend to key j, i.e. j <= i), then runs
one MultiHeadAttention(256, 8) three ways:

* self-attention: an encoder sequence (2, 15, 256) attends to itself -> weights (2, 8, 15, 15);
* causal self-attention: a decoder sequence (2, 8, 256) attends to itself and its past ->
  weights (2, 8, 8, 8), zero above the diagonal;
* cross-attention: the decoder's queries attend to the encoder's keys and values ->
  output (2, 8, 256), weights (2, 8, 8, 15).

Draws the mask and the three weight matrices of head 0. Source: arXiv:1706.03762, §3.2.3.
"""

import numpy

import minitorch_attn as mt
import minitorch_attn.functional as F
from minitorch_attn import nn
from minitorch_attn.app.demo_common import pyplot, randn, save, setup

args, out = setup(__doc__, "06_masks")
mask = F.causal_mask(5, device=args.device)
print("causal mask (5, 5), 1 = may attend (row = query, column = key):")
print(mask.numpy().astype(int))

# %% [markdown]
# ## One module, three calls
#
# The encoder's sequence has 15 tokens, the decoder's 8. Whatever the call, each row of
# weights sums to 1; the causal one is exactly 0 above the diagonal.

# %%
mha = nn.MultiHeadAttention(256, 8, dropout=0.0).to(args.device)
encoder = randn(args.rng, 2, 15, 256, device=args.device)  # (batch, source length, d_model)
decoder = randn(args.rng, 2, 8, 256, device=args.device)  # (batch, target length, d_model)
with mt.no_grad():
    runs = {
        "self-attention": mha(encoder, encoder, encoder),
        "causal self-attention": mha(decoder, decoder, decoder, is_causal=True),
        "cross-attention": mha(decoder, encoder, encoder),
    }
for name, (output, weights) in runs.items():
    w = weights.numpy()
    print(
        f"{name}: output {output.shape}, attention map {weights.shape}, "
        f"rows sum to 1: {bool(numpy.allclose(w.sum(-1), 1.0, atol=1e-5))}"
    )
causal = runs["causal self-attention"][1].numpy()
above = numpy.triu(numpy.ones(causal.shape[-2:], dtype=bool), k=1)
print(f"causal weights above the diagonal (the future): max {causal[..., above].max():.1f}")

# %% [markdown]
# ## The picture
#
# The mask, then head 0 of each call, each with its own colour scale (the causal map's first
# query can only attend to itself, with weight 1).

# %%
plt = pyplot()
fig, axes = plt.subplots(2, 2, figsize=(9, 7.2), layout="constrained")
axes[0, 0].imshow(mask.numpy(), cmap="gray_r", vmin=0, vmax=1)
axes[0, 0].set_title("causal mask (5 x 5): black = may attend", fontsize=10)
for ax, (name, (_, weights)) in zip(axes.flat[1:], runs.items()):
    image = ax.imshow(weights.numpy()[0, 0], cmap="viridis", vmin=0.0)
    ax.set_title(f"{name}, head 0 of {weights.shape}", fontsize=10)
    fig.colorbar(image, ax=ax, label="attention weight")
for ax in axes.flat:
    rows, columns = ax.get_images()[0].get_array().shape
    ax.set_xticks(range(0, columns, 1 if columns <= 5 else 2))
    ax.set_yticks(range(0, rows, 1 if rows <= 5 else 2))
    ax.set_xlabel("key position")
    ax.set_ylabel("query position")
save(fig, out, "three_attentions.png")
