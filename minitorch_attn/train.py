"""The main job: train a character-level GPT on real text, sample from it, draw its attention.

What the ``minitorch-attn train`` command does, in order:

1. **Data** (:mod:`minitorch_attn.data`): the corpus, a vocabulary of its characters, the
   split into training and validation text, random batches of windows, and the bigram
   baseline to beat.
2. **Training** (:func:`run_training`): AdamW, warmup + cosine schedule, gradient
   clipping, a progress bar, periodic validation in bits per character, Ctrl-C saves and
   stops, ``--resume`` continues (weights, optimizer moments, step count and loss history;
   the learning-rate schedule restarts over the new run's steps).
3. **Sampling** (:mod:`minitorch_attn.sampling`): a sample of the trained model, drawn
   with a key/value cache.
4. **Outputs**: ``checkpoint.npz``, ``loss.png``, ``attention.png`` and ``metrics.json``
   in the run folder.

Bits per character = cross-entropy in nats / ln 2.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time

import numpy

from . import checkpoint as ckpt
from . import functional as F
from . import nn, optim
from .core.autograd import no_grad
from .core.backend import get_backend, manual_seed
from .core.factories import tensor
from .data import LN2, CharVocab, bigram_bpc, get_batch, load_corpus, split_ids
from .sampling import generate, load_training_checkpoint

HEATMAP_SENTENCE = "The trophy didn't fit in the bag because it was too big."


# ---- 2. training -------------------------------------------------------------------------------
def evaluate_bpc(model, ids, block_size, batch_size=32, max_windows=None, device="cpu"):
    """Mean bits per character of ``model`` on ``ids``, over non-overlapping windows of
    ``block_size + 1`` characters: all of them, or ``max_windows`` spread evenly over the
    text (a quicker estimate for progress reports)."""
    available = (len(ids) - 1) // block_size
    if available == 0:
        raise ValueError(f"{len(ids)} validation tokens are too few for one window of {block_size} + 1")
    count = available if max_windows is None else min(available, max_windows)
    chosen = numpy.linspace(0, available - 1, count).round().astype(int)
    windows = numpy.stack([ids[i * block_size:(i + 1) * block_size + 1] for i in chosen])
    was_training = model.training
    model.eval()
    total = 0.0
    with no_grad():
        for start in range(0, count, batch_size):
            chunk = windows[start:start + batch_size]
            x, y = tensor(chunk[:, :-1], device=device), tensor(chunk[:, 1:], device=device)
            logits = model(x)
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
            total += loss.item() * len(chunk)
    model.train(was_training)
    return total / count / LN2


def make_optimizer(model, lr, weight_decay, betas=(0.9, 0.99)):
    """AdamW with weight decay on every matrix (the parameters with 2 or more dims: the
    projections and the token *and position* embeddings) and none on biases and norm gains
    (vectors), as nanoGPT (``configure_optimizers``). Group 0 decays, group 1 does not."""
    decay = [p for p in model.parameters() if p.ndim >= 2]
    no_decay = [p for p in model.parameters() if p.ndim < 2]
    return optim.AdamW([{"params": decay, "weight_decay": weight_decay},
                        {"params": no_decay, "weight_decay": 0.0}], lr=lr, betas=betas)


def _progress(total, disable):
    try:
        from tqdm import tqdm
    except ImportError:  # tqdm is a dependency; this keeps a broken install usable
        return None
    return tqdm(total=total, unit="step", dynamic_ncols=True, disable=disable, file=sys.stderr)


def run_training(args):
    """Run the whole training job described by ``args`` (the ``train`` command's flags,
    see :mod:`minitorch_attn.cli`) and return the metrics dict it writes."""
    wall_start = time.perf_counter()
    log = print if not args.quiet else (lambda *a, **k: None)
    manual_seed(args.seed)
    rng = numpy.random.default_rng(args.seed)
    get_backend(args.device)  # fail early, with the install hint, for a missing device

    text = load_corpus(args.text)
    resumed = load_training_checkpoint(args.resume) if args.resume else None
    if resumed is not None:
        vocab = CharVocab(resumed["extra"]["vocab"])
        config = resumed["config"]
    else:
        vocab = CharVocab.from_text(text)
        config = dict(vocab_size=len(vocab), d_model=args.d_model, num_heads=args.num_heads,
                      num_layers=args.num_layers, max_seq_len=args.block_size, dropout=args.dropout,
                      norm=args.norm, attn_impl=args.attn_impl)
    block_size = config["max_seq_len"]
    train_ids, val_ids = split_ids(vocab.encode(text), args.val_fraction)
    if vocab.unknown_count:
        log(f"note: {vocab.unknown_count} characters of the text are not in the checkpoint's vocabulary")
    baseline = bigram_bpc(train_ids, val_ids, len(vocab))

    model = nn.GPT(**config).to(args.device)
    os.makedirs(args.out, exist_ok=True)  # only once the inputs have proved usable
    opt = make_optimizer(model, args.lr, args.weight_decay)
    history = {"step": [], "train_bpc": [], "val_step": [], "val_bpc": []}
    start_step = 0
    if resumed is not None:
        ckpt.restore(resumed, model, opt)
        start_step = resumed["extra"]["step"]
        history = resumed["extra"]["history"]
        rng = numpy.random.default_rng([args.seed, start_step])
        for group in opt.param_groups:  # the schedule restarts (a warm restart, as SGDR)
            group["lr"] = args.lr
    log(f"corpus: {len(text):,} characters, vocabulary {len(vocab)}, train {len(train_ids):,} / "
        f"val {len(val_ids):,}; bigram baseline {baseline:.3f} bits/char")
    log(f"model: GPT with {model.num_parameters():,} parameters ({config['num_layers']} layers, "
        f"d_model {config['d_model']}, {config['num_heads']} heads, context {block_size}) on {args.device}")

    total_steps = args.steps if args.steps else 10**9
    # the schedule counts the steps of this run (with --time-budget, its end is re-estimated)
    schedule = optim.WarmupCosineLR(opt, warmup_steps=args.warmup_steps, total_steps=args.steps or 1000,
                                    min_lr_ratio=0.1)
    bar = _progress(args.steps, disable=args.quiet)
    tokens_per_step = args.batch_size * block_size
    step, train_start, interrupted, smoothed = start_step, time.perf_counter(), False, None
    eval_seconds = 0.0
    try:
        while step - start_step < total_steps:
            elapsed = time.perf_counter() - train_start
            if args.time_budget and elapsed >= args.time_budget:
                break
            if args.time_budget and not args.steps and step - start_step >= 10:
                # running for a time budget: re-estimate where the schedule will end
                per_step = (elapsed - eval_seconds) / (step - start_step)
                schedule.total_steps = int((args.time_budget - eval_seconds) / per_step)
            schedule.step(step - start_step)
            x, y = get_batch(train_ids, args.batch_size, block_size, rng, args.device)
            logits = model(x)
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
            opt.zero_grad()
            loss.backward()
            optim.clip_grad_norm_(model.parameters(), args.grad_clip)
            opt.step()
            step += 1
            bpc = loss.item() / LN2
            smoothed = bpc if smoothed is None else 0.9 * smoothed + 0.1 * bpc
            history["step"].append(step)
            history["train_bpc"].append(bpc)
            if step % args.eval_interval == 0:
                t = time.perf_counter()
                val_bpc = evaluate_bpc(model, val_ids, block_size, args.batch_size, args.eval_windows, args.device)
                eval_seconds += time.perf_counter() - t
                history["val_step"].append(step)
                history["val_bpc"].append(val_bpc)
                message = f"step {step}: val {val_bpc:.3f} bits/char (bigram {baseline:.3f})"
                (bar.write if bar is not None and not args.quiet else log)(message)
            if bar is not None:
                rate = (step - start_step) * tokens_per_step / max(1e-9, time.perf_counter() - train_start - eval_seconds)
                bar.update(1)
                bar.set_postfix_str(f"loss {smoothed:.3f} bpc, {rate:,.0f} tok/s", refresh=False)
    except KeyboardInterrupt:
        interrupted = True
        log("\ninterrupted: saving a checkpoint and finishing")
    finally:
        if bar is not None:
            bar.close()
    train_seconds = time.perf_counter() - train_start - eval_seconds
    steps_done = step - start_step

    final_val = evaluate_bpc(model, val_ids, block_size, args.batch_size, None, args.device)
    history["val_step"].append(step)
    history["val_bpc"].append(final_val)
    path = os.path.join(args.out, "checkpoint.npz")
    ckpt.save(path, model, opt, config=config, vocab=vocab.chars, step=step, history=history,
              seed=args.seed)
    log(f"step {step}: final validation {final_val:.3f} bits/char (bigram baseline {baseline:.3f}); "
        f"checkpoint {path}")

    sample = generate(model, vocab, args.sample_prompt, max_new_tokens=args.sample_tokens,
                      temperature=0.8, top_p=args.top_p, seed=args.seed, device=args.device)
    log(f"sample:\n{sample}")
    pictures = write_plots(args.out, history, baseline, model, vocab, args.device, log)

    metrics = {
        "steps": step, "steps_this_run": steps_done,
        "tokens_per_s": steps_done * tokens_per_step / train_seconds if train_seconds > 0 else 0.0,
        "val_bpc": final_val, "bigram_bpc": baseline,
        "train_bpc": float(numpy.mean(history["train_bpc"][-20:])) if history["train_bpc"] else None,
        "wall_s": time.perf_counter() - wall_start, "train_s": train_seconds, "eval_s": eval_seconds,
        "parameters": model.num_parameters(), "config": config, "device": args.device,
        "seed": args.seed, "batch_size": args.batch_size, "lr": args.lr, "interrupted": interrupted,
        "sample": sample, "plots": pictures,
    }
    with open(os.path.join(args.out, "metrics.json"), "w", encoding="utf-8") as f:
        json.dump(metrics, f, indent=2)
    log(f"{step} steps, {metrics['tokens_per_s']:,.0f} tokens/s, {metrics['wall_s']:.0f} s in all; "
        f"outputs in {args.out}")
    return metrics


# ---- 6. sampling ---------------------------------------------------------------------------------


# ---- 4. pictures ---------------------------------------------------------------------------------
def write_plots(out, history, baseline, model, vocab, device, log=print):
    """Write ``loss.png`` and ``attention.png`` into ``out`` when matplotlib is installed;
    otherwise say that they were skipped. Returns the list of files written."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log('matplotlib is not installed: skipped loss.png and attention.png (pip install "minitorch-attn[demos]")')
        return []
    written = []

    fig, ax = plt.subplots(figsize=(7, 4.5))
    steps, train = numpy.array(history["step"]), numpy.array(history["train_bpc"])
    if len(train):
        ax.plot(steps, train, color="tab:blue", alpha=0.25, linewidth=0.8)
        window = max(1, min(25, len(train) // 10))
        smooth = numpy.convolve(train, numpy.ones(window) / window, mode="valid")
        ax.plot(steps[window - 1:], smooth, color="tab:blue", label="train (moving average)")
    ax.plot(history["val_step"], history["val_bpc"], "o-", color="tab:orange", label="validation")
    ax.axhline(baseline, color="gray", linestyle="--", label=f"bigram baseline ({baseline:.2f})")
    ax.set_xlabel("step")
    ax.set_ylabel("bits per character")
    ax.set_title("Character-level GPT on minitorch-attn")
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    path = os.path.join(out, "loss.png")
    fig.savefig(path, dpi=120)
    plt.close(fig)
    written.append(path)

    ids = vocab.encode(HEATMAP_SENTENCE)[-model.max_seq_len:]
    chars = vocab.decode(ids)
    was_training = model.training
    model.eval()
    with no_grad():
        _, weights = model(tensor(ids[None, :], device=device), need_weights=True)
    model.train(was_training)
    layer = len(weights) - 1
    w = weights[layer].numpy()[0]  # (heads, T, T)
    heads = w.shape[0]
    cols = min(heads, 2)
    rows = math.ceil(heads / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(7.5 * cols, 7.5 * rows), squeeze=False)
    labels = [c if c != " " else "␣" for c in chars]
    for h in range(rows * cols):
        ax = axes[h // cols][h % cols]
        if h >= heads:
            ax.axis("off")
            continue
        ax.imshow(w[h], cmap="viridis", vmin=0.0)
        ax.set_title(f"layer {layer}, head {h}")
        ax.set_xticks(range(len(labels)), labels, fontsize=6)
        ax.set_yticks(range(len(labels)), labels, fontsize=6)
        ax.set_xlabel("key (attended to)")
        ax.set_ylabel("query")
    fig.suptitle(f"Attention of every head of the last layer: {chars!r}")
    fig.tight_layout()
    path = os.path.join(out, "attention.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    written.append(path)
    return written
