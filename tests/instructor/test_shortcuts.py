"""Instructor-only tests, held out of student trees: they catch the usual shortcuts
(gradients of ones, a missing accumulation for a node used twice, broadcasting not
reduced, and a wrong backward that a plain-sum loss would hide) with closed-form
gradients under random upstream gradients."""

import numpy as np
import pytest

import minitorch_attn as mt

pytestmark = pytest.mark.instructor

rng = np.random.default_rng(2024)


def leaf(array):
    return mt.tensor(np.asarray(array, dtype=np.float64), requires_grad=True)


def close(ours, expected):
    expected = np.asarray(expected)
    tol = 64 * np.finfo(np.float64).eps * max(1.0, float(np.abs(expected).max(initial=0)))
    np.testing.assert_allclose(ours.numpy(), expected, rtol=0, atol=tol)


def test_task_1_1_a_node_used_twice_accumulates():
    a = leaf([1.0, -2.0])
    g = rng.standard_normal(2)
    b = a * a + a            # a used three times: d/da = 2a + 1
    b.backward(mt.tensor(g))
    close(a.grad, g * (2 * np.array([1.0, -2.0]) + 1))
    b2 = a * 3.0
    b2.backward(mt.tensor(g))  # accumulates across calls
    close(a.grad, g * (2 * np.array([1.0, -2.0]) + 1) + 3 * g)


def test_task_1_2_elementwise_under_a_random_upstream_gradient():
    x = rng.uniform(0.5, 2.0, (3, 4))
    y = rng.uniform(0.5, 2.0, (3, 4))
    g = rng.standard_normal((3, 4))
    cases = [
        (lambda a, b: a * b, lambda: (g * y, g * x)),
        (lambda a, b: a / b, lambda: (g / y, -g * x / y ** 2)),
        (lambda a, b: a.exp() * b.log(), lambda: (g * np.exp(x) * np.log(y), g * np.exp(x) / y)),
        (lambda a, b: a.sqrt() + b.tanh(), lambda: (g / (2 * np.sqrt(x)), g * (1 - np.tanh(y) ** 2))),
        (lambda a, b: a ** 3 - b, lambda: (g * 3 * x ** 2, -g)),
    ]
    for fn, expected in cases:
        a, b = leaf(x), leaf(y)
        fn(a, b).backward(mt.tensor(g))
        ea, eb = expected()
        close(a.grad, ea)
        close(b.grad, eb)


def test_task_1_3_broadcast_gradients_are_reduced():
    x, y = rng.standard_normal((2, 1, 4)), rng.standard_normal((3, 1))
    g = rng.standard_normal((2, 3, 4))
    a, b = leaf(x), leaf(y)
    (a * b).backward(mt.tensor(g))
    close(a.grad, (g * y).sum(axis=1, keepdims=True))
    close(b.grad, (g * x).sum(axis=(0, 2))[:, None])


def test_task_1_4_reductions_under_a_random_upstream_gradient():
    x = rng.standard_normal((3, 5))
    g = rng.standard_normal(3)
    for fn, expected in [
        (lambda a: a.sum(dim=1), lambda: np.broadcast_to(g[:, None], (3, 5))),
        (lambda a: a.mean(dim=1), lambda: np.broadcast_to(g[:, None] / 5, (3, 5))),
        (lambda a: a.var(dim=1), lambda: g[:, None] * 2 * (x - x.mean(1, keepdims=True)) / 4),
        (lambda a: a.max(dim=1), lambda: g[:, None] * (x == x.max(1, keepdims=True))),
    ]:
        a = leaf(x)
        fn(a).backward(mt.tensor(g))
        close(a.grad, expected())


def test_task_1_5_matmul_under_a_random_upstream_gradient():
    x, w = rng.standard_normal((2, 3, 4)), rng.standard_normal((4, 5))
    g = rng.standard_normal((2, 3, 5))
    a, b = leaf(x), leaf(w)
    (a @ b).backward(mt.tensor(g))
    close(a.grad, g @ w.T)
    close(b.grad, np.einsum("bij,bik->jk", x, g))
