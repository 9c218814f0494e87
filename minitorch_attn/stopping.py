"""Stopping a command: Ctrl-C (SIGINT), closing its terminal (SIGHUP) and ``kill`` (SIGTERM).

All three stop a command the same way: Python raises KeyboardInterrupt where the program
is, so every ``try``/``finally`` runs, an atomic write (:mod:`minitorch_attn.atomic`)
removes its temporary file, and ``train`` saves its checkpoint and metrics. Without
:func:`stop_as_ctrl_c`, SIGHUP and SIGTERM end the process at once and leave half-made
files behind. After SIGHUP the terminal is gone, so the output that went to it goes to
``os.devnull`` from then on (writing to a closed terminal fails).

:func:`stops_wait` holds the three back around a block that must finish (a checkpoint
being written) and says which came, for the caller to act on after it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading

from .speed import STOP_SIGNALS


def hang_up(signum, frame):
    """The handler of SIGHUP: what went to the closed terminal goes to ``os.devnull``, then
    the command stops as with Ctrl-C. A hang-up comes once per closed terminal but is often
    delivered twice (the kernel's, then the shell's passed on to its jobs): every one after
    the first is ignored, so it cannot interrupt the saving that the first one started."""
    _leave_the_terminal()
    signal.default_int_handler(signum, frame)


# the thread pool's caller asks (speed.raises_keyboard_interrupt)
hang_up.raises_keyboard_interrupt = True  # type: ignore[attr-defined]


def _leave_the_terminal():
    """Send standard output and error to ``os.devnull`` where they went to the terminal
    (as :func:`stop_as_ctrl_c` found them: a terminal that hung up no longer says it is one),
    and ignore SIGHUP from now on: the terminal is gone, a second hang-up says nothing new
    (and one that came while Python shuts down, its handlers reset, would kill the process)."""
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    for fd in _terminal_fds:
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), fd)


_terminal_fds: list[int] = []
"""The file descriptors of standard output and error that are a terminal (set by :func:`stop_as_ctrl_c`)."""


def stop_as_ctrl_c():
    """Make SIGHUP and SIGTERM raise KeyboardInterrupt, as Ctrl-C does (every command and
    demo calls this first). Only the main thread can set handlers; elsewhere nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        return
    _terminal_fds[:] = [fd for fd in (1, 2) if os.isatty(fd)]
    for signum in STOP_SIGNALS:
        if signum != signal.SIGINT and signal.getsignal(signum) is not signal.SIG_IGN:  # nohup's stays ignored
            signal.signal(signum, hang_up if signum == getattr(signal, "SIGHUP", None) else signal.default_int_handler)


@contextlib.contextmanager
def stops_wait():
    """Inside the block Ctrl-C, SIGHUP and SIGTERM are noted instead of handled, so the block
    always finishes (a checkpoint is written whole). Yields the list of the signals noted;
    after the block their handlers are back in place (the caller decides what a noted
    stop means). Only the main thread receives signals: elsewhere nothing changes."""
    noted = []
    if threading.current_thread() is not threading.main_thread():
        yield noted
        return
    previous = {signum: signal.signal(signum, lambda got, frame: noted.append(got)) for signum in STOP_SIGNALS}
    try:
        yield noted
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        if getattr(signal, "SIGHUP", None) in noted:
            _leave_the_terminal()
