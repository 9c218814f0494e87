"""Attention heatmaps, an illustration and the heads of a trained model.

    python demos/08_heatmaps.py [--device cpu|cuda] [--quick] [--seed N] [--out DIR]
                                [--checkpoint runs/<folder>/checkpoint.npz]

1. The tutorial's illustration: "The cat sat on mat" with random 16-dimensional word
   vectors used directly as queries and keys (no learned weights), so each word attends
   most to itself. It shows how to read a heatmap, not what a model learns.
2. The real thing: every head of every layer of the character-level GPT trained by the
   main job (``minitorch-attn train``), reading "The trophy didn't fit in the bag because it
   was too big." Give its checkpoint with --checkpoint; without one, a small model is
   trained first by the same training job (--quick: a few steps of a tiny model, whose
   heads have learned little).
"""

import os
import sys

import numpy

import minitorch_attn as mt
import minitorch_attn.functional as F
from minitorch_attn.cli import main as cli_main
from minitorch_attn.data import load_corpus
from minitorch_attn.sampling import load_model
from minitorch_attn.train import HEATMAP_SENTENCE
from minitorch_attn.demo_common import pyplot, randn, save, setup


def add_flags(parser):
    parser.add_argument("--checkpoint", metavar="PATH", help="checkpoint.npz of minitorch-attn train "
                                                              "(default: train a small model first)")


def train_small_model(args, out):
    """Run the training job (the ``train`` command) into ``out/model``; returns its checkpoint."""
    folder = os.path.join(out, "model")  # the demo's own: a run from an earlier time is replaced
    flags = ["--out", folder, "--overwrite", "--device", args.device, "--seed", str(args.seed), "--block-size", "64"]
    if args.quick:  # a tiny model for 15 steps on 20,000 characters of the default corpus
        excerpt = os.path.join(out, "excerpt.txt")
        with open(excerpt, "w", encoding="utf-8") as f:
            f.write(load_corpus()[:20_000])
        flags += ["--text", excerpt, "--steps", "15", "--time-budget", "0", "--warmup-steps", "5",
                  "--d-model", "32", "--num-layers", "2", "--num-heads", "2", "--batch-size", "8",
                  "--eval-interval", "1000", "--sample-tokens", "20", "--quiet"]
    else:  # two minutes of the default model, one layer fewer
        flags += ["--time-budget", "120", "--num-layers", "3", "--eval-interval", "200", "--sample-tokens", "100"]
    print(f"no --checkpoint given: training a small model first: minitorch-attn train {' '.join(flags)}")
    status = cli_main(["train", *flags])
    if status != 0:  # a bad flag (2) or Ctrl-C (130): the command has said why
        raise SystemExit(status)
    return os.path.join(folder, "checkpoint.npz")


def illustration(args, plt, out):
    """The tutorial's picture: five words, random vectors as queries and keys."""
    words = "The cat sat on mat".split()
    x = randn(args.rng, 1, len(words), 16, device=args.device)   # one random vector per word
    weights = F.attention_weights(x, x).numpy()[0]                 # Q = K = the word vectors
    print(f"illustration {words}: attention weights {weights.shape}, rows sum to "
          f"{weights.sum(-1).min():.6f} .. {weights.sum(-1).max():.6f}")
    fig, ax = plt.subplots(figsize=(4.5, 4))
    ax.imshow(weights, cmap="viridis", vmin=0.0)
    ax.set_xticks(range(len(words)), words)
    ax.set_yticks(range(len(words)), words)
    for i in range(len(words)):
        for j in range(len(words)):
            ax.text(j, i, f"{weights[i, j]:.2f}", ha="center", va="center", fontsize=7, color="white")
    ax.set_xlabel("key (attended to)")
    ax.set_ylabel("query")
    ax.set_title("Illustration: random word vectors")
    fig.tight_layout()
    save(fig, out, "cat_sat_on_mat.png")


def trained_heads(args, plt, out, checkpoint):
    """Every head of every layer of the model in ``checkpoint`` on :data:`HEATMAP_SENTENCE`."""
    model, vocab, _ = load_model(checkpoint, args.device)
    if model.config["attn_impl"] == "flash":
        model.config["attn_impl"] = "naive"  # the flash kernel never forms the weights; same model otherwise
        model = type(model)(**model.config).load_state_dict(model.state_dict()).to(args.device)
    ids = vocab.encode(HEATMAP_SENTENCE)[-model.max_seq_len:]
    chars = vocab.decode(ids)
    model.eval()
    with mt.no_grad():
        _, weights = model(mt.tensor(ids[None, :], device=args.device), need_weights=True)
    weights = numpy.stack([w.numpy()[0] for w in weights])           # (layers, heads, T, T)
    layers, heads = weights.shape[:2]
    print(f"trained model ({model.num_parameters():,} parameters, {layers} layers x {heads} heads) on {chars!r}")
    print(f"attention maps: {weights.shape} (layers, heads, queries, keys), "
          f"rows sum to 1: {bool(numpy.allclose(weights.sum(-1), 1.0, atol=1e-5))}")
    it = chars.index(" it ") + 1 if " it " in chars else len(chars) - 1
    for layer in range(layers):
        for head in range(heads):
            top = numpy.argsort(weights[layer, head, it])[::-1][:3]
            print(f"  layer {layer} head {head}: 'i' of \"it\" attends most to "
                  + ", ".join(f"{chars[j]!r}@{j} ({weights[layer, head, it, j]:.2f})" for j in top))
    labels = [c if c != " " else "␣" for c in chars]
    fig, axes = plt.subplots(layers, heads, figsize=(4.2 * heads, 4.2 * layers), squeeze=False)
    for layer in range(layers):
        for head in range(heads):
            ax = axes[layer][head]
            # colours up to the 99th percentile: the first query can only attend to itself
            # (weight 1), and would otherwise wash out every other row
            ax.imshow(weights[layer, head], cmap="viridis", vmin=0.0, vmax=numpy.quantile(weights[layer, head], 0.99))
            ax.set_title(f"layer {layer}, head {head}", fontsize=9)
            ax.set_xticks(range(len(labels)), labels, fontsize=4)
            ax.set_yticks(range(len(labels)), labels, fontsize=4)
    fig.suptitle(HEATMAP_SENTENCE)
    fig.tight_layout()
    save(fig, out, "trained_heads.png", dpi=80)


def main(argv=None):
    args, out = setup(__doc__, "08_heatmaps", argv, extra=add_flags)
    plt = pyplot()
    illustration(args, plt, out)
    checkpoint = args.checkpoint or train_small_model(args, out)
    trained_heads(args, plt, out, checkpoint)


if __name__ == "__main__":
    sys.exit(main())
