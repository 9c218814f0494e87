"""The student's side of the held-back tests: the worker that answers the judge's requests.

    python -m minitorch_attn.homework.worker IN OUT

:class:`.remote.Student` starts it under the sandbox in the copy that holds the student's
code, and writes requests on the file descriptor IN; it answers each on OUT, one JSON line
each way (the protocol is in :mod:`.remote`'s docstring). It imports the student's library
and runs their code, so nothing here is trusted by the grader: the trusted side reads
every answer as a claim.
"""

from __future__ import annotations

import base64
import importlib
import io
import itertools
import json
import operator
import os
import sys
import traceback

import numpy as np

from ..core.factories import tensor

MAX_TEXT_CHARS = 4_000  # one string of a reply
MAX_ITEMS = 100_000  # of one tuple or list of a reply
MAX_DEPTH = 16  # of nested tuples and lists

# What "op" requests may ask: Python's operators, and len(), list() and repr() of an object.
OPERATORS = {
    "add": operator.add,
    "sub": operator.sub,
    "mul": operator.mul,
    "truediv": operator.truediv,
    "matmul": operator.matmul,
    "pow": operator.pow,
    "neg": operator.neg,
    "getitem": operator.getitem,
    "len": len,
    "list": lambda x: list(itertools.islice(x, MAX_ITEMS + 1)),
    "identity": lambda x: x,
    "repr": lambda x: repr(x)[:200],
}


def dump_array(array):
    """A NumPy array as text: base64 of ``numpy.save``, no pickles."""
    buffer = io.BytesIO()
    np.save(buffer, np.asarray(array), allow_pickle=False)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


class Kept:
    """A value the trusted side asked to keep here (``{"do": "keep"}``): its reply is a
    reference even for an array, so that a later call gets that very array."""

    def __init__(self, value):
        self.value = value


class Worker:
    """Answers requests in the student's copy (see the module docstring). It runs the
    student's code, so nothing here is trusted by the grader."""

    def __init__(self):
        self.objects, self.numbers = {}, {}

    def handle(self, request):
        do = request.get("do")
        if do == "import":
            return importlib.import_module(request["module"])
        if do == "getattr":
            return getattr(self.value(request["of"]), request["name"])
        if do == "call":
            return self.value(request["of"])(*self.value(request["args"]), **self.value(request["kwargs"]))
        if do == "op":
            return OPERATORS[request["name"]](*self.value(request["args"]))
        if do == "keep":
            return Kept(self.value(request["args"])[0])
        if do == "reset":
            self.objects.clear()
            self.numbers.clear()
            return None
        raise ValueError(f"unknown request {do!r}")

    def value(self, data):
        """A request's value as an object here."""
        if not isinstance(data, dict):
            return data
        ((kind, inner),) = data.items()
        if kind == "ref":
            return self.objects[inner]
        if kind == "array":
            return np.load(io.BytesIO(base64.b64decode(inner)), allow_pickle=False)
        if kind == "tensor":
            return tensor(
                self.value({"array": inner["array"]}), dtype=inner["dtype"], requires_grad=inner["requires_grad"]
            )
        if kind == "tuple":
            return tuple(self.value(v) for v in inner)
        if kind == "list":
            return [self.value(v) for v in inner]
        if kind == "dict":
            return {k: self.value(v) for k, v in inner.items()}
        if kind == "slice":
            return slice(*(self.value(v) for v in inner))
        if kind == "ellipsis":
            return Ellipsis
        raise ValueError(f"unknown value {kind!r}")

    def reply(self, value, depth=0):
        """An object here as a reply's value: data when it is data, else a reference (a
        :class:`Kept` value always a reference)."""
        if type(value) is Kept:
            return self.reference(value.value)
        if value is None or isinstance(value, (bool, int, float, str)) or depth > MAX_DEPTH:
            return value if depth <= MAX_DEPTH else None
        if isinstance(value, np.generic) and value.dtype.kind in "biufc":
            return value.item()
        if isinstance(value, np.ndarray) and value.dtype.kind in "biufc":
            return {"array": dump_array(value)}
        if type(value) in (tuple, list):
            return {type(value).__name__: [self.reply(v, depth + 1) for v in value]}
        return self.reference(value)

    def reference(self, value):
        """``{"ref": [number, type name]}`` of an object kept here (numbered on first sight)."""
        number = self.numbers.get(id(value))
        if number is None:
            number = len(self.objects) + 1
            self.objects[number], self.numbers[id(value)] = value, number
        return {"ref": [number, type(value).__name__]}

    def serve(self, requests, replies):
        """Answer each line of ``requests`` with one line on ``replies``, until it closes."""
        for line in requests:
            number = None
            try:
                request = json.loads(line)
                number = request.get("n")
                answer = {"n": number, "value": self.reply(self.handle(request))}
            except BaseException as error:  # the student's code raised (even SystemExit): say what
                answer = {
                    "n": number,
                    "error": f"{type(error).__name__}: {error}"[:MAX_TEXT_CHARS],
                    "where": _where(error),
                }
            try:
                text = json.dumps(answer)
            except (TypeError, ValueError):
                text = json.dumps({"n": number, "error": "the answer could not be written as JSON"})
            replies.write(text.encode() + b"\n")
            replies.flush()


def _where(error):
    """``file:line`` of the deepest frame of the traceback in the library (not in this worker)."""
    frames = [
        f
        for f in traceback.extract_tb(error.__traceback__)
        if "minitorch_attn" in f.filename and not f.filename.endswith(os.path.join("homework", "worker.py"))
    ]
    if not frames:
        return ""
    path, line = frames[-1].filename, frames[-1].lineno
    inside = path.split(os.sep + "minitorch_attn" + os.sep, 1)
    return f"minitorch_attn/{inside[1]}:{line}" if len(inside) == 2 else f"{path}:{line}"


def main(argv=None):
    """``python -m minitorch_attn.homework.worker IN OUT``: serve on the file descriptors IN and OUT."""
    fd_in, fd_out = (int(a) for a in (argv if argv is not None else sys.argv[1:]))
    with os.fdopen(fd_in, "rb") as requests, os.fdopen(fd_out, "wb") as replies:
        Worker().serve(requests, replies)
    return 0


if __name__ == "__main__":
    sys.exit(main())
