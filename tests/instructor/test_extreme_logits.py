"""Every op that exponentiates, at extreme logits: ±1000 in float64 and ±80 in float32.

exp(1000) overflows float64, so an op that exponentiates without first subtracting the
row maximum (softmax, log_softmax, cross-entropy, attention) or without a running maximum
(flash attention) returns NaN or inf here, while a stable one is exact to rounding. At
±80 in float32, log(softmax) underflows to -inf where log_softmax must stay finite.

The reference is computed in float64 from the shifted formulas. Its tolerance counts the
rounding of exp(s - max): the condition number of exp at s - max is |s - max|, so one
rounding step per unit of logit spread, plus a few for the other operations.
"""

import numpy as np
import pytest

import minitorch_attn as mt
import minitorch_attn.functional as F
from tests.instructor.expect import attention_reference, expect_close, leaf, log_softmax, softmax

LIMITS = [pytest.param("float64", 1000.0, id="float64-1000"), pytest.param("float32", 80.0, id="float32-80")]


def logits(rng, shape, limit):
    """Uniform in [-limit, limit], with the extremes present in the first row."""
    x = rng.uniform(-limit, limit, shape)
    x.reshape(-1, shape[-1])[0, :2] = [limit, -limit]
    return x


def n_ops(limit):
    return 2 * limit + 16


@pytest.mark.parametrize("op", [pytest.param("softmax", marks=pytest.mark.task_2_1),
                                pytest.param("log_softmax", marks=pytest.mark.task_2_2)])
@pytest.mark.parametrize("dtype, limit", LIMITS)
@pytest.mark.parametrize("dim", [-1, 0])
def test_softmax_and_log_softmax_at_extreme_logits(rng, op, dtype, limit, dim):
    x, g = logits(rng, (4, 7), limit), rng.standard_normal((4, 7))
    t = leaf(x, dtype)
    y = getattr(F, op)(t, dim=dim)
    y.backward(mt.tensor(g, dtype=dtype))
    p = softmax(x, dim)
    if op == "softmax":
        forward, gradient = p, p * (g - (g * p).sum(dim, keepdims=True))
    else:
        forward, gradient = log_softmax(x, dim), g - p * g.sum(dim, keepdims=True)
    what = f"{op}(dim={dim}) {{}}, input (4, 7) {dtype}, logits within ±{limit:g}"
    expect_close(y, forward, what=what.format("forward"), n_ops=n_ops(limit), dtype=dtype)
    expect_close(t.grad, gradient, what=what.format("gradient"), n_ops=n_ops(limit), dtype=dtype)


@pytest.mark.task_2_3
@pytest.mark.parametrize("dtype, limit", LIMITS)
def test_cross_entropy_at_extreme_logits(rng, dtype, limit):
    x = logits(rng, (5, 7), limit)
    target = np.array([1, 0, 6, 3, 3])
    t = leaf(x, dtype)
    loss = F.cross_entropy(t, mt.tensor(target), label_smoothing=0.1)
    loss.backward()
    logp = log_softmax(x)
    q = 0.9 * np.eye(7)[target] + 0.1 / 7
    what = f"cross_entropy(label_smoothing=0.1) {{}}, logits (5, 7) {dtype}, within ±{limit:g}"
    expect_close(loss, -(q * logp).sum(1).mean(), what=what.format("forward"), n_ops=n_ops(limit), dtype=dtype)
    expect_close(t.grad, (softmax(x) - q) / 5, what=what.format("gradient"), n_ops=n_ops(limit), dtype=dtype)


def attention_inputs(rng, limit, shape_q=(2, 2, 5, 4), shape_k=(2, 2, 6, 4), dim_v=3):
    """q, k, v whose scaled scores q kᵀ / sqrt(E) reach ±limit."""
    q, k = rng.standard_normal(shape_q), rng.standard_normal(shape_k)
    v = rng.standard_normal(shape_k[:-1] + (dim_v,))
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(shape_q[-1])
    return q * (limit / np.abs(scores).max()), k, v


def run_attention(kind, q, k, v, dtype, causal, dO):
    tensors = [leaf(a, dtype) for a in (q, k, v)]
    if kind == "sdpa":
        out = F.scaled_dot_product_attention(*tensors, is_causal=causal)
    else:   # blocks smaller than the sequences: the running maximum changes from block to block
        out = F.flash_attention(*tensors, is_causal=causal, block_size_q=2, block_size_k=2)
    out.backward(mt.tensor(dO, dtype=dtype))
    return out, tensors


@pytest.mark.parametrize("kind, part", [
    pytest.param("sdpa", "forward", marks=pytest.mark.task_4_1, id="sdpa forward"),
    pytest.param("sdpa", "backward", marks=pytest.mark.task_4_2, id="sdpa backward"),
    pytest.param("flash", "forward", marks=pytest.mark.task_5_1, id="flash forward"),
    pytest.param("flash", "backward", marks=pytest.mark.task_5_2, id="flash backward"),
])
@pytest.mark.parametrize("dtype, limit", LIMITS)
@pytest.mark.parametrize("causal", [False, True])
def test_attention_at_extreme_scores(rng, kind, part, dtype, limit, causal):
    """Forward and backward are separate tasks: each checks only its own part."""
    q, k, v = attention_inputs(rng, limit)
    dO = rng.standard_normal(q.shape[:-1] + (3,))
    out, tensors = run_attention(kind, q, k, v, dtype, causal, dO)
    expected = attention_reference(q, k, v, dO, causal)
    what = f"{kind}(is_causal={causal}) {{}}, q {q.shape} k {k.shape} {dtype}, scores within ±{limit:g}"
    if part == "forward":
        expect_close(out, expected[0], what=what.format("forward"), n_ops=n_ops(limit), dtype=dtype)
        return
    for name, tensor, reference in zip("qkv", tensors, expected[1:]):
        expect_close(tensor.grad, reference, what=what.format(f"gradient of {name}"), n_ops=n_ops(limit), dtype=dtype)
