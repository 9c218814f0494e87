"""The data of the training job: the corpus, its characters as tokens, the split, the batches
and the baseline to beat.

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

Bits per character = cross-entropy in nats / ln 2.
"""

from __future__ import annotations

import math
import os

import numpy

from .core.factories import tensor

LN2 = math.log(2.0)


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
