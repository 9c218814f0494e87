"""The main job: train a character-level GPT on real text, sample from it, draw its attention.

Everything the ``minitorch-attn train`` and ``sample`` commands do, in the order they do it:

1. **Corpus** (:func:`load_corpus`): a UTF-8 text file, or by default the Python language
   reference that ships with every CPython (``pydoc_data.topics``, ~465,000 characters),
   so nothing is downloaded.
2. **Vocabulary** (:class:`CharVocab`): one token per distinct character; characters never
   seen in training map to a fallback token when sampling.
3. **Split and batches** (:func:`split_ids`, :func:`get_batch`): the first 90% of the text
   trains, the last 10% validates; a batch is ``batch_size`` random windows of
   ``block_size + 1`` characters, the input and the same shifted by one as the target.
4. **Baseline** (:func:`bigram_bpc`): the bits per character of a count-based bigram
   model (add-one smoothing) fitted on the training split and scored on the validation
   split -- what a model must beat to have learned more than "which letter follows which".
5. **Training** (:func:`run_training`): AdamW, warmup + cosine schedule, gradient
   clipping, a progress bar, periodic validation in bits per character, Ctrl-C saves and
   stops, ``--resume`` continues (weights, optimizer moments, step count and loss history;
   the learning-rate schedule restarts over the new run's steps).
6. **Sampling** (:func:`generate`): temperature and top-k, with a key/value cache so
   each new character attends to cached keys and values instead of recomputing the prefix.
7. **Outputs**: ``checkpoint.npz``, ``loss.png``, ``attention.png`` and ``metrics.json``
   in the run folder.

Bits per character = cross-entropy in nats / ln 2.
"""

from __future__ import annotations

import json
import math
import numbers
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

HEATMAP_SENTENCE = "The trophy didn't fit in the bag because it was too big."
LN2 = math.log(2.0)


# ---- 1-4. data ---------------------------------------------------------------------------------
def load_corpus(path=None):
    """The training text: the file at ``path`` (UTF-8), or the Python language reference
    (``pydoc_data.topics``, its topics joined in sorted order).

    Raises:
        FileNotFoundError: for a missing file (OSError for a folder or an unreadable file).
        ValueError: if the file is not UTF-8 text, or the text is shorter than 100 characters.
    """
    if path is None:
        from pydoc_data.topics import topics

        text = "\n\n".join(topics[key] for key in sorted(topics))
    else:
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except UnicodeDecodeError as error:
            raise ValueError(f"{os.fspath(path)!r} is not UTF-8 text (byte {error.start}: {error.reason})") from None
    if len(text) < 100:
        raise ValueError(f"the corpus has {len(text)} characters; at least 100 are needed to train")
    return text


class CharVocab:
    """Characters <-> token ids, one id per distinct character of the training text
    (sorted, so the same text always gives the same ids).

    ``encode`` maps a character it has never seen to ``fallback`` (a space when the
    vocabulary has one) and counts it in ``unknown_count`` instead of failing.
    """

    def __init__(self, chars):
        self.chars = "".join(chars)
        if not self.chars or len(set(self.chars)) != len(self.chars):
            raise ValueError("a vocabulary needs at least one character, each listed once")
        self.index = {c: i for i, c in enumerate(self.chars)}
        self.fallback = self.index.get(" ", 0)
        self.unknown_count = 0

    @classmethod
    def from_text(cls, text):
        return cls(sorted(set(text)))

    def __len__(self):
        return len(self.chars)

    def encode(self, text):
        ids = [self.index.get(c, -1) for c in text]
        self.unknown_count += ids.count(-1)
        return numpy.array([self.fallback if i < 0 else i for i in ids], dtype=numpy.int64)

    def decode(self, ids):
        return "".join(self.chars[int(i)] for i in ids)


def split_ids(ids, val_fraction=0.1):
    """``(train, val)``: the first ``1 - val_fraction`` of the ids, then the rest."""
    if not 0.0 < val_fraction < 1.0:
        raise ValueError(f"val_fraction must be in (0, 1), got {val_fraction!r}")
    cut = int(len(ids) * (1.0 - val_fraction))
    return ids[:cut], ids[cut:]


def get_batch(ids, batch_size, block_size, rng, device="cpu"):
    """``batch_size`` random windows of ``ids`` (a 1-D int64 NumPy array).

    Returns:
        ``(x, y)``, int64 Tensors of shape ``(batch_size, block_size)`` on ``device``,
        ``y[b, t] = x[b, t + 1]`` (the next character).
    Raises:
        ValueError: if ``ids`` is not longer than ``block_size``.
    """
    if len(ids) <= block_size:
        raise ValueError(f"{len(ids)} tokens are too few for windows of {block_size} + 1")
    starts = rng.integers(0, len(ids) - block_size, size=batch_size)
    windows = numpy.stack([ids[s:s + block_size + 1] for s in starts])
    return tensor(windows[:, :-1], device=device), tensor(windows[:, 1:], device=device)


def bigram_bpc(train_ids, val_ids, vocab_size):
    """Validation bits per character of the add-one-smoothed bigram model
    ``P(b | a) = (count(a b) + 1) / (count(a) + V)`` fitted on ``train_ids``."""
    counts = numpy.ones((vocab_size, vocab_size))
    numpy.add.at(counts, (train_ids[:-1], train_ids[1:]), 1.0)
    log_p = numpy.log(counts / counts.sum(axis=1, keepdims=True))
    return float(-log_p[val_ids[:-1], val_ids[1:]].mean() / LN2)


# ---- 5. training -------------------------------------------------------------------------------
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
    """AdamW with weight decay on the matrices (embeddings, projections) only; biases
    and norm gains are not decayed (as GPT-2 and nanoGPT)."""
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
                      temperature=0.8, top_k=None, seed=args.seed, device=args.device)
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
def _check_sampling(max_new_tokens, temperature, top_k):
    """Raise a ValueError unless the sampling options make sense."""
    def is_int(value):
        return isinstance(value, numbers.Integral) and not isinstance(value, bool)

    if not is_int(max_new_tokens) or max_new_tokens < 0:
        raise ValueError(f"max_new_tokens must be an int >= 0, got {max_new_tokens!r}")
    if not isinstance(temperature, numbers.Real) or not 0 <= temperature < math.inf:
        raise ValueError(f"temperature must be a finite number >= 0 (0 = always the likeliest), got {temperature!r}")
    if top_k is not None and (not is_int(top_k) or top_k < 1):
        raise ValueError(f"top_k must be an int >= 1 (or None for the whole vocabulary), got {top_k!r}")


def _next_id(logits_row, temperature, top_k, rng):
    """Sample one id from a row of logits (NumPy, float64) with temperature and top-k."""
    if temperature <= 0:
        return int(numpy.argmax(logits_row))
    z = logits_row / temperature
    if top_k is not None and top_k < len(z):
        z = numpy.where(z < numpy.sort(z)[-top_k], -numpy.inf, z)
    p = numpy.exp(z - z.max())
    return int(rng.choice(len(p), p=p / p.sum()))


def generate_ids(model, ids, max_new_tokens, temperature=1.0, top_k=None, rng=None, use_cache=True,
                 device="cpu", return_logits=False):
    """Continue the token ids ``ids`` (a non-empty list) by ``max_new_tokens`` sampled ids.

    With ``use_cache`` the prompt runs through the model once and every later step feeds
    only the newest token, attending to the cached keys and values of all earlier ones.
    When the sequence reaches ``max_seq_len`` (the learned positions run out), the cache is
    rebuilt from the last half of the context. Without the cache every step recomputes the
    last ``max_seq_len`` tokens; both give the same logits (the tests check it).

    Returns:
        the new ids (a list), and with ``return_logits`` also the logits of each step (NumPy).
    Raises:
        ValueError: for an empty prompt, ``max_new_tokens < 0``, a negative or non-finite
            ``temperature`` (0 = greedy), or ``top_k < 1`` (one larger than the vocabulary
            keeps every token).
    """
    _check_sampling(max_new_tokens, temperature, top_k)
    if not ids:
        raise ValueError("generation needs a prompt of at least one token")
    rng = rng if rng is not None else numpy.random.default_rng()
    limit = model.max_seq_len
    ids, new, all_logits = list(ids), [], []
    was_training = model.training
    model.eval()
    with no_grad():
        cache, feed = None, None
        for _ in range(max_new_tokens):
            if not use_cache:
                logits = model(tensor([ids[-limit:]], device=device))
            else:
                if cache is None:
                    cache, feed = model.new_cache(), ids[-limit:]
                elif cache.length + len(feed) > limit:  # out of positions: keep the last half
                    cache, feed = model.new_cache(), ids[-(limit // 2):]
                logits = model(tensor([feed], device=device), cache=cache)
            row = logits[0, -1].numpy().astype(numpy.float64)
            next_id = _next_id(row, temperature, top_k, rng)
            all_logits.append(row)
            ids.append(next_id)
            new.append(next_id)
            feed = [next_id]
    model.train(was_training)
    return (new, all_logits) if return_logits else new


def generate(model, vocab, prompt, max_new_tokens=200, temperature=1.0, top_k=None, seed=None, device="cpu"):
    """The prompt followed by ``max_new_tokens`` sampled characters (a string).

    Characters of the prompt that are not in the vocabulary are replaced by its fallback
    (see :class:`CharVocab`); an empty prompt starts from a newline (or the first token).
    """
    ids = list(vocab.encode(prompt)) if prompt else [vocab.index.get("\n", 0)]
    new = generate_ids(model, ids, max_new_tokens, temperature, top_k, numpy.random.default_rng(seed),
                       device=device)
    return prompt + vocab.decode(new)


def load_training_checkpoint(path):
    """:func:`checkpoint.load` of a file written by the training job, checking the fields
    that job adds (the vocabulary, matching the config's ``vocab_size``, the step and the
    loss history).

    Raises:
        CheckpointError: if the file is not a checkpoint, or not one of the training job.
    """
    checkpoint = ckpt.load(path)
    extra, config = checkpoint["extra"], checkpoint["config"]
    missing = [key for key in ("vocab", "step", "history") if key not in extra]
    if missing:
        raise ckpt.CheckpointError(f"{os.fspath(path)!r} has no {', '.join(missing)}: it was not written by the training job")
    if not isinstance(extra["vocab"], str):
        raise ckpt.CheckpointError(f"{os.fspath(path)!r} has a vocabulary that is not a string of characters")
    if len(extra["vocab"]) != config.get("vocab_size"):
        raise ckpt.CheckpointError(f"{os.fspath(path)!r} stores a vocabulary of {len(extra['vocab'])} characters "
                                   f"but a model with vocab_size {config.get('vocab_size')!r}")
    return checkpoint


def load_model(path, device="cpu"):
    """``(model, vocab, checkpoint)`` from a checkpoint written by the training job.

    Raises:
        CheckpointError: if the file is not a training checkpoint or its config does not
            build a GPT.
    """
    checkpoint = load_training_checkpoint(path)
    try:
        model = nn.GPT(**checkpoint["config"])
        vocab = CharVocab(checkpoint["extra"]["vocab"])
    except (TypeError, ValueError) as error:
        raise ckpt.CheckpointError(f"{os.fspath(path)!r} does not describe a usable GPT: {error}") from None
    ckpt.restore(checkpoint, model)
    return model.to(device), vocab, checkpoint


def run_sample(args):
    """The ``sample`` command: print a continuation of ``--prompt``."""
    model, vocab, _ = load_model(args.checkpoint, args.device)
    before = vocab.unknown_count
    text = generate(model, vocab, args.prompt, args.max_new_tokens, args.temperature, args.top_k,
                    args.seed, args.device)
    if vocab.unknown_count > before:
        print(f"note: {vocab.unknown_count - before} prompt characters are not in the vocabulary "
              f"and were read as {vocab.chars[vocab.fallback]!r}", file=sys.stderr)
    print(text)
    return 0


# ---- 7. pictures ---------------------------------------------------------------------------------
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
    fig, axes = plt.subplots(rows, cols, figsize=(7.5 * cols + 1.2, 7.5 * rows + 0.6), squeeze=False,
                             layout="constrained")
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
    fig.colorbar(image, ax=axes, extend="max", shrink=0.8,
                 label=f"attention weight (colours stop at {top:.2f}, the 99th percentile)")
    fig.suptitle(f"Every head of layer {layer}, the last, reading {chars!r}")
    path = os.path.join(out, "attention.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    written.append(path)
    return written
