"""The student's library in a process of its own: the trusted side asks, the student's process computes.

The held-back checks run in a trusted process (:mod:`.judge`) and reach the student's code
only through a :class:`Student`: a worker process (:mod:`.worker`, ``python -m
minitorch_attn.homework.worker IN OUT``), started under the sandbox (:mod:`.sandbox`) in the
copy that holds the student's code. It imports the library there and answers requests, one
JSON line each way:

    {"n": 7, "do": "import", "module": "minitorch_attn.functional"}
    {"n": 8, "do": "getattr", "of": {"ref": 3}, "name": "softmax"}
    {"n": 9, "do": "call", "of": {"ref": 4}, "args": [...], "kwargs": {...}}
    {"n": 10, "do": "op", "name": "mul", "args": [...]}      a * b, x[i], len(x), list(x), -x, ...
    {"n": 11, "do": "keep", "args": [V]}                      V kept there: a reference, even to an array
    {"n": 12, "do": "reset"}                                  forget every object (after each check)

    {"n": 9, "value": V}    or    {"n": 9, "error": "ValueError: ...", "where": "minitorch_attn/x.py:12"}

**Values cross as data, objects stay where they are.** None, booleans, numbers, strings,
tuples, lists and NumPy arrays (``{"array": base64 of numpy.save}``, read back with
``allow_pickle=False``) are copied; a Tensor of the trusted side crosses as its values,
dtype and ``requires_grad`` and becomes a new tensor in the worker (:meth:`Student.send`);
anything else stays in the worker and crosses as a reference, ``{"ref": [n, type name]}``,
which the trusted side holds as a :class:`Remote`: its attributes, calls and operators are
requests in turn. A value sent with :meth:`Student.keep` stays in the worker too (an array
as well), so that a check can pass that very array to the student's code and read it back
afterwards (:meth:`Student.read`): did their code write into it? Nothing the trusted side
runs ever comes from the worker: no code, no pickle, no callable.

**Every reply is a claim of the student's process.** The trusted side caps its size,
decodes it without pickles and checks its form and its number; a malformed reply, a reply
to another request, a process that ends or does not answer before the check's deadline
each raise :class:`StudentError` in the check that asked (the worker is then ended, and
the next check starts a new one; after ``MAX_STOPS_IN_A_ROW`` checks in a row whose worker
was stopped, code that hangs or crashes every time, the next checks fail at once). So the
checks (``tests/instructor/``) must decide from
what they chose themselves: the inputs, the shapes they expect, which gradients exist, how
many outputs; a value of the student's is only ever compared with their own reference.

In the project's own test suite there is no grader: :class:`Local` is the same interface
on the library this process imports, so the held-back tests run there as ordinary tests.
"""

from __future__ import annotations

import base64
import importlib
import io
import json
import os
import select
import sys
import time

import numpy as np

from ..core.factories import tensor
from ..core.tensor import Tensor
from . import sandbox
from .worker import MAX_DEPTH, MAX_ITEMS, MAX_TEXT_CHARS, dump_array

MAX_REPLY_BYTES = 64 * 2**20  # one reply's line
MAX_STOPS_IN_A_ROW = 3  # checks in a row whose worker was stopped: the next ones start none
WORKER = "minitorch_attn.homework.worker"


class StudentError(AssertionError):
    """The student's code raised, or their process failed to answer properly: the check fails with this message."""


# ---- the trusted side -------------------------------------------------------------------------------
class Remote:
    """An object that lives in the student's process. Attributes, calls, operators, ``len``
    and iteration are requests to it; ``repr`` is local. Two Remotes of one object are one
    Python object (``is`` works), until the check ends (:meth:`Student.reset`)."""

    __slots__ = ("_student", "_number", "_type", "_generation")

    def __init__(self, student, number, type_name):
        object.__setattr__(self, "_student", student)
        object.__setattr__(self, "_number", number)
        object.__setattr__(self, "_type", type_name)
        object.__setattr__(self, "_generation", student._generation)

    def __repr__(self):
        return f"<the student's {self._type} #{self._number}>"

    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)  # Python's own probes (copy, pickle, pytest) stay here
        return self._student._ask("getattr", of=self, name=name)

    def __setattr__(self, name, value):
        raise TypeError(f"{self!r}: attributes of the student's objects are read, not written")

    def __call__(self, *args, **kwargs):
        return self._student._ask("call", of=self, args=list(args), kwargs=kwargs)

    def _op(self, name, *args):
        return self._student._ask("op", name=name, args=list(args))

    def __add__(self, other):
        return self._op("add", self, other)

    def __radd__(self, other):
        return self._op("add", other, self)

    def __sub__(self, other):
        return self._op("sub", self, other)

    def __rsub__(self, other):
        return self._op("sub", other, self)

    def __mul__(self, other):
        return self._op("mul", self, other)

    def __rmul__(self, other):
        return self._op("mul", other, self)

    def __truediv__(self, other):
        return self._op("truediv", self, other)

    def __rtruediv__(self, other):
        return self._op("truediv", other, self)

    def __matmul__(self, other):
        return self._op("matmul", self, other)

    def __rmatmul__(self, other):
        return self._op("matmul", other, self)

    def __pow__(self, other):
        return self._op("pow", self, other)

    def __rpow__(self, other):
        return self._op("pow", other, self)

    def __neg__(self):
        return self._op("neg", self)

    def __getitem__(self, key):
        return self._op("getitem", self, key)

    def __len__(self):
        n = self._op("len", self)
        if not isinstance(n, int) or isinstance(n, bool) or not 0 <= n <= MAX_ITEMS:
            raise StudentError(f"len() of {self!r} answered {n!r}, not a length")
        return n

    def __iter__(self):
        items = self._op("list", self)
        if not isinstance(items, list) or len(items) > MAX_ITEMS:
            raise StudentError(f"list() of {self!r} answered {type(items).__name__}, not a list")
        return iter(items)


class Student:
    """The library of the student's copy ``folder``, in a worker process started (lazily)
    under ``confinement`` with ``python``. Use :meth:`module` to reach it, :meth:`send` to
    copy the trusted side's tensors to it, and :meth:`begin` / :meth:`reset` around each
    check; :meth:`close` ends the worker."""

    local = False

    def __init__(self, folder, confinement, python=None):
        self.folder, self.confinement, self.python = folder, confinement, python or sys.executable
        self._started = None
        self._requests = self._replies = None
        self._count = 0
        self._generation = 0
        self._remotes = {}
        self._deadline = None
        self._limit = None
        self.restarts = 0
        self.last_failure = None  # why the last worker ended
        self._ended_in = None  # the check (generation) in which it ended
        self._stops_in_a_row = 0  # checks in a row that ended with their worker stopped

    # the interface the checks use (also :class:`Local`'s)
    def module(self, name):
        """The student's module ``name`` (a :class:`Remote`)."""
        return self._ask("import", module=name)

    def send(self, value):
        """``value`` in the student's process: a Tensor becomes a new tensor there with the
        same values, dtype and ``requires_grad`` (a tuple or list of them, one of those, of
        the same length: StudentError otherwise)."""
        sent = self._ask("op", name="identity", args=[value])
        if isinstance(value, (tuple, list)) and (type(sent) is not type(value) or len(sent) != len(value)):
            raise StudentError(f"the student's process answered {type(sent).__name__} for the {len(value)} values sent")
        return sent

    def keep(self, value):
        """``value`` (data: an array, a tuple of them, ...) sent to the student's process and
        kept there: a :class:`Remote` that a call receives as that very object, even an
        array (which otherwise crosses as a copy each time)."""
        kept = self._ask("keep", args=[value])
        if not isinstance(kept, Remote):
            raise StudentError(f"the student's process answered {type(kept).__name__} for a value it was to keep")
        return kept

    def read(self, kept):
        """The value of a kept object now, as data (an array: its values now)."""
        return self._ask("op", name="identity", args=[kept])

    def describe(self, value):
        """``repr`` of a student's object (at most 200 characters), asked of their process."""
        if not isinstance(value, Remote):
            return repr(value)
        text = value._op("repr", value)
        return text if isinstance(text, str) else repr(value)

    def begin(self, seconds):
        """A check starts: it may wait for the student's process ``seconds`` in all."""
        self._limit = seconds
        self._deadline = time.monotonic() + seconds

    def reset(self):
        """A check ended: the worker forgets its objects (a dead one is not restarted for this)."""
        self._stops_in_a_row = self._stops_in_a_row + 1 if self._ended_in == self._generation else 0
        self._generation += 1
        self._remotes.clear()
        self._deadline = None
        if self._started is not None:
            try:
                self._ask("reset")
            except StudentError:
                pass

    def close(self):
        """End the worker (after the last check)."""
        self._stop("the checks ended")

    # the protocol
    def _ask(self, do, of=None, name=None, module=None, args=(), kwargs=None):
        if self._ended_in == self._generation:
            raise StudentError(f"the student's process was stopped earlier in this check: {self.last_failure}")
        if self._started is None and self._stops_in_a_row >= MAX_STOPS_IN_A_ROW:
            self._ended_in = self._generation  # this check counts as one more
            raise StudentError(
                f"not run: the student's process was stopped in the {self._stops_in_a_row} checks "
                f"before this one (the last time: {self.last_failure})"
            )
        request = {
            "do": do,
            "name": name,
            "module": module,
            "of": self._encode(of),
            "args": self._encode(list(args)),
            "kwargs": self._encode(dict(kwargs or {})),
        }
        if self._started is None:
            self._start()
        self._count += 1
        request["n"] = self._count
        try:
            line = json.dumps(request).encode() + b"\n"
            self._write(line)
            reply = self._read()
        except StudentError as error:
            self._stop(str(error))
            raise
        except BaseException:
            self._stop("the check was interrupted while the student's process was working")
            raise
        if not isinstance(reply, dict) or reply.get("n") != self._count:
            self._stop("it answered out of turn")
            raise StudentError(
                "the student's process answered another request than the one asked "
                "(its replies were written by something else than the worker)"
            )
        if "error" in reply:
            raised, where = _text(reply.get("error")), _text(reply.get("where"), 300)
            raise StudentError(f"your code raised {raised}" + (f" (at {where})" if where else ""))
        try:
            return self._decode(reply.get("value"))
        except StudentError:
            self._stop("it answered in a form the grader does not read")
            raise

    def _start(self):
        sandbox.hand_over(self.folder, self.confinement.account)
        from_grader, to_worker = os.pipe()  # (read end, write end)
        from_worker, to_grader = os.pipe()
        command = [self.python, "-m", WORKER, str(from_grader), str(to_grader)]
        try:
            self._started = sandbox.start(command, self.folder, self.confinement, pass_fds=(from_grader, to_grader))
        finally:
            os.close(from_grader)
            os.close(to_grader)
        os.set_blocking(to_worker, False)  # a worker that stops reading must not block the grader's write
        self._requests, self._replies = to_worker, from_worker
        self._buffer = b""

    def _stop(self, why):
        started, self._started = self._started, None
        if started is None:
            return
        for fd in (self._requests, self._replies):
            try:
                os.close(fd)
            except OSError:
                pass
        started.finish()
        self.restarts += 1
        self.last_failure = why
        self._ended_in = self._generation

    def _time_left(self):
        if self._deadline is None:
            return None
        return self._deadline - time.monotonic()

    def _write(self, data):
        view = memoryview(data)
        while view:
            left = self._time_left()
            if left is not None and left <= 0:
                raise StudentError(self._late())
            _, ready, _ = select.select([], [self._requests], [], left)
            if not ready:
                raise StudentError(self._late())
            try:
                view = view[os.write(self._requests, view[:65536]) :]
            except BlockingIOError:
                continue
            except BrokenPipeError:
                raise StudentError(self._ended()) from None

    def _read(self):
        while b"\n" not in self._buffer:
            left = self._time_left()
            if left is not None and left <= 0:
                raise StudentError(self._late())
            ready, _, _ = select.select([self._replies], [], [], left)
            if not ready:
                raise StudentError(self._late())
            chunk = os.read(self._replies, 1 << 20)
            if not chunk:
                raise StudentError(self._ended())
            self._buffer += chunk
            if len(self._buffer) > MAX_REPLY_BYTES:
                raise StudentError(f"the student's process sent a reply over {MAX_REPLY_BYTES >> 20} MB")
        line, self._buffer = self._buffer.split(b"\n", 1)
        try:
            return json.loads(line)
        except ValueError:
            raise StudentError(
                "the student's process answered something that is not a reply "
                "(did your code write to the grader's channel?)"
            ) from None

    def _late(self):
        return (
            f"your code did not answer within the {self._limit:g} s of this check (a loop that never "
            f"ends?); it was stopped"
        )

    def _ended(self):
        started = self._started
        try:
            code = started.process.wait(timeout=1)
        except Exception:  # alive, but it closed the grader's channel
            return "your code closed the student's process's channel to the grader"
        output = started.output()[-1500:]
        said = sandbox.Finished(code, None, output).crash(self.confinement.memory)
        return f"your code ended the student's process ({said})" + (f"; its last output:\n{output}" if output else "")

    def _encode(self, value, depth=0):
        """A request's value as JSON data (see the module docstring)."""
        if depth > MAX_DEPTH:
            raise TypeError("a value nested too deep to send")
        if isinstance(value, Remote):
            if value._student is not self or value._generation != self._generation:
                raise TypeError(f"{value!r} belongs to an earlier check")
            return {"ref": value._number}
        if value is None or isinstance(value, (bool, int, float, str)):
            return value
        if isinstance(value, np.generic):
            return value.item()
        if isinstance(value, np.ndarray):
            return {"array": dump_array(value)}
        if isinstance(value, Tensor):
            return {
                "tensor": {
                    "array": dump_array(np.asarray(value.numpy())),
                    "dtype": str(value.dtype),
                    "requires_grad": bool(value.requires_grad),
                }
            }
        if isinstance(value, tuple):
            return {"tuple": [self._encode(v, depth + 1) for v in value]}
        if isinstance(value, list):
            return {"list": [self._encode(v, depth + 1) for v in value]}
        if isinstance(value, dict) and all(isinstance(k, str) for k in value):
            return {"dict": {k: self._encode(v, depth + 1) for k, v in value.items()}}
        if isinstance(value, slice):
            return {"slice": [self._encode(v, depth + 1) for v in (value.start, value.stop, value.step)]}
        if value is Ellipsis:
            return {"ellipsis": None}
        raise TypeError(f"cannot send a {type(value).__name__} to the student's process (data and Remotes only)")

    def _decode(self, data, depth=0):
        """A reply's value (see the module docstring), checked for its form."""
        if depth > MAX_DEPTH:
            raise StudentError("the student's process answered with values nested too deep")
        if data is None or isinstance(data, (bool, int, float)):
            return data
        if isinstance(data, str):
            return data[:MAX_TEXT_CHARS]
        if isinstance(data, dict) and len(data) == 1:
            ((kind, inner),) = data.items()
            if kind == "array" and isinstance(inner, str):
                return _load_array(inner)
            if kind in ("tuple", "list") and isinstance(inner, list) and len(inner) <= MAX_ITEMS:
                items = [self._decode(v, depth + 1) for v in inner]
                return tuple(items) if kind == "tuple" else items
            if (
                kind == "ref"
                and isinstance(inner, list)
                and len(inner) == 2
                and isinstance(inner[0], int)
                and isinstance(inner[1], str)
            ):
                number = inner[0]
                if number not in self._remotes:
                    self._remotes[number] = Remote(self, number, inner[1][:100])
                return self._remotes[number]
        raise StudentError("the student's process answered a value of a form the grader does not read")


class Local:
    """:class:`Student`'s interface on the library this process imports (the project's own
    test suite, where the held-back tests run as ordinary tests)."""

    local = True
    restarts = 0

    def module(self, name):
        return importlib.import_module(name)

    def send(self, value):
        """A copy, as :meth:`Student.send` makes: new tensors with the same values, dtype and requires_grad."""
        if isinstance(value, (tuple, list)):
            return type(value)(self.send(v) for v in value)
        if isinstance(value, Tensor):
            return tensor(np.array(value.numpy()), dtype=value.dtype, requires_grad=value.requires_grad)
        if isinstance(value, np.ndarray):
            return value.copy()
        return value

    def keep(self, value):
        """A copy, as :meth:`Student.keep` makes: the student's code gets an array of its own."""
        return np.array(value, copy=True) if isinstance(value, np.ndarray) else value

    def read(self, kept):
        return np.array(kept, copy=True) if isinstance(kept, np.ndarray) else kept

    def describe(self, value):
        return repr(value)

    def begin(self, seconds):
        pass

    def reset(self):
        pass

    def close(self):
        pass


def _load_array(text):
    """A NumPy array from a reply: plain numbers or booleans only, no pickles."""
    try:
        array = np.load(io.BytesIO(base64.b64decode(text, validate=True)), allow_pickle=False)
    except (ValueError, OSError, EOFError, TypeError):
        raise StudentError("the student's process answered an array the grader cannot read") from None
    if not isinstance(array, np.ndarray) or array.dtype.kind not in "biufc":
        raise StudentError("the student's process answered an array that is not numbers")
    return array


def _text(value, limit=MAX_TEXT_CHARS):
    return value[:limit] if isinstance(value, str) else ""
