"""Feedback that names the mistake for certain: designed probes, not failure fingerprints.

For each graded backward, the held-back checks of ``tests/instructor/test_probes.py`` build
inputs that isolate one term of the formula (for LayerNorm, upstream gradients that leave
one of its two row terms only; for attention, a scale that is not 1/sqrt(E), rows whose
row term is 0; for softmax, rows where the row term is 0; the probes are listed in that
file's docstring, held out of student trees). A probe that fails measures the difference
against its isolated term ``T``: when it is ``c · T`` to rounding, its message ends with
``[probe ID: c = C]`` (one tag per term when a probe fits several). Those checks run in the
grader's own process (the student's code only computes, in its worker), so the tags are
the grader's.

:func:`diagnose` names the catalogued mistake whose probes and coefficients the task's
failures show, every other probe of the task passing; nothing for a stub
(NotImplementedError: no tag), a crash, a run that went wrong as a whole, or failures that
match no signature (or several). The signatures (``signatures.json``, :func:`load`, held out
of student trees: the mistakes' names say the formulas) name mistakes of ``mutants.json``;
a mistake in the catalogue that is not a wrong term of a backward formula (an overflow, a
shape, an array written in place) has no signature and gets no diagnosis (``homework
selftest --accuracy`` prints which mistake got which, :func:`expected`).
"""

from __future__ import annotations

import json
import pathlib
import re

PROBES_FILE = "tests/instructor/test_probes.py"
TAG = re.compile(r"\[probe (\S+): c = (-?[0-9.eE+-]+)\]")

FILE = "minitorch_attn/homework/signatures.json"  # held out of student trees (the names say the formulas)
TOLERANCE = 0.01  # of a coefficient, relative to max(1, |c|)


def load(root):
    """``{mistake: (task, {probe: c})}`` and the names of the backward-term mistakes that no
    probe isolates yet, from ``root/FILE``; empty when the file is missing (a student tree).

    Raises:
        ValueError: the file is not a signatures file.
    """
    path = pathlib.Path(root) / FILE
    if not path.is_file():
        return {}, ()
    data = json.loads(path.read_text())
    try:
        return (
            {e["mistake"]: (e["task"], {p: float(c) for p, c in e["probes"].items()}) for e in data["signatures"]},
            tuple(data.get("not_probed", ())),
        )
    except (KeyError, TypeError, AttributeError, ValueError):
        raise ValueError(
            f"{path} is not a signatures file (expected {{'signatures': [{{mistake, task, probes}}]}})"
        ) from None


def observed(checks):
    """``{probe: c}`` of the failed probe checks among ``checks``, or None when a probe
    failed without a tag (a stub, a crash, a difference no term explains) or no probe ran."""
    probes = [c for c in checks if c.held_back and c.nodeid.startswith(PROBES_FILE)]
    if not probes:
        return None
    found = {}
    for check in probes:
        if check.passed:
            continue
        tags = TAG.findall(check.message or "")
        if not tags:
            return None
        found.update((probe, float(c)) for probe, c in tags)
    return found


def diagnose(signatures, task_id, checks, problem=None):
    """The name of the one catalogued mistake of ``task_id`` among ``signatures`` (:func:`load`)
    whose signature the probe checks among ``checks`` show exactly, else None (see the module
    docstring)."""
    seen = None if problem else observed(checks)
    if not seen:
        return None
    hits = [
        name
        for name, (task, signature) in signatures.items()
        if task == task_id
        and set(signature) == set(seen)
        and all(abs(seen[p] - c) <= TOLERANCE * max(1.0, abs(c)) for p, c in signature.items())
    ]
    return hits[0] if len(hits) == 1 else None


def expected(signatures, name):
    """The diagnosis the catalogued mistake ``name`` must get: its own name when it has a
    signature among ``signatures`` (a wrong term of a backward formula), else None."""
    return name if name in signatures else None
