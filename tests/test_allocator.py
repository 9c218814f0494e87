"""Freed array memory is kept for reuse (minitorch_attn.allocator), so new arrays do not
page-fault afresh."""

import os
import resource

import numpy as np
import pytest

from minitorch_attn import allocator


def _glibc():
    try:
        return os.confstr("CS_GNU_LIBC_VERSION") is not None
    except (AttributeError, ValueError, OSError):
        return False


def _churn():
    """What an autograd step does to memory: several temporaries of 2 MiB, made and freed."""
    for _ in range(20):
        arrays = [np.ones(2**19, dtype=np.float32) for _ in range(4)]
        del arrays


@pytest.mark.skipif(not _glibc(), reason="the thresholds are glibc's")
def test_freed_blocks_are_reused_without_page_faults():
    """With glibc's defaults the 80 arrays below take about 40,000 page faults (each array
    lands on pages the process has just returned); kept, they reuse the same memory."""
    assert allocator.keep_freed_memory()   # as the commands do; calling again is harmless
    _churn()                               # the heap grows to its peak once
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    _churn()
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
    assert faults < 512, f"{faults} page faults: freed memory was given back and faulted in again"
