"""Designed probes: inputs that isolate one term of a backward formula, so that a wrong
gradient names its mistake for certain (:mod:`minitorch_attn.homework.probes`).

Each probe builds an input on which every term of the task's backward but a chosen one is
fixed (or zero), computes the student's gradient, and compares it with the reference. When
they differ, the difference is measured against the isolated term ``T``: if it is
``c · T`` to rounding (the rest of the difference below ``EXPLAINED`` of it), the failure
message ends with the tag ``[probe ID: c = C]`` (the term's coefficient is off by ``c``: ``-1``
when it is missing, ``-2`` when its sign is flipped); a difference that no multiple of ``T``
explains, an exception or a stub carries no tag. The grader reads the tags of its own
(held-back) checks and names a catalogued mistake only when the tags of the task match its
signature exactly, every other probe of the task passing.

Probes (``T`` in the formula's own sign):

* ``1.4/count``: mean over an axis of 5; ``T`` the whole gradient ``g / n`` (forgetting to
  divide by the count gives ``c = n - 1 = 4``).
* ``2.1/row``: softmax, random ``g``; ``T = -p Σ(g p)``. ``2.1/plain``: rows where
  ``Σ g p = 0``: ``T = p g`` alone.
* ``2.2/row``: log_softmax, random ``g``; ``T = -p Σ g``. ``2.2/plain``: rows where
  ``Σ g = 0``: ``T = g`` alone.
* ``3.1/mean``: layer_norm, ``mean(dx̂ · x̂) = 0``: ``T = -rstd · mean(dx̂)``.
  ``3.1/xhat``: ``mean(dx̂) = 0``: ``T = -rstd · x̂ · mean(dx̂ · x̂)``.
* ``3.2/xhat``: rms_norm, random ``g``; ``T = -r · x̂ · mean(dx̂ · x̂)``. ``3.2/plain``:
  ``mean(dx̂ · x̂) = 0``: ``T = r · dx̂`` alone.
* ``4.2/D`` and ``5.2/D``: attention (sdpa, flash), ``rowsum(dO) = 0`` and ``D = rowsum(dO ∘ O)
  ≠ 0``; ``T`` the part of dQ from ``D``: ``-scale · (P ∘ D) K``. ``4.2/rowsum``: ``D = 0`` and
  ``rowsum(dO) ≠ 0``; ``T = -scale · (P ∘ rowsum(dO)) K``, not in the formula (its coefficient
  should be 0). ``4.2/scale``: ``scale = 0.25``, ``D = rowsum(dO) = 0``; ``T`` is dK itself.
* ``1.2/exp``, ``1.2/tanh``, ``1.2/div``, ``1.4/var``, ``1.4/ties``, ``6.1/at0``: a designed point
  where the derivative is a known number (exp at log 2, tanh at atanh(1/2), d(a/b)/db at a = 3,
  tied maxima, silu at 0); ``T`` the gradient itself, so ``c`` is the factor by which it is off.
* ``1.5/transpose``: a square ``A = S + K``; ``T = -K dC``, the part of ``dB`` only ``Aᵀ`` gives.
* ``2.3/mean``, ``2.3/sum``: two of five rows ignored; two terms, ``count`` (the gradient) and
  ``ignored`` (the softmax of the ignored rows).
"""

import numpy as np
import pytest

import minitorch_attn as mt
from minitorch_attn import functional
from tests.conftest import float64_tolerance
from tests.instructor.expect import backward_of_task, host, leaf, our_leaf, softmax

pytestmark = pytest.mark.instructor

EXPLAINED = 1e-6  # the part of a difference a multiple of the isolated term leaves, relative to the difference


def probe(probe_id, ours, expected, term, what):
    """Assert the student's ``ours`` equals ``expected``; else fail, tagged with the
    coefficient ``c`` when ``ours - expected = c · term`` to rounding. ``term`` may be a dict
    ``{name: array}`` of several terms: the difference is then fitted by least squares on
    them, and each term of coefficient ``|c| > 1e-3`` gets the tag ``[probe ID/name: c = C]``."""
    if ours is None:
        raise AssertionError(f"probe {probe_id}, {what}: no gradient (None)")
    got, expected = host(ours), np.asarray(expected, dtype=np.float64)
    if got.shape != expected.shape:
        raise AssertionError(f"probe {probe_id}, {what}: shape {got.shape}, expected {expected.shape}")
    error = got - expected
    tolerance = float64_tolerance(expected, 64, "float64")
    if np.all(np.isfinite(error)) and np.max(np.abs(error), initial=0.0) <= tolerance:
        return
    worst = np.unravel_index(int(np.argmax(np.where(np.isfinite(error), np.abs(error), np.inf))), error.shape)
    message = (
        f"probe {probe_id}, {what}: worst at {tuple(int(i) for i in worst)}: yours {got[worst]:.10g}, "
        f"expected {expected[worst]:.10g} (tolerance {tolerance:.3g})"
    )
    terms = term if isinstance(term, dict) else {"": term}
    basis = np.stack(
        [np.broadcast_to(np.asarray(a, dtype=np.float64), error.shape).ravel() for a in terms.values()], axis=1
    )
    if np.all(np.isfinite(error)) and np.linalg.matrix_rank(basis) == basis.shape[1]:
        c = np.linalg.lstsq(basis, error.ravel(), rcond=None)[0]
        rest = np.sqrt(np.sum((error.ravel() - basis @ c) ** 2))
        if rest <= EXPLAINED * np.sqrt(np.sum(error * error)):
            message += "".join(
                f" [probe {probe_id}{'/' + name if name else ''}: c = {value:.4g}]"
                for name, value in zip(terms, c)
                if abs(value) > 1e-3
            )
    raise AssertionError(message)


def _project_out(g, *bases):
    """``g`` with, in each row (last axis), its components along ``bases`` removed (Gram-Schmidt)."""
    done = []
    for b in bases:
        b = np.broadcast_to(b, g.shape).astype(np.float64)
        for d in done:
            b = b - (b * d).sum(-1, keepdims=True) / (d * d).sum(-1, keepdims=True) * d
        done.append(b)
        g = g - (g * b).sum(-1, keepdims=True) / (b * b).sum(-1, keepdims=True) * b
    return g


@pytest.mark.task_1_4
def test_probe_1_4_count(student, rng):
    x, g = rng.standard_normal((3, 5)), rng.standard_normal(3)
    a = our_leaf(x)
    backward_of_task(student, "1.4", a.mean(dim=1), [g])
    expected = np.broadcast_to(g[:, None] / 5, (3, 5))
    probe("1.4/count", a.grad, expected, expected, "mean over dim 1 of (3, 5): gradient of x")


@pytest.mark.task_2_1
@pytest.mark.parametrize("kind", ["row", "plain"])
def test_probe_2_1(student, rng, kind):
    x, g = rng.standard_normal((4, 6)), rng.standard_normal((4, 6))
    p = softmax(x)
    if kind == "plain":
        g = g - (g * p).sum(-1, keepdims=True)  # Σ g p = 0 in each row
    t = leaf(student, x)
    student.module("minitorch_attn.functional").softmax(t, dim=-1).backward(mt.tensor(g))
    row = -p * (g * p).sum(-1, keepdims=True)
    probe(f"2.1/{kind}", t.grad, p * g + row, row if kind == "row" else p * g, "softmax (4, 6): gradient of x")


@pytest.mark.task_2_2
@pytest.mark.parametrize("kind", ["row", "plain"])
def test_probe_2_2(student, rng, kind):
    x, g = rng.standard_normal((4, 6)), rng.standard_normal((4, 6))
    if kind == "plain":
        g = g - g.mean(-1, keepdims=True)  # Σ g = 0 in each row
    t = leaf(student, x)
    student.module("minitorch_attn.functional").log_softmax(t, dim=-1).backward(mt.tensor(g))
    row = -softmax(x) * g.sum(-1, keepdims=True)
    probe(f"2.2/{kind}", t.grad, g + row, row if kind == "row" else g, "log_softmax (4, 6): gradient of x")


def _norm_terms(x, g, centered):
    """``(rstd, x̂, [rstd dx̂, -rstd mean(dx̂), -rstd x̂ mean(dx̂ x̂)])`` of layer_norm (``centered``)
    or rms_norm, eps 1e-5, no weight (dx̂ = g)."""
    xc = x - x.mean(-1, keepdims=True) if centered else x
    rstd = 1 / np.sqrt((xc * xc).mean(-1, keepdims=True) + 1e-5)
    xhat = xc * rstd
    mean_term = -rstd * g.mean(-1, keepdims=True) * np.ones_like(x) if centered else np.zeros_like(x)
    return rstd, xhat, [rstd * g, mean_term, -rstd * xhat * (g * xhat).mean(-1, keepdims=True)]


@pytest.mark.task_3_1
@pytest.mark.parametrize("kind", ["mean", "xhat"])
def test_probe_3_1(student, rng, kind):
    x, g = rng.standard_normal((4, 8)), rng.standard_normal((4, 8))
    _, xhat, _ = _norm_terms(x, g, True)
    g = _project_out(g, xhat) if kind == "mean" else g - g.mean(-1, keepdims=True)
    _, _, terms = _norm_terms(x, g, True)
    t = leaf(student, x)
    student.module("minitorch_attn.functional").layer_norm(t, (8,), eps=1e-5).backward(mt.tensor(g))
    probe(
        f"3.1/{kind}",
        t.grad,
        sum(terms),
        terms[1] if kind == "mean" else terms[2],
        "layer_norm (4, 8), no weight: gradient of x",
    )


@pytest.mark.task_3_2
@pytest.mark.parametrize("kind", ["xhat", "plain"])
def test_probe_3_2(student, rng, kind):
    x, g = rng.standard_normal((4, 8)), rng.standard_normal((4, 8))
    _, xhat, _ = _norm_terms(x, g, False)
    if kind == "plain":
        g = _project_out(g, xhat)  # mean(dx̂ x̂) = 0 in each row
    _, _, terms = _norm_terms(x, g, False)
    t = leaf(student, x)
    student.module("minitorch_attn.functional").rms_norm(t, (8,), eps=1e-5).backward(mt.tensor(g))
    probe(
        f"3.2/{kind}",
        t.grad,
        sum(terms),
        terms[2] if kind == "xhat" else terms[0],
        "rms_norm (4, 8), no weight: gradient of x",
    )


def _attention(q, k, v, scale):
    """``(O, P)`` of float64 attention with ``scale``."""
    p = softmax(scale * q @ np.swapaxes(k, -1, -2))
    return p @ v, p


def _attention_grads(q, k, v, dO, scale, D):
    """``(dQ, dK)`` with the row term ``D`` given."""
    _, p = _attention(q, k, v, scale)
    ds = p * (dO @ np.swapaxes(v, -1, -2) - D)
    return scale * ds @ k, scale * np.swapaxes(ds, -1, -2) @ q


ATTENTION = {
    "4.2": lambda q, k, v, scale: functional.scaled_dot_product_attention(q, k, v, scale=scale),
    "5.2": lambda q, k, v, scale: functional.flash_attention(q, k, v, scale=scale, block_size_q=2, block_size_k=3),
}


@pytest.mark.parametrize(
    "probe_id",
    [
        pytest.param("4.2/D", marks=pytest.mark.task_4_2),
        pytest.param("4.2/rowsum", marks=pytest.mark.task_4_2),
        pytest.param("4.2/scale", marks=pytest.mark.task_4_2),
        pytest.param("5.2/D", marks=pytest.mark.task_5_2),
    ],
)
def test_probe_attention(student, rng, probe_id):
    """This process's forward; the student's backward asked for each attention node."""
    task, kind = probe_id.split("/")
    q, k, v = rng.standard_normal((2, 5, 4)), rng.standard_normal((2, 7, 4)), rng.standard_normal((2, 7, 3))
    scale = 0.25 if kind == "scale" else 1 / np.sqrt(4)
    o, p = _attention(q, k, v, scale)
    dO = rng.standard_normal((2, 5, 3))
    ones = np.ones_like(dO)
    dO = {"D": _project_out(dO, ones), "rowsum": _project_out(dO, o), "scale": _project_out(dO, ones, o)}[kind]
    D, rowsum = (dO * o).sum(-1, keepdims=True), dO.sum(-1, keepdims=True)
    dq, dk = _attention_grads(q, k, v, dO, scale, D)
    tq, tk, tv = our_leaf(q), our_leaf(k), our_leaf(v)
    backward_of_task(student, task, ATTENTION[task](tq, tk, tv, scale), [dO])
    what = f"attention q (2, 5, 4), k (2, 7, 4), v (2, 7, 3), scale {scale:g}: gradient of "
    if kind == "scale":
        probe(probe_id, tk.grad, dk, dk, what + "k")
    elif kind == "D":
        probe(probe_id, tq.grad, dq, -scale * (p * D) @ k, what + "q")
    else:
        probe(probe_id, tq.grad, dq, -scale * (p * rowsum) @ k, what + "q")


@pytest.mark.task_1_2
@pytest.mark.parametrize("op", ["exp", "tanh", "div"])
def test_probe_1_2(student, rng, op):
    """At a designed point each derivative is a known number: ``exp`` at ``log 2`` is 2,
    ``tanh`` at ``atanh(1/2)`` is ``1 - 1/4``, ``d(a/b)/db`` at ``a = 3`` is ``-3/b²``;
    a wrong derivative is then a wrong multiple of the gradient (``T``: the gradient itself)."""
    g = rng.standard_normal((3, 4))
    b_values = rng.uniform(0.5, 2.0, (3, 4))
    if op == "div":
        a, b = our_leaf(np.full((3, 4), 3.0)), our_leaf(b_values)
        backward_of_task(student, "1.2", a / b, [g])
        expected = -g * 3.0 / b_values**2
        probe(f"1.2/{op}", b.grad, expected, expected, "a / b at a = 3: gradient of b")
        return
    x0 = {"exp": np.log(2.0), "tanh": np.arctanh(0.5)}[op]
    a = our_leaf(np.full((3, 4), x0))
    backward_of_task(student, "1.2", a.exp() if op == "exp" else a.tanh(), [g])
    expected = g * (2.0 if op == "exp" else 0.75)
    probe(f"1.2/{op}", a.grad, expected, expected, f"{op} at {x0:.6g}: gradient of x")


@pytest.mark.task_1_4
@pytest.mark.parametrize("op", ["var", "ties"])
def test_probe_1_4(student, rng, op):
    """var over 5 (correction 1): ``T`` the gradient ``g · 2 (x - μ) / 4``; max over rows with
    two tied maxima: ``T`` the gradient, ``g / 2`` at each tie."""
    g = rng.standard_normal(3)
    x = rng.standard_normal((3, 5))
    if op == "ties":
        x[:, 1] = x[:, 3] = np.abs(x).max() + 1.0
    a = our_leaf(x)
    backward_of_task(student, "1.4", a.var(dim=1) if op == "var" else a.max(dim=1), [g])
    if op == "var":
        expected = g[:, None] * 2 * (x - x.mean(1, keepdims=True)) / 4
    else:
        expected = g[:, None] * (x == x.max(1, keepdims=True)) / 2
    probe(f"1.4/{op}", a.grad, expected, expected, f"{op} over dim 1 of (3, 5): gradient of x")


@pytest.mark.task_1_5
def test_probe_1_5_transpose(student, rng):
    """Square ``A = S + K`` (symmetric plus antisymmetric): ``dB = Aᵀ dC = S dC - K dC``;
    ``T = -K dC``, the part that only the transpose gives."""
    a0 = rng.standard_normal((4, 4))
    sym, anti = (a0 + a0.T) / 2, (a0 - a0.T) / 2
    b0, g = rng.standard_normal((4, 3)), rng.standard_normal((4, 3))
    a, b = our_leaf(sym + anti), our_leaf(b0)
    backward_of_task(student, "1.5", a @ b, [g])
    probe("1.5/transpose", b.grad, (sym - anti) @ g, -anti @ g, "matmul (4, 4) @ (4, 3): gradient of b")


@pytest.mark.task_2_3
@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_probe_2_3(student, rng, reduction):
    """Five rows, two of them ignored (``ignore_index``): ``T`` = ``count``, the gradient
    itself (its mean divides by the 3 rows that count), and ``ignored``, the softmax of
    the ignored rows (which get no gradient; the code outside the task sets their logits to 0,
    so their softmax is 1/C)."""
    x = rng.standard_normal((5, 4))
    target = np.array([1, -100, 3, -100, 0])
    t = leaf(student, x)
    F = student.module("minitorch_attn.functional")
    F.cross_entropy(t, mt.tensor(target), reduction=reduction).backward(mt.tensor(0.7, dtype="float64"))
    valid = (target != -100)[:, None]
    total = 3.0 if reduction == "mean" else 1.0
    expected = 0.7 * valid * (softmax(x) - np.eye(4)[np.where(target < 0, 0, target)]) / total
    terms = {"count": expected, "ignored": 0.7 * ~valid * np.full((5, 4), 0.25) / total}  # their logits count as 0
    probe(
        f"2.3/{reduction}",
        t.grad,
        expected,
        terms,
        f"cross_entropy (5, 4), 2 rows ignored, {reduction}: gradient of the logits",
    )


@pytest.mark.task_6_1
def test_probe_6_1_at_zero(student, rng):
    """silu at 0: σ = 1/2 and the derivative ``σ (1 + x (1 - σ))`` is 1/2; ``T`` the gradient."""
    g = rng.standard_normal((3, 4))
    t = leaf(student, np.zeros((3, 4)))
    student.module("minitorch_attn.functional").silu(t).backward(mt.tensor(g))
    probe("6.1/at0", t.grad, g / 2, g / 2, "silu at 0: gradient of x")
