"""The pictures of the main job: the training curve (``loss.png``) and every head of the last
layer reading one sentence (``attention.png``), written into the run folder by
:func:`write_plots` at the end of ``minitorch-attn train`` (:mod:`minitorch_attn.app.train`).
"""

from __future__ import annotations

import math
import os

import numpy

from .. import nn
from ..atomic import write_atomically
from ..core.autograd import no_grad
from ..core.factories import tensor

HEATMAP_SENTENCE = "The trophy didn't fit in the bag because it was too big."


def write_plots(out, history, baseline, model, vocab, device, log=print, final=None, windows=None):
    """Write ``loss.png`` (:func:`loss_figure`) and ``attention.png`` (:func:`attention_figure`)
    into ``out``, each atomically, when matplotlib is installed; otherwise say that they were
    skipped. Returns the list of files written."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log('matplotlib is not installed: skipped loss.png and attention.png (pip install -e ".[demos]")')
        return []
    written = []
    for name, fig, dpi in [
        ("loss.png", loss_figure(plt, history, baseline, final, windows), 120),
        ("attention.png", attention_figure(plt, model, vocab, device), 110),
    ]:
        path = os.path.join(out, name)
        write_atomically(path, lambda f: fig.savefig(f, format="png", dpi=dpi), suffix=".png")  # noqa: B023 (called here)
        plt.close(fig)
        written.append(path)
    return written


def loss_figure(plt, history, baseline, final=None, windows=None):
    """Bits per character against steps: the training loss (raw and a moving average), the
    periodic validation estimates (``windows`` windows each), the bigram baseline, and
    ``final = (step, bpc)``, the validation on the whole split, as a marker of its own:
    it is another measurement than the estimates, so the line does not run into it."""
    fig, ax = plt.subplots(figsize=(7, 4.5))
    steps, train = numpy.array(history["step"]), numpy.array(history["train_bpc"])
    if len(train):
        ax.plot(steps, train, color="tab:blue", alpha=0.25, linewidth=0.8)
        window = max(1, min(25, len(train) // 10))
        smooth = numpy.convolve(train, numpy.ones(window) / window, mode="valid")
        ax.plot(steps[window - 1 :], smooth, color="tab:blue", label="train (moving average)")
    estimate = f"validation estimate ({windows} windows)" if windows else "validation estimate"
    ax.plot(history["val_step"], history["val_bpc"], "o-", color="tab:orange", label=estimate)
    if final is not None:
        ax.plot(
            [final[0]],
            [final[1]],
            "*",
            color="tab:red",
            markersize=14,
            linestyle="none",
            label=f"validation, whole split ({final[1]:.2f})",
        )
    ax.axhline(baseline, color="gray", linestyle="--", label=f"bigram baseline ({baseline:.2f})")
    ax.set_xlabel("step")
    ax.set_ylabel("bits per character")
    ax.set_title("Character-level GPT on minitorch-attn")
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


def attention_figure(plt, model, vocab, device):
    """The attention weights of every head of the last layer on :data:`HEATMAP_SENTENCE`."""
    ids = vocab.encode(HEATMAP_SENTENCE)[-model.max_seq_len :]
    chars = vocab.decode(ids)
    with nn.in_eval_mode(model), no_grad():
        _, weights = model(tensor(ids[None, :], device=device), need_weights=True)
    layer = len(weights) - 1
    w = weights[layer].numpy()[0]  # (heads, T, T)
    heads = w.shape[0]
    cols = min(heads, 2)
    rows = math.ceil(heads / cols)
    fig, axes = plt.subplots(
        rows, cols, figsize=(7.5 * cols + 1.2, 7.5 * rows + 0.6), squeeze=False, layout="constrained"
    )
    labels = [c if c != " " else "␣" for c in chars]
    top = float(numpy.quantile(w, 0.99))  # the first query's weight is 1: it would wash out the rest
    for h in range(rows * cols):
        ax = axes[h // cols][h % cols]
        if h >= heads:
            ax.axis("off")
            continue
        image = ax.imshow(w[h], cmap="viridis", vmin=0.0, vmax=top)
        ax.set_title(f"head {h}")
        ax.set_xticks(range(len(labels)), labels, fontsize=8)
        ax.set_yticks(range(len(labels)), labels, fontsize=8)
        ax.set_xlabel("key (attended to)")
        ax.set_ylabel("query")
    fig.colorbar(
        image,
        ax=axes,
        extend="max",
        shrink=0.8,
        label=f"attention weight (colours stop at {top:.2f}, the 99th percentile)",
    )
    fig.suptitle(f"Every head of layer {layer}, the last, reading {chars!r}")
    return fig
