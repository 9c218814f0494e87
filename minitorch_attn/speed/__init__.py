"""Speed beneath the formulas: how the work is spread over threads and where memory is reused.

Read it after the course. Nothing here changes what a formula computes: a Function's
``forward`` and ``backward`` are the ones the learner reads, and the graph records the
Function the learner called at any thread count. The one difference in numbers is
rounding in the last bits of a gradient summed over chunks of rows (a norm's gain and
bias, :mod:`.rows`). This package imports nothing of the course, and the course uses it
only through the names below.

- :mod:`.threads`: how many threads (BLAS's and the pool's), ``set_num_threads``,
  :class:`FastestThreads` (picks the count by timing a repeated piece of work);
- :mod:`.pool`: the pool of threads over independent jobs, and flash attention's
  (batch, head) chunks;
- :mod:`.rows`: a Function that declares ``row_wise = RowWise(...)`` runs in chunks of
  rows on the pool, where the table :data:`SPLITS` says that pays;
- :mod:`.sums`: sums along rows and down columns as products with ones (faster than
  ``sum`` on short rows);
- :mod:`.switch` and :mod:`.fused`: one switch (``use_fused``, off by default) for fused
  twins of the training step's formulas (SiLU's sigmoid, attention's weights, Adam's
  steps), the same numbers bit for bit in fewer passes over memory;
- :mod:`.allocator`: freed memory kept in the process for the next arrays (glibc).
"""

from .allocator import keep_freed_memory
from .pool import (
    CHUNKS_PER_THREAD,
    STOP_SIGNALS,
    Chunk,
    batch_chunks,
    each_on_threads,
    join,
    raises_keyboard_interrupt,
    run_on_threads,
    take,
)
from .rows import SPLITS, RowWise, Split, backward_in_rows, forward_in_rows, threads_for
from .sums import column_sums, last_axis_sums
from .switch import fused_kernels, use_fused
from .threads import (
    FastestThreads,
    available_cores,
    blas_thread_count,
    blas_threads,
    chosen_by_user,
    get_num_threads,
    set_num_threads,
)

__all__ = [
    "STOP_SIGNALS",
    "raises_keyboard_interrupt",
    "CHUNKS_PER_THREAD",
    "Chunk",
    "FastestThreads",
    "RowWise",
    "SPLITS",
    "Split",
    "available_cores",
    "backward_in_rows",
    "batch_chunks",
    "blas_thread_count",
    "blas_threads",
    "chosen_by_user",
    "column_sums",
    "each_on_threads",
    "forward_in_rows",
    "fused_kernels",
    "get_num_threads",
    "join",
    "keep_freed_memory",
    "last_axis_sums",
    "run_on_threads",
    "set_num_threads",
    "take",
    "threads_for",
    "use_fused",
]
