# %% [markdown]
# # Section 15: reading attention heatmaps
#
# An attention heatmap has one row per query (the token that is looking) and one column per
# key (the token looked at); each row is a softmax and sums to 1. First we read the
# tutorial's own example, a matrix of scores typed by hand, and check what it says each word
# attends to. Then the real thing: every head of a small GPT trained on text by the training
# job, reading "The trophy didn't fit in the bag because it was too big."

# %%
"""Section 15: attention heatmaps, the tutorial's example checked and the heads of a trained model.

    python demos/08_heatmaps.py [--device cpu|cuda] [--quick] [--seed N] [--out DIR]
                                [--checkpoint runs/<folder>/checkpoint.npz]

1. The tutorial's example: its hand-typed 5 x 5 scores for "The cat sat on mat", through a
   softmax; what each word attends to most, against what the tutorial says.
2. Every head of every layer of the character-level GPT trained by the main job
   (``minitorch-attn train``), reading "The trophy didn't fit in the bag because it was too
   big.": what the "i" of "it" attends to in each head, an overview of all heads and one head
   in detail. Give a checkpoint with --checkpoint; without one, a small model is trained
   first by the same training job for two minutes (--quick: a tiny model for a few seconds,
   whose heads have learned little).
"""

import argparse
import os

import numpy

import minitorch_attn as mt
import minitorch_attn.functional as F
from minitorch_attn.app.cli import main as cli_main
from minitorch_attn.app.demo_common import pyplot, quick_caveat, quick_training_flags, save, setup
from minitorch_attn.app.sampling import load_model
from minitorch_attn.app.train_pictures import HEATMAP_SENTENCE


def existing_file(text):
    """An argparse ``type=``: a path to a file that exists, checked before the demo draws anything."""
    if not os.path.isfile(text):
        raise argparse.ArgumentTypeError(f"no checkpoint at {text!r}")
    return text


def add_flags(parser):
    parser.add_argument(
        "--checkpoint",
        metavar="PATH",
        type=existing_file,
        help="checkpoint.npz of minitorch-attn train (default: train a small model first)",
    )


args, out = setup(__doc__, "08_heatmaps", extra=add_flags)
plt = pyplot()

# %% [markdown]
# ## The tutorial's example
#
# The tutorial types a matrix of scores, turns it into weights with a softmax and reads
# grammar into the picture. Its own numbers say otherwise: we check each sentence it writes.

# %%
words = ["The", "cat", "sat", "on", "mat"]
tutorial_scores = numpy.array(
    [
        [3.0, 1.0, 0.5, 0.2, 0.1],  # the tutorial's hand-typed scores
        [0.8, 3.5, 1.2, 0.3, 0.2],  # (row = query, column = key)
        [0.5, 2.8, 3.0, 1.5, 1.8],
        [0.3, 0.5, 0.8, 2.5, 0.6],
        [0.4, 1.2, 2.1, 1.0, 3.2],
    ]
)
weights = F.softmax(mt.tensor(tutorial_scores, device=args.device), dim=-1).numpy()
print(
    f"the tutorial's example {words}: weights {weights.shape}, rows sum to "
    f"{weights.sum(-1).min():.6f} .. {weights.sum(-1).max():.6f}"
)
claims = [("cat", "sat"), ("mat", "sat"), ("on", "mat")]  # "X strongly attends to Y", in the tutorial
for query, claimed in claims:
    row = weights[words.index(query)]
    order = numpy.argsort(row)[::-1]
    print(
        f"  tutorial: '{query}' attends to '{claimed}' ({row[words.index(claimed)]:.2f}); measured: '{query}' "
        f"attends most to '{words[order[0]]}' ({row[order[0]]:.2f}), then '{words[order[1]]}' ({row[order[1]]:.2f})"
    )
print(
    "  every word attends most to itself, since the typed scores are largest on the diagonal; nothing was "
    "learned: the scores were typed by hand"
)
fig, ax = plt.subplots(figsize=(5.6, 4.6), layout="constrained")
image = ax.imshow(weights, cmap="viridis", vmin=0.0, vmax=1.0)
for i in range(len(words)):
    for j in range(len(words)):
        ax.text(
            j,
            i,
            f"{weights[i, j]:.2f}",
            ha="center",
            va="center",
            fontsize=9,
            color="white" if weights[i, j] < 0.5 else "black",
        )
for query, claimed in claims:  # red frames: what the tutorial says each word attends to
    ax.add_patch(
        plt.Rectangle(
            (words.index(claimed) - 0.5, words.index(query) - 0.5), 1, 1, fill=False, edgecolor="red", linewidth=2
        )
    )
ax.set_xticks(range(len(words)), words)
ax.set_yticks(range(len(words)), words)
ax.set_xlabel("key (attended to)")
ax.set_ylabel("query (attending)")
ax.set_title("The tutorial's typed scores, softmax per row\nred: what its text says each word attends to", fontsize=10)
fig.colorbar(image, ax=ax, label="attention weight")
save(fig, out, "cat_sat_on_mat.png")

# %% [markdown]
# ## A trained model
#
# Without `--checkpoint` we first run the training job for two minutes (the default model with
# three layers). Then the model reads the sentence and returns the weights of every head.


# %%
def train_small_model(args, out):
    """Run the training job (the ``train`` command) into ``out/model``; returns its checkpoint."""
    folder = os.path.join(out, "model")  # the demo's own: a run from an earlier time is replaced
    os.makedirs(folder, exist_ok=True)
    flags = ["--out", folder, "--overwrite", "--device", args.device, "--seed", str(args.seed), "--block-size", "64"]
    if args.quick:
        flags += quick_training_flags(folder) + ["--quiet"]
    else:  # two minutes of the default model
        flags += ["--time-budget", "120", "--eval-interval", "200", "--sample-tokens", "100"]
    print(f"no --checkpoint given: training a small model first: minitorch-attn train {' '.join(flags)}")
    status = cli_main(["train", *flags])
    if status != 0:  # a bad flag (2) or Ctrl-C (130): the command has said why
        raise SystemExit(status)
    return os.path.join(folder, "checkpoint.npz")


checkpoint = args.checkpoint or train_small_model(args, out)
model, vocab, _ = load_model(checkpoint, args.device)
if model.config["attn_impl"] == "flash":
    model.config["attn_impl"] = "naive"  # the flash kernel never forms the weights; same model otherwise
    naive = type(model)(**model.config)
    naive.load_state_dict(model.state_dict())
    model = naive.to(args.device)
ids = vocab.encode(HEATMAP_SENTENCE)[-model.max_seq_len :]
chars = vocab.decode(ids)
model.eval()
with mt.no_grad():
    _, maps = model(mt.tensor(ids[None, :], device=args.device), need_weights=True)
maps = numpy.stack([w.numpy()[0] for w in maps])  # (layers, heads, T, T)
layers, heads = maps.shape[:2]
print(f"\ntrained model ({model.num_parameters():,} parameters, {layers} layers x {heads} heads) on {chars!r}")
print(
    f"attention maps: {maps.shape} (layers, heads, queries, keys), "
    f"rows sum to 1: {bool(numpy.allclose(maps.sum(-1), 1.0, atol=1e-5))}"
)

# %% [markdown]
# ## What does the "i" of "it" look at?
#
# The model is causal: the "i" sees only itself and the characters before it. For each head,
# its three largest weights. When they differ by less than 5%, the head has no preference
# among them and we say so.

# %%
it = chars.index(" it ") + 1 if " it " in chars else len(chars) - 1
for layer in range(layers):
    for head in range(heads):
        row = maps[layer, head, it]
        top = numpy.argsort(row)[::-1][:3]
        note = "  (near-ties: within 5% of each other)" if row[top[0]] < 1.05 * row[top[2]] else ""
        print(
            f"  layer {layer} head {head}: 'i' of \"it\" attends most to "
            + ", ".join(f"{chars[j]!r}@{j} ({row[j]:.2f})" for j in top)
            + note
        )
quick_caveat(args, "what trained heads attend to (a 15-step model has learned almost nothing)")

# %% [markdown]
# ## All heads, then one in detail
#
# One colour scale for every head. The first query can only attend to itself (weight 1),
# so the scale stops at the 99th percentile of all weights and larger ones get its top colour
# (the arrow on the colour bar). The axes mark where each word starts. Then the head whose
# "i" of "it" reaches furthest back, with every character labelled.

# %%
top_colour = float(numpy.quantile(maps, 0.99))
starts = [0]
for i, c in enumerate(chars[:-1]):  # word starts, at least 3 characters apart so labels never touch
    if c == " " and i + 1 - starts[-1] >= 3:
        starts.append(i + 1)
labels = [chars[s:].split(" ")[0] for s in starts]
fig, axes = plt.subplots(
    layers,
    heads,
    figsize=(2.6 * heads + 1.4, 2.6 * layers + 1.3),
    layout="constrained",
    sharex=True,
    sharey=True,
    squeeze=False,
)
for layer in range(layers):
    for head in range(heads):
        ax = axes[layer][head]
        image = ax.imshow(maps[layer, head], cmap="viridis", vmin=0.0, vmax=top_colour)
        ax.set_title(f"layer {layer}, head {head}", fontsize=9)
        ax.set_xticks(starts, labels, rotation=90, fontsize=8)
        ax.set_yticks(starts, labels, fontsize=8)
for ax in axes[-1]:
    ax.set_xlabel("key (attended to)")
for ax in axes[:, 0]:
    ax.set_ylabel("query")
fig.colorbar(
    image,
    ax=axes,
    extend="max",
    shrink=0.8,
    label=f"attention weight (colours stop at {top_colour:.2f}, the 99th percentile)",
)
fig.suptitle(HEATMAP_SENTENCE)
save(fig, out, "trained_heads.png")

reach = numpy.arange(it + 1)
layer, head = numpy.unravel_index(numpy.argmax((maps[:, :, it, : it + 1] * (it - reach)).sum(-1)), (layers, heads))
print(
    f"in detail: layer {layer} head {head}, whose 'i' of \"it\" looks furthest back on average "
    f"({(maps[layer, head, it, : it + 1] * (it - reach)).sum():.1f} characters)"
)
detail = maps[layer, head]
fig, ax = plt.subplots(figsize=(9, 8.4), layout="constrained")
image = ax.imshow(detail, cmap="viridis", vmin=0.0, vmax=float(numpy.quantile(detail, 0.99)))
marks = [c if c != " " else "␣" for c in chars]
ax.set_xticks(range(len(marks)), marks, fontsize=8)
ax.set_yticks(range(len(marks)), marks, fontsize=8)
ax.set_xlabel("key (attended to)")
ax.set_ylabel("query")
ax.set_title(f"Layer {layer}, head {head}, one character per row and column", fontsize=10)
fig.colorbar(
    image,
    ax=ax,
    extend="max",
    shrink=0.8,
    label=f"attention weight (colours stop at {numpy.quantile(detail, 0.99):.2f}, the 99th percentile)",
)
save(fig, out, "trained_head_detail.png")
