"""Probes: checks whose verdict the student's code cannot reach. Values in, values out.

A task's probes are the gradient-check entries the manifest lists under it (the inputs of
each op, drawn by the entry itself: no ties, no kinks). For each one, a worker

1. draws the entry's inputs from a seed,
2. computes the op's outputs and, for a random upstream gradient ``g`` drawn from the
   same seed, the gradient of ``sum(output * g)`` with respect to every input,
3. saves each array with ``numpy.save`` (no pickles) as ``<entry>.out<k>.npy`` and
   ``<entry>.grad<i>.npy``, or the error as ``<entry>.error.txt``.

The worker runs twice: once under the student's code (in the sandbox, as the student's
user) and once under the instructor's (in the grader's own copy). The grader alone
compares the two, with ``numpy.load(allow_pickle=False)``, a size cap on every file and a
tolerance of ``RTOL`` relative to the largest reference value. Whatever the student's code
does inside its process (patch pytest, forge a report, exit early), a probe passes only
when the values it wrote are the instructor's values for inputs it could not know in
advance: the seed is drawn from a secret that only the autograder holds and from the
student's code for the task, so that new code gets new inputs and the same code the same
ones (the same submission always gets the same grade).

    python -m minitorch_attn.homework.probes SPEC.json OUT_FOLDER

where SPEC.json is ``{"entries": [name, ...], "seed": int}``.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import pathlib
import sys

import numpy as np

from ..core.autograd import backward
from ..core.backend import manual_seed
from ..core.factories import tensor
from ..gradcheck.suite import Inputs, entries
from .sandbox import open_private

RTOL = 1e-7                      # relative to max(1, largest |reference value|)
MAX_ARRAY_BYTES = 8 * 2 ** 20    # a probe's arrays are small: anything larger is refused
MAX_ERROR_CHARS = 500
SPEC_NAME = "probes.json"


def seed(secret, task_id, code):
    """The probes' seed for ``task_id``: an HMAC of the task and the student's ``code`` for
    it (any text) under ``secret`` (bytes or str), as a non-negative 62-bit int."""
    key = secret.encode() if isinstance(secret, str) else bytes(secret)
    digest = hmac.new(key, f"{task_id}\n{code}".encode(), hashlib.sha256).digest()
    return int.from_bytes(digest[:8], "big") >> 2


def file_stem(index):
    return f"probe{index}"


def write_spec(folder, names, seed_value):
    """Write the worker's SPEC.json into ``folder``; returns its path."""
    path = pathlib.Path(folder) / SPEC_NAME
    path.write_text(json.dumps({"entries": list(names), "seed": int(seed_value)}))
    return path


def evaluate(names, seed_value, out):
    """The worker: run each entry of ``names`` and save what it gives into ``out``."""
    table = {entry.name: entry for entry in entries()}
    out = pathlib.Path(out)
    out.mkdir(parents=True, exist_ok=True)
    for index, name in enumerate(names):
        stem = out / file_stem(index)
        try:
            manual_seed(seed_value % 2 ** 31)
            inputs = table[name].make(Inputs("cpu", "float64", seed_value % 2 ** 32))
            outputs = table[name].fn(*inputs)
            outputs = outputs if isinstance(outputs, tuple) else (outputs,)
            rng = np.random.default_rng(seed_value % 2 ** 32 + 1)
            roots = [(o, tensor(rng.standard_normal(o.shape))) for o in outputs
                     if o.dtype in ("float32", "float64") and o.requires_grad]
            if roots:
                backward([r for r, _ in roots], [g for _, g in roots])
            for k, output in enumerate(outputs):
                np.save(f"{stem}.out{k}.npy", np.asarray(output.numpy(), dtype=np.float64))
            for i, value in enumerate(inputs):
                grad = getattr(value, "grad", None)
                if grad is not None:
                    np.save(f"{stem}.grad{i}.npy", np.asarray(grad.numpy(), dtype=np.float64))
        except Exception as error:  # the student's code failed: say how, go on with the next probe
            (out / f"{file_stem(index)}.error.txt").write_text(f"{type(error).__name__}: {error}"[:MAX_ERROR_CHARS])


def load(out, count):
    """``[{"arrays": {file suffix: array}, "error": text or None}]`` for ``count`` probes
    saved in ``out``, read defensively: only plain numeric arrays, none over the cap."""
    out = pathlib.Path(out)
    found = []
    for index in range(count):
        arrays, error = {}, None
        for path in sorted(out.glob(f"{file_stem(index)}.*.npy")):
            suffix = path.name[len(file_stem(index)) + 1:-4]
            if path.is_symlink() or not path.is_file() or path.stat().st_size > MAX_ARRAY_BYTES:
                error = f"{suffix}: not a plain file under {MAX_ARRAY_BYTES >> 20} MB"
                continue
            try:
                with open_private(path) as file:
                    array = np.load(file, allow_pickle=False)
            except (ValueError, OSError, EOFError) as problem:
                error = f"{suffix}: unreadable ({type(problem).__name__})"
                continue
            if not (np.issubdtype(array.dtype, np.number) or array.dtype == bool):
                error = f"{suffix}: not a numeric array"
                continue
            arrays[suffix] = array.astype(np.float64)
        error_file = out / f"{file_stem(index)}.error.txt"
        if error_file.is_file() and not error_file.is_symlink():
            with open_private(error_file) as file:
                error = file.read(MAX_ERROR_CHARS).decode("utf-8", errors="replace")
        found.append({"arrays": arrays, "error": error})
    return found


def compare(names, theirs, reference):
    """``[(name, None or why the student's values are wrong)]``, one per probe. A probe the
    reference itself could not run raises ValueError (a grader error, not a student's 0)."""
    verdicts = []
    for name, mine, ref in zip(names, theirs, reference):
        if ref["error"] is not None or not ref["arrays"]:
            raise ValueError(f"the instructor's code fails its own probe {name!r}: {ref['error']}")
        verdicts.append((name, _difference(mine, ref["arrays"])))
    return verdicts


def _difference(mine, expected):
    if mine["error"] is not None and not mine["arrays"]:
        return f"your code raised {mine['error']}"
    for suffix, want in expected.items():
        what = _what(suffix)
        got = mine["arrays"].get(suffix)
        if got is None:
            return f"no {what} (None, or the probe stopped before it" + (f": {mine['error']})" if mine["error"] else ")")
        if got.shape != want.shape:
            return f"the {what} has shape {got.shape}, expected {want.shape}"
        finite = np.isfinite(want)
        if not np.array_equal(np.isnan(got), np.isnan(want)) or not np.array_equal(got[~finite & ~np.isnan(want)],
                                                                                   want[~finite & ~np.isnan(want)]):
            return f"the {what} has NaN or infinite values where the expected one has not (or the other way round)"
        tolerance = RTOL * max(1.0, float(np.max(np.abs(want[finite]), initial=0.0)))
        error = np.where(finite, np.abs(np.where(np.isfinite(got), got, np.inf) - np.where(finite, want, 0)), 0.0)
        if (error > tolerance).any():
            worst = np.unravel_index(int(np.argmax(error)), error.shape) if error.ndim else ()
            return (f"the {what} is wrong at element {tuple(int(i) for i in worst)}: yours {got[worst]:.10g}, "
                    f"expected {want[worst]:.10g} ({int((error > tolerance).sum())} of {error.size} elements wrong)")
    return None


def _what(suffix):
    if suffix.startswith("out"):
        return f"output {suffix[3:]}"
    return f"gradient of input {suffix[4:]}"


def main(argv=None):
    """``python -m minitorch_attn.homework.probes SPEC.json OUT``: the worker."""
    spec_path, out = argv if argv is not None else sys.argv[1:]
    spec = json.loads(pathlib.Path(spec_path).read_text())
    evaluate(spec["entries"], int(spec["seed"]), out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
