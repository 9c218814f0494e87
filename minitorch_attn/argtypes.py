"""The argparse pieces of every command: the parser, and the types that check a flag's
value where it is read.

Each type is an argparse ``type=`` that converts the text and accepts it only when it is
valid, so a bad value ends the command with one line naming the flag and what was
expected (:class:`CommandParser` prints that line and a pointer to ``--help``, with
:func:`print_error`, which prints the errors raised while a command runs the same way).
"""

from __future__ import annotations

import argparse
import math
import os
import sys

from .core.backend import DEVICES, DeviceUnavailableError, get_backend


class CommandParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose errors are the one line that says what was wrong and a
    pointer to ``--help`` (argparse prints its whole usage block first), with exit status 2.
    Subcommands' parsers are of the same class."""

    def error(self, message):
        raise SystemExit(print_error(self.prog, message))


def print_error(prog, message):
    """Print a command's error as every command does, a bad flag's or one raised while it
    runs: ``PROG: error: MESSAGE`` and a pointer to ``PROG --help`` (on stderr). Returns 2,
    the exit status of a command that stopped on an error."""
    print(f"{prog}: error: {message}\nsee '{prog} --help' for every flag", file=sys.stderr)
    return 2


def _checked(convert, ok, expected):
    """An argparse ``type=``: ``convert`` the text, and accept it only if ``ok(value)``."""

    def parse(text):
        try:
            value = convert(text)
        except ValueError:
            value = None
        if value is None or not ok(value):
            raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}")
        return value

    return parse


positive_int = _checked(int, lambda v: v >= 1, "an integer >= 1")
non_negative_int = _checked(int, lambda v: v >= 0, "an integer >= 0")
positive_float = _checked(float, lambda v: 0 < v < math.inf, "a number > 0")
non_negative_float = _checked(float, lambda v: 0 <= v < math.inf, "a finite number >= 0")
unit_interval = _checked(float, lambda v: 0 <= v <= 1, "a number in [0, 1]")
open_fraction = _checked(float, lambda v: 0 < v < 1, "a number in (0, 1)")
positive_fraction = _checked(float, lambda v: 0 < v <= 1, "a number in (0, 1]")
folder = _checked(str, lambda v: not os.path.exists(v) or os.path.isdir(v), "a folder (this is an existing file)")


def device_type(devices=DEVICES):
    """An argparse ``type=`` for ``--device`` (here, in the demos and in the benchmarks): the
    name of one of ``devices`` whose library and hardware are present. An unknown name's error
    lists ``devices`` (the same list as the flag's help, :func:`device_help`), a missing
    library's names the extra that installs it (the backend's message)."""

    def device(text):
        if text.split(":")[0] not in devices:  # "cuda:0" as PyTorch users write it
            raise argparse.ArgumentTypeError(f"unknown device {text!r}; expected one of {', '.join(devices)}")
        try:
            get_backend(text)
        except (ValueError, TypeError, DeviceUnavailableError) as error:
            raise argparse.ArgumentTypeError(str(error)) from None
        return text

    return device


def device_help(devices=DEVICES):
    """The devices of a ``--device`` flag in words: ``"cpu, cuda or strict"``."""
    return " or ".join([", ".join(devices[:-1]), devices[-1]]) if len(devices) > 1 else devices[0]


usable_device = device_type()
