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
import select
import stat

import numpy

from ..core.backend import host_generator
from ..core.factories import tensor

LN2 = math.log(2.0)


def load_corpus(path=None):
    """The training text: the file at ``path`` (UTF-8), or the Python language reference
    (``pydoc_data.topics``, its topics joined in sorted order).

    Whether the text is long enough depends on the context length and the split: see
    :func:`check_text_size`.

    Raises:
        FileNotFoundError: for a missing file (OSError for a folder or an unreadable file).
        ValueError: if the file is not UTF-8 text.
    """
    if path is None:
        from pydoc_data.topics import topics

        text = "\n\n".join(topics[key] for key in sorted(topics))
    else:
        try:
            text = _read_bytes(path).decode("utf-8")
        except UnicodeDecodeError as error:
            raise ValueError(f"{os.fspath(path)!r} is not UTF-8 text (byte {error.start}: {error.reason})") from None
        text = text.replace("\r\n", "\n").replace("\r", "\n")  # any line ending as "\n", as open() in text mode reads
    return text


def _read_bytes(path):
    """All bytes of the file at ``path``. A pipe (as in ``--text <(command)``), a named
    pipe or a character device is opened without waiting and read in
    chunks, waiting at most 0.1 s at a time for more: a blocking ``open`` or ``read`` cannot
    notice a Ctrl-C that arrived just before it began, and the program would then wait for
    a writer for ever (and a device that never ends would never let Ctrl-C through)."""
    mode = os.stat(path).st_mode
    if os.name != "posix" or not (stat.S_ISFIFO(mode) or stat.S_ISCHR(mode)):  # a file (or an error to report)
        with open(path, "rb") as f:
            return f.read()
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # a named pipe: no wait for its writer here
    try:
        waiting = select.poll()  # poll, not select: any file descriptor number
        waiting.register(fd, select.POLLIN)
        chunks = []
        while True:  # a Ctrl-C (KeyboardInterrupt) is raised in here, between two waits or chunks
            if not waiting.poll(100):
                continue
            try:
                chunk = os.read(fd, 1 << 20)
            except BlockingIOError:  # nothing to read after all
                continue
            if not chunk:
                return b"".join(chunks)  # the writer closed its end
            chunks.append(chunk)
    finally:
        os.close(fd)


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
    cut = _split_point(len(ids), val_fraction)
    return ids[:cut], ids[cut:]


def _split_point(length, val_fraction):
    """Where the validation part of ``length`` tokens starts (the one formula of the split)."""
    return int(length * (1.0 - val_fraction))


def check_text_size(length, block_size, val_fraction):
    """Raise a ValueError, with the numbers, unless a text of ``length`` characters split at
    ``val_fraction`` leaves both parts at least one window of ``block_size + 1`` characters
    (what :func:`get_batch` and the validation need). The message gives the shortest text
    that would do (:func:`shortest_text`)."""
    cut = _split_point(length, val_fraction)
    if min(cut, length - cut) <= block_size:
        raise ValueError(
            f"the text has {length:,} characters, too few for a context of {block_size} characters and "
            f"{val_fraction:g} of it for validation: training and validation each need a window of "
            f"{block_size + 1} characters (the context + 1), and this text gives them {cut:,} and {length - cut:,}. "
            f"Give a text of at least {shortest_text(block_size, val_fraction):,} characters, a larger "
            f"--val-fraction or a smaller --block-size"
        )


def shortest_text(block_size, val_fraction):
    """The fewest characters whose split leaves both parts ``block_size + 1`` long (641 for
    the defaults: a context of 64 and a tenth for validation)."""
    need = block_size + 1
    # the validation part is at most length * val_fraction + 1 and the training part at most
    # length * (1 - val_fraction): start just below both bounds and count up
    length = max(2 * need, math.floor((need - 1) / val_fraction), math.floor(need / (1 - val_fraction))) - 1
    while min(_split_point(length, val_fraction), length - _split_point(length, val_fraction)) < need:
        length += 1
    return length


def get_batch(ids, batch_size, block_size, rng=None, device="cpu"):
    """``batch_size`` random windows of ``ids`` (a 1-D int64 NumPy array), their starts
    drawn by ``rng`` (a NumPy ``Generator``), or from the package's stream
    (:func:`minitorch_attn.manual_seed`) when None.

    Returns:
        ``(x, y)``, int64 Tensors of shape ``(batch_size, block_size)`` on ``device``,
        ``y[b, t] = x[b, t + 1]`` (the next character).
    Raises:
        ValueError: if ``ids`` is not longer than ``block_size``.
    """
    if len(ids) <= block_size:
        raise ValueError(f"{len(ids)} tokens are too few for windows of {block_size} + 1")
    rng = rng if rng is not None else host_generator()
    starts = rng.integers(0, len(ids) - block_size, size=batch_size)
    windows = numpy.stack([ids[s : s + block_size + 1] for s in starts])
    return tensor(windows[:, :-1], device=device), tensor(windows[:, 1:], device=device)


def bigram_bpc(train_ids, val_ids, vocab_size):
    """Validation bits per character of the add-one-smoothed bigram model
    ``P(b | a) = (count(a b) + 1) / (count(a) + V)`` fitted on ``train_ids``."""
    counts = numpy.ones((vocab_size, vocab_size))
    numpy.add.at(counts, (train_ids[:-1], train_ids[1:]), 1.0)
    log_p = numpy.log(counts / counts.sum(axis=1, keepdims=True))
    return float(-log_p[val_ids[:-1], val_ids[1:]].mean() / LN2)
