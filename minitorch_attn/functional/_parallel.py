"""Threads over independent chunks on the ``"cpu"`` device: the (batch, head) chunks of
:mod:`.flash`, the rows of the normalizations (:func:`by_row_chunks`), the first axis
of GELU, SiLU and dense attention (:func:`on_threads`), and independent pieces of work
of any kind (:func:`each_on_threads`: an optimizer's parameters; the parts of a batch of
:class:`minitorch_attn.nn.SplitBatch` go through :func:`_run`).

NumPy releases the GIL inside BLAS and ufuncs, so the blocks of different heads can run
on different cores. CuPy and array-api-strict run everything in the calling thread.
The pool has :func:`minitorch_attn.threads.get_num_threads` threads (one per core unless
``set_num_threads`` or ``--threads`` says otherwise), and BLAS runs one thread while the
pool works (see :mod:`minitorch_attn.threads` for why the two layers must not be stacked).
"""

from __future__ import annotations

import concurrent.futures
import contextvars
import dataclasses
import functools
import itertools
import math
import signal
import threading

from ..core.autograd import Context, Function
from ..core.backend import backend_of
from ..stopping import STOP_SIGNALS, raises_keyboard_interrupt
from ..threads import alone, blas_threads, get_num_threads, in_a_job

ROW_CHUNK_BYTES = 2**20
"""Bytes of input per chunk of rows in :func:`by_row_chunks`: a chunk and the few
temporaries of one normalization stay in the CPU's caches. Measured on LayerNorm of
(32, 512, 1024) float32: 1 MiB about 8% faster than 256 KiB (fewer calls), as fast as 2 MiB."""

@dataclasses.dataclass(frozen=True)
class _Chunk:
    """An index ``x[chunk]`` selecting part of one batch/head axis (all of it if ``axis`` is None)."""

    axis: int | None
    start: int
    stop: int

    def key(self):
        return (slice(None),) * self.axis + (slice(self.start, self.stop), ...)


def _thread_count(backend):
    """Threads for the chunks: NumPy releases the GIL in BLAS and ufuncs; CuPy and
    array-api-strict run in the calling thread."""
    return get_num_threads() if backend.name == "cpu" else 1


CHUNKS_PER_THREAD = 2
"""Flash attention's (batch, head) chunks per thread of the pool. speed: the pool hands the
next chunk to whichever thread is free, so with two per thread a thread whose core is
shared with another program does fewer chunks instead of holding up the others; measured
3-7% faster than one chunk per thread at B=1 H=8 N=2048 d=64, on an idle and a busy core."""


def _chunks(lead_shape, threads):
    """Split the longest batch/key-head axis into ``CHUNKS_PER_THREAD * threads`` parts (G
    is never split: the heads of a group add into one dK, dV)."""
    if threads <= 1 or not lead_shape or max(lead_shape) < 2:
        return [_Chunk(None, 0, 0)]
    axis = max(range(len(lead_shape)), key=lambda a: lead_shape[a])
    size = lead_shape[axis]
    parts = min(CHUNKS_PER_THREAD * threads, size)
    bounds = [size * n // parts for n in range(parts + 1)]
    return [_Chunk(axis, a, b) for a, b in zip(bounds, bounds[1:])]


def _take(array, chunk):
    """``array[chunk]``, or all of ``array`` where it broadcasts (size 1) on the chunk axis."""
    if array is None:
        return None
    if chunk.axis is None or array.shape[chunk.axis] == 1:
        return array
    return array[chunk.key()]


def _run(threads, jobs):
    """Run the jobs (one per chunk) and return their results in order: in the calling
    thread when there is one, or when the caller is itself a job of the pool (waiting
    for the pool's threads, all busy with jobs that wait, would wait for ever), else in
    the pool with a one-thread BLAS (speed: the pool spreads the chunks over the cores;
    BLAS threads on top would fight it for them). If a job raises, the first error is
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
    if len(jobs) == 1 or in_a_job():
        return [job() for job in jobs]
    ctrl_c = _CtrlCNoted()
    futures = []
    with ctrl_c, blas_threads(1):
        for job in jobs:
            if ctrl_c.stops:                     # the rest is not handed out
                break
            futures.append(_pool(threads).submit(contextvars.copy_context().run, _alone, job))
        pending = futures
        while pending:
            if ctrl_c.stops:
                for future in pending:
                    future.cancel()              # the jobs not started never start
            pending = list(concurrent.futures.wait(pending, timeout=_NOTICE_SECONDS).not_done)
    ctrl_c.deliver()                             # KeyboardInterrupt, after every job has ended
    return [f.result() for f in futures]


_NOTICE_SECONDS = 0.05
"""How often the caller of the pool looks for a Ctrl-C while it waits for the jobs."""


class _CtrlCNoted:
    """Inside the ``with`` block a Ctrl-C (SIGINT, and the SIGHUP and SIGTERM that stop a
    command as it does, :mod:`minitorch_attn.stopping`) is noted instead of handled; after
    it, :meth:`deliver` hands what was noted to the handler that was in place (Python's own
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


def _concat(xp, parts, chunks):
    """Join per-chunk results along the chunk axis."""
    return parts[0] if len(parts) == 1 else xp.concat(parts, axis=chunks[0].axis)


# ---- row-wise and elementwise Functions, chunk by chunk of rows -------------------------------------
PARALLEL_BYTES = 2**19
"""Bytes of the first input from which :func:`on_threads` splits a Function over the pool.
speed: one pass of the pool costs about 0.1 ms (two handoffs and the BLAS setting) and a
chunk's Python code holds the GIL; the tanh GELU of the default GPT (2 MiB) and its
attention (512 KiB of queries, whose scores take several passes each) gain, a LayerNorm of
(1024, 128) (512 KiB of cheap passes) does not, so the norms keep to :func:`by_row_chunks`."""


def by_row_chunks(function, x, *params, axes, **options):
    """``function.apply(x, *params, axes=axes, **options)`` for a Function that works row by
    row over the trailing ``axes`` (LayerNorm, RMSNorm), computed on NumPy in chunks of
    rows, the chunks spread over the pool's threads.

    speed: each line of the normalization's formula reads and writes the whole input once;
    on an input larger than the cache every line is a trip to main memory. A chunk of
    :data:`ROW_CHUNK_BYTES` stays in the caches through all its lines, and the threads work
    on different chunks at once. The formulas are untouched: each chunk runs the
    Function's own ``forward`` and ``backward``. Small inputs (at most two chunks), CuPy and
    array-api-strict call the Function directly.
    """
    backend = backend_of(x.data)
    if backend.name != "cpu" or x.data.nbytes <= 2 * ROW_CHUNK_BYTES:
        return function.apply(x, *params, axes=axes, **options)
    rows = math.prod(x.shape[:x.ndim - len(axes)])
    per_chunk = max(1, ROW_CHUNK_BYTES // max(1, x.data.nbytes // max(1, rows)))
    bounds = tuple(range(0, rows, per_chunk)) + (rows,)
    return _RowChunks.apply(x, *params, function=function, cut=1, trailing=len(axes), bounds=bounds,
                            out_trailing=x.shape[x.ndim - len(axes):],
                            options=dict(options, axes=tuple(range(1, 1 + len(axes)))))


def on_threads(function, inputs, shared=(), out_trailing=None, **options):
    """``function.apply(*inputs, *shared, **options)`` for a Function whose work on each
    entry of the first axis of ``inputs`` (all of one length there) is independent of the
    others' (an elementwise function, attention over a batch), computed in chunks of that
    axis on the pool's threads when there are several and the first input has at least
    :data:`PARALLEL_BYTES`; otherwise, and on CuPy and array-api-strict, in one call.
    ``shared`` inputs go whole to every chunk; ``out_trailing`` is the output's shape after
    its first axis (default: the first input's).

    speed: NumPy runs each operation on one core; the chunks let a second core take half
    of an operation's work (:data:`CHUNKS_PER_THREAD` chunks per thread, each handed to the
    thread that is free). The formulas are untouched: each chunk runs the Function's own
    ``forward`` and ``backward``.
    """
    first = inputs[0]
    threads = get_num_threads()
    length = first.shape[0] if first.ndim else 0
    if backend_of(first.data).name != "cpu" or threads < 2 or length < 2 or first.data.nbytes < PARALLEL_BYTES:
        return function.apply(*inputs, *shared, **options)
    parts = min(CHUNKS_PER_THREAD * threads, length)
    bounds = tuple(length * n // parts for n in range(parts + 1))
    return _RowChunks.apply(*inputs, *shared, function=function, cut=len(inputs), trailing=first.ndim - 1,
                            bounds=bounds, out_trailing=tuple(first.shape[1:] if out_trailing is None else out_trailing),
                            options=options)


class _RowChunks(Function):
    """``function`` applied to chunks of rows of its first ``cut`` inputs, each viewed as
    ``(rows, *its last trailing dims)`` (the same rows in every one); the other inputs go
    whole to every chunk.

    Forward: ``y[chunk] = function.forward(x[chunk], ..., *shared)``, one Context per chunk.
    Backward: ``dx[chunk] = function.backward(dy[chunk])`` for each cut input; the shared
    inputs' gradients (a norm's gain and bias) are sums over the rows, so the chunks'
    gradients add up.
    """

    @staticmethod
    def forward(ctx, *arrays, function, cut, trailing, bounds, out_trailing, options):
        xp = ctx.xp
        cut_inputs, shared = arrays[:cut], arrays[cut:]
        rows = [xp.reshape(a, (-1,) + tuple(a.shape[a.ndim - trailing:])) for a in cut_inputs]   # views
        chunks = [Context(ctx.backend, ctx.needs_input_grad) for _ in bounds[:-1]]
        out = xp.empty((bounds[-1],) + tuple(out_trailing), dtype=rows[0].dtype, device=ctx.backend.device)

        def one_chunk(n):
            a, b = bounds[n], bounds[n + 1]
            out[a:b] = function.forward(chunks[n], *(r[a:b] for r in rows), *shared, **options)

        _run_each(len(chunks), one_chunk)
        ctx.save_for_backward(*chunks)   # freed with the graph's saved arrays
        ctx.function, ctx.bounds, ctx.cut, ctx.out_trailing = function, bounds, cut, tuple(out_trailing)
        ctx.shapes = [(a.shape, r.shape, r.dtype) for a, r in zip(cut_inputs, rows)]
        return xp.reshape(out, tuple(cut_inputs[0].shape[:cut_inputs[0].ndim - trailing]) + tuple(out_trailing))

    @staticmethod
    def backward(ctx, grad_output):
        xp = ctx.xp
        chunks, bounds, cut = ctx.saved_tensors, ctx.bounds, ctx.cut
        grad_output = xp.reshape(grad_output, (bounds[-1],) + ctx.out_trailing)
        grads = [xp.empty(rows_shape, dtype=dtype, device=ctx.backend.device) if need else None
                 for (_, rows_shape, dtype), need in zip(ctx.shapes, ctx.needs_input_grad)]
        shared_grads = [None] * len(chunks)

        def one_chunk(n):
            a, b = bounds[n], bounds[n + 1]
            parts = ctx.function.backward(chunks[n], grad_output[a:b])
            parts = parts if isinstance(parts, tuple) else (parts,)
            for full, part in zip(grads, parts[:cut]):
                if full is not None:
                    full[a:b] = 0.0 if part is None else part      # None: a zero gradient
            shared_grads[n] = parts[cut:]

        _run_each(len(chunks), one_chunk)
        summed = [None if parts[0] is None else functools.reduce(lambda p, q: p + q, parts)
                  for parts in zip(*shared_grads)]
        return (*(None if g is None else xp.reshape(g, shape) for g, (shape, _, _) in zip(grads, ctx.shapes)),
                *summed)


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
    numbers = itertools.count()     # next() on it is atomic: no two threads get the same n

    def worker():
        for n in iter(numbers.__next__, None):
            if n >= count:
                return
            work(n)

    _run(threads, [worker] * threads)
