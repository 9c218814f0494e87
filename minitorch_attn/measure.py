"""Measuring honestly: wall time with the GPU synchronized, peak memory of the arrays, and a
reproducible busy machine.

Used by the demos and the benchmarks, so that every figure they print is measured the same way:

* :func:`median_seconds` times one function; :func:`alternating_medians` times several
  in turn (A B A B ...), so that a machine whose load changes slows them alike, each at
  the BLAS thread count that suits it best (:class:`~minitorch_attn.threads.FastestThreads`);
* :class:`PeakMeter` and :func:`peak_memory` read the peak bytes the array library allocated;
* :func:`busy` keeps ``n`` cores busy with helper processes while a benchmark runs (its
  ``--busy N`` flag), so a figure "under load" is measured under a load anyone can repeat.
"""

from __future__ import annotations

import os
import signal
import statistics
import subprocess
import sys
import time
from contextlib import contextmanager

from .argtypes import non_negative_int
from .threads import FastestThreads


def synchronize(device):
    """Wait for the GPU to finish queued work (a no-op on the CPU), so timings are honest."""
    if device == "cuda":
        import cupy

        cupy.cuda.Device().synchronize()


def median_seconds(fn, repeats, device="cpu", warmup=1):
    """The median wall time of ``fn()`` over ``repeats`` runs, after ``warmup`` untimed runs."""
    for _ in range(warmup):
        fn()
    synchronize(device)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        synchronize(device)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def alternating_medians(fns, repeats, device="cpu", warmup=1):
    """``{name: median seconds}`` of each function of the dict ``fns``, timed in turn.

    Each function first runs ``warmup`` untimed calls and then, still untimed, lets a
    :class:`~minitorch_attn.threads.FastestThreads` find the BLAS thread count that runs it
    fastest; the ``repeats`` timed rounds call every function once per round, each at its
    own best count. Returns also ``{name: that thread count}`` as a second dict.
    """
    choosers = {}
    for name, fn in fns.items():
        for _ in range(warmup):
            fn()
        choosers[name] = chooser = FastestThreads(trial=2, period=10**9)
        while chooser.choice is None or chooser.trial_order:
            with chooser:
                fn()
                synchronize(device)
    times = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            with choosers[name]:
                start = time.perf_counter()
                fn()
                synchronize(device)
                times[name].append(time.perf_counter() - start)
    return ({name: statistics.median(t) for name, t in times.items()},
            {name: chooser.choice for name, chooser in choosers.items()})


# A CPU-bound helper: it counts until it is told to stop, or until its parent (whose pid
# it is given) is gone, so that it never outlives a parent that was killed.
_BUSY_LOOP = """
import os, sys
parent = int(sys.argv[1])
while os.getppid() == parent:
    for _ in range(1_000_000):
        pass
"""


@contextmanager
def busy(n):
    """Keep ``n`` cores busy for the duration of the ``with`` block: ``n`` helper processes
    that each spin one core in a Python loop (what any other CPU-bound program does to
    ours). They are stopped when the block ends, by an exception or Ctrl-C too, and each
    stops by itself if this process dies without ending the block.

    Raises:
        ValueError: if ``n`` is negative.
    """
    if n < 0:
        raise ValueError(f"busy: expected a number of helper processes >= 0, got {n}")
    helpers = []
    try:
        for _ in range(n):
            helpers.append(subprocess.Popen([sys.executable, "-c", _BUSY_LOOP, str(os.getpid())]))
        yield helpers
    finally:
        for helper in helpers:
            helper.send_signal(signal.SIGTERM)
        for helper in helpers:
            helper.wait()


def busy_flag(parser):
    """Add the benchmarks' ``--busy N`` flag to an argparse ``parser``."""
    parser.add_argument("--busy", type=non_negative_int, default=0, metavar="N",
                        help="keep N cores busy with CPU-bound helper processes while measuring "
                             "(a reproducible busy machine; default 0)")


class PeakMeter:
    """Peak bytes allocated by the array library during a ``with`` block."""

    def __init__(self, device):
        self.device = device

    def __enter__(self):
        if self.device == "cuda":
            import cupy

            self.pool = cupy.get_default_memory_pool()
            cupy.cuda.get_current_stream().synchronize()
            self.pool.free_all_blocks()
            self.start = self.pool.total_bytes()
        else:
            import tracemalloc

            tracemalloc.start()
            self.start = 0
        return self

    def __exit__(self, *exc):
        if self.device == "cuda":
            import cupy

            cupy.cuda.get_current_stream().synchronize()
            self.peak = self.pool.total_bytes() - self.start
        else:
            import tracemalloc

            self.peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
        return False


def peak_memory(fn, device="cpu"):
    """The peak number of bytes that ``fn()`` allocates, measured by :class:`PeakMeter`:
    tracemalloc on NumPy, which reports every array it allocates to it; the memory pool
    on CuPy."""
    with PeakMeter(device) as meter:
        fn()
    return meter.peak
