"""Functions that work row by row, run in chunks of rows on the pool.

A Function whose output for each row of its inputs depends on that row alone (an
elementwise function, a normalization of each row, attention of each entry of a batch)
says so with a class attribute, ``row_wise = RowWise(...)``. The engine
(``Function.apply`` and ``run_backward``) then calls :func:`forward_in_rows` and
:func:`backward_in_rows`, which call the Function's own ``forward`` and ``backward`` on
chunks of rows, each chunk with a Context of its own::

    forward:   y[chunk] = forward(ctx_chunk, x[chunk], ..., *shared)
    backward:  dx[chunk] = backward(ctx_chunk, dy[chunk])                  each cut input
               dshared = Σ_chunks backward(ctx_chunk, dy[chunk])           each shared input

The graph records one node of the Function itself: ``F.gelu(x).grad_fn`` is
``<GELUBackward>`` at any thread count, and the engine's errors name it. The chunks'
saved arrays are the call's saved arrays (one Context holds them all), so the engine
checks their versions and frees them as it does any other node's.

Numbers: the output and the gradient of every cut input are those of one call, bit for
bit (each row's work is the same, only where it runs differs). A shared input's gradient
(a norm's gain and bias) is a sum over the rows; it is summed chunk by chunk, equal to
one call's to rounding (the one number this layer changes, and only in its last bits).

speed: NumPy runs each operation on one core; chunks on the pool's threads let a second
core take half of an operation's work. A pass of the pool costs about 0.1 ms (two
handoffs, the BLAS setting) and a chunk's Python code holds the GIL, so a small call runs
whole: :data:`SPLITS` holds, per Function, the size of its first input from which the
pool pays (``benchmarks/crossover.py`` measures it). The norms cut their rows into chunks
of ``chunk_bytes`` instead: each line of a normalization's formula reads and writes the
whole input once, and a chunk that fits in the CPU's caches stays there through all its
lines (at any thread count). CuPy and array-api-strict run every call whole.
"""

from __future__ import annotations

import dataclasses
import math
import threading
from collections.abc import Callable

from .pool import CHUNKS_PER_THREAD, each_on_threads
from .threads import get_num_threads


@dataclasses.dataclass(frozen=True)
class RowWise:
    """A Function's statement that it works row by row (its ``row_wise`` class attribute).

    Args:
        inputs: the first ``inputs`` positional arguments of ``forward`` hold the rows, the
            same rows in each (query, key and value of attention); the other arguments go
            whole to every chunk, and their gradients are added up over the chunks.
        row_axes: the name of ``forward``'s option that lists the trailing axes of one row
            (the norms' ``axes``): every axis before them counts rows, and each chunk
            gets them as ``(rows, *row)`` with the option renumbered. None: the first axis
            counts the rows (an elementwise function; a batch of attention).
        when: None, or ``when(*args, **options)``, False for a call whose rows are not
            independent (attention with a mask, or with dropout): it runs whole.

    A row-wise Function keeps its arrays for the backward with ``save_for_backward``
    (the chunks' saved arrays are gathered there), and returns one array.
    """

    inputs: int = 1
    row_axes: str | None = None
    when: Callable | None = None


@dataclasses.dataclass(frozen=True)
class Split:
    """How the pool splits one row-wise Function: not below ``from_bytes`` of its first
    input; in chunks of about ``chunk_bytes`` of it, or (None) in :data:`CHUNKS_PER_THREAD`
    chunks per thread of the pool, and then only with two threads or more."""

    from_bytes: int
    chunk_bytes: int | None = None


ROW_CHUNK_BYTES = 2**20
"""The norms' chunk: one chunk and the few temporaries of one normalization stay in the
CPU's caches. Measured on LayerNorm of (32, 512, 1024) float32: 1 MiB about 8% faster
than 256 KiB (fewer calls), as fast as 2 MiB."""

SPLITS = {
    "GELU": Split(from_bytes=2**24),
    "SiLU": Split(from_bytes=2**24),
    "ScaledDotProductAttention": Split(from_bytes=2**22),
    "LayerNorm": Split(from_bytes=2 * ROW_CHUNK_BYTES + 1, chunk_bytes=ROW_CHUNK_BYTES),
    "RMSNorm": Split(from_bytes=2 * ROW_CHUNK_BYTES + 1, chunk_bytes=ROW_CHUNK_BYTES),
    "FlashAttention": Split(from_bytes=2**24),  # bytes of the scores it never forms
}
"""Per Function (by class name), the size of its first input from which the pool pays;
any other row-wise Function uses :data:`DEFAULT_SPLIT`. Set from ``benchmarks/crossover.py``
(``benchmarks/README.md``, "Where the pool pays"): a pass of the pool costs about 0.1 ms
and its chunks' Python code holds the GIL, and on the shared 2-core machine it was
measured on two threads were no faster than one at any size up to about half of each
threshold (GELU 8 MiB, SiLU 5.5 MiB, attention 2 MiB, flash attention 8 MiB of scores);
a call below its size runs whole, as at one thread. Rerun the script on an idle machine
to lower them. The norms' chunks are for the caches, at any thread count (above 2 MiB, in
chunks of 1 MiB)."""

DEFAULT_SPLIT = Split(from_bytes=2**24)


def threads_for(name, backend, nbytes):
    """The pool's threads for a call of a Function that splits its own work (flash
    attention's (batch, head) chunks), named ``name``, of ``nbytes`` (the measure of its
    work it states: flash attention's is the bytes of the scores it never forms): 1 on
    CuPy and array-api-strict (they run in the calling thread) and below its
    :data:`SPLITS` entry, where the pool costs more than it gains; else
    :func:`~.threads.get_num_threads`."""
    if backend.name != "cpu" or nbytes < SPLITS.get(name, DEFAULT_SPLIT).from_bytes:
        return 1
    return get_num_threads()


def forward_in_rows(function, ctx, args, options):
    """``function.forward(ctx, *args, **options)`` for a row-wise Function, in chunks of rows
    on the pool where that pays (see the module docstring); else in one call."""
    plan = _plan(function, ctx, args, options)
    if plan is None:
        return function.forward(ctx, *args, **options)
    lead, bounds, options = plan
    xp, cut = ctx.xp, function.row_wise.inputs
    rows = [xp.reshape(a, (-1,) + tuple(a.shape[lead:])) for a in args[:cut]]  # views
    shared = args[cut:]
    chunks = [type(ctx)(ctx.backend, ctx.needs_input_grad) for _ in bounds[:-1]]
    out, made = [], threading.Lock()

    def one_chunk(n):
        a, b = bounds[n], bounds[n + 1]
        y = function.forward(chunks[n], *(r[a:b] for r in rows), *shared, **options)
        with made:  # the first chunk done makes the output
            if not out:
                out.append(xp.empty((bounds[-1],) + tuple(y.shape[1:]), dtype=y.dtype, device=ctx.backend.device))
        out[0][a:b] = y

    each_on_threads(len(chunks), one_chunk)
    kept = [c.saved_tensors for c in chunks]
    for c in chunks:
        c.save_for_backward()  # the call's Context holds them (see below)
    ctx.save_for_backward(*(array for saved in kept for array in saved))
    ctx.row_chunks = _Chunks(
        lead,
        chunks,
        bounds,
        tuple(len(saved) for saved in kept),
        tuple((a.shape, r.shape, r.dtype) for a, r in zip(args[:cut], rows)),
    )
    return xp.reshape(out[0], tuple(args[0].shape[:lead]) + tuple(out[0].shape[1:]))


def backward_in_rows(function, ctx, grad_outputs):
    """``function.backward(ctx, *grad_outputs)`` for a row-wise Function, chunk by chunk if
    its forward ran so (:func:`forward_in_rows`)."""
    plan = getattr(ctx, "row_chunks", None)
    if plan is None:
        return function.backward(ctx, *grad_outputs)
    xp, cut, bounds = ctx.xp, function.row_wise.inputs, plan.bounds
    saved, start = ctx.saved_tensors, 0  # raises once the graph was freed
    for chunk, count in zip(plan.chunks, plan.saved_counts):
        chunk.save_for_backward(*saved[start : start + count])
        start += count
    (grad_output,) = grad_outputs
    grad_output = xp.reshape(grad_output, (bounds[-1],) + tuple(grad_output.shape[plan.lead :]))
    grads = [
        xp.empty(rows_shape, dtype=dtype, device=ctx.backend.device) if need else None
        for (_, rows_shape, dtype), need in zip(plan.shapes, ctx.needs_input_grad)
    ]
    shared_grads = [None] * len(plan.chunks)

    def one_chunk(n):
        a, b = bounds[n], bounds[n + 1]
        parts = function.backward(plan.chunks[n], grad_output[a:b])
        parts = parts if isinstance(parts, tuple) else (parts,)
        for full, part in zip(grads, parts[:cut]):
            if full is not None:
                full[a:b] = 0.0 if part is None else part  # None: a zero gradient
        shared_grads[n] = parts[cut:]

    try:
        each_on_threads(len(plan.chunks), one_chunk)
    finally:
        for chunk in plan.chunks:
            chunk.save_for_backward()  # the call's Context still holds them
    summed = [None if parts[0] is None else _add_up(parts) for parts in zip(*shared_grads)]
    return (*(None if g is None else xp.reshape(g, shape) for g, (shape, _, _) in zip(grads, plan.shapes)), *summed)


@dataclasses.dataclass(frozen=True)
class _Chunks:
    """What :func:`backward_in_rows` needs of a forward run in chunks."""

    lead: int  # the leading axes of the inputs and the output that count rows
    chunks: list  # one Context per chunk
    bounds: tuple  # chunk n is rows bounds[n]:bounds[n+1]
    saved_counts: tuple  # how many of the call's saved arrays each chunk saved
    shapes: tuple  # per cut input: its shape, its shape as rows, its dtype


def _add_up(parts):
    total = parts[0]
    for part in parts[1:]:
        total = total + part  # in chunk order: the same rounding every run
    return total


def _plan(function, ctx, args, options):
    """``(lead, bounds, options)`` for a call to run in chunks, or None for one call: ``lead``
    axes of the cut inputs count the rows, chunk n is rows ``bounds[n]:bounds[n+1]``."""
    declared, first = function.row_wise, args[0]
    if ctx.backend.name != "cpu" or (declared.when is not None and not declared.when(*args, **options)):
        return None
    if declared.row_axes is None:
        lead = min(first.ndim, 1)
    else:
        width = len(options[declared.row_axes])
        lead = first.ndim - width
        options = dict(options, **{declared.row_axes: tuple(range(1, 1 + width))})
    rows = math.prod(first.shape[:lead])
    split = SPLITS.get(function.__name__, DEFAULT_SPLIT)
    if rows < 2 or first.nbytes < split.from_bytes:
        return None
    if split.chunk_bytes is None:
        threads = get_num_threads()
        if threads < 2:
            return None
        parts = min(CHUNKS_PER_THREAD * threads, rows)
        bounds = tuple(rows * n // parts for n in range(parts + 1))
    else:
        per_chunk = max(1, split.chunk_bytes // max(1, first.nbytes // rows))
        bounds = tuple(range(0, rows, per_chunk)) + (rows,)
    return lead, bounds, options
