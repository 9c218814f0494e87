"""Keep the memory of freed arrays in the process for the next ones (glibc's malloc on Linux).

speed: every NumPy array takes its memory from the C library's ``malloc``. glibc serves a
block above a threshold (128 KiB at first, later the largest block freed so far) straight
from the operating system with ``mmap`` and gives it back at ``free``, and gives back the
top of its heap whenever more than a second threshold lies free there. An autograd step
frees and allocates many temporaries of a few MiB, so with these defaults most new arrays
land on pages the process has just returned, and the first touch of each 4 KiB page is a
page fault: about 10,000 faults per training step of the default GPT, which made the step
1.2 to 1.9 times slower on a 2-core virtual machine (``benchmarks/train_bench.py``).

:func:`keep_freed_memory` tells glibc (``mallopt``) never to serve a block with ``mmap``
and to keep up to :data:`KEEP_BYTES` free at the top of its heap, so freed blocks of any
size stay in the process and are reused. Blocks above 32 MiB matter too: raising the
``mmap`` threshold instead stops there (glibc's limit), and LayerNorm forward+backward of
a (32, 512, 1024) float32 input, whose arrays are 64 MiB, took 131 ms with that and 68 ms
with this, PyTorch's in the same process 62 ms and 17 ms (``benchmarks/norm_bench.py``):
most of both was page faults. The price: freed memory stays with the process, so it
holds on to about its peak (only what lies free at the very top of the heap beyond 1 GiB
goes back). Threads other than the main one keep blocks up to 64 MiB (glibc's limit for
their heaps); larger ones are still mapped afresh each time. The setting is the whole
process's, so the package does not make it when imported: the ``minitorch-attn`` command,
the demos and the benchmarks call it, and a program of your own may. Elsewhere than glibc
(macOS, Windows, musl) it does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os

KEEP_BYTES = 2**30
"""Free memory glibc may keep at the very top of its heap before it gives some back."""
_M_TRIM_THRESHOLD = -1  # from glibc's <malloc.h>
_M_MMAP_MAX = -4


@functools.cache
def keep_freed_memory() -> bool:
    """Ask glibc to keep freed blocks for reuse instead of returning them to the operating
    system (the process then holds about its peak memory; see the module's text). Returns
    True if it did so, False where the C library is not glibc (then nothing changes).
    Safe to call more than once."""
    try:
        glibc = os.confstr("CS_GNU_LIBC_VERSION") is not None  # "glibc 2.36"; None on musl
    except (AttributeError, ValueError, OSError):  # no confstr (Windows) or no such name
        glibc = False
    if not glibc:
        return False
    libc = ctypes.CDLL(ctypes.util.find_library("c"))
    return bool(libc.mallopt(_M_MMAP_MAX, 0)) and bool(libc.mallopt(_M_TRIM_THRESHOLD, KEEP_BYTES))
