"""Threads over independent (batch, head) chunks for :mod:`.flash` on the ``"cpu"`` device.

NumPy releases the GIL inside BLAS and ufuncs, so the blocks of different heads can run
on different cores. CuPy and array-api-strict run everything in the calling thread.
The pool has :func:`minitorch_attn.threads.get_num_threads` threads (one per core unless
``set_num_threads`` or ``--threads`` says otherwise), and BLAS runs one thread while the
pool works (see :mod:`minitorch_attn.threads` for why the two layers must not be stacked).
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import functools

from ..threads import blas_threads, get_num_threads

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


def _chunks(lead_shape, threads):
    """Split the longest batch/key-head axis into ``threads`` parts (G is never split: the
    heads of a group add into one dK, dV)."""
    if threads <= 1 or not lead_shape or max(lead_shape) < 2:
        return [_Chunk(None, 0, 0)]
    axis = max(range(len(lead_shape)), key=lambda a: lead_shape[a])
    size = lead_shape[axis]
    parts = min(threads, size)
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
    thread when there is one, else in the pool with a one-thread BLAS (speed: the pool
    spreads the chunks over the cores; BLAS threads on top would fight it for them)."""
    if len(jobs) == 1:
        return [jobs[0]()]
    with blas_threads(1):
        return [f.result() for f in [_pool(threads).submit(job) for job in jobs]]


@functools.cache
def _pool(threads):
    """One pool per thread count, made on first use and kept (threads are cheap to keep)."""
    return concurrent.futures.ThreadPoolExecutor(max_workers=threads, thread_name_prefix="flash")


def _concat(xp, parts, chunks):
    """Join per-chunk results along the chunk axis."""
    return parts[0] if len(parts) == 1 else xp.concat(parts, axis=chunks[0].axis)
