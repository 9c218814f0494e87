"""What the instructor tests share: comparisons whose failure message names the op, the
input shape and dtype, forward or gradient, and the worst element, so that a student's
feedback says what to fix without a debugger."""

import numpy as np

import minitorch_attn as mt
from tests.conftest import float64_tolerance


def leaf(array, dtype="float64"):
    return mt.tensor(np.asarray(array), dtype=dtype, requires_grad=True)


def host(x):
    """A float64 NumPy copy of a Tensor or array."""
    return np.array(x.numpy() if isinstance(x, mt.Tensor) else x, dtype=np.float64)


def expect_close(ours, expected, *, what, n_ops=8, dtype="float64"):
    """Assert ``ours`` equals the float64 reference ``expected`` within
    ``float64_tolerance(expected, n_ops, dtype)``; infinities must match exactly, and a NaN
    is always wrong. ``what`` names the check, e.g. "softmax forward, input (4, 7) float32"."""
    if ours is None:
        raise AssertionError(f"{what}: no gradient (None) where one was expected")
    got, expected = host(ours), np.asarray(expected, dtype=np.float64)
    if got.shape != expected.shape:
        raise AssertionError(f"{what}: shape {got.shape}, expected {expected.shape}")
    tolerance = float64_tolerance(expected[np.isfinite(expected)], n_ops, dtype)
    same_inf = np.isinf(expected) & (got == expected)
    error = np.where(same_inf, 0.0, np.abs(got - expected))
    error = np.where(np.isnan(error), np.inf, error)
    wrong = error > tolerance
    if wrong.any():
        worst = np.unravel_index(int(np.argmax(error)), error.shape) if error.ndim else ()
        raise AssertionError(
            f"{what}: {int(wrong.sum())} of {wrong.size} elements wrong; worst at {tuple(int(i) for i in worst)}: "
            f"ours {got[worst]:.10g}, expected {expected[worst]:.10g} (tolerance {tolerance:.3g})")


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
