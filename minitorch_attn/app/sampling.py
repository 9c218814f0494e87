"""Sampling from a trained GPT: temperature, top-k and nucleus (top-p) filtering, with a
key/value cache so each new character attends to cached keys and values instead of
recomputing the prefix; loading the checkpoints of the training job; the
``minitorch-attn sample`` command.
"""

from __future__ import annotations

import math
import numbers
import os
import sys

import numpy

from .. import nn
from ..core.autograd import no_grad
from ..core.backend import host_generator
from ..core.factories import tensor
from ..core.tensor import _is_int
from . import checkpoint as ckpt
from .data import CharVocab


def _check_sampling(max_new_tokens, temperature, top_k, top_p=None):
    """Raise a ValueError unless the sampling options make sense."""
    if not _is_int(max_new_tokens) or max_new_tokens < 0:
        raise ValueError(f"max_new_tokens must be an int >= 0, got {max_new_tokens!r}")
    if not isinstance(temperature, numbers.Real) or not 0 <= temperature < math.inf:
        raise ValueError(f"temperature must be a finite number >= 0 (0 = always the likeliest), got {temperature!r}")
    if top_k is not None and (not _is_int(top_k) or top_k < 1):
        raise ValueError(f"top_k must be an int >= 1 (or None for the whole vocabulary), got {top_k!r}")
    if top_p is not None and (not isinstance(top_p, numbers.Real) or isinstance(top_p, bool) or not 0 < top_p <= 1):
        raise ValueError(f"top_p must be a number in (0, 1] (or None for the whole vocabulary), got {top_p!r}")


def sampling_probabilities(logits_row, temperature=1.0, top_k=None, top_p=None):
    """The distribution one token is drawn from (NumPy float64, summing to 1), from a row of
    logits: softmax of ``logits / temperature`` over the tokens that survive both filters.

    - top-k: the ``top_k`` largest logits (ties with the k-th are kept too);
    - top-p, nucleus sampling (Holtzman et al., arXiv:1904.09751, §3.1): the smallest set of
      the likeliest tokens whose probabilities add up to at least ``top_p``. The tokens are
      taken in order of probability (equal ones by id) while the mass *before* each is below
      ``top_p``, so the token that crosses the threshold is kept.

    ``temperature`` must be > 0 here (0 means "always the likeliest": :func:`_next_id`).
    The logits are shifted by their maximum *before* the division, so every ``z`` is
    ``<= 0`` with the likeliest at exactly 0: however small the temperature, the others
    go to ``-inf`` (probability 0) and never to ``inf - inf = NaN``, so a tiny temperature
    is greedy decoding (ties for the maximum share it evenly), as its limit is.
    """
    logits = numpy.asarray(logits_row, dtype=numpy.float64)
    with numpy.errstate(over="ignore"):  # -inf for the unlikely ones at a tiny temperature: meant
        z = (logits - logits.max()) / temperature
    if top_k is not None and top_k < len(z):
        z = numpy.where(z < numpy.sort(z)[-top_k], -numpy.inf, z)
    p = numpy.exp(z - z.max())
    p /= p.sum()
    if top_p is not None and top_p < 1:
        order = numpy.argsort(-p, kind="stable")  # likeliest first
        mass_before = numpy.concatenate(([0.0], numpy.cumsum(p[order])[:-1]))  # of the likelier ones
        p[order[mass_before >= top_p]] = 0.0  # every token after the one that crosses top_p
        p /= p.sum()
    return p


def _next_id(logits_row, temperature, top_k, rng, top_p=None):
    """Sample one id from a row of logits (NumPy, float64) with temperature, top-k and top-p
    (:func:`sampling_probabilities`); temperature 0 takes the likeliest."""
    if temperature <= 0:
        return int(numpy.argmax(logits_row))
    p = sampling_probabilities(logits_row, temperature, top_k, top_p)
    return int(rng.choice(len(p), p=p))


def generate_ids(
    model,
    ids,
    max_new_tokens,
    temperature=1.0,
    top_k=None,
    top_p=None,
    rng=None,
    use_cache=True,
    device="cpu",
    return_logits=False,
    on_token=None,
):
    """Continue the token ids ``ids`` (a non-empty list) by ``max_new_tokens`` sampled ids.

    Without the cache every step runs the model on ``model.context(ids)``: the last
    ``max_seq_len`` ids with learned positions, all of them with rotary ones (whose
    attention slides over the last ``max_seq_len`` keys). With ``use_cache`` the prompt runs
    through the model once and every later step feeds only the newest token, attending to
    the cached keys and values. Both give the same logits at every step, also past
    ``max_seq_len`` (the tests check it in float64): a rotary cache slides; a learned one is
    refilled from the window each step once the positions run out, since every token's
    position then shifts.

    ``temperature``, ``top_k`` and ``top_p`` shape each step's distribution (see
    :func:`sampling_probabilities`); ``on_token(id)``, when given, is called with each new id
    as soon as it is drawn (the ``sample`` command prints it then).

    Returns:
        the new ids (a list), and with ``return_logits`` also the logits of each step (NumPy).
    Raises:
        ValueError: for an empty prompt, ``max_new_tokens < 0``, a negative or non-finite
            ``temperature`` (0 = greedy), ``top_k < 1`` (one larger than the vocabulary
            keeps every token) or ``top_p`` outside ``(0, 1]``.
    """
    _check_sampling(max_new_tokens, temperature, top_k, top_p)
    if not ids:
        raise ValueError("generation needs a prompt of at least one token")
    rng = rng if rng is not None else host_generator()  # governed by mt.manual_seed
    ids, new, all_logits = list(ids), [], []
    with nn.in_eval_mode(model), no_grad():
        cache, feed = None, None
        for _ in range(max_new_tokens):
            if not use_cache:
                logits = model(tensor([model.context(ids)], device=device))
            else:
                if cache is None or not cache.fits(len(feed)):  # first step, or out of positions
                    cache, feed = model.new_cache(), model.context(ids)
                logits = model(tensor([feed], device=device), cache=cache)
            row = logits[0, -1].numpy().astype(numpy.float64)
            next_id = _next_id(row, temperature, top_k, rng, top_p)
            if on_token is not None:
                on_token(next_id)
            all_logits.append(row)
            ids.append(next_id)
            new.append(next_id)
            feed = [next_id]
    return (new, all_logits) if return_logits else new


def generate(
    model,
    vocab,
    prompt,
    max_new_tokens=200,
    temperature=1.0,
    top_k=None,
    top_p=None,
    seed=None,
    device="cpu",
    stream=None,
):
    """The prompt followed by ``max_new_tokens`` sampled characters (a string).

    Characters of the prompt that are not in the vocabulary are replaced by its fallback
    (see :class:`CharVocab`); an empty prompt starts from a newline (or the first token).
    With ``stream`` (a text file such as ``sys.stdout``) the prompt and then each character
    are also written to it, and flushed, as they are generated. ``seed``: the draws' own
    seed, or None to draw from the package's stream (:func:`minitorch_attn.manual_seed`).
    """
    ids = list(vocab.encode(prompt)) if prompt else [vocab.index.get("\n", 0)]
    if stream is not None:
        stream.write(prompt)
        stream.flush()

    def show(token):  # the sample as it grows
        stream.write(vocab.decode([token]))
        stream.flush()

    rng = host_generator() if seed is None else numpy.random.default_rng(seed)  # None: from mt.manual_seed
    new = generate_ids(
        model,
        ids,
        max_new_tokens,
        temperature,
        top_k,
        top_p,
        rng,
        device=device,
        on_token=show if stream is not None else None,
    )
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
        raise ckpt.CheckpointError(
            f"{os.fspath(path)!r} has no {', '.join(missing)}: it was not written by the training job"
        )
    if not isinstance(extra["vocab"], str):
        raise ckpt.CheckpointError(f"{os.fspath(path)!r} has a vocabulary that is not a string of characters")
    if len(extra["vocab"]) != config.get("vocab_size"):
        raise ckpt.CheckpointError(
            f"{os.fspath(path)!r} stores a vocabulary of {len(extra['vocab'])} characters "
            f"but a model with vocab_size {config.get('vocab_size')!r}"
        )
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
    """The ``sample`` command: print a continuation of ``--prompt``, each character as soon
    as it is drawn."""
    model, vocab, _ = load_model(args.checkpoint, args.device)
    before = vocab.unknown_count
    vocab.encode(args.prompt)  # counts the prompt's unknown characters, to say so before sampling
    if vocab.unknown_count > before:
        print(
            f"note: {vocab.unknown_count - before} prompt characters are not in the vocabulary "
            f"and are read as {vocab.chars[vocab.fallback]!r}",
            file=sys.stderr,
        )
    seed = args.seed if args.seed is not None else numpy.random.SeedSequence().entropy  # a new sample each run
    generate(
        model,
        vocab,
        args.prompt,
        args.max_new_tokens,
        args.temperature,
        args.top_k,
        args.top_p,
        seed,
        args.device,
        stream=sys.stdout,
    )
    print()
    return 0
