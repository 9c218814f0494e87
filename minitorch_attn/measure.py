"""Measuring honestly: wall time with the GPU synchronized, and peak memory of the arrays.

Used by the demos and the benchmarks, so that every figure they print is measured the same way.
"""

from __future__ import annotations

import statistics
import time


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
