"""Feedback that names the mistake for certain: designed probes, not failure fingerprints.

For each graded backward, the held-back checks of ``tests/instructor/test_probes.py`` build
inputs that isolate one term of the formula (LayerNorm: an upstream gradient with
``mean(dx̂) = 0`` leaves only the ``x̂`` term, one with ``mean(dx̂ · x̂) = 0`` only the mean
term; attention: a scale that is not 1/sqrt(E) of 1, rows where ``rowsum(dO) = 0`` or
``rowsum(dO ∘ O) = 0``; softmax: rows where ``Σ g p = 0``). A probe that fails measures the
difference against its isolated term ``T``: when it is ``c · T`` to rounding, its message
ends with ``[probe ID: c = C]`` (one tag per term when a probe fits several). Those checks run in the grader's own process (the student's
code only computes, in its worker), so the tags are the grader's.

:func:`diagnose` names the catalogued mistake of :data:`SIGNATURES` whose probes and
coefficients the task's failures show, every other probe of the task passing; nothing for
a stub (NotImplementedError: no tag), a crash, a run that went wrong as a whole, or failures
that match no signature (or several). The mistakes are those of ``mutants.json``; a mistake
in the catalogue that is not a wrong term of a backward formula (an overflow, a shape, an
array written in place) has no signature and gets no diagnosis (``homework selftest
--accuracy`` prints which mistake got which, :func:`expected`).
"""

from __future__ import annotations

import re

PROBES_FILE = "tests/instructor/test_probes.py"
TAG = re.compile(r"\[probe (\S+): c = (-?[0-9.eE+-]+)\]")

# mistake name (as in mutants.json) -> (task, {probe: the coefficient c its probe measures})
SIGNATURES = {
    "div backward forgets the factor a in d/db": ("1.2", {"1.2/div": -2 / 3}),
    "tanh backward uses 1 - y instead of 1 - y²": ("1.2", {"1.2/tanh": -1 / 3}),
    "mean backward does not divide by the count": ("1.4", {"1.4/count": 4.0}),
    "max backward gives every tie the whole gradient": ("1.4", {"1.4/ties": 1.0}),
    "var backward divides by n - correction + 1": ("1.4", {"1.4/var": -0.2}),
    "matmul backward: dB = A dC, A not transposed": ("1.5", {"1.5/transpose": -2.0}),
    "softmax backward without the row term": ("2.1", {"2.1/row": -1.0}),
    "log_softmax backward passes the upstream gradient through": ("2.2", {"2.2/row": -1.0}),
    "cross_entropy mean gradient divided by every row, ignored ones too": ("2.3", {"2.3/mean/count": -0.4}),
    "cross_entropy gives ignored rows a gradient": ("2.3", {"2.3/mean/ignored": 1.0, "2.3/sum/ignored": 1.0}),
    "layer_norm backward without the mean(dx̂) term": ("3.1", {"3.1/mean": -1.0}),
    "layer_norm backward without the x̂ mean(dx̂ x̂) term": ("3.1", {"3.1/xhat": -1.0}),
    "rms_norm backward without the x̂ term": ("3.2", {"3.2/xhat": -1.0}),
    "attention backward: dS without the row term D": ("4.2", {"4.2/D": -1.0}),
    "attention backward: dK without the scale": ("4.2", {"4.2/scale": 3.0}),
    "attention backward: D = rowsum(dO) instead of rowsum(dO ∘ O)": ("4.2", {"4.2/D": -1.0, "4.2/rowsum": 1.0}),
    "flash backward without the row term D": ("5.2", {"5.2/D": -1.0}),
    "silu backward with σ (1 - σ) only: no product rule": ("6.1", {"6.1/at0": -0.5}),
}
# wrong terms of a backward formula in mutants.json that no probe isolates yet: they get no diagnosis
NOT_PROBED = (
    "attention backward: dV from the weights before dropout",
    "flash backward: dV from the weights before dropout",
)
TOLERANCE = 0.01   # of a coefficient, relative to max(1, |c|)


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


def diagnose(task_id, checks, problem=None):
    """The name of the one catalogued mistake of ``task_id`` whose signature the probe
    checks among ``checks`` show exactly, else None (see the module docstring)."""
    seen = None if problem else observed(checks)
    if not seen:
        return None
    hits = [name for name, (task, signature) in SIGNATURES.items()
            if task == task_id and set(signature) == set(seen)
            and all(abs(seen[p] - c) <= TOLERANCE * max(1.0, abs(c)) for p, c in signature.items())]
    return hits[0] if len(hits) == 1 else None


def expected(name):
    """The diagnosis the catalogued mistake ``name`` must get: its own name when it has a
    signature (a wrong term of a backward formula), else None."""
    return name if name in SIGNATURES else None
