"""Measuring honestly: wall time with the GPU synchronized, peak memory of the arrays, and a
reproducible busy machine.

Used by the demos and the benchmarks, so that every figure they print is measured the same way:

* :func:`alternate` times two functions in turn (A B, B A, ...), so that a machine whose
  load changes slows them alike; :func:`alternating_medians` times several in turn, each
  at the thread count that suits it best (:class:`~minitorch_attn.speed.FastestThreads`);
  both time one call with :func:`seconds_of`;
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

from ..argtypes import non_negative_int
from ..speed import FastestThreads


def synchronize(device):
    """Wait for the GPU to finish queued work (a no-op on the CPU), so timings are honest."""
    if device == "cuda":
        import cupy

        cupy.cuda.Device().synchronize()


def seconds_of(fn, device="cpu"):
    """The wall time of one call ``fn()``, with the GPU's queued work finished before and after."""
    synchronize(device)
    start = time.perf_counter()
    fn()
    synchronize(device)
    return time.perf_counter() - start


def alternating_medians(fns, repeats, device="cpu", warmup=1):
    """``{name: median seconds}`` of each function of the dict ``fns``, timed in turn.

    Each function first runs ``warmup`` untimed calls and then, still untimed, lets a
    :class:`~minitorch_attn.speed.FastestThreads` find the thread count that runs it
    fastest; the ``repeats`` timed rounds call every function once per round, each at its
    own best count. Returns also ``{name: that thread count}`` as a second dict.
    """
    choosers = {}
    for name, fn in fns.items():
        for _ in range(warmup):
            fn()
        choosers[name] = chooser = FastestThreads(trial=2, period=10**9, warmup=0)
        while len(chooser.candidates) > 1 and not chooser.trials_done:
            with chooser:
                fn()
                synchronize(device)
    times = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            with choosers[name]:
                times[name].append(seconds_of(fn, device))
    return (
        {name: statistics.median(t) for name, t in times.items()},
        {name: chooser.choice for name, chooser in choosers.items()},
    )


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
    parser.add_argument(
        "--busy",
        type=non_negative_int,
        default=0,
        metavar="N",
        help="keep N cores busy with CPU-bound helper processes while measuring "
        "(a reproducible busy machine; default 0)",
    )


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


class Comparison:
    """Two functions timed in alternation by :func:`alternate`.

    Attributes:
        first: the median wall time of ``first()``, in seconds.
        second: the median wall time of ``second()``, in seconds.
        ratio: the median over the rounds of ``second's time / first's time``: below 1 the
            second is faster (a speed-up of ``1 / ratio``), above 1 it is slower.
        rounds: how many timed rounds the medians are taken over.
    """

    def __init__(self, first, second, ratio, rounds):
        self.first, self.second, self.ratio, self.rounds = first, second, ratio, rounds

    def __repr__(self):
        return f"Comparison(first={self.first!r}, second={self.second!r}, ratio={self.ratio!r}, rounds={self.rounds})"

    def describe(self, first_name, second_name):
        """One line saying what was measured: the time ratio, the speed it means, and both
        medians, e.g. ``RMSNorm / LayerNorm time ratio 0.91 (speed relative to LayerNorm:
        1.10x; medians 12.1 ms and 11.0 ms over 5 alternating rounds)``; when it is
        :attr:`noisy`, the line says so and gives the ratio of the medians too."""
        line = (
            f"{second_name} / {first_name} time ratio {self.ratio:.2f} (speed relative to {first_name}: "
            f"{1 / self.ratio:.2f}x; medians {format_seconds(self.first)} and {format_seconds(self.second)} "
            f"over {self.rounds} alternating rounds)"
        )
        if self.noisy:
            line += f" [noisy: the ratio of the medians is {self.second / self.first:.2f}]"
        return line

    @property
    def noisy(self):
        """Whether the ratio of the two medians and the median of the per-round ratios differ
        by more than a quarter: the load changed faster than the rounds alternated."""
        return not 0.8 <= (self.second / self.first) / self.ratio <= 1.25


def alternate(first, second, repeats=5, device="cpu", warmup=1, min_seconds=0.5, max_rounds=200):
    """Time ``first()`` against ``second()`` like for like: warm both up, then alternate them.

    Both run ``warmup`` untimed calls first (caches, allocations, lazy imports). Then each
    round times one call of each, and the order swaps from round to round (first-second,
    second-first, ...), so that a load that comes and goes on a shared machine slows both
    alike and neither always runs in the other's wake. There are at least ``repeats``
    rounds, and more (up to ``max_rounds``) until each function has been timed for
    ``min_seconds`` in all: quick calls get many rounds, whose medians a busy moment cannot
    move. The ratio is the median of the per-round ratios.

    Returns:
        a :class:`Comparison` (medians in seconds, ``ratio = second / first``).
    Raises:
        ValueError: if ``repeats < 1``, ``warmup < 0`` or ``max_rounds < repeats``.
    """
    if repeats < 1 or warmup < 0 or max_rounds < repeats:
        raise ValueError(
            f"alternate: expected repeats >= 1, warmup >= 0 and max_rounds >= repeats, "
            f"got {repeats}, {warmup} and {max_rounds}"
        )
    for _ in range(warmup):
        first()
        second()
    times = ([], [])
    rounds = 0
    while rounds < repeats or (rounds < max_rounds and min(sum(times[0]), sum(times[1])) < min_seconds):
        for which in (0, 1) if rounds % 2 == 0 else (1, 0):
            times[which].append(seconds_of((first, second)[which], device))
        rounds += 1
    ratios = [b / a for a, b in zip(*times)]
    return Comparison(statistics.median(times[0]), statistics.median(times[1]), statistics.median(ratios), rounds)


def format_seconds(seconds):
    """``0.0123 -> '12.3 ms'``: seconds in the unit that keeps three significant digits."""
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"
