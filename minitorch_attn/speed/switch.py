"""One switch for the fused kernels of :mod:`.fused`: off unless a caller turns it on.

A Function whose formula has a fused twin asks :func:`fused_kernels` and, where the
switch is on, calls the twin instead of its plain lines; the twin computes the same
numbers, bit for bit (``tests/test_speed_fused.py``), in fewer passes over memory. The
switch is a context variable: ``with use_fused():`` turns it on for the code inside and
for the pool's jobs that code starts (they run in a copy of its context), and nowhere
else (another thread, a test after it). The training job turns it on around each step
(``train.py``), as ``benchmarks/train_bench.py`` does.

The homework's student trees are handed out without :mod:`.fused` (its kernels compute
graded steps: ``homework/manifest.json``, ``held_out``); there :func:`fused_kernels` is
always None and every Function runs its plain lines, the student's own.
"""

from __future__ import annotations

import contextlib
import contextvars
import types

_kernels: types.ModuleType | None
try:
    from . import fused as _kernels
except ImportError:  # a student tree (see above)
    _kernels = None

_ON = contextvars.ContextVar("minitorch_attn_fused_kernels", default=False)


@contextlib.contextmanager
def use_fused(on=True):
    """Within the ``with`` block, Functions with a fused twin run it (``on=True``) or their
    plain lines (``on=False``); outside it, as before. Raises TypeError for a non-bool ``on``."""
    if not isinstance(on, bool):
        raise TypeError(f"use_fused: on must be True or False, got {on!r}")
    token = _ON.set(on)
    try:
        yield
    finally:
        _ON.reset(token)


def fused_kernels():
    """The module of fused kernels (:mod:`.fused`) where the switch is on and the module is
    there, else None: the caller then runs its plain formula."""
    return _kernels if _ON.get() else None
