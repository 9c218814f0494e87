"""Assignment 6 against closed-form NumPy (held back): silu at inputs where e^|x| overflows,
SwiGLU's forward and the gradients of its input and three weights under a random upstream
gradient, LLaMA's width rule, and the modern GPT (RMSNorm, rotary positions, grouped-query
heads, a sliding window) against a NumPy forward, in one pass and token by token from the
key/value cache, and its choice of SwiGLU.

Each task's checks need its own code only. SwiGLU's gate is silu, task 6.1's: its checks
put tanh in silu's place (:func:`~tests.instructor.expect.swapped`), since the network's
structure, not its gate, is task 6.2's. The model's checks use GPT-2's feed-forward network
(no task's code) where SwiGLU would be task 6.2's, and check the choice of SwiGLU with a
stand-in for the class.

Each reference is written from the papers' formulas, not from the library: SiLU (Elfwing
et al., arXiv:1702.03118, eq. 4), SwiGLU (Shazeer, arXiv:2002.05202, eq. 6), LLaMA's hidden
width (Touvron et al., arXiv:2302.13971 §2.2, as its code computes it), RoPE on split halves
(Su et al., arXiv:2104.09864, §3.4.2), RMSNorm (Zhang & Sennrich, arXiv:1910.07467, eq. 4).
The library under test is the ``student`` fixture's (``tests/conftest.py``); ``mt`` and
``nn`` here are this process's, used only for tensors sent to it and for LLaMA's preset.
"""

import numpy as np
import pytest

import minitorch_attn as mt
from minitorch_attn import nn
from tests.instructor.expect import expect_close, leaf, softmax, swapped

pytestmark = pytest.mark.instructor


def sigmoid(x):
    return np.exp(-np.logaddexp(0.0, -x))


def silu(x):
    return x * sigmoid(x)


# ---- 6.1: silu -------------------------------------------------------------------------------------
@pytest.mark.task_6_1
@pytest.mark.parametrize("dtype, big", [("float64", 1000.0), ("float32", 120.0)])
def test_task_6_1_silu_under_a_random_upstream_gradient_at_every_scale(student, rng, dtype, big):
    """Ordinary inputs, 0, and inputs past the overflow of e^|x| (709 in float64, 88 in
    float32) on both sides, under a random upstream gradient."""
    x = np.concatenate([rng.standard_normal(8) * 3, [0.0, -big, -0.9 * big, -50.0, 50.0, 0.9 * big, big]])
    g = rng.standard_normal(x.shape)
    t = leaf(student, x, dtype)
    y = student.module("minitorch_attn.functional").silu(t)
    y.backward(mt.tensor(g, dtype=dtype))
    x = t.numpy().astype(np.float64)  # the inputs as rounded to dtype
    s = sigmoid(x)
    what = f"silu {{}}, input {x.shape} {dtype} with |x| up to {big:g}"
    expect_close(y, silu(x), what=what.format("forward"), n_ops=8, dtype=dtype)
    expect_close(t.grad, g * s * (1 + x * sigmoid(-x)), what=what.format("gradient"), n_ops=16, dtype=dtype)
    assert y.dtype == t.grad.dtype == dtype, f"silu keeps the dtype {dtype}: output {y.dtype}, gradient {t.grad.dtype}"


@pytest.mark.task_6_1
def test_task_6_1_silu_of_a_batch_of_rows(student, rng):
    x, g = rng.standard_normal((2, 3, 5)) * 2, rng.standard_normal((2, 3, 5))
    t = leaf(student, x)
    y = student.module("minitorch_attn.functional").silu(t)
    y.backward(mt.tensor(g))
    what = "silu {}, input (2, 3, 5) float64"
    expect_close(y, silu(x), what=what.format("forward"))
    expect_close(t.grad, g * sigmoid(x) * (1 + x * sigmoid(-x)), what=what.format("gradient"))


def load(student, module, weights, dtype):
    """Give the parameters of the student's ``module`` the values ``weights`` (``{name:
    array}``) in ``dtype``, as ``p.data = ...`` does (their modules are built in float32);
    the assignment runs in the student's process, where their objects live."""
    assign = student.module("builtins").setattr
    for name, p in module.named_parameters():
        assign(p, "data", np.asarray(weights[name], dtype=dtype))


# ---- 6.2: SwiGLU -----------------------------------------------------------------------------------
def gated_reference(x, w1, w3, w2, g):
    """``(y, dx, dw1, dw3, dw2)`` of ``y = w2(tanh(w1 x) * w3 x)`` under the upstream ``g``: the
    SwiGLU network with tanh as its gate (the checks' stand-in for silu, task 6.1's)."""
    a, b = x @ w1.T, x @ w3.T  # (..., d_ff): gate and value
    h = np.tanh(a) * b
    y = h @ w2.T
    dh = g @ w2
    da = dh * b * (1 - np.tanh(a) ** 2)
    db = dh * np.tanh(a)
    rows = lambda m: m.reshape(-1, m.shape[-1])  # noqa: E731
    return (y, da @ w1 + db @ w3, rows(da).T @ rows(x), rows(db).T @ rows(x), rows(g).T @ rows(h))


@pytest.mark.task_6_2
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_task_6_2_swiglu_forward_and_every_gradient_under_a_random_upstream_gradient(student, rng, dtype):
    d_model, d_ff = 6, 10
    ffn = student.module("minitorch_attn.nn").SwiGLU(d_model, d_ff)
    weights = {name: rng.standard_normal(tuple(p.shape)) * 0.5 for name, p in ffn.named_parameters()}
    assert sorted(weights) == ["w1.weight", "w2.weight", "w3.weight"], (
        f"SwiGLU's parameters are w1, w2, w3 without biases (LLaMA's names), got {sorted(weights)}"
    )
    load(student, ffn, weights, dtype)
    x, g = rng.standard_normal((2, 4, d_model)), rng.standard_normal((2, 4, d_model))
    t = leaf(student, x, dtype)
    with swapped(student, "minitorch_attn.functional", "silu", student.module("minitorch_attn").tanh):
        y = ffn(t)
    y.backward(mt.tensor(g, dtype=dtype))
    host = {name: p.numpy().astype(np.float64) for name, p in ffn.named_parameters()}
    expected = gated_reference(t.numpy().astype(np.float64), host["w1.weight"], host["w3.weight"], host["w2.weight"], g)
    what = (
        f"SwiGLU({d_model}, {d_ff}) {{}}, input (2, 4, {d_model}) {dtype}: y = w2(gate(w1 x) * w3 x), "
        f"the gate tanh here"
    )
    expect_close(y, expected[0], what=what.format("forward"), n_ops=64, dtype=dtype)
    expect_close(t.grad, expected[1], what=what.format("gradient of x"), n_ops=64, dtype=dtype)
    for name, reference in zip(("w1", "w3", "w2"), expected[2:]):
        expect_close(
            getattr(ffn, name).weight.grad,
            reference,
            what=what.format(f"gradient of {name}.weight"),
            n_ops=64,
            dtype=dtype,
        )


@pytest.mark.task_6_2
def test_task_6_2_swiglu_width_is_llamas(student):
    """LLaMA's code: ``hidden = int(2 * 4 d / 3)``, then up to a multiple of 8."""
    student_nn = student.module("minitorch_attn.nn")
    for d_model in (1, 2, 3, 4, 8, 16, 47, 48, 64, 100, 128, 512, 4096):
        expected = 8 * ((int(2 * 4 * d_model / 3) + 7) // 8)
        got = student_nn.swiglu_width(d_model)
        assert got == expected, f"swiglu_width({d_model}) is {got}, LLaMA's width is {expected}"
    ffn = student_nn.SwiGLU(12, 7)
    assert (ffn.w1.weight.shape, ffn.w3.weight.shape, ffn.w2.weight.shape) == ((7, 12), (7, 12), (12, 7)), (
        "SwiGLU(d_model=12, d_ff=7): w1 and w3 map 12 -> 7 (weights (7, 12)), w2 maps 7 -> 12 (weight (12, 7))"
    )


# ---- 6.3: the modern GPT ---------------------------------------------------------------------------
def rms_norm(x, weight):
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + np.finfo(np.float64).eps) * weight


def rotate(x, positions, base):
    """RoPE on split halves: pair i is (x_i, x_{i + d/2}), rotated by position · base^(-2i/d)."""
    d = x.shape[-1]
    angles = positions[:, None] * base ** (-2.0 * np.arange(d // 2) / d)  # (T, d/2)
    cos, sin = np.cos(angles), np.sin(angles)
    a, b = x[..., : d // 2], x[..., d // 2 :]
    return np.concatenate([a * cos - b * sin, a * sin + b * cos], axis=-1)


def gelu(x):
    """GPT-2's GELU, the tanh approximation (Hendrycks & Gimpel, arXiv:1606.08415, §2)."""
    return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x**3)))


def modern_gpt_reference(w, idx, d_model, heads, kv_heads, layers, window, base=10000.0):
    """Logits ``(batch, T, vocab)`` of the LLaMA-style GPT with weights ``w`` (its state
    dict as float64 arrays): Pre-RMSNorm blocks, rotary queries and keys, each key/value
    head shared by ``heads // kv_heads`` query heads, a sliding window of ``window`` keys,
    GPT-2's feed-forward network (LLaMA's SwiGLU is tasks 6.1 and 6.2's), a final RMSNorm
    and the tied embedding as the output layer."""
    batch, length = idx.shape
    d_k, group = d_model // heads, heads // kv_heads
    positions = np.arange(length, dtype=np.float64)
    i, j = np.arange(length)[:, None], np.arange(length)[None, :]
    visible = (j <= i) & (j > i - window)
    x = w["token_embedding.weight"][idx]
    for n in range(layers):
        p = lambda name: w[f"blocks.{n}.{name}"]  # noqa: E731, B023 (a name for this layer's weights, used in it)
        h = rms_norm(x, p("norm1.weight"))
        qkv = h @ p("attn.W_qkv.weight").T
        q, k, v = np.split(qkv, [d_model, d_model + kv_heads * d_k], axis=-1)
        q = q.reshape(batch, length, heads, d_k).transpose(0, 2, 1, 3)
        k = k.reshape(batch, length, kv_heads, d_k).transpose(0, 2, 1, 3)
        v = v.reshape(batch, length, kv_heads, d_k).transpose(0, 2, 1, 3)
        q, k = rotate(q, positions, base), rotate(k, positions, base)
        k, v = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)  # query head j reads kv head j // group
        scores = np.where(visible, q @ k.transpose(0, 1, 3, 2) / np.sqrt(d_k), -np.inf)
        out = (softmax(scores) @ v).transpose(0, 2, 1, 3).reshape(batch, length, d_model)
        x = x + out @ p("attn.W_o.weight").T
        h = rms_norm(x, p("norm2.weight"))
        x = x + gelu(h @ p("ffn.0.weight").T + p("ffn.0.bias")) @ p("ffn.2.weight").T + p("ffn.2.bias")
    return rms_norm(x, w["norm.weight"]) @ w["token_embedding.weight"].T


CONFIG = dict(d_model=16, num_heads=4, num_kv_heads=2, num_layers=2, max_seq_len=4, d_ff=24)
MODERN = dict(nn.LLAMA, mlp="gelu")  # LLaMA's block with GPT-2's feed-forward network: SwiGLU is tasks 6.1 and 6.2's


def modern_gpt(student, rng, vocab=13):
    """The student's model in float64 with weights large enough for every layer and every
    position to matter (std 0.3, gains around 1), and those weights as NumPy arrays."""
    model = student.module("minitorch_attn.nn").GPT(vocab, **MODERN, **CONFIG).eval()
    weights = {}
    for name, p in model.named_parameters():
        shape = tuple(p.shape)
        weights[name] = rng.normal(1.0, 0.2, shape) if "norm" in name else rng.normal(0.0, 0.3, shape)
    load(student, model, weights, "float64")
    return model, weights


def _reference(weights, idx):
    return modern_gpt_reference(
        weights,
        idx,
        CONFIG["d_model"],
        CONFIG["num_heads"],
        CONFIG["num_kv_heads"],
        CONFIG["num_layers"],
        CONFIG["max_seq_len"],
    )


WHAT = (
    "GPT(**nn.LLAMA, mlp='gelu', d_model=16, num_heads=4, num_kv_heads=2, num_layers=2, max_seq_len=4) "
    "float64 (RMSNorm, rotary positions, a sliding window of 4 keys, tied embedding)"
)


@pytest.mark.task_6_3
def test_task_6_3_the_modern_gpt_is_the_block_of_the_papers(student, rng):
    model, weights = modern_gpt(student, rng)
    expected_names = {"token_embedding.weight", "norm.weight"} | {
        f"blocks.{n}.{name}"
        for n in range(2)
        for name in (
            "attn.W_qkv.weight",
            "attn.W_o.weight",
            "norm1.weight",
            "norm2.weight",
            "ffn.0.weight",
            "ffn.0.bias",
            "ffn.2.weight",
            "ffn.2.bias",
        )
    }
    assert set(weights) == expected_names, (
        f"parameters: missing {sorted(expected_names - set(weights))}, "
        f"unexpected {sorted(set(weights) - expected_names)}"
    )
    idx = rng.integers(0, 13, (2, 9))  # past max_seq_len: the window slides
    expect_close(model(mt.tensor(idx)), _reference(weights, idx), what=f"{WHAT}: logits of (2, 9) tokens", n_ops=256)


@pytest.mark.task_6_3
def test_task_6_3_cached_generation_matches_the_papers_block_step_by_step(student, rng):
    model, weights = modern_gpt(student, rng)
    idx = rng.integers(0, 13, (1, 10))
    expected = _reference(weights, idx)
    cache = model.new_cache()
    prompt = 6  # longer than the window of 4
    expect_close(
        model(mt.tensor(idx[:, :prompt]), cache=cache),
        expected[:, :prompt],
        what=f"{WHAT}: logits of a prompt of {prompt} tokens through the cache",
        n_ops=256,
    )
    for t in range(prompt, idx.shape[1]):
        expect_close(
            model(mt.tensor(idx[:, t : t + 1]), cache=cache),
            expected[:, t : t + 1],
            what=f"{WHAT}: logits of token {t}, one at a time from the cache",
            n_ops=256,
        )
    assert cache.length <= CONFIG["max_seq_len"], (
        f"the cache holds {cache.length} positions; a sliding window of {CONFIG['max_seq_len']} needs at most that"
    )


@pytest.mark.task_6_3
def test_task_6_3_chunks_through_the_cache_see_the_last_window_of_keys(student, rng):
    """Chunks of 3 tokens through the cache: from the second on, 3 queries attend over more
    keys than the window, the queries being the last 3 positions (bottom-right aligned)."""
    model, weights = modern_gpt(student, rng)
    idx = rng.integers(0, 13, (2, 9))
    expected = _reference(weights, idx)
    cache = model.new_cache()
    for start in (0, 3, 6):
        expect_close(
            model(mt.tensor(idx[:, start : start + 3]), cache=cache),
            expected[:, start : start + 3],
            what=f"{WHAT}: logits of tokens {start} to {start + 2}, a chunk of 3 through the cache",
            n_ops=256,
        )


@pytest.mark.task_6_3
def test_task_6_3_mlp_swiglu_gives_every_block_a_swiglu_network_of_d_ff(student):
    """``mlp="swiglu"`` builds ``SwiGLU(d_model, d_ff)`` in each block: checked with a
    stand-in for the class (Linear, no task's code), since SwiGLU itself is task 6.2's."""
    student_nn = student.module("minitorch_attn.nn")
    is_a = student.module("builtins").isinstance
    with swapped(student, "minitorch_attn.nn.transformer", "SwiGLU", student_nn.Linear):
        model = student_nn.GPT(13, **nn.LLAMA, **CONFIG)
    for n, block in enumerate(model.blocks):
        assert is_a(block.ffn, student_nn.Linear) and tuple(block.ffn.weight.shape) == (24, 16), (
            f"GPT(**nn.LLAMA, d_model=16, d_ff=24): block {n}'s feed-forward network is "
            f"{student.describe(block.ffn)}, not the SwiGLU(16, 24) that mlp='swiglu' asks for"
        )
