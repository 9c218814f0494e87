"""The pool: threads over independent jobs on the ``"cpu"`` device.

Who hands it work: the (batch, head) chunks of flash attention (:func:`batch_chunks`,
:func:`take`, :func:`join`), the chunks of rows of a Function that declares itself
row-wise (:mod:`.rows`), an optimizer's parameters (:func:`each_on_threads`) and the
parts of a batch of :class:`minitorch_attn.nn.SplitBatch` (:func:`run_on_threads`).

NumPy releases the GIL inside BLAS and ufuncs, so the jobs really run on different
cores. CuPy and array-api-strict run everything in the calling thread. The pool has
:func:`~.threads.get_num_threads` threads (one per core unless ``set_num_threads`` or
``--threads`` says otherwise), and BLAS runs one thread while the pool works (see
:mod:`.threads` for why the two layers must not be stacked). Nothing here changes a
number: each job computes what it would compute in the calling thread.
"""

from __future__ import annotations

import concurrent.futures
import contextvars
import dataclasses
import functools
import itertools
import signal
import threading

from .threads import alone, blas_threads, get_num_threads, in_a_job


@dataclasses.dataclass(frozen=True)
class Chunk:
    """An index ``x[chunk]`` selecting part of one batch/head axis (all of it if ``axis`` is None)."""

    axis: int | None
    start: int
    stop: int

    def key(self):
        return (slice(None),) * self.axis + (slice(self.start, self.stop), ...)


CHUNKS_PER_THREAD = 2
"""How many chunks of flash attention's batch and heads each thread of the pool gets. speed: the pool hands the
next chunk to whichever thread is free, so with two per thread a thread whose core is
shared with another program does fewer chunks instead of holding up the others; measured
3-7% faster than one chunk per thread at B=1 H=8 N=2048 d=64, on an idle and a busy core."""


def batch_chunks(lead_shape, threads):
    """Split the longest batch/key-head axis into ``CHUNKS_PER_THREAD * threads`` parts (G
    is never split: the heads of a group add into one dK, dV)."""
    if threads <= 1 or not lead_shape or max(lead_shape) < 2:
        return [Chunk(None, 0, 0)]
    axis = max(range(len(lead_shape)), key=lambda a: lead_shape[a])
    size = lead_shape[axis]
    parts = min(CHUNKS_PER_THREAD * threads, size)
    bounds = [size * n // parts for n in range(parts + 1)]
    return [Chunk(axis, a, b) for a, b in zip(bounds, bounds[1:])]


def take(array, chunk):
    """``array[chunk]``, or all of ``array`` where it broadcasts (size 1) on the chunk axis."""
    if array is None:
        return None
    if chunk.axis is None or array.shape[chunk.axis] == 1:
        return array
    return array[chunk.key()]


def run_on_threads(threads, jobs):
    """Run the jobs (one per chunk) and return their results in order: in the calling
    thread when the caller is itself a job of the pool (waiting for the pool's threads,
    all busy with jobs that wait, would wait for ever) or when there is one job; in the
    calling thread with a one-thread BLAS when ``threads`` is 1 (as at one thread: a call
    too small for the pool is also too small for BLAS's threads, whose hand-offs cost
    more than its products gain, and far more when another program keeps a core busy);
    else in the pool with a one-thread BLAS (speed: the pool spreads the chunks over the
    cores; BLAS threads on top would fight it for them). If a job raises, the first error is
    raised once every job has ended; after a Ctrl-C, the jobs not started yet never start
    and the running ones end before the KeyboardInterrupt is raised, so that no job goes
    on writing (a gradient, a weight) after the caller has moved on. Each job runs in a
    copy of the caller's context (``contextvars``), so the caller's ``numpy.errstate``
    holds in it as in the caller (a thread of its own would start from the defaults).

    While the caller hands out the jobs and waits for them, a Ctrl-C is noted, not raised
    (:class:`_CtrlCNoted`): a KeyboardInterrupt raised inside ``concurrent.futures`` or
    ``threading`` (in ``submit``, in a wait, between a lock's taking and its release) can
    leave one of their locks held for ever, and the next hand-out or wait then never
    returns (``minitorch-attn train`` hung so after a Ctrl-C)."""
    if in_a_job():
        return [job() for job in jobs]
    if threads <= 1:
        with blas_threads(1):
            return [job() for job in jobs]
    if len(jobs) == 1:
        return [jobs[0]()]
    ctrl_c = _CtrlCNoted()
    futures = []
    with ctrl_c, blas_threads(1):
        for job in jobs:
            if ctrl_c.stops:  # the rest is not handed out
                break
            futures.append(_pool(threads).submit(contextvars.copy_context().run, _alone, job))
        pending = futures
        while pending:
            if ctrl_c.stops:
                for future in pending:
                    future.cancel()  # the jobs not started never start
            pending = list(concurrent.futures.wait(pending, timeout=_NOTICE_SECONDS).not_done)
    ctrl_c.deliver()  # KeyboardInterrupt, after every job has ended
    return [f.result() for f in futures]


_NOTICE_SECONDS = 0.05
"""How often the caller of the pool looks for a Ctrl-C while it waits for the jobs."""


STOP_SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGHUP", "SIGTERM") if hasattr(signal, name))
"""The signals that stop a command as Ctrl-C does (Windows has no SIGHUP): the pool's caller
notes them while it hands out and waits (:class:`_CtrlCNoted`)."""


def raises_keyboard_interrupt(handler):
    """Whether the signal ``handler`` stops the program with KeyboardInterrupt: Python's own,
    or one that says so (``handler.raises_keyboard_interrupt``, as ``stopping.hang_up``)."""
    return handler is signal.default_int_handler or getattr(handler, "raises_keyboard_interrupt", False)


class _CtrlCNoted:
    """Inside the ``with`` block a Ctrl-C (SIGINT, and the SIGHUP and SIGTERM that stop a
    command as it does, ``STOP_SIGNALS``) is noted instead of handled; after it,
    :meth:`deliver` hands what was noted to the handler that was in place (Python's own
    raises KeyboardInterrupt). ``stops`` is True once a signal was noted whose handler will
    stop the caller with KeyboardInterrupt: the jobs not started are then dropped. Only the
    main thread receives signals; elsewhere, or under a handler that is not a Python
    function (ignored, the default action), nothing changes."""

    def __init__(self):
        self.noted, self.previous = [], {}

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            for signum in STOP_SIGNALS:
                handler = signal.getsignal(signum)
                if callable(handler):
                    self.previous[signum] = handler
                    signal.signal(signum, self._note)
        return self

    def _note(self, signum, frame):
        self.noted.append(signum)

    @property
    def stops(self):
        return any(raises_keyboard_interrupt(self.previous[signum]) for signum in self.noted)

    def __exit__(self, *error):
        for signum, handler in self.previous.items():
            signal.signal(signum, handler)
        return False

    def deliver(self):
        for signum in self.noted:
            self.previous[signum](signum, None)


def _alone(job):
    """One job in a thread of the pool: the ops it calls see one thread (:func:`alone`),
    so none waits for a pool whose threads are all busy with the jobs that wait."""
    with alone():
        return job()


@functools.cache
def _pool(threads):
    """One pool per thread count, made on first use and kept (threads are cheap to keep)."""
    return concurrent.futures.ThreadPoolExecutor(max_workers=threads, thread_name_prefix="minitorch-attn")


def join(xp, parts, chunks):
    """Join per-chunk results along the chunk axis."""
    return parts[0] if len(parts) == 1 else xp.concat(parts, axis=chunks[0].axis)


def each_on_threads(count, work, on_cpu=True):
    """Call ``work(n)`` for every ``n`` in ``range(count)``: on the pool's threads when the
    arrays it touches are NumPy's (``on_cpu``), else (CuPy, array-api-strict) one after the
    other in the calling thread. The ``work(n)`` must be independent of each other (an
    optimizer's update of one parameter)."""
    if on_cpu:
        _run_each(count, work)
    else:
        for n in range(count):
            work(n)


def _run_each(count, work):
    """Call ``work(n)`` for every ``n`` in ``range(count)`` on the pool's threads. Each thread
    takes the next ``n`` as soon as it is done with its last (so a thread whose core is busy
    with another program does fewer, instead of holding up the others)."""
    threads = min(get_num_threads(), count)
    numbers = itertools.count()  # next() on it is atomic: no two threads get the same n

    def worker():
        for n in iter(numbers.__next__, None):
            if n >= count:
                return
            work(n)

    run_on_threads(threads, [worker] * threads)
