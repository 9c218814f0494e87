# %% [markdown]
# # Section 12: the Transformer encoder, block by block
#
# An encoder block puts the pieces together: a LayerNorm, multi-head self-attention and a
# residual addition, then a LayerNorm, a feed-forward network and another residual addition
# (Pre-LN: the norms come first in each branch). The encoder embeds the tokens and their
# positions, runs a stack of such blocks and normalizes once more at the end.
#
# We build the tutorial's encoder, run it on a batch of token ids, and count its parameters
# twice: from the model's own tensors and from a formula, module by module. Neither gives the
# count the tutorial prints.

# %%
"""Section 12: the Transformer encoder, and its true parameter count.

    python demos/05_encoder.py [--device cpu|cuda] [--quick] [--seed N] [--out DIR]

The tutorial's TransformerEncoder(vocab_size=30000, d_model=256, num_heads=8, d_ff=1024,
num_layers=6, max_seq_len=512) on token ids of shape (4, 20): prints the output shape and
the parameter count, module by module, as counted from the model's own parameters and as a
formula from the configuration. The tutorial prints 6,832,384; the model it defines has
more (the token embedding alone is 30000 x 256 = 7,680,000). Draws the count per module.
"""

import minitorch_attn as mt
from minitorch_attn import nn
from minitorch_attn.app.demo_common import pyplot, save, setup

args, out = setup(__doc__, "05_encoder")
TUTORIAL_COUNT = 6_832_384
config = dict(vocab_size=30000, d_model=256, num_heads=8, d_ff=1024, num_layers=6, max_seq_len=512)
model = nn.TransformerEncoder(**config, dropout=0.1).to(args.device)
model.eval()
idx = mt.tensor(args.rng.integers(0, config["vocab_size"], size=(4, 20)), device=args.device)
with mt.no_grad():
    hidden = model(idx)
print(f"TransformerEncoder({', '.join(f'{k}={v}' for k, v in config.items())})")
print(f"token ids shape: {idx.shape}")
print(f"output shape: {hidden.shape}")
print(
    f"each of the {len(model.blocks)} blocks, Pre-LN (norm_first={model.blocks[0].norm_first}): "
    "x = x + attention(norm1(x)), then x = x + ffn(norm2(x)), ffn = Linear, GELU, Linear"
)

# %% [markdown]
# ## Counting the parameters
#
# From the model: the number of elements of every parameter tensor, part by part. From the
# formula: embeddings `V d + L d`; per block, attention `4 d²` (no biases), the feed-forward
# network `d d_ff + d_ff + d_ff d + d` and two LayerNorms `2 · 2d`; a final LayerNorm `2d`.


# %%
def breakdown(model):
    """``[(name, count)]`` for every part of the model, each block's attention, feed-forward
    network and norms on their own lines; the counts add up to ``model.num_parameters()``."""
    rows = [
        ("token_embedding", model.token_embedding.num_parameters()),
        ("position_embedding", model.position_embedding.num_parameters()),
    ]
    for i, block in enumerate(model.blocks):
        rows += [
            (f"blocks.{i}.{part}", sub.num_parameters()) for part, sub in block._modules.items() if sub.num_parameters()
        ]
    rows.append(("norm", model.norm.num_parameters()))
    return rows


V, d, d_ff, L, layers = (config[k] for k in ("vocab_size", "d_model", "d_ff", "max_seq_len", "num_layers"))
formula = V * d + L * d + layers * (4 * d * d + (d * d_ff + d_ff + d_ff * d + d) + 2 * 2 * d) + 2 * d
rows = breakdown(model)
total = model.num_parameters()
print("parameters per module (every block is the same; block 0 shown):")
for name, count in rows:
    if not name.startswith("blocks.") or name.startswith("blocks.0."):
        print(f"  {name:<20} {count:>11,}")
block = model.blocks[0].num_parameters()
print(f"  {'one block':<20} {block:>11,}  x {len(model.blocks)} blocks = {block * len(model.blocks):,}")
print(f"sum of the rows: {sum(count for _, count in rows):,}")
print(f"by the formula: {formula:,}")
print(f"total parameters: {total:,}")
print(
    f"the tutorial prints {TUTORIAL_COUNT:,}: short by {total - TUTORIAL_COUNT:,} for the model it defines "
    f"(less than its token embedding alone, {V * d:,})"
)

# %% [markdown]
# ## The picture
#
# Where the parameters are: the token embedding holds most of them.

# %%
plt = pyplot()
groups = {}
for name, count in rows:  # "blocks.3.attn" -> "blocks.*.attn": each kind summed over the blocks
    kind = "blocks.*." + name.split(".")[2] if name.startswith("blocks.") else name
    groups[kind] = groups.get(kind, 0) + count
fig, ax = plt.subplots(figsize=(7.5, 3.4), layout="constrained")
ax.barh(list(groups), [v / 1e6 for v in groups.values()], color="tab:blue")
for i, v in enumerate(groups.values()):
    ax.text(v / 1e6, i, f" {v:,}", va="center", fontsize=8)
ax.invert_yaxis()
ax.set_xlabel("millions of parameters (blocks.* = summed over the 6 blocks)")
ax.set_ylabel("module")
ax.set_title(f"TransformerEncoder: {total:,} parameters (the tutorial prints {TUTORIAL_COUNT:,})", fontsize=10)
ax.set_xlim(0, max(groups.values()) / 1e6 * 1.3)
save(fig, out, "encoder_parameters.png")
