"""Grad mode: whether operations record the graph, per thread, as PyTorch's.

:func:`is_grad_enabled` is True in every thread until that thread enters :class:`no_grad`
(or ``set_grad_enabled(False)``); a thread started inside a ``no_grad`` block starts
with grad enabled, as in PyTorch, so evaluation in one thread never stops recording in
another. Each context manager keeps the mode it replaced and puts it back on exit, also
when the block raises, so blocks nest in any order.

Each one is also a decorator. Decorating makes a fresh context manager for every call
(so a decorated function that calls itself puts back the right mode at every level), and
on a generator function it holds the mode only while the generator's own code runs:
between two ``next()`` calls the caller's mode is in force, as in PyTorch
(``torch/utils/_contextlib.py``). ``@no_grad`` works with or without the parentheses.
"""

from __future__ import annotations

import functools
import inspect
import threading


class _GradMode(threading.local):
    """The per-thread flag; the class attribute is the value a new thread starts with."""

    enabled = True


_mode = _GradMode()


def is_grad_enabled() -> bool:
    """True unless this thread is inside :class:`no_grad` or ``set_grad_enabled(False)``."""
    return _mode.enabled


class _GradModeContext:
    """A context manager that sets the grad mode of this thread and can decorate functions."""

    mode = True

    def __new__(cls, orig_func=None):
        if cls is not set_grad_enabled and orig_func is not None:  # @no_grad without ()
            if not callable(orig_func):
                raise TypeError(f"{cls.__name__}() takes no arguments (or a function to decorate), got {orig_func!r}")
            return cls()(orig_func)
        return super().__new__(cls)

    def __init__(self, orig_func=None):
        pass

    def __enter__(self):
        self._previous = _mode.enabled
        _mode.enabled = self.mode
        return self

    def __exit__(self, *exc):
        _mode.enabled = self._previous
        return False

    def clone(self):
        """A new context manager of the same mode (one per call of a decorated function)."""
        return type(self)()

    def __call__(self, func):
        if not callable(func):
            raise TypeError(f"{type(self).__name__} decorates a function, got {func!r}")
        if inspect.isgeneratorfunction(func):
            return _generator_in_mode(self.clone, func)

        @functools.wraps(func)
        def in_mode(*args, **kwargs):
            with self.clone():
                return func(*args, **kwargs)

        return in_mode


def _generator_in_mode(make_context, func):
    """``func``, a generator function, with each step of its body run in the context."""

    @functools.wraps(func)
    def generator(*args, **kwargs):
        gen = func(*args, **kwargs)
        try:
            with make_context():
                response = gen.send(None)
            while True:
                try:
                    request = yield response  # the caller's mode holds here
                except GeneratorExit:
                    with make_context():
                        gen.close()
                    raise
                except BaseException as error:  # gen.throw() from the caller
                    with make_context():
                        response = gen.throw(error)
                else:
                    with make_context():
                        response = gen.send(request)
        except StopIteration as stop:
            return stop.value

    return generator


class no_grad(_GradModeContext):
    """Context manager (and decorator) in which operations record no graph, as ``torch.no_grad``.

    Use it for evaluation, sampling and optimizer updates::

        with no_grad():
            logits = model(x)

    Per thread; nests; see the module docstring for decorators and generators.
    """

    mode = False


class enable_grad(_GradModeContext):
    """Context manager (and decorator) that turns recording back on inside :class:`no_grad`,
    as ``torch.enable_grad``."""

    mode = True


class set_grad_enabled(_GradModeContext):
    """Set grad mode to ``mode`` (a bool), as ``torch.set_grad_enabled``: called as a
    function it sets the mode of this thread at once; as a context manager or decorator it
    puts the previous mode back at the end.

    Raises:
        TypeError: if ``mode`` is not a bool.
    """

    def __init__(self, mode):
        if not isinstance(mode, bool):
            raise TypeError(f"set_grad_enabled needs True or False, got {mode!r}")
        self.mode = mode
        self._previous = _mode.enabled
        _mode.enabled = mode  # at once, so that a plain call sets the mode

    def __enter__(self):
        _mode.enabled = self.mode  # the previous mode was kept when it was made
        return self

    def __call__(self, func):
        _mode.enabled = self._previous  # used as a decorator: the mode applies to calls only
        return super().__call__(func)

    def clone(self):
        return type(self)(self.mode)
