"""Instructor-only tests, held out of student trees: they catch the usual shortcuts
(gradients of ones, a missing accumulation for a node used twice, broadcasting not
reduced, and a wrong backward that a plain-sum loss would hide) with closed-form
gradients under random upstream gradients.

Each test reaches its own task's code only: the engine's tests (1.1) use ops whose backward
no task writes (add, einsum's product); the backward passes of assignment 1 and of attention
run on this process's graph, with the student's code asked for the task's part
(:func:`~tests.instructor.expect.backward_of_task`); a forward is checked apart from its backward."""

import numpy as np
import pytest

import minitorch_attn as mt
from minitorch_attn import functional
from tests.instructor.expect import attention_reference, backward_of_task, expect_close, leaf, our_leaf, softmax

pytestmark = pytest.mark.instructor


def close(ours, expected, what):
    """``ours`` within 64 rounding steps of the closed form; ``what`` names op, shape, forward or gradient."""
    expect_close(ours, expected, what=what, n_ops=64)


@pytest.mark.task_1_1
def test_task_1_1_a_node_used_twice_accumulates(student, rng):
    einsum = student.module("minitorch_attn").einsum
    a = leaf(student, [1.0, -2.0])
    g = rng.standard_normal(2)
    b = einsum("i,i->i", a, a) + a  # a used three times: d/da = 2a + 1
    b.backward(mt.tensor(g))
    close(a.grad, g * (2 * np.array([1.0, -2.0]) + 1), "einsum('i,i->i', a, a) + a gradient, input (2,) float64")
    b2 = a + a + a
    b2.backward(mt.tensor(g))  # accumulates across calls
    close(
        a.grad,
        g * (2 * np.array([1.0, -2.0]) + 1) + 3 * g,
        "einsum('i,i->i', a, a) + a, then a + a + a: gradient accumulated over two backward calls, input (2,) float64",
    )


@pytest.mark.task_1_2
def test_task_1_2_elementwise_under_a_random_upstream_gradient(student, rng):
    x = rng.uniform(0.5, 2.0, (3, 4))
    y = rng.uniform(0.5, 2.0, (3, 4))
    g = rng.standard_normal((3, 4))
    cases = [
        ("a * b", lambda a, b: a * b, lambda: (g * y, g * x)),
        ("a / b", lambda a, b: a / b, lambda: (g / y, -g * x / y**2)),
        ("exp(a) * log(b)", lambda a, b: a.exp() * b.log(), lambda: (g * np.exp(x) * np.log(y), g * np.exp(x) / y)),
        (
            "sqrt(a) + tanh(b)",
            lambda a, b: a.sqrt() + b.tanh(),
            lambda: (g / (2 * np.sqrt(x)), g * (1 - np.tanh(y) ** 2)),
        ),
        ("a ** 3 - b", lambda a, b: a**3 - b, lambda: (g * 3 * x**2, -g)),
    ]
    for name, fn, expected in cases:
        a, b = our_leaf(x), our_leaf(y)
        backward_of_task(student, "1.2", fn(a, b), [g])
        ea, eb = expected()
        close(a.grad, ea, f"{name} gradient of a, inputs (3, 4), (3, 4) float64")
        close(b.grad, eb, f"{name} gradient of b, inputs (3, 4), (3, 4) float64")


@pytest.mark.task_1_3
def test_task_1_3_broadcast_gradients_are_reduced(student, rng):
    x, y = rng.standard_normal((2, 1, 4)), rng.standard_normal((3, 1))
    g = rng.standard_normal((2, 3, 4))
    a, b = our_leaf(x), our_leaf(y)
    backward_of_task(student, "1.3", a * b, [g])
    close(
        a.grad, (g * y).sum(axis=1, keepdims=True), "a * b (broadcast) gradient of a, inputs (2, 1, 4), (3, 1) float64"
    )
    close(
        b.grad, (g * x).sum(axis=(0, 2))[:, None], "a * b (broadcast) gradient of b, inputs (2, 1, 4), (3, 1) float64"
    )


@pytest.mark.task_1_4
def test_task_1_4_reductions_under_a_random_upstream_gradient(student, rng):
    x = rng.standard_normal((3, 5))
    g = rng.standard_normal(3)
    for name, fn, expected in [
        ("sum", lambda a: a.sum(dim=1), lambda: np.broadcast_to(g[:, None], (3, 5))),
        ("mean", lambda a: a.mean(dim=1), lambda: np.broadcast_to(g[:, None] / 5, (3, 5))),
        ("var", lambda a: a.var(dim=1), lambda: g[:, None] * 2 * (x - x.mean(1, keepdims=True)) / 4),
        ("max", lambda a: a.max(dim=1), lambda: g[:, None] * (x == x.max(1, keepdims=True))),
    ]:
        a = our_leaf(x)
        backward_of_task(student, "1.4", fn(a), [g])
        close(a.grad, expected(), f"{name}(dim=1) gradient, input (3, 5) float64")


@pytest.mark.task_1_4
def test_task_1_4_max_shares_the_gradient_among_tied_maxima(student, rng):
    """A row with k equal maxima sends each of them g / k, as ``torch.amax``: the row's
    gradient still sums to its upstream gradient, whatever the ties."""
    x = rng.standard_normal((4, 6))
    for row, ties in enumerate((1, 2, 3, 6)):
        x[row, rng.permutation(6)[:ties]] = x[row].max() + 1.0
    hits = (x == x.max(1, keepdims=True)).astype(float)
    g = rng.standard_normal(4)
    a = our_leaf(x)
    backward_of_task(student, "1.4", a.max(dim=1), [g])
    close(
        a.grad,
        g[:, None] * hits / hits.sum(1, keepdims=True),
        "max(dim=1) gradient, rows with 1, 2, 3 and 6 tied maxima, input (4, 6) float64",
    )
    top = (x == x.max()).astype(float)
    a = our_leaf(x)
    backward_of_task(student, "1.4", a.max(), [np.float64(g[0])])
    close(a.grad, g[0] * top / top.sum(), f"max() gradient, {int(top.sum())} tied maxima, input (4, 6) float64")


@pytest.mark.task_1_5
def test_task_1_5_matmul_under_a_random_upstream_gradient(student, rng):
    x, w = rng.standard_normal((2, 3, 4)), rng.standard_normal((4, 5))
    g = rng.standard_normal((2, 3, 5))
    a, b = our_leaf(x), our_leaf(w)
    backward_of_task(student, "1.5", a @ b, [g])
    close(a.grad, g @ w.T, "matmul gradient of a, inputs (2, 3, 4) @ (4, 5) float64")
    close(b.grad, np.einsum("bij,bik->jk", x, g), "matmul gradient of b, inputs (2, 3, 4) @ (4, 5) float64")


# ---- assignments 2-5: closed-form NumPy references ------------------------------------------------


@pytest.mark.task_2_1
def test_task_2_1_softmax_under_a_random_upstream_gradient(student, rng):
    F = student.module("minitorch_attn.functional")
    x, g = rng.standard_normal((4, 6)), rng.standard_normal((4, 6))
    t = leaf(student, x)
    y = F.softmax(t, dim=-1)
    y.backward(mt.tensor(g))
    p = softmax(x)
    close(y, p, "softmax forward, input (4, 6) float64")
    close(t.grad, p * (g - (g * p).sum(-1, keepdims=True)), "softmax gradient, input (4, 6) float64")


@pytest.mark.task_2_2
def test_task_2_2_log_softmax_under_a_random_upstream_gradient(student, rng):
    F = student.module("minitorch_attn.functional")
    x, g = rng.standard_normal((4, 6)), rng.standard_normal((4, 6))
    t = leaf(student, x)
    y = F.log_softmax(t, dim=-1)
    y.backward(mt.tensor(g))
    close(y, np.log(softmax(x)), "log_softmax forward, input (4, 6) float64")
    close(t.grad, g - softmax(x) * g.sum(-1, keepdims=True), "log_softmax gradient, input (4, 6) float64")


@pytest.mark.task_2_3
def test_task_2_3_cross_entropy_gradient_is_softmax_minus_onehot(student, rng):
    F = student.module("minitorch_attn.functional")
    x = rng.standard_normal((5, 7))
    target = np.array([0, 6, 3, 3, 1])
    t = leaf(student, x)
    loss = F.cross_entropy(t, mt.tensor(target))
    upstream = 0.7
    loss.backward(mt.tensor(upstream, dtype="float64"))
    p = softmax(x)
    close(loss, -np.log(p[np.arange(5), target]).mean(), "cross_entropy forward, logits (5, 7) float64")
    onehot = np.eye(7)[target]
    close(t.grad, upstream * (p - onehot) / 5, "cross_entropy gradient, logits (5, 7) float64")


def _layer_norm_reference(x, w, b, g, eps=1e-5):
    mean = x.mean(-1, keepdims=True)
    rstd = 1 / np.sqrt(((x - mean) ** 2).mean(-1, keepdims=True) + eps)
    xhat = (x - mean) * rstd
    dxhat = g * w
    dx = rstd * (dxhat - dxhat.mean(-1, keepdims=True) - xhat * (dxhat * xhat).mean(-1, keepdims=True))
    return xhat * w + b, dx, (g * xhat).sum(0), g.sum(0)


@pytest.mark.task_3_1
def test_task_3_1_layer_norm_under_a_random_upstream_gradient(student, rng):
    F = student.module("minitorch_attn.functional")
    x, w, b, g = (rng.standard_normal(s) for s in [(4, 8), (8,), (8,), (4, 8)])
    tx, tw, tb = leaf(student, x), leaf(student, w), leaf(student, b)
    y = F.layer_norm(tx, (8,), tw, tb)
    y.backward(mt.tensor(g))
    out, dx, dw, db = _layer_norm_reference(x, w, b, g)
    what = "layer_norm {}, input (4, 8), weight and bias (8,) float64"
    close(y, out, what.format("forward"))
    close(tx.grad, dx, what.format("gradient of x"))
    close(tw.grad, dw, what.format("gradient of weight"))
    close(tb.grad, db, what.format("gradient of bias"))


@pytest.mark.task_3_2
def test_task_3_2_rms_norm_under_a_random_upstream_gradient(student, rng):
    F = student.module("minitorch_attn.functional")
    x, w, g = (rng.standard_normal(s) for s in [(4, 8), (8,), (4, 8)])
    eps = 1e-6
    tx, tw = leaf(student, x), leaf(student, w)
    y = F.rms_norm(tx, (8,), tw, eps=eps)
    y.backward(mt.tensor(g))
    r = 1 / np.sqrt((x * x).mean(-1, keepdims=True) + eps)
    xhat = x * r
    dxhat = g * w
    what = "rms_norm {}, input (4, 8), weight (8,) float64"
    close(y, xhat * w, what.format("forward"))
    close(tx.grad, r * (dxhat - xhat * (dxhat * xhat).mean(-1, keepdims=True)), what.format("gradient of x"))
    close(tw.grad, (g * xhat).sum(0), what.format("gradient of weight"))


ATTENTION = {  # (a function of a library's functional module and q, k, v; the task of its backward)
    "sdpa": (lambda F, q, k, v: F.scaled_dot_product_attention(q, k, v), "4.2"),
    "flash": (lambda F, q, k, v: F.flash_attention(q, k, v, block_size_q=2, block_size_k=3), "5.2"),
}


@pytest.mark.parametrize(
    "attention, part",
    [
        pytest.param("sdpa", "forward", marks=pytest.mark.task_4_1),
        pytest.param("sdpa", "backward", marks=pytest.mark.task_4_2),
        pytest.param("flash", "forward", marks=pytest.mark.task_5_1),
        pytest.param("flash", "backward", marks=pytest.mark.task_5_2),
    ],
)
def test_attention_under_a_random_upstream_gradient(student, rng, attention, part):
    """The forward on the student's library; the backward on this process's forward, the
    student's backward asked for each attention node (their forward may be unfinished)."""
    call, backward_task = ATTENTION[attention]
    q, k, v = rng.standard_normal((2, 2, 5, 4)), rng.standard_normal((2, 2, 7, 4)), rng.standard_normal((2, 2, 7, 3))
    dO = rng.standard_normal((2, 2, 5, 3))
    o, dq, dk, dv = attention_reference(q, k, v, dO)
    what = f"{attention} {{}}, q (2, 2, 5, 4), k (2, 2, 7, 4), v (2, 2, 7, 3) float64"
    if part == "forward":
        out = call(student.module("minitorch_attn.functional"), *(leaf(student, a) for a in (q, k, v)))
        close(out, o, what.format("forward"))
        return
    tq, tk, tv = our_leaf(q), our_leaf(k), our_leaf(v)
    backward_of_task(student, backward_task, call(functional, tq, tk, tv), [dO])
    close(tq.grad, dq, what.format("gradient of q"))
    close(tk.grad, dk, what.format("gradient of k"))
    close(tv.grad, dv, what.format("gradient of v"))


@pytest.mark.task_4_3
@pytest.mark.parametrize("heads, kv_heads", [(2, 2), (4, 2), (4, 1)])
def test_task_4_3_heads_are_split_repeated_and_merged_as_a_numpy_reference(student, rng, heads, kv_heads):
    """The module's own code, each step on its own (the attention between them is task 4.1's):
    split ``(B, T, h d_k) -> (B, h, T, d_k)``, each key/value head repeated for its group of
    query heads, and the heads merged back side by side."""
    d_model, batch, length = 8, 2, 3
    d_k, group = d_model // heads, heads // kv_heads
    mha = student.module("minitorch_attn.nn").MultiHeadAttention(d_model, heads, dropout=0.0, num_kv_heads=kv_heads)
    what = f"MultiHeadAttention(d_model={d_model}, num_heads={heads}, num_kv_heads={kv_heads}).{{}}, input {{}} float64"

    def split(a, n):  # (B, T, n d_k) -> (B, n, T, d_k)
        return a.reshape(batch, length, n, d_k).transpose(0, 2, 1, 3)

    x, kv = rng.standard_normal((batch, length, d_model)), rng.standard_normal((batch, length, kv_heads * d_k))
    expect_close(
        mha._split_heads(leaf(student, x), heads), split(x, heads), what=what.format("_split_heads", x.shape), n_ops=0
    )
    expect_close(
        mha._split_heads(leaf(student, kv), kv_heads),
        split(kv, kv_heads),  # keys and values: h_kv heads
        what=what.format("_split_heads of keys", kv.shape),
        n_ops=0,
    )
    expect_close(
        mha._repeat_kv(leaf(student, split(kv, kv_heads))),
        np.repeat(split(kv, kv_heads), group, axis=1),
        what=what.format("_repeat_kv", (batch, kv_heads, length, d_k)),
        n_ops=0,
    )
    out = rng.standard_normal((batch, heads, length, d_k))
    expect_close(
        mha._merge_heads(leaf(student, out)),
        out.transpose(0, 2, 1, 3).reshape(batch, length, d_model),
        what=what.format("_merge_heads", out.shape),
        n_ops=0,
    )
