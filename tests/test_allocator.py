"""Freed array memory is kept for reuse (minitorch_attn.speed.allocator), so new arrays do not
page-fault afresh."""

import os
import resource

import numpy as np
import pytest

from minitorch_attn.speed import allocator


def _glibc():
    try:
        return os.confstr("CS_GNU_LIBC_VERSION") is not None
    except (AttributeError, ValueError, OSError):
        return False


def _churn(mib=2, times=20):
    """What an autograd step does to memory: several temporaries of ``mib`` MiB, made and freed."""
    for _ in range(times):
        arrays = [np.ones(mib * 2**18, dtype=np.float32) for _ in range(4)]
        del arrays


@pytest.mark.skipif(not _glibc(), reason="the thresholds are glibc's")
@pytest.mark.parametrize("mib", [2, 64], ids=["2 MiB", "64 MiB, above glibc's largest mmap threshold"])
def test_freed_blocks_are_reused_without_page_faults(mib):
    """With glibc's defaults the arrays below take about 512 page faults per MiB (each
    array lands on pages the process has just returned); kept, they reuse the same memory."""
    assert allocator.keep_freed_memory()  # as the commands do; calling again is harmless
    times = 20 if mib < 32 else 3
    _churn(mib, times)  # the heap grows to its peak once
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    _churn(mib, times)
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
    assert faults < 512, f"{faults} page faults: freed memory was given back and faulted in again"
