"""How many CPU threads the library uses: decided here, at run time, without environment variables.

Two layers of threads can run this package's NumPy work on the ``"cpu"`` device:

* **BLAS threads**: OpenBLAS (or MKL) splits each matrix product over its own threads;
* **our own pool**: a training step's batch runs one part per thread
  (:class:`minitorch_attn.nn.SplitBatch`), the optimizer's updates one parameter at a
  time on each thread, flash attention independent (batch, head) chunks, LayerNorm
  and RMSNorm of large inputs chunks of rows, and GELU, SiLU and dense attention of
  large inputs chunks of their first axis, in a pool of Python threads
  (:mod:`.pool`, :mod:`.rows`); NumPy releases the GIL inside BLAS and
  ufuncs, so the chunks really run on different cores. A job of the pool runs what it
  calls on its own thread (:func:`alone`): an op inside a part of a batch does not
  split itself again.

The two layers must not be stacked: BLAS threads spin-wait for each other between the
pieces of a product, and a core taken by another thread (ours, or another program's) makes
every product wait for a whole scheduler time slice. So:

1. where we run our own pool, BLAS runs one thread (:func:`blas_threads` around the pool);
2. elsewhere, loops of repeated work (training steps, timed demo runs) let
   :class:`FastestThreads` time one thread against one per core (BLAS's and the pool's
   alike) and keep the faster,
   checking again now and then because the load of the machine changes: two threads
   (the batch in two parts) are about 1.6 times as fast for the default GPT's training
   step on an idle 2-core machine as one; beside a program that keeps a core busy they
   gain about 8% over one;
3. :func:`set_num_threads` (the ``--threads N`` flag of the commands, demos and
   benchmarks) fixes the number instead, as ``torch.set_num_threads`` does.

The BLAS thread count is changed with threadpoolctl, the library scikit-learn uses for
this: it finds the BLAS that NumPy loaded and calls its own setter
(``openblas_set_num_threads``, ...), so it works after NumPy is imported, which an
environment variable such as ``OPENBLAS_NUM_THREADS`` does not. The setting is
process-wide: calling the package from several threads at once shares it.
"""

from __future__ import annotations

import functools
import numbers
import os
import statistics
import threading
import time
import warnings
from contextlib import contextmanager

import numpy  # noqa: F401  (loads NumPy's BLAS, which the handle below must see)
from threadpoolctl import ThreadpoolController

_requested = None  # set_num_threads(n): n; None: the library chooses
_chosen = None  # the count a FastestThreads runs the current repetition with (None: outside one)
_this_thread = threading.local()  # .alone: True in a job of the pool, which runs on its own thread


def available_cores():
    """The number of CPU cores this process may run on (its affinity mask where the OS has
    one, else ``os.cpu_count()``)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def set_num_threads(n: int) -> None:
    """Use ``n`` threads on the CPU from now on (as ``torch.set_num_threads``): BLAS runs
    ``n`` threads outside our own pools, the pool (a training step's parts of the batch,
    the optimizer, flash attention, large normalizations and activations) has ``n``
    threads, each with a one-thread BLAS, and nothing chooses by timing. ``None`` gives the
    choice back to the library.

    Warns (UserWarning) when ``n`` is more than :func:`available_cores`.

    Raises:
        TypeError: if ``n`` is not an int (or None). ValueError: if ``n < 1``.
    """
    global _requested
    if n is not None:
        if not isinstance(n, numbers.Integral) or isinstance(n, bool):  # Python's or NumPy's
            raise TypeError(f"set_num_threads: expected an int >= 1 or None, got {n!r}")
        n = int(n)
        if n < 1:
            raise ValueError(f"set_num_threads: expected an int >= 1 or None, got {n}")
        if n > available_cores():
            warnings.warn(
                f"{n} threads are more than the {available_cores()} cores this process may run on: "
                f"they take turns on them, and every product waits for the slowest (expected at most "
                f"{available_cores()})",
                stacklevel=2,
            )
        _set_blas(n)
    _requested = n


def get_num_threads() -> int:
    """The threads the library uses on the CPU (the size of the pool, :mod:`.pool`):
    the number given to :func:`set_num_threads`, else, inside a repetition run by
    :class:`FastestThreads`, the count it runs that repetition with, else one per
    available core. Inside a job of the pool (``alone``) it is 1: a job's work runs on
    its own thread, never on a pool of its own."""
    if in_a_job():
        return 1
    if _requested is not None:
        return _requested
    return _chosen if _chosen is not None else available_cores()


@contextmanager
def alone():
    """Inside the ``with`` block, on this thread only, :func:`get_num_threads` is 1: the pool
    runs its jobs so, and a job that calls an op with threads of its own (GELU, attention,
    the norms) runs that op's chunks itself instead of waiting for the pool it is part of."""
    before = getattr(_this_thread, "alone", False)
    _this_thread.alone = True
    try:
        yield
    finally:
        _this_thread.alone = before


def in_a_job():
    """True on a thread that runs a job of the pool (inside :func:`alone`)."""
    return getattr(_this_thread, "alone", False)


def chosen_by_user():
    """True after ``set_num_threads(n)`` with an int: then nothing chooses by timing."""
    return _requested is not None


@functools.cache
def _blas():
    """threadpoolctl's handle on the BLAS libraries loaded in this process (found once:
    looking them up costs about 0.2 ms, using the handle a few microseconds)."""
    return ThreadpoolController().select(user_api="blas")


def blas_thread_count():
    """The number of threads BLAS uses now (1 if no BLAS library was found)."""
    return max(_blas_counts(), default=1)


def _blas_counts():
    """The thread count of each BLAS library of the process, in the order of ``_blas()``."""
    return [lib.num_threads for lib in _blas().lib_controllers]


def _set_blas(n):
    """Tell every BLAS library of the process to use ``n`` threads; return what they used."""
    before = _blas_counts()
    for lib in _blas().lib_controllers:
        lib.set_num_threads(n)
    return before


def _restore_blas(counts):
    """Give each BLAS library back the count that :func:`_set_blas` returned."""
    for lib, count in zip(_blas().lib_controllers, counts):
        lib.set_num_threads(count)


def _use_threads(n):
    """Run BLAS and the pool with ``n`` threads (a :class:`FastestThreads` repetition);
    return what :func:`_restore_threads` needs to put the previous counts back."""
    global _chosen
    before = (_set_blas(n), _chosen)
    _chosen = n
    return before


def _restore_threads(before):
    global _chosen
    blas, _chosen = before
    _restore_blas(blas)


@contextmanager
def blas_threads(n):
    """Inside the ``with`` block BLAS uses ``n`` threads; the previous count comes back after
    (also after a Ctrl-C that lands while the count is being set: it is set inside the
    ``try``, so BLAS is never left at ``n``)."""
    before = _blas_counts()
    try:
        _set_blas(n)
        yield
    finally:
        _restore_blas(before)


class FastestThreads:
    """Picks the thread count (BLAS's and the pool's) that makes a repeated piece of work
    fastest, by timing it.

    Use it around each repetition (a training step, a timed call)::

        threads = FastestThreads()
        for step in range(steps):
            with threads:
                train_step()

    The first ``warmup`` repetitions run untimed with the first candidate (one thread, the
    safe choice): a job's first steps are slow for reasons of their own (arrays allocated
    for the first time, caches cold), and timing them would favour whichever count came
    later. Then it alternates the candidates (one thread, and one per core) over ``trial``
    repetitions each, in the order A B, B A, A B, ... (so that a drift in speed during the
    trial hits them alike), keeps the one with the smaller median time for the next
    ``period`` repetitions, then times them all again: the load of the machine changes
    while a long job runs. After :func:`set_num_threads` there is one candidate and no trial.

    Args:
        candidates: the thread counts to try (default: 1 and the available cores).
        trial: repetitions of each candidate per trial (their median is compared).
        period: repetitions between two trials.
        warmup: untimed repetitions before the first trial.
        clock: the timer (``time.perf_counter``; the tests pass a fake one).

    Raises:
        TypeError: a count that is not an int. ValueError: no candidate, a thread count
            < 1, ``trial < 1``, ``period < 0`` or ``warmup < 0`` (each would make the
            chooser never decide, or decide on nothing).
    """

    def __init__(self, candidates=None, trial=3, period=100, warmup=2, clock=time.perf_counter):
        if candidates is None:
            candidates = (get_num_threads(),) if chosen_by_user() else sorted({1, available_cores()})
        self.candidates = tuple(candidates)
        if not self.candidates:
            raise ValueError("FastestThreads: expected at least one candidate thread count")
        for name, value, least in [("a candidate", n, 1) for n in self.candidates] + [
            ("trial", trial, 1),
            ("period", period, 0),
            ("warmup", warmup, 0),
        ]:
            if not isinstance(value, numbers.Integral) or isinstance(value, bool):
                raise TypeError(f"FastestThreads: {name} must be an int, got {value!r}")
            if value < least:
                raise ValueError(f"FastestThreads: {name} must be >= {least}, got {value}")
        self.trial, self.period, self.clock = trial, period, clock
        # the count to run until the first trial (None: that trial starts at once)
        self.choice = self.candidates[0] if len(self.candidates) == 1 or warmup else None
        self.until_trial = None if len(self.candidates) == 1 else warmup  # repetitions before the next trial
        self.trial_order = []  # the counts still to time in this trial
        self.samples = {}  # count -> seconds of its repetitions in this trial
        self.counts = {n: 0 for n in self.candidates}  # repetitions run with each
        self.trials_done = 0

    def __enter__(self):
        if self.until_trial == 0 and not self.trial_order:  # a new trial: A B, B A, A B, ...
            self.trial_order = [
                n for r in range(self.trial) for n in (self.candidates if r % 2 == 0 else self.candidates[::-1])
            ]
            self.samples = {n: [] for n in self.candidates}
        self.timed = bool(self.trial_order)
        if self.timed:
            self.current = self.trial_order.pop(0)
        else:
            self.current = self.choice
            self.until_trial = None if self.until_trial is None else self.until_trial - 1
        self._before = _use_threads(self.current)
        self.start = self.clock()
        return self

    def __exit__(self, *exc):
        elapsed = self.clock() - self.start
        _restore_threads(self._before)
        self.counts[self.current] += 1
        if self.timed:
            self.samples[self.current].append(elapsed)
            if not self.trial_order:  # the trial is complete: keep the fastest
                self.choice = min(self.candidates, key=lambda n: statistics.median(self.samples[n]))
                self.until_trial = self.period
                self.trials_done += 1
        return False

    @contextmanager
    def best(self):
        """``with chooser.best():`` runs a block, untimed, at the count chosen so far (other
        work of the same job, such as validation between training steps)."""
        before = _use_threads(self.choice if self.choice is not None else self.candidates[0])
        try:
            yield
        finally:
            _restore_threads(before)

    def most_used(self):
        """The thread count that ran the most repetitions so far."""
        return max(self.counts, key=self.counts.get)
