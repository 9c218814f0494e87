"""The main job: train a character-level GPT on real text, sample from it, draw its attention.

What the ``minitorch-attn train`` command does, in order:

1. **Data** (:mod:`minitorch_attn.app.data`): the corpus, a vocabulary of its characters, the
   split into training and validation text, random batches of windows, and the bigram
   baseline to beat.
2. **Training** (:func:`run_training`): AdamW, warmup + cosine schedule, gradient
   clipping, a progress bar, periodic validation in bits per character, Ctrl-C saves and
   stops, ``--resume`` continues (weights, optimizer moments, step count and loss history;
   the learning-rate schedule restarts over the new run's steps).
3. **Sampling** (:mod:`minitorch_attn.app.sampling`): a sample of the trained model, drawn
   with a key/value cache.
4. **Outputs**: ``checkpoint.npz``, ``loss.png`` and ``attention.png`` (drawn by
   :mod:`minitorch_attn.app.train_pictures`) and ``metrics.json`` in the run folder.

Bits per character = cross-entropy in nats / ln 2.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
import types

import numpy
from tqdm import tqdm

from .. import functional as F
from .. import nn, optim
from ..atomic import write_atomically
from ..core.autograd import no_grad
from ..core.backend import get_backend, manual_seed
from ..core.factories import tensor
from ..core.tensor import _is_int
from ..speed import FastestThreads, use_fused
from ..stopping import stops_wait
from . import checkpoint as ckpt
from .data import LN2, CharVocab, bigram_bpc, check_text_size, get_batch, load_corpus, split_ids
from .sampling import generate, load_training_checkpoint
from .train_pictures import write_plots


# ---- 2. training -------------------------------------------------------------------------------
def evaluate_bpc(model, ids, block_size, batch_size=32, max_windows=None, device="cpu"):
    """Mean bits per character of ``model`` on ``ids``: each character after the first is
    scored once, from at least ``block_size // 2`` characters of context where the text
    has them (all but its first ``block_size // 2``).

    Windows of ``block_size + 1`` characters start every ``stride = block_size -
    block_size // 2`` characters, and a last one ends at the text's end. The first window
    scores all its predictions; each later one only those past the end of the window
    before it. This is the sliding-window evaluation of a fixed-context model (Dai et
    al. 2019, arXiv:1901.02860 §3.1, there sliding by one character; a stride of half a
    window needs 32 times fewer windows at a context of 64), and it scores each character
    with the kind of context the model has when it samples. Windows that do not overlap
    would score the first characters of every window from almost no context: at the
    default context of 64 that adds about 0.07 bits/char on the default text, nearly all
    of it from the first five characters of each window.

    ``max_windows`` scores that many of the windows, spread evenly over the text, instead
    of all (a quicker estimate for progress reports). ``ids``: a 1-D int array.

    Raises:
        TypeError: if ``ids`` is not a 1-D array (or list) of integers.
        ValueError: if ``ids`` holds fewer than ``block_size + 1`` tokens (not one window),
            or ``block_size``, ``batch_size`` or ``max_windows`` is not an int >= 1.
    """
    ids = numpy.asarray(ids)
    if ids.ndim != 1 or (ids.size and not numpy.issubdtype(ids.dtype, numpy.integer)):  # [] is float64
        raise TypeError(f"ids must be a 1-D array of token ids (integers), got shape {ids.shape} of {ids.dtype}")
    ids = ids.astype(numpy.int64, copy=False)  # signed, so that -100 below marks a position as not scored
    sizes = {"block_size": block_size, "batch_size": batch_size}
    if max_windows is not None:
        sizes["max_windows"] = max_windows
    for name, value in sizes.items():
        if not _is_int(value) or value < 1:
            raise ValueError(f"{name} must be an int >= 1, got {value!r}")
    predictions = len(ids) - 1
    if predictions < block_size:
        raise ValueError(f"{len(ids)} validation tokens are too few for one window of {block_size} + 1")
    stride = block_size - block_size // 2
    starts = list(range(0, predictions - block_size + 1, stride))
    if starts[-1] + block_size < predictions:
        starts.append(predictions - block_size)  # the last window ends at the text's end
    starts = numpy.array(starts)
    # the first position that each window scores: the one after the previous window's end
    first = numpy.concatenate([[0], starts[:-1] + block_size - starts[1:]])
    count = len(starts) if max_windows is None else min(len(starts), max_windows)
    chosen = numpy.linspace(0, len(starts) - 1, count).round().astype(int)
    total, scored = 0.0, 0
    with nn.in_eval_mode(model), no_grad():
        for batch in range(0, count, batch_size):
            picked = chosen[batch : batch + batch_size]
            windows = numpy.stack([ids[s : s + block_size + 1] for s in starts[picked]])
            # the positions before a window's first scored one are ignored (-100, as in PyTorch)
            y = numpy.where(numpy.arange(block_size) >= first[picked, None], windows[:, 1:], -100)
            logits = model(tensor(windows[:, :-1], device=device))
            loss = F.cross_entropy(
                logits.reshape(-1, logits.shape[-1]),
                tensor(y.reshape(-1), device=device),
                ignore_index=-100,
                reduction="sum",
            )
            total += loss.item()
            scored += int((y != -100).sum())
    return total / scored / LN2


def next_char_loss(model, x, y):
    """The training loss: cross-entropy of ``model(x)``'s predictions against the next
    characters ``y``, a mean over all ``(batch, block)`` positions (nats)."""
    logits = model(x)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))


def make_optimizer(model, lr, weight_decay, betas=(0.9, 0.99)):
    """AdamW with weight decay on every matrix (the parameters with 2 or more dims: the
    projections and the token *and position* embeddings) and none on biases and norm gains
    (vectors), as nanoGPT (``configure_optimizers``). Group 0 decays, group 1 does not."""
    decay = [p for p in model.parameters() if p.ndim >= 2]
    no_decay = [p for p in model.parameters() if p.ndim < 2]
    return optim.AdamW(
        [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}], lr=lr, betas=betas
    )


DEFAULT_BLOCK = dict(nn.LLAMA)
"""The block ``train`` builds unless told otherwise: LLaMA's (RMSNorm before attention and
MLP, a SwiGLU feed-forward, rotary positions). In four-minute runs of the main job at the
same parameter count and the same tokens/s it reached 1.740 bits/char where GPT-2's block
(``--norm layernorm --mlp gelu --pos-encoding learned``) reached 1.834 (docs/main-job.md)."""

MODEL_FLAGS = {
    "d_model": "d_model",
    "num_heads": "num_heads",
    "num_layers": "num_layers",
    "max_seq_len": "block_size",
    "dropout": "dropout",
    "norm": "norm",
    "attn_impl": "attn_impl",
    "pos_encoding": "pos_encoding",
    "mlp": "mlp",
    "d_ff": "d_ff",
    "num_kv_heads": "num_kv_heads",
}
"""The GPT config keys that ``train`` flags set, and the flag (argparse name) of each."""


def model_config(args, vocab_size):
    """The GPT config (``GPT(**config)``) that the ``train`` flags ``args`` describe."""
    return dict(vocab_size=vocab_size, **{key: getattr(args, name) for key, name in MODEL_FLAGS.items()})


def describe_model(config, block_size):
    """The GPT of ``config`` in a few words: ``"3 layers, d_model 128, 4 heads, context 64,
    rmsnorm, swiglu of width 344, rope positions"``, with the key/value heads and the
    attention kernel when they are not the usual ones."""
    kv_heads = config.get("num_kv_heads")
    parts = [f"{config['num_layers']} layers", f"d_model {config['d_model']}", f"{config['num_heads']} heads"]
    if kv_heads is not None and kv_heads != config["num_heads"]:
        parts.append(f"{kv_heads} key/value heads")
    parts += [
        f"context {block_size}",
        config.get("norm", "layernorm"),
        f"{config.get('mlp', 'gelu')} of width {config['d_ff']}",
        f"{config.get('pos_encoding', 'learned')} positions",
    ]
    if config.get("attn_impl", "naive") != "naive":
        parts.append(f"{config['attn_impl']} attention")
    return ", ".join(parts)


def ignored_model_flags(args, config):
    """What a resumed run says about each model flag given on the command line
    (``args.given``) whose value differs from the checkpoint's ``config``, which wins:
    ``["--d-model 64 is ignored: the checkpoint's model has d_model 128"]``."""
    given = getattr(args, "given", ())
    return [
        f"--{name.replace('_', '-')} {getattr(args, name)} is ignored: the checkpoint's model has "
        f"{key} {config.get(key)}"
        for key, name in MODEL_FLAGS.items()
        if name in given and getattr(args, name) != config.get(key)
    ]


class _Progress:
    """The progress bar (tqdm, on stderr): steps out of ``--steps``, or, when only a
    ``--time-budget`` limits the run, seconds out of the budget, so that it has a total and
    an ETA either way.

    ``disable``: True hides it (``--quiet``); None lets tqdm decide, which shows it only
    when stderr is a terminal, so a log file gets the log lines (written with
    ``bar.write``, shown either way) and not hundreds of kilobytes of redrawn bars."""

    def __init__(self, steps, time_budget, start_step, disable):
        self.by_time = not steps
        if self.by_time:
            self.bar = tqdm(
                total=time_budget,
                unit="s",
                disable=disable,
                file=sys.stderr,
                dynamic_ncols=True,
                bar_format="{l_bar}{bar}| {n:.0f}/{total:.0f} s [{elapsed}<{remaining}{postfix}]",
            )
        else:  # counts on from a resumed step
            self.bar = tqdm(
                total=start_step + steps,
                initial=start_step,
                unit="step",
                disable=disable,
                file=sys.stderr,
                dynamic_ncols=True,
            )

    def update(self, step, elapsed, postfix):
        self.bar.update(min(elapsed, self.bar.total) - self.bar.n if self.by_time else 1)
        self.bar.set_postfix_str(f"step {step}, {postfix}" if self.by_time else postfix, refresh=False)

    def close(self, elapsed):
        if self.by_time:  # the time spent since the last step counts too (all of it, when the budget ran out)
            self.bar.update(min(elapsed, self.bar.total) - self.bar.n)
        self.bar.close()


@contextlib.contextmanager
def _ctrl_c_lands_after():
    """Inside the block Ctrl-C (and SIGHUP, SIGTERM) waits (:func:`~minitorch_attn.stopping.stops_wait`);
    it stops the program as KeyboardInterrupt once the block is done. A block that must not be cut in half (an
    optimizer step and its bookkeeping) so either happens whole or not at all."""
    with stops_wait() as pressed:
        yield
    if pressed:
        raise KeyboardInterrupt


def _silent(*args, **kwargs):
    pass


def run_training(args):
    """Run the whole training job described by ``args`` (the ``train`` command's flags,
    see :mod:`minitorch_attn.app.cli`) and return the metrics dict it writes to ``metrics.json``.

    Every size the text must have is checked before the run folder is made. Ctrl-C stops
    training; the checkpoint is then written at once (a Ctrl-C during the write waits for
    it) and before the final validation, sample and pictures, which a second Ctrl-C skips.
    ``metrics["interrupted"]`` says whether Ctrl-C was pressed. With ``--quiet`` only the
    results are printed (the final validation, the sample, where the outputs are).
    """
    wall_start = time.perf_counter()
    log = _silent if args.quiet else print
    job = _prepare(args, log)
    interrupted = _train(args, job, log)
    if interrupted:
        print(
            f"\ninterrupted at step {job.step}: saving the checkpoint, then the final validation "
            f"(Ctrl-C again skips it)"
        )

    path = os.path.join(args.out, "checkpoint.npz")
    with stops_wait() as pressed:  # first the checkpoint, whatever happens next
        ckpt.save(
            path,
            job.model,
            job.opt,
            config=job.config,
            vocab=job.vocab.chars,
            step=job.step,
            history=job.history,
            seed=args.seed,
        )
    print(f"checkpoint: {path} (step {job.step})")
    results = {"val_bpc": None, "sample": None, "plots": []}
    if not pressed:
        try:
            _final_results(args, job, log, results)
        except KeyboardInterrupt:
            pressed.append(True)
    if pressed:
        print(
            f"\ninterrupted{' again' if interrupted else ''}: the checkpoint {path} is saved; the final "
            f"validation, sample and pictures that were not done are skipped"
        )
        interrupted = True

    steps_done, tokens_per_step = job.step - job.start_step, args.batch_size * job.block_size
    metrics = {
        "steps": job.step,
        "steps_this_run": steps_done,
        "tokens_per_s": steps_done * tokens_per_step / job.train_s if job.train_s > 0 else 0.0,
        "val_bpc": results["val_bpc"],
        "bigram_bpc": job.baseline,
        "train_bpc": float(numpy.mean(job.history["train_bpc"][-20:])) if job.history["train_bpc"] else None,
        "wall_s": time.perf_counter() - wall_start,
        "train_s": job.train_s,
        "eval_s": job.eval_s,
        "parameters": job.model.num_parameters(),
        "config": job.config,
        "device": args.device,
        "seed": args.seed,
        "batch_size": args.batch_size,
        "lr": args.lr,
        "min_lr_ratio": args.min_lr_ratio,
        "interrupted": interrupted,
        "resumed_from": args.resume,
        "blas_threads": job.blas.counts,
        "sample": results["sample"],
        "plots": results["plots"],
    }
    with stops_wait():
        write_atomically(os.path.join(args.out, "metrics.json"), json.dumps(metrics, indent=2).encode("utf-8"))
    print(
        f"{job.step} steps, {metrics['tokens_per_s']:,.0f} tokens/s, {metrics['wall_s']:.0f} s in all; "
        f"outputs in {args.out}"
    )
    return metrics


def _final_results(args, job, log, results):
    """The validation on the whole split, the sample (printed as it is drawn) and the
    pictures, each put in ``results`` as soon as it exists."""
    log(f"final validation on the whole split ({len(job.val_ids) - 1:,} characters)...")
    with job.blas.best():
        results["val_bpc"] = evaluate_bpc(job.model, job.val_ids, job.block_size, args.batch_size, None, args.device)
    print(
        f"step {job.step}: validation {results['val_bpc']:.3f} bits/char on the whole split "
        f"(bigram baseline {job.baseline:.3f})"
    )
    if job.history["val_bpc"]:
        print(_estimates_against_the_whole_split(job, args, results["val_bpc"]))
    print("sample:")
    results["sample"] = generate(
        job.model,
        job.vocab,
        args.sample_prompt,
        max_new_tokens=args.sample_tokens,
        temperature=0.8,
        top_p=args.top_p,
        seed=args.seed,
        device=args.device,
        stream=sys.stdout,
    )
    print()
    results["plots"] = write_plots(
        args.out,
        job.history,
        job.baseline,
        job.model,
        job.vocab,
        args.device,
        log,
        final=(job.step, results["val_bpc"]),
        windows=args.eval_windows,
    )


def _estimates_against_the_whole_split(job, args, val_bpc):
    """Why the whole split's bits/char differ from the last periodic estimate: the estimates
    score ``--eval-windows`` windows at the same places of the split every time
    (:func:`evaluate_bpc` spreads them evenly), so their gap to the whole split is mostly how
    hard the text at those places is against the split's average, about the same at every
    step; the steps after the last estimate (a short ``--resume`` with its warm restart
    among them) change the model too, for better or worse."""
    scored = min(len(job.val_ids) - 1, args.eval_windows * (job.block_size - job.block_size // 2))
    last, last_step = job.history["val_bpc"][-1], job.history["val_step"][-1]
    gap = last - val_bpc
    why = f"the text at those places is {'easier' if gap < 0 else 'harder'} than the split's average"
    if last_step < job.step:
        why += f"; the model also changed in the {job.step - last_step} steps since"
    return (
        f"  (the periodic estimates above score {args.eval_windows} windows, about {scored:,} of the split's "
        f"{len(job.val_ids) - 1:,} characters, at the same places each time; the last, {last:.3f} at step "
        f"{last_step}, is {abs(gap):.3f} {'below' if gap < 0 else 'above'} the whole split: {why})"
    )


def _prepare(args, log):
    """Everything before the first step: the text, its vocabulary (the checkpoint's when
    resuming), the size checks, the split, the baseline, the model and its optimizer (with
    the checkpoint's weights and moments), and only then the run folder."""
    manual_seed(args.seed)
    get_backend(args.device)  # fail early, with the install hint, for a missing device
    text = load_corpus(args.text)
    resumed = load_training_checkpoint(args.resume) if args.resume else None
    block_size = args.block_size if resumed is None else resumed["config"]["max_seq_len"]
    check_text_size(len(text), block_size, args.val_fraction)  # before the vocabulary: an empty text has none
    if resumed is None:
        vocab = CharVocab.from_text(text)
        config = model_config(args, len(vocab))
    else:
        vocab, config = CharVocab(resumed["extra"]["vocab"]), resumed["config"]
    train_ids, val_ids = split_ids(vocab.encode(text), args.val_fraction)
    if vocab.unknown_count:
        log(f"note: {vocab.unknown_count} characters of the text are not in the checkpoint's vocabulary")
    job = types.SimpleNamespace(
        vocab=vocab,
        config=config,
        block_size=block_size,
        train_ids=train_ids,
        val_ids=val_ids,
        baseline=bigram_bpc(train_ids, val_ids, len(vocab)),
        model=nn.GPT(**config).to(args.device),
        start_step=0,
        train_s=0.0,
        eval_s=0.0,
        history={"step": [], "train_bpc": [], "val_step": [], "val_bpc": []},
        rng=numpy.random.default_rng(args.seed),
    )
    job.config = config = dict(job.model.config)  # with what the model resolved (the feed-forward width)
    job.opt = make_optimizer(job.model, args.lr, args.weight_decay)
    if resumed is not None:
        ckpt.restore(resumed, job.model, job.opt)
        job.start_step, job.history = resumed["extra"]["step"], resumed["extra"]["history"]
        job.rng = numpy.random.default_rng([args.seed, job.start_step])
        for group in job.opt.param_groups:  # the schedule restarts (a warm restart, as SGDR)
            group["lr"] = args.lr
        for message in ignored_model_flags(args, config):
            print(f"warning: {message}", file=sys.stderr)
    job.step = job.start_step
    os.makedirs(args.out, exist_ok=True)  # only once the inputs have proved usable
    if resumed is not None:
        log(
            f"resuming from step {job.start_step} of {args.resume} with its model and vocabulary; "
            f"steps count on from {job.start_step}, the learning-rate schedule starts again"
        )
    log(
        f"corpus: {len(text):,} characters, vocabulary {len(vocab)}, train {len(train_ids):,} / "
        f"val {len(val_ids):,}; bigram baseline {job.baseline:.3f} bits/char"
    )
    log(
        f"model: GPT with {job.model.num_parameters():,} parameters ({describe_model(config, block_size)}) "
        f"on {args.device}"
    )
    log(f"run folder: {args.out}")
    return job


def _train(args, job, log):
    """The training loop: steps until ``--steps`` or ``--time-budget`` runs out, with the
    periodic validation. Returns True if Ctrl-C stopped it."""
    total_steps = args.steps if args.steps else 10**9
    # the schedule counts the steps of this run (with --time-budget, its end is re-estimated)
    schedule = optim.WarmupCosineLR(
        job.opt, warmup_steps=args.warmup_steps, total_steps=args.steps or 1000, min_lr_ratio=args.min_lr_ratio
    )
    progress = _Progress(args.steps, args.time_budget, job.start_step, disable=True if args.quiet else None)
    tokens_per_step = args.batch_size * job.block_size
    train_start, smoothed = time.perf_counter(), None
    # speed: threads by timing, each thread taking its part of the batch (nn.SplitBatch):
    # one per core wins on an idle machine and, by less, beside a busy program; re-timed
    # every 100 steps, since the load changes (--threads N fixes the number)
    job.blas = FastestThreads()
    split = nn.SplitBatch(job.model, next_char_loss)
    try:
        while job.step - job.start_step < total_steps:
            elapsed = time.perf_counter() - train_start
            done = job.step - job.start_step
            if args.time_budget and elapsed >= args.time_budget:
                break
            if args.time_budget and not args.steps and done >= 10:
                # running for a time budget: re-estimate where the schedule will end
                per_step = (elapsed - job.eval_s) / done
                schedule.total_steps = int((args.time_budget - job.eval_s) / per_step)
            with job.blas, use_fused():  # speed: the fused twins of the step's formulas (speed/fused.py)
                x, y = get_batch(job.train_ids, args.batch_size, job.block_size, job.rng, args.device)
                job.opt.zero_grad()
                bpc = split.backward(x, y) / LN2  # loss = next_char_loss(model, x, y); loss.backward()
                if args.grad_clip:  # --grad-clip 0: no clipping
                    optim.clip_grad_norm_(job.model.parameters(), args.grad_clip)
                with _ctrl_c_lands_after():  # the step lands whole: weights, moments, its number and history
                    job.opt.step()
                    job.step += 1
                    job.history["step"].append(job.step)
                    job.history["train_bpc"].append(bpc)
            schedule.step(job.step - job.start_step)  # after optimizer.step(), as in PyTorch: the next step's rate
            smoothed = bpc if smoothed is None else 0.9 * smoothed + 0.1 * bpc
            if job.step % args.eval_interval == 0:
                t = time.perf_counter()
                with job.blas.best():
                    val_bpc = evaluate_bpc(
                        job.model, job.val_ids, job.block_size, args.batch_size, args.eval_windows, args.device
                    )
                job.eval_s += time.perf_counter() - t
                with _ctrl_c_lands_after():  # the two lists stay the same length
                    job.history["val_step"].append(job.step)
                    job.history["val_bpc"].append(val_bpc)
                if not args.quiet:
                    progress.bar.write(
                        f"step {job.step}: val {val_bpc:.3f} bits/char (bigram {job.baseline:.3f}; "
                        f"{args.eval_windows} windows)"
                    )
            elapsed = time.perf_counter() - train_start
            rate = (job.step - job.start_step) * tokens_per_step / max(1e-9, elapsed - job.eval_s)
            progress.update(job.step, elapsed, f"loss {smoothed:.3f} bpc, {rate:,.0f} tok/s")
        return False
    except KeyboardInterrupt:
        return True
    finally:
        progress.close(time.perf_counter() - train_start)
        job.train_s = time.perf_counter() - train_start - job.eval_s
