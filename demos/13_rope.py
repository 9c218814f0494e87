# %% [markdown]
# # Beyond the tutorial: learned positions against rotary positions (RoPE)
#
# The same GPT, corpus, seed and number of steps, trained twice: once with a learned
# embedding per position, once with rotary queries and keys. We compare validation bits per
# character, speed, and a sample that runs past the context, where rotary attention slides.

# %%
"""Learned positions against rotary positions (RoPE): the same GPT, corpus and steps.

    python demos/13_rope.py [--steps N] [--device cpu|cuda] [--quick] [--seed N] [--out DIR]

Trains the character-level GPT of ``minitorch-attn train`` twice on the Python language
reference, with the same seed, batches and number of steps: once with a learned embedding
per position (GPT-2), once with rotary queries and keys (``--pos-encoding rope``; Su et
al., arXiv:2104.09864). Prints validation bits per character, speed and a sample of each
(300 characters: past the 64-character context, where rotary attention slides and learned
positions are re-read from the last 64), and draws both validation curves. ``--quick``:
a tiny model on the first 20,000 characters, for the smoke test.
"""

import json
import os
import sys

from minitorch_attn.app import checkpoint, cli, data
from minitorch_attn.app.demo_common import pyplot, save, setup
from minitorch_attn.argtypes import positive_int

QUICK = [
    "--d-model",
    "32",
    "--num-layers",
    "1",
    "--num-heads",
    "2",
    "--block-size",
    "32",
    "--batch-size",
    "8",
    "--eval-interval",
    "10",
    "--eval-windows",
    "4",
    "--sample-tokens",
    "80",
]


def run(pos_encoding, args, out):
    """Train with ``--pos-encoding pos_encoding`` into ``out/pos_encoding``; return its
    metrics and its loss history."""
    folder = os.path.join(out, pos_encoding)
    flags = [
        "train",
        "--pos-encoding",
        pos_encoding,
        "--steps",
        str(args.steps),
        "--time-budget",
        "0",
        "--seed",
        str(args.seed),
        "--device",
        args.device,
        "--out",
        folder,
        "--overwrite",
        "--quiet",
        "--sample-prompt",
        "The ",
    ]
    if args.quick:
        text = os.path.join(out, "corpus.txt")
        with open(text, "w", encoding="utf-8") as f:
            f.write(data.load_corpus()[:20_000])
        flags += ["--text", text, *QUICK]
    status = cli.main(flags)
    if status:
        if status == 130:  # Ctrl-C: train said so and saved its checkpoint
            raise SystemExit(130)
        raise SystemExit(f"training with {pos_encoding} positions failed (status {status})")
    with open(os.path.join(folder, "metrics.json"), encoding="utf-8") as f:
        metrics = json.load(f)
    history = checkpoint.load(os.path.join(folder, "checkpoint.npz"))["extra"]["history"]
    return metrics, history


def draw(results, baseline, out):
    """Both validation curves: the periodic estimates as lines, the final full-split value as a star."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for (name, (_metrics, history)), colour in zip(results.items(), ("tab:blue", "tab:orange")):
        steps, bpc = history["val_step"], history["val_bpc"]
        ax.plot(steps[:-1], bpc[:-1], "o-", color=colour, markersize=3, label=f"{name} positions (estimates)")
        ax.plot(
            steps[-1:],
            bpc[-1:],
            "*",
            color=colour,
            markersize=12,
            label=f"{name}: {bpc[-1]:.3f} on the whole validation split",
        )
    ax.axhline(baseline, color="gray", linestyle="--", label=f"bigram baseline ({baseline:.2f})")
    ax.set(
        xlabel="step",
        ylabel="validation bits per character",
        title="Learned vs rotary positions, same model, data and steps",
    )
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    save(fig, out, "rope_vs_learned.png", dpi=120)


def main(argv=None):
    args, out = setup(
        __doc__,
        "13_rope",
        argv,
        extra=lambda p: p.add_argument(
            "--steps", type=positive_int, default=None, help="optimizer steps of each run (default 1500; --quick 30)"
        ),
    )
    args.steps = args.steps or (30 if args.quick else 1500)
    results = {name: run(name, args, out) for name in ("learned", "rope")}

    first = results["learned"][0]
    print(
        f"{args.steps} steps each, batch {first['batch_size']}, context {first['config']['max_seq_len']}, "
        f"seed {args.seed}, on {args.device}; bigram baseline {first['bigram_bpc']:.3f} bits/char"
    )
    print(f"{'positions':<10} {'parameters':>10} {'val bits/char':>14} {'tokens/s':>9} {'train s':>8}")
    for name, (metrics, _) in results.items():
        print(
            f"{name:<10} {metrics['parameters']:>10,} {metrics['val_bpc']:>14.3f} "
            f"{metrics['tokens_per_s']:>9,.0f} {metrics['train_s']:>8.0f}"
        )
    difference = results["rope"][0]["val_bpc"] - results["learned"][0]["val_bpc"]
    print(f"rope minus learned: {difference:+.3f} bits/char")
    for name, (metrics, _) in results.items():
        print(f"\nsample, {name} positions:\n{metrics['sample']}")

    draw(results, first["bigram_bpc"], out)
    return 0


# %% [markdown]
# ## Run it
#
# The flags are the command line's (or, in a notebook, `$MINITORCH_ATTN_DEMO_FLAGS`).

# %%
status = main()
if status:
    sys.exit(status)
