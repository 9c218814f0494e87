"""What the instructor tests share: the student's library reached through the ``student``
fixture (``conftest.py``), and comparisons whose failure message names the op, the input
shape and dtype, forward or gradient, and the worst element, so that a student's feedback
says what to fix without a debugger.

``minitorch_attn`` as imported here is the library of this process: the instructor's when
the grader runs these tests, a reference the student's values are compared with.
"""

import numpy as np

import minitorch_attn as mt
from tests.conftest import float64_tolerance

REFERENCE_RTOL = 1e-7   # a student's values against the reference library's, relative to max(1, |value|)


def leaf(student, array, dtype="float64"):
    """A tensor of ``array``'s values in the student's library, requiring grad."""
    return student.send(mt.tensor(np.asarray(array), dtype=dtype, requires_grad=True))


def host(x):
    """A float64 NumPy copy of a Tensor (this process's or the student's) or an array."""
    if isinstance(x, np.ndarray) or np.isscalar(x):
        return np.array(x, dtype=np.float64)
    return np.array(x.numpy(), dtype=np.float64)


def student_call(student, record, sample):
    """The student's ``sample.call(record.op)``: the same record and sample of their copy of
    the catalogue of operations (which is the instructor's: it holds no solution region)."""
    theirs = student.module("minitorch_attn.opinfo").find(record.name)
    for candidate in theirs.samples:
        if candidate.name == sample.name:
            return candidate.call(theirs.op)
    raise AssertionError(f"the catalogue of the graded copy has no sample {sample.name!r} of {record.name!r}")


def expect_close(ours, expected, *, what, n_ops=8, dtype="float64", rtol=None):
    """Assert ``ours`` equals the float64 reference ``expected`` within
    ``float64_tolerance(expected, n_ops, dtype)`` (or ``rtol * max(1, max|expected|)``);
    infinities must match exactly, and a NaN is always wrong. ``what`` names the check,
    e.g. "softmax forward, input (4, 7) float32"."""
    if ours is None:
        raise AssertionError(f"{what}: no gradient (None) where one was expected")
    got, expected = host(ours), np.asarray(expected, dtype=np.float64)
    if got.shape != expected.shape:
        raise AssertionError(f"{what}: shape {got.shape}, expected {expected.shape}")
    finite = expected[np.isfinite(expected)]
    tolerance = (float64_tolerance(finite, n_ops, dtype) if rtol is None
                 else rtol * max(1.0, float(np.max(np.abs(finite), initial=0.0))))
    same_inf = np.isinf(expected) & (got == expected)
    error = np.where(same_inf, 0.0, np.abs(got - expected))
    error = np.where(np.isnan(error), np.inf, error)
    wrong = error > tolerance
    if wrong.any():
        worst = np.unravel_index(int(np.argmax(error)), error.shape) if error.ndim else ()
        raise AssertionError(
            f"{what}: {int(wrong.sum())} of {wrong.size} elements wrong; worst at {tuple(int(i) for i in worst)}: "
            f"yours {got[worst]:.10g}, expected {expected[worst]:.10g} (tolerance {tolerance:.3g})")


def expect_unchanged(before, after, *, what):
    """Assert an array kept its shape and exact values (NaNs in the same places)."""
    before, after = np.asarray(before), host(after)
    if before.shape == after.shape and np.array_equal(before, after, equal_nan=True):
        return
    changed = "its shape" if before.shape != after.shape else \
        f"{int(np.sum(~((before == after) | (np.isnan(before) & np.isnan(after)))))} of {before.size} elements"
    raise AssertionError(f"{what} was changed ({changed}): a backward must not write into arrays that the "
                         f"forward saved or that another node holds")


def softmax(x, axis=-1):
    """The float64 reference softmax, shifted by the maximum."""
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def log_softmax(x, axis=-1):
    """The float64 reference log-softmax, shifted by the maximum."""
    z = x - x.max(axis=axis, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=axis, keepdims=True))


def attention_reference(q, k, v, dO, causal=False):
    """``(O, dQ, dK, dV)`` of ``softmax(q kᵀ / sqrt(E)) v`` under the upstream gradient
    ``dO``, in float64, with FlashAttention-2's row term ``D = rowsum(dO ∘ O)``."""
    scale = 1 / np.sqrt(q.shape[-1])
    s = scale * q @ np.swapaxes(k, -1, -2)
    if causal:
        s = np.where(np.tril(np.ones(s.shape[-2:], dtype=bool)), s, -np.inf)
    p = softmax(s)
    o = p @ v
    dp = dO @ np.swapaxes(v, -1, -2)
    ds = p * (dp - (dO * o).sum(-1, keepdims=True))
    return o, scale * ds @ k, scale * np.swapaxes(ds, -1, -2) @ q, np.swapaxes(p, -1, -2) @ dO
