"""The modern decoder block (LLaMA's): RMSNorm before attention and MLP, rotary positions,
grouped-query attention, a SwiGLU feed-forward, no biases; :class:`nn.SiLU` and
:class:`nn.SwiGLU`; and ``nn.GPT(**nn.LLAMA)``: it trains, the KV cache and checkpoints work
with it, and PyTorch's re-implementation (``minitorch_attn.app.torch_gpt``) gives its logits.

Homework assignment 6: ``task_6_1`` (silu), ``task_6_2`` (SwiGLU), ``task_6_3`` (the block's
assembly) mark the tests of each task, and each such test needs its own task's code only:
SwiGLU's tests put tanh in the place of its gate silu (task 6.1's), the assembly's tests use
GPT-2's feed-forward network or a stand-in for SwiGLU (task 6.2's). The tests of the whole
modern GPT (it trains, checkpoints, PyTorch's logits) carry no task's marker."""

import numpy as np
import pytest

import minitorch_attn as mt
import minitorch_attn.functional as F
from minitorch_attn import nn, optim
from minitorch_attn.app import checkpoint, sampling
from minitorch_attn.nn import transformer
from tests.conftest import float64_tolerance

MODERN = dict(nn.LLAMA, num_kv_heads=2)  # 4 query heads share 2 key/value heads
ASSEMBLY = dict(MODERN, mlp="gelu")  # its parts of task 6.3, with GPT-2's feed-forward network


@pytest.fixture
def tanh_gate(monkeypatch):
    """SwiGLU's gate silu is task 6.1's: here tanh takes its place."""
    monkeypatch.setattr(F, "silu", mt.tanh)


def small_gpt(vocab=11, **options):
    mt.manual_seed(0)
    return nn.GPT(vocab, d_model=16, num_heads=4, num_layers=2, max_seq_len=8, **options)


def to_float64(model):
    for p in model.parameters():
        p.data = mt.tensor(p.numpy(), dtype="float64").data
    return model


def np_silu(x):
    """x σ(x) in float64, σ without overflow."""
    return x * np.exp(-np.logaddexp(0.0, -x))


# ---- the layers ----------------------------------------------------------------------------------
@pytest.mark.task_6_1
def test_silu_module_is_f_silu():
    x = mt.randn(3, 4)
    np.testing.assert_array_equal(nn.SiLU()(x).numpy(), F.silu(x).numpy())


@pytest.mark.task_6_1
def test_silu_values_and_gradients_against_float64():
    x = mt.tensor([-3.0, -1.0, -0.25, 0.0, 0.5, 1.0, 4.0], dtype="float64", requires_grad=True)
    y = F.silu(x)
    expected = np_silu(x.numpy())
    np.testing.assert_allclose(y.numpy(), expected, rtol=0, atol=float64_tolerance(expected, 8, "float64"))
    assert y.numpy()[5] == pytest.approx(0.7310585786300049, abs=1e-15)  # silu(1) = σ(1)
    assert mt.gradcheck(F.silu, [x])
    assert mt.gradcheck(F.silu, [mt.randn(3, 4, dtype="float64", requires_grad=True)])


@pytest.mark.task_6_1
@pytest.mark.parametrize("dtype, big", [("float64", 800.0), ("float32", 100.0)])
def test_silu_of_large_inputs_neither_overflows_nor_loses_its_gradient(dtype, big):
    """e^|x| overflows at these |x| (past 709 in float64 and 88 in float32): a sigmoid written
    with it warns or returns NaN; the limits are silu = x (gradient 1) and silu = -0 (gradient 0)."""
    values = np.array([-big, -40.0, 40.0, big])
    x = mt.tensor(values, dtype=dtype, requires_grad=True)
    y = F.silu(x)
    y.backward(mt.ones(4, dtype=dtype))
    s = np.exp(-np.logaddexp(0.0, -values))
    np.testing.assert_allclose(y.numpy(), values * s, rtol=0, atol=float64_tolerance(values, 8, dtype))
    limits = np.where(values > 0, 1.0, 0.0)
    np.testing.assert_allclose(x.grad.numpy(), limits, rtol=0, atol=float64_tolerance(1, 8, dtype))
    assert y.dtype == x.grad.dtype == dtype


@pytest.mark.task_6_2
def test_swiglu_is_w2_of_gate_w1x_times_w3x(tanh_gate):
    mt.manual_seed(0)
    ffn = nn.SwiGLU(6, 10)
    assert {name for name, _ in ffn.named_parameters()} == {"w1.weight", "w2.weight", "w3.weight"}
    x = mt.randn(2, 3, 6)
    w1, w2, w3 = (getattr(ffn, n).weight.numpy() for n in ("w1", "w2", "w3"))
    expected = (np.tanh(x.numpy() @ w1.T) * (x.numpy() @ w3.T)) @ w2.T
    np.testing.assert_allclose(ffn(x).numpy(), expected, rtol=1e-5, atol=1e-6)


def test_swiglu_is_w2_of_silu_w1x_times_w3x():
    mt.manual_seed(0)
    ffn = nn.SwiGLU(6, 10)
    x = mt.randn(2, 3, 6)
    w1, w2, w3 = (getattr(ffn, n).weight.numpy() for n in ("w1", "w2", "w3"))
    h = x.numpy() @ w1.T
    expected = ((h / (1 + np.exp(-h))) * (x.numpy() @ w3.T)) @ w2.T
    np.testing.assert_allclose(ffn(x).numpy(), expected, rtol=1e-5, atol=1e-6)


@pytest.mark.task_6_2
def test_swiglu_gradients_by_finite_differences_and_of_every_weight(tanh_gate):
    mt.manual_seed(1)
    ffn = to_float64(nn.SwiGLU(4, 6))
    x = mt.randn(2, 3, 4, dtype="float64", requires_grad=True)
    assert mt.gradcheck(ffn, [x])
    ffn(x).sum().backward()
    for name, p in ffn.named_parameters():
        assert p.grad is not None and p.grad.shape == p.shape, name
    assert nn.SwiGLU(4, 6, bias=True).w2.bias.shape == (4,)  # biases only when asked for


@pytest.mark.task_6_2
def test_swiglu_width_matches_a_gelu_network_of_width_4d():
    assert nn.swiglu_width(128) == 344 and nn.swiglu_width(48) == 128
    gelu, swiglu = nn.FeedForward(128, 512), nn.SwiGLU(128, nn.swiglu_width(128))
    count = lambda m: sum(p.numel() for p in m.parameters())  # noqa: E731
    assert count(gelu) == 131712 and count(swiglu) == 132096  # within 0.3%


@pytest.mark.task_6_3
def test_the_modern_gpt_has_no_biases_and_the_parts_it_is_made_of(monkeypatch):
    built = []

    def stand_in(d_model, d_ff):  # SwiGLU itself is task 6.2's: record the choice
        built.append((d_model, d_ff))
        return nn.Linear(d_model, d_ff, bias=False)

    monkeypatch.setattr(transformer, "SwiGLU", stand_in)
    model = small_gpt(**MODERN, d_ff=40)
    assert built == [(16, 40), (16, 40)]  # mlp="swiglu" in every block
    names = [name for name, _ in model.named_parameters()]
    assert not [n for n in names if n.endswith("bias")]
    assert "position_embedding.weight" not in names  # rotary positions
    block = model.blocks[0]
    assert isinstance(block.norm1, nn.RMSNorm)
    assert block.attn.num_kv_heads == 2 and block.attn.W_qkv.weight.shape == (16 + 2 * 2 * 4, 16)
    assert model.config["mlp"] == "swiglu" and nn.GPT(**model.config).config == model.config


def test_an_unknown_mlp_is_a_value_error():
    with pytest.raises(ValueError, match="mlp must be one of"):
        small_gpt(mlp="relu")


@pytest.mark.task_6_3
def test_rotary_attention_sees_relative_positions_only():
    """Three tokens at positions 0, 1, 2, and the same three at 4, 5, 6 after a cached prefix
    that the mask hides: rotated queries and keys give the same output (their dot products
    depend on the distance only), and the values are not rotated."""
    mt.manual_seed(2)
    mha = to_float64(nn.MultiHeadAttention(8, 2, dropout=0.0, num_kv_heads=1, rope_base=10.0))
    x, prefix = mt.randn(1, 3, 8, dtype="float64"), mt.randn(1, 4, 8, dtype="float64")
    at_start = mha(x, x, x, is_causal=True, need_weights=False)[0].numpy()
    cache = nn.KVCache(1)
    mha(prefix, prefix, prefix, is_causal=True, cache=cache)
    only_these = mt.tensor(np.concatenate([np.zeros((3, 4), bool), np.tril(np.ones((3, 3), bool))], axis=1))
    later = mha(x, x, x, attn_mask=only_these, need_weights=False, cache=cache)[0].numpy()
    assert cache.position == 7
    np.testing.assert_allclose(later, at_start, rtol=0, atol=float64_tolerance(at_start, 64, "float64"))
    unrotated = to_float64(nn.MultiHeadAttention(8, 2, dropout=0.0, num_kv_heads=1))
    unrotated.load_state_dict(mha.state_dict())
    assert np.abs(unrotated(x, x, x, is_causal=True)[0].numpy() - at_start).max() > 1e-3  # the rotation matters


@pytest.mark.task_6_3
def test_cached_chunks_of_any_size_give_the_logits_of_one_forward():
    """A prompt, then chunks of several tokens that straddle the window of 8 keys (the
    banded mask then sits at the bottom right: the new tokens are the last of the keys),
    then single tokens: the logits of one forward over the whole sequence at every step."""
    model = small_gpt(**ASSEMBLY).eval()
    rng = np.random.default_rng(5)
    for p in model.parameters():  # weights large enough for every position to matter
        p.data = mt.tensor(rng.normal(0.0, 0.3, p.shape), dtype="float64").data
    idx = mt.tensor(rng.integers(0, 11, (2, 20)))
    full = model(idx).numpy()
    cache, pieces, start = model.new_cache(), [], 0
    for size in (3, 6, 1, 9, 1):
        pieces.append(model(idx[:, start : start + size], cache=cache).numpy())
        start += size
    assert start == 20 and cache.position == 20 and cache.length == 7
    np.testing.assert_allclose(
        np.concatenate(pieces, axis=1), full, rtol=0, atol=float64_tolerance(full, 100, "float64")
    )


# ---- it trains -----------------------------------------------------------------------------------
def train(model, steps=30, seed=0):
    rng = np.random.default_rng(seed)
    data = np.tile(np.arange(11), 40)  # a sequence the model can learn: 0 1 2 ... 10 0 1 ...
    opt = optim.AdamW(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(steps):
        starts = rng.integers(0, len(data) - 9, 8)
        batch = np.stack([data[s : s + 9] for s in starts])
        logits = model(mt.tensor(batch[:, :-1]))
        loss = F.cross_entropy(logits.reshape(-1, 11), mt.tensor(batch[:, 1:].reshape(-1)))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def test_the_modern_gpt_trains_and_deterministically():
    first = train(small_gpt(**MODERN))
    assert first[-1] < 0.5 * first[0], first
    assert train(small_gpt(**MODERN)) == first


# ---- generation, checkpoints ---------------------------------------------------------------------
@pytest.mark.task_6_3
def test_cached_generation_gives_the_logits_of_full_forwards_past_the_window():
    model = to_float64(small_gpt(**ASSEMBLY)).eval()
    kw = dict(temperature=0.0, return_logits=True)
    ids_cached, logits_cached = sampling.generate_ids(model, [1, 2, 3], 12, use_cache=True, **kw)
    ids_full, logits_full = sampling.generate_ids(model, [1, 2, 3], 12, use_cache=False, **kw)
    assert ids_cached == ids_full
    np.testing.assert_allclose(np.asarray(logits_cached), np.asarray(logits_full), rtol=0, atol=1e-12)


def test_a_checkpoint_records_the_modern_block(tmp_path):
    model = small_gpt(**MODERN)
    checkpoint.save(tmp_path / "m.npz", model, config=model.config)
    loaded = checkpoint.load(tmp_path / "m.npz")
    again = nn.GPT(**loaded["config"])
    again.load_state_dict(loaded["model"])
    idx = mt.tensor([[1, 2, 3, 4]])
    np.testing.assert_array_equal(again(idx).numpy(), model(idx).numpy())
    assert isinstance(again.blocks[1].ffn, nn.SwiGLU)


# ---- PyTorch ------------------------------------------------------------------------------------
def test_pytorch_reimplementation_gives_equal_logits_and_gradients_in_float64(torch):
    from minitorch_attn.app.torch_gpt import GPT as TorchGPT

    model = small_gpt(**MODERN, tie_weights=False)
    rng = np.random.default_rng(3)
    for p in model.parameters():  # weights large enough for every layer to matter
        p.data = mt.tensor(rng.normal(0.0, 0.2, p.shape), dtype="float64").data
    theirs = TorchGPT(
        **{k: v for k, v in model.config.items() if k != "attn_impl"}, norm_eps=float(np.finfo(np.float64).eps)
    ).double()
    theirs.load_state_dict({k: torch.tensor(v.numpy()) for k, v in model.state_dict().items()})
    batch = rng.integers(0, 11, (3, 12))  # past max_seq_len: rotary attention slides
    target = rng.integers(0, 11, (3 * 12,))
    logits = model(mt.tensor(batch))
    loss = F.cross_entropy(logits.reshape(-1, 11), mt.tensor(target))
    loss.backward()
    their_logits = theirs(torch.tensor(batch))
    torch.nn.functional.cross_entropy(their_logits.reshape(-1, 11), torch.tensor(target)).backward()
    reference = their_logits.detach().numpy()
    np.testing.assert_allclose(logits.numpy(), reference, rtol=0, atol=float64_tolerance(reference, 10, "float64"))
    their_params = dict(theirs.named_parameters())
    for name, p in model.named_parameters():
        expected = their_params[name].grad.numpy()
        np.testing.assert_allclose(p.grad.numpy(), expected, rtol=1e-9, atol=1e-12, err_msg=name)


# ---- the commands ----------------------------------------------------------------------------------
def test_train_builds_the_modern_block_from_flags_and_export_loads_it_in_pytorch(tmp_path, torch, capsys):
    pytest.importorskip("safetensors")
    from minitorch_attn.app import cli, data
    from minitorch_attn.app.torch_gpt import GPT as TorchGPT

    text = tmp_path / "corpus.txt"
    text.write_text(data.load_corpus()[:4000], encoding="utf-8")
    flags = [
        "--d-model",
        "16",
        "--num-layers",
        "1",
        "--num-heads",
        "4",
        "--block-size",
        "16",
        "--batch-size",
        "4",
        "--sample-tokens",
        "5",
        "--eval-windows",
        "2",
        "--time-budget",
        "0",
        "--quiet",
        "--norm",
        "rmsnorm",
        "--pos-encoding",
        "rope",
        "--mlp",
        "swiglu",
        "--num-kv-heads",
        "2",
    ]
    out = tmp_path / "run"
    assert cli.main(["train", "--text", str(text), "--steps", "3", "--out", str(out), *flags]) == 0
    ckpt = next(out.rglob("*.npz"))
    config = checkpoint.load(ckpt)["config"]
    assert (config["mlp"], config["num_kv_heads"], config["norm"], config["pos_encoding"]) == (
        "swiglu",
        2,
        "rmsnorm",
        "rope",
    )
    assert cli.main(["export", "--checkpoint", str(ckpt), "--out", str(tmp_path / "m.safetensors")]) == 0
    theirs, vocab = TorchGPT.from_export(str(tmp_path / "m.safetensors"))
    ours = sampling.load_model(str(ckpt))[0].eval()
    ids = np.asarray([vocab.encode("The quick brown fox")])
    with torch.no_grad():
        reference = theirs(torch.tensor(ids)).numpy()
    np.testing.assert_allclose(
        ours(mt.tensor(ids)).numpy(), reference, rtol=0, atol=float64_tolerance(reference, 10, "float32")
    )


@pytest.mark.task_6_1
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_silu_below_its_exponent_cap_keeps_its_relative_digits(dtype):
    """Past x = -80 the forward caps e^-x and takes s = e^x there: the values stay exact
    relative to the float64 math (1/(1 + e^80) in place of e^x would be off by up to 1e35)."""
    values = np.array(
        [-79.5, -80.5, -85.0, -87.0, -100.0 if dtype == "float64" else -86.5, -700.0 if dtype == "float64" else -80.0]
    )
    y = F.silu(mt.tensor(values, dtype=dtype)).numpy().astype(np.float64)
    exact = values * np.exp(values - np.logaddexp(0.0, values))  # x σ(x), σ(x) = e^x / (1 + e^x)
    np.testing.assert_allclose(y, exact, rtol=8 * float(np.finfo(dtype).eps), atol=0)


@pytest.mark.task_6_1
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_silu_below_its_exponent_cap_beside_a_nan_stays_finite(dtype):
    """A NaN beside an entry below -80 must not hide that entry from the exponent cap (a
    minimum over the row is NaN): e^-x would overflow there (a RuntimeWarning, which the
    suite turns into an error) and s would be 0 instead of e^x. The NaN stays NaN."""
    values = np.array([np.nan, -1e4, -85.0, 0.5])
    y = F.silu(mt.tensor(values, dtype=dtype)).numpy().astype(np.float64)
    assert np.isnan(y[0])
    exact = values[1:] * np.exp(values[1:] - np.logaddexp(0.0, values[1:]))
    np.testing.assert_allclose(y[1:], exact, rtol=8 * float(np.finfo(dtype).eps), atol=0)
