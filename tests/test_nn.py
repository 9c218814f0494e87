"""Modules: parameter bookkeeping, state dicts, dropout modes, attention variants, blocks, GPT.

The tests of homework task 4.3 run the module's own steps (heads split, repeated, merged);
the tests of the whole module run attention too (tasks 4.1 and 4.2), so they carry no task's
marker: a task's points depend on its own code only."""

import numpy as np
import pytest

import minitorch_attn as mt
import minitorch_attn.functional as F
from minitorch_attn import nn
from tests.conftest import float64_tolerance


def to_float64(module, device="cpu"):
    """The module with every parameter converted to float64 on ``device`` (for exact comparisons)."""
    for p in module.parameters():
        p.data = mt.tensor(p.numpy(), dtype="float64", device=device).data
    return module


def x64(*shape, device="cpu"):
    return mt.randn(*shape, dtype="float64", device=device)


# ---- parameters and containers -------------------------------------------------------------------
def test_multihead_attention_512_8_has_1048576_parameters():
    assert nn.MultiHeadAttention(512, 8).num_parameters() == 1_048_576
    assert nn.MultiHeadAttention(512, 8, bias=True).num_parameters() == 4 * (512 * 512 + 512)
    assert nn.MultiHeadAttention(512, 8, fused_qkv=True).num_parameters() == 1_048_576
    # GQA: K and V project to num_kv_heads * d_k = 2 * 8 columns
    assert nn.MultiHeadAttention(64, 8, num_kv_heads=2).num_parameters() == 2 * 64 * 64 + 2 * 64 * 16


def test_gpt_parameter_count_matches_the_formula():
    V, d, L, T, ff = 50, 32, 2, 16, 128
    block = (3 * d * d + d * d) + (d * ff + ff + ff * d + d) + 2 * (2 * d)  # attn, ffn, two LayerNorms
    tied = V * d + T * d + L * block + 2 * d
    assert nn.GPT(V, d_model=d, num_heads=4, num_layers=L, max_seq_len=T).num_parameters() == tied
    assert (
        nn.GPT(V, d_model=d, num_heads=4, num_layers=L, max_seq_len=T, tie_weights=False).num_parameters()
        == tied + V * d
    )


def test_bad_head_count_raises():
    with pytest.raises(ValueError, match="divisible"):
        nn.MultiHeadAttention(10, 3)
    with pytest.raises(ValueError, match="multiple of num_kv_heads"):
        nn.MultiHeadAttention(64, 8, num_kv_heads=3)
    with pytest.raises(ValueError, match="attn_impl"):
        nn.MultiHeadAttention(64, 8, attn_impl="fast")
    with pytest.raises(ValueError, match="query must have shape"):
        nn.MultiHeadAttention(8, 2)(mt.randn(2, 3, 4), mt.randn(2, 3, 8), mt.randn(2, 3, 8))


def test_named_parameters_recurse_and_share():
    model = nn.Sequential(nn.Linear(3, 4), nn.GELU(), nn.ModuleList([nn.Linear(4, 2, bias=False)]))
    names = [n for n, _ in model.named_parameters()]
    assert names == ["0.weight", "0.bias", "2.0.weight"]
    gpt = nn.GPT(11, d_model=8, num_heads=2, num_layers=1, max_seq_len=4)
    assert gpt.lm_head.weight is gpt.token_embedding.weight
    assert "lm_head.weight" not in dict(gpt.named_parameters())  # a tied weight is listed once
    assert "Linear(in_features=3, out_features=4, bias=True)" in repr(model)


def test_state_dict_round_trip():
    a = nn.GPT(13, d_model=16, num_heads=2, num_layers=1, max_seq_len=8)
    mt.manual_seed(1)
    b = nn.GPT(13, d_model=16, num_heads=2, num_layers=1, max_seq_len=8)
    idx = mt.randint(0, 13, (2, 8))
    assert not np.array_equal(a(idx).numpy(), b(idx).numpy())
    b.load_state_dict({k: v.numpy() for k, v in a.state_dict().items()})
    np.testing.assert_array_equal(a(idx).numpy(), b(idx).numpy())


def test_load_state_dict_names_every_problem():
    model = nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 2))
    state = model.state_dict()
    state.pop("1.bias")
    state["extra.weight"] = mt.zeros(1)
    with pytest.raises(KeyError, match=r"missing keys \['1.bias'\].*unexpected keys \['extra.weight'\]"):
        model.load_state_dict(state)
    model.load_state_dict(state, strict=False)
    state["0.weight"] = mt.zeros(4, 4)
    with pytest.raises(ValueError, match=r"0.weight: checkpoint \(4, 4\), model \(4, 3\)"):
        model.load_state_dict(state)


def test_to_moves_parameters_and_keeps_them(device):
    model = nn.Linear(3, 2)
    weight = model.weight
    model.to(device)
    assert model.weight is weight and weight.device == device
    assert model(mt.randn(5, 3, device=device)).shape == (5, 2)


def test_zero_grad_and_train_eval_flags():
    model = nn.Sequential(nn.Linear(3, 2), nn.Dropout(0.5))
    model(mt.randn(4, 3)).sum().backward()
    assert model[0].weight.grad is not None
    model.zero_grad()
    assert model[0].weight.grad is None
    model.eval()
    assert not model.training and not model[1].training
    model.train()
    assert model[1].training


# ---- layers ----------------------------------------------------------------------------------------
def test_dropout_train_and_eval(device):
    drop = nn.Dropout(0.5)
    x = mt.ones(1000, device=device)
    y = drop(x).numpy()
    assert set(np.unique(y)) <= {0.0, 2.0} and 350 < (y == 0).sum() < 650
    drop.eval()
    assert drop(x) is x


def test_attention_dropout_only_while_training():
    mha = nn.MultiHeadAttention(16, 4, dropout=0.5)
    x = mt.randn(2, 5, 16)
    assert not np.array_equal(mha(x, x, x)[0].numpy(), mha(x, x, x)[0].numpy())
    mha.eval()
    np.testing.assert_array_equal(mha(x, x, x)[0].numpy(), mha(x, x, x)[0].numpy())


def test_embedding_gradient_accumulates_repeated_ids(device):
    emb = nn.Embedding(5, 3).to(device)
    idx = mt.tensor([[1, 1, 4], [1, 0, 4]], device=device)
    emb(idx).sum().backward()
    np.testing.assert_allclose(emb.weight.grad.numpy()[:, 0], [1, 3, 0, 0, 2])


@pytest.mark.parametrize("padding_idx", [2, -1])
def test_embedding_padding_row_starts_at_zero_and_gets_no_gradient_as_pytorch(rng, padding_idx, torch):
    ours = nn.Embedding(6, 4, padding_idx=padding_idx)
    theirs = torch.nn.Embedding(6, 4, padding_idx=padding_idx)
    assert repr(ours) == repr(theirs) and ours.padding_idx == theirs.padding_idx
    row = ours.padding_idx
    assert not np.any(ours.weight.numpy()[row]) and not theirs.weight[row].any()
    to_float64(ours)
    theirs = _torch_twin(ours, torch)
    idx = rng.integers(0, 6, size=(3, 5))
    idx[0, :2] = row
    upstream = rng.standard_normal((3, 5, 4))
    ours(mt.tensor(idx)).backward(mt.tensor(upstream))
    theirs(torch.tensor(idx)).backward(torch.tensor(upstream))
    np.testing.assert_allclose(ours.weight.grad.numpy(), theirs.weight.grad.numpy(), rtol=1e-12, atol=1e-12)
    assert not np.any(ours.weight.grad.numpy()[row])


def test_linear_and_norms_match_pytorch(torch):
    x = x64(2, 3, 6)
    xt = torch.tensor(x.numpy())
    for ours, theirs in [
        (nn.Linear(6, 4), torch.nn.Linear(6, 4)),
        (nn.LayerNorm(6), torch.nn.LayerNorm(6)),
        (nn.RMSNorm(6), torch.nn.RMSNorm(6)),
    ]:
        to_float64(ours)
        theirs = theirs.double()
        ours.weight.data = mt.randn(*ours.weight.shape, dtype="float64").data
        with torch.no_grad():
            theirs.weight.copy_(torch.tensor(ours.weight.numpy()))
            if getattr(ours, "bias", None) is not None:
                theirs.bias.copy_(torch.tensor(ours.bias.numpy()))
        expected = theirs(xt).detach().numpy()
        np.testing.assert_allclose(ours(x).numpy(), expected, atol=float64_tolerance(expected, 20, "float64"))


# ---- attention ---------------------------------------------------------------------------------------
def test_multihead_attention_matches_pytorch(torch):
    d, h = 16, 4
    ours = to_float64(nn.MultiHeadAttention(d, h, dropout=0.0))
    theirs = torch.nn.MultiheadAttention(d, h, bias=False, batch_first=True).double()
    with torch.no_grad():
        theirs.in_proj_weight.copy_(
            torch.tensor(np.concatenate([ours.W_q.weight.numpy(), ours.W_k.weight.numpy(), ours.W_v.weight.numpy()]))
        )
        theirs.out_proj.weight.copy_(torch.tensor(ours.W_o.weight.numpy()))
    q, kv = x64(2, 5, d), x64(2, 7, d)
    out, weights = ours(q, kv, kv)
    t_out, t_weights = theirs(
        torch.tensor(q.numpy()), torch.tensor(kv.numpy()), torch.tensor(kv.numpy()), average_attn_weights=False
    )
    expected = t_out.detach().numpy()
    np.testing.assert_allclose(out.numpy(), expected, atol=float64_tolerance(expected, 50, "float64"))
    np.testing.assert_allclose(weights.numpy(), t_weights.detach().numpy(), atol=1e-13)
    fast, no_weights = ours(q, kv, kv, need_weights=False)  # the fused kernel path
    assert no_weights is None
    np.testing.assert_allclose(fast.numpy(), expected, atol=float64_tolerance(expected, 50, "float64"))

    causal_mask = torch.triu(torch.ones(5, 5, dtype=torch.bool), 1)  # torch: True = masked out
    t_out, _ = theirs(*(torch.tensor(q.numpy()),) * 3, attn_mask=causal_mask)
    expected = t_out.detach().numpy()
    out, _ = ours(q, q, q, is_causal=True)
    np.testing.assert_allclose(out.numpy(), expected, atol=float64_tolerance(expected, 50, "float64"))


@pytest.mark.task_4_3
@pytest.mark.parametrize("heads, kv_heads", [(2, 2), (4, 2), (4, 1)])
def test_heads_are_split_repeated_and_merged(rng, heads, kv_heads):
    """The module's own steps, each on its own (the attention between them is task 4.1's):
    split ``(B, T, h d_k) -> (B, h, T, d_k)``, each key/value head repeated for the query
    heads of its group (``repeat_interleave``), the heads merged back side by side."""
    d_model, batch, length = 8, 2, 3
    d_k, group = d_model // heads, heads // kv_heads
    mha = nn.MultiHeadAttention(d_model, heads, dropout=0.0, num_kv_heads=kv_heads)
    x = rng.standard_normal((batch, length, d_model))
    split = x.reshape(batch, length, heads, d_k).transpose(0, 2, 1, 3)
    np.testing.assert_array_equal(mha._split_heads(mt.tensor(x, dtype="float64"), heads).numpy(), split)
    kv = split[:, :kv_heads]
    np.testing.assert_array_equal(mha._repeat_kv(mt.tensor(kv, dtype="float64")).numpy(), np.repeat(kv, group, axis=1))
    np.testing.assert_array_equal(mha._merge_heads(mt.tensor(split, dtype="float64")).numpy(), x)


def test_gqa_equals_attention_with_explicitly_repeated_heads(device):
    d, h, h_kv = 16, 4, 2
    d_k, group = d // h, h // h_kv
    gqa = to_float64(nn.MultiHeadAttention(d, h, dropout=0.0, num_kv_heads=h_kv), device)
    full = to_float64(nn.MultiHeadAttention(d, h, dropout=0.0), device)

    def repeat_heads(w):  # (h_kv d_k, d) -> (h d_k, d), head j of the result = head j // group
        w = w.numpy().reshape(h_kv, 1, d_k, d)
        return mt.tensor(np.broadcast_to(w, (h_kv, group, d_k, d)).reshape(h * d_k, d), device=device).data

    full.W_q.weight.data, full.W_o.weight.data = gqa.W_q.weight.data, gqa.W_o.weight.data
    full.W_k.weight.data, full.W_v.weight.data = repeat_heads(gqa.W_k.weight), repeat_heads(gqa.W_v.weight)
    x = x64(2, 6, d, device=device)
    out_gqa, w_gqa = gqa(x, x, x, is_causal=True)
    out_full, w_full = full(x, x, x, is_causal=True)
    expected = out_full.numpy()
    np.testing.assert_allclose(out_gqa.numpy(), expected, atol=float64_tolerance(expected, 50, "float64"))
    np.testing.assert_allclose(w_gqa.numpy(), w_full.numpy(), atol=1e-13)


def test_fused_qkv_equals_separate_projections(device):
    d, h = 16, 4
    sep = to_float64(nn.MultiHeadAttention(d, h, dropout=0.0, bias=True), device)
    fused = to_float64(nn.MultiHeadAttention(d, h, dropout=0.0, bias=True, fused_qkv=True), device)
    xp = mt.tensor(0, device=device).data.__array_namespace__()
    fused.W_qkv.weight.data = xp.concat([sep.W_q.weight.data, sep.W_k.weight.data, sep.W_v.weight.data])
    fused.W_qkv.bias.data = xp.concat([sep.W_q.bias.data, sep.W_k.bias.data, sep.W_v.bias.data])
    fused.W_o.weight.data, fused.W_o.bias.data = sep.W_o.weight.data, sep.W_o.bias.data
    x, memory = x64(2, 5, d, device=device), x64(2, 3, d, device=device)
    for args in [(x, x, x), (x, memory, memory)]:  # self-attention (one product) and cross-attention
        expected = sep(*args)[0].numpy()
        np.testing.assert_allclose(fused(*args)[0].numpy(), expected, atol=float64_tolerance(expected, 50, "float64"))


def test_causal_attention_ignores_the_future():
    mha = nn.MultiHeadAttention(8, 2, dropout=0.0)
    x = mt.randn(1, 6, 8)
    y = mt.tensor(
        np.concatenate([x.numpy()[:, :4], np.random.default_rng(0).standard_normal((1, 2, 8))], axis=1), dtype="float32"
    )
    a, w = mha(x, x, x, is_causal=True)
    b, _ = mha(y, y, y, is_causal=True)
    np.testing.assert_allclose(a.numpy()[:, :4], b.numpy()[:, :4], rtol=1e-5, atol=1e-6)
    assert np.all(np.triu(w.numpy()[0, 0], 1) == 0)


def test_flash_implementation_equals_naive():
    naive = nn.MultiHeadAttention(16, 4, dropout=0.0)
    flash = nn.MultiHeadAttention(16, 4, dropout=0.0, attn_impl="flash")
    flash.load_state_dict(naive.state_dict())
    x = mt.randn(2, 9, 16)
    out, weights = flash(x, x, x, is_causal=True, need_weights=False)
    assert weights is None
    expected, expected_weights = naive(x, x, x, is_causal=True)
    np.testing.assert_allclose(out.numpy(), expected.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(flash(x, x, x, is_causal=True)[1].numpy(), expected_weights.numpy(), rtol=1e-6)


# ---- blocks and models --------------------------------------------------------------------------------
@pytest.mark.parametrize("norm_first", [True, False])
@pytest.mark.parametrize("norm", ["layernorm", "rmsnorm"])
def test_encoder_block_pre_and_post_ln(norm_first, norm):
    block = nn.TransformerEncoderBlock(8, 2, 16, dropout=0.0, norm_first=norm_first, norm=norm)
    x = mt.randn(2, 5, 8)
    attend = lambda h: block.attn(h, h, h)[0]  # noqa: E731
    if norm_first:  # x + attn(norm1(x)), then + ffn(norm2(.))
        h = x + attend(block.norm1(x))
        expected = h + block.ffn(block.norm2(h))
    else:  # norm1(x + attn(x)), then norm2(. + ffn(.))
        h = block.norm1(x + attend(x))
        expected = block.norm2(h + block.ffn(h))
    np.testing.assert_allclose(block(x).numpy(), expected.numpy(), rtol=1e-6, atol=1e-6)
    if not norm_first and norm == "layernorm":  # Post-LN output rows are normalized
        np.testing.assert_allclose(block(x).numpy().mean(-1), 0, atol=1e-5)


def test_decoder_block_is_causal_and_reads_memory():
    block = nn.TransformerDecoderBlock(8, 2, 16, dropout=0.0)
    x, memory = mt.randn(1, 5, 8), mt.randn(1, 3, 8)
    out = block(x, memory).numpy()
    assert out.shape == (1, 5, 8)
    changed = mt.tensor(np.concatenate([x.numpy()[:, :3], np.ones((1, 2, 8), np.float32)], axis=1))
    np.testing.assert_allclose(block(changed, memory).numpy()[:, :3], out[:, :3], rtol=1e-5, atol=1e-6)
    assert not np.allclose(block(x, memory * 2.0).numpy(), out)
    padding = mt.tensor(np.array([True, True, False]).reshape(1, 1, 1, 3))
    assert block(x, memory, memory_mask=padding).shape == (1, 5, 8)


def test_transformer_encoder_shapes_and_length_check():
    enc = nn.TransformerEncoder(20, 16, 4, 32, 2, max_seq_len=10, dropout=0.0)
    assert enc(mt.randint(0, 20, (3, 10))).shape == (3, 10, 16)
    with pytest.raises(ValueError, match="max_seq_len"):
        enc(mt.randint(0, 20, (1, 11)))
    with pytest.raises(ValueError, match="token ids"):
        enc(mt.randn(1, 4))


def test_gpt_is_a_decoder_not_an_encoder_and_keeps_its_parameter_names():
    gpt = nn.GPT(5, d_model=8, num_heads=2, num_layers=1, max_seq_len=4)
    assert not isinstance(gpt, nn.TransformerEncoder)
    block = [
        "attn.W_qkv.weight",
        "attn.W_o.weight",
        "norm1.weight",
        "norm1.bias",
        "norm2.weight",
        "norm2.bias",
        "ffn.0.weight",
        "ffn.0.bias",
        "ffn.2.weight",
        "ffn.2.bias",
    ]
    # the names of checkpoints written before GPT and TransformerEncoder were separated, and
    # the tied lm_head.weight listed again at the end, as PyTorch's state_dict lists it
    assert list(gpt.state_dict()) == [
        "token_embedding.weight",
        "position_embedding.weight",
        *(f"blocks.0.{name}" for name in block),
        "norm.weight",
        "norm.bias",
        "lm_head.weight",
    ]


def test_the_mask_argument_is_attn_mask_as_in_functional():
    mha = nn.MultiHeadAttention(8, 2, dropout=0.0)
    x = mt.randn(2, 5, 8)
    causal = F.causal_mask(5)
    out, weights = mha(x, x, x, attn_mask=causal)
    np.testing.assert_array_equal(out.numpy(), mha(x, x, x, is_causal=True)[0].numpy())
    assert np.all(np.triu(weights.numpy(), 1) == 0)
    with pytest.raises(TypeError, match="mask"):
        mha(x, x, x, mask=causal)
    enc = nn.TransformerEncoder(20, 8, 2, 16, 1, max_seq_len=5, dropout=0.0)
    idx = mt.randint(0, 20, (1, 5))
    first = enc(idx, attn_mask=causal).numpy()[:, 0]
    changed = mt.tensor(np.concatenate([idx.numpy()[:, :4], (idx.numpy()[:, 4:] + 1) % 20], axis=1))
    np.testing.assert_allclose(enc(changed, attn_mask=causal).numpy()[:, 0], first, rtol=1e-6)  # the past only
    assert not np.allclose(enc(changed).numpy()[:, 0], enc(idx).numpy()[:, 0])


def test_gpt_trains_and_reaches_every_parameter():
    gpt = nn.GPT(10, d_model=16, num_heads=2, num_layers=2, max_seq_len=8)
    idx = mt.randint(0, 10, (2, 8))
    logits = gpt(idx)
    assert logits.shape == (2, 8, 10) and logits.dtype == "float32"
    F.cross_entropy(logits.reshape(-1, 10), idx.reshape(-1)).backward()
    assert all(p.grad is not None and p.grad.dtype == "float32" for p in gpt.parameters())


@pytest.mark.parametrize("num_kv_heads", [None, 1])
def test_kv_cache_gives_the_same_logits(num_kv_heads):
    gpt = nn.GPT(12, d_model=16, num_heads=4, num_layers=2, max_seq_len=10, num_kv_heads=num_kv_heads).eval()
    idx = mt.randint(0, 12, (2, 9))
    full = gpt(idx).numpy()
    cache = gpt.new_cache()
    steps = [gpt(idx[:, :4], cache=cache).numpy()]  # the prompt in one go ...
    for t in range(4, 9):  # ... then one token at a time
        steps.append(gpt(idx[:, t : t + 1], cache=cache).numpy())
    assert cache.length == 9
    np.testing.assert_allclose(np.concatenate(steps, axis=1), full, rtol=1e-4, atol=1e-5)


def _rope_gpt(rng, max_seq_len=3, num_layers=2, **options):
    """A float64 GPT with rotary positions and weights large enough to matter (std 0.3)."""
    gpt = nn.GPT(
        12, d_model=16, num_heads=4, num_layers=num_layers, max_seq_len=max_seq_len, pos_encoding="rope", **options
    ).eval()
    for p in gpt.parameters():
        p.data = mt.tensor(rng.normal(0.0, 0.3, p.shape), dtype="float64").data
    return gpt


@pytest.mark.task_6_3
def test_rope_gpt_has_no_position_table_and_reads_any_length(rng):
    gpt = _rope_gpt(rng)
    assert "position_embedding.weight" not in gpt.state_dict()
    assert all(block.attn.rope_base == 10000.0 for block in gpt.blocks)
    assert gpt(mt.randint(0, 12, (2, 10))).shape == (2, 10, 12)  # longer than max_seq_len = 3
    with pytest.raises(ValueError, match="exceeds max_seq_len=3"):
        nn.GPT(12, d_model=16, num_heads=4, num_layers=1, max_seq_len=3)(mt.randint(0, 12, (1, 4)))
    with pytest.raises(ValueError, match="pos_encoding must be one of"):
        nn.GPT(12, pos_encoding="sinusoidal")
    encoder = nn.TransformerEncoder(12, 16, 4, 32, 1, max_seq_len=3, pos_encoding="rope")
    assert encoder(mt.randint(0, 12, (1, 7))).shape == (1, 7, 16)


@pytest.mark.task_6_3
def test_rope_attention_slides_over_the_last_max_seq_len_keys(rng):
    """Each layer sees a window of 3 keys, so with 2 layers token 0 reaches positions up to
    2 + 2 = 4 and no further: the logits at 5.. do not change when it does."""
    gpt = _rope_gpt(rng, max_seq_len=3, num_layers=2)
    idx = rng.integers(0, 12, (1, 9))
    changed = idx.copy()
    changed[0, 0] = (idx[0, 0] + 1) % 12
    before, after = gpt(mt.tensor(idx)).numpy(), gpt(mt.tensor(changed)).numpy()
    np.testing.assert_array_equal(after[:, 5:], before[:, 5:])
    assert np.abs(after[:, 4] - before[:, 4]).max() > 1e-6


@pytest.mark.task_6_3
@pytest.mark.parametrize("num_kv_heads, attn_impl", [(None, "naive"), (2, "flash")])
def test_rope_kv_cache_slides_and_gives_the_same_logits(rng, num_kv_heads, attn_impl):
    gpt = _rope_gpt(rng, max_seq_len=4, num_kv_heads=num_kv_heads, attn_impl=attn_impl)
    idx = mt.tensor(rng.integers(0, 12, (2, 13)))
    full = gpt(idx).numpy()  # one forward, banded causal mask
    cache = gpt.new_cache()
    steps = [gpt(idx[:, :6], cache=cache).numpy()]  # a prompt longer than the window ...
    assert cache.length == 3 and cache.position == 6  # ... keeps the last window - 1
    for t in range(6, 13):  # ... then one token at a time
        steps.append(gpt(idx[:, t : t + 1], cache=cache).numpy())
    assert cache.length == 3 and cache.position == 13
    np.testing.assert_allclose(
        np.concatenate(steps, axis=1), full, rtol=0, atol=float64_tolerance(full, n_ops=100, dtype="float64")
    )


def test_rotary_attention_needs_self_attention():
    mha = nn.MultiHeadAttention(8, 2, rope_base=10000.0)
    assert "rope_base=10000.0" in repr(mha)
    with pytest.raises(ValueError, match="rotary positions need self-attention"):
        mha(mt.randn(1, 3, 8), mt.randn(1, 5, 8), mt.randn(1, 5, 8))


@pytest.mark.parametrize(
    "options",
    [
        dict(),
        dict(num_kv_heads=1, fused_qkv=True, bias=True),
    ],
)
def test_attention_module_gradients_by_finite_differences(options):
    """The module wires the checked ops together (projections, head split, GQA, attention,
    head merge); the gradient of its input must agree with central differences too
    (float64, a random upstream gradient)."""
    _module_gradcheck(options)


@pytest.mark.task_6_3
def test_rotary_attention_module_gradients_by_finite_differences():
    """The same with rotary queries and keys and grouped-query heads (assignment 6: in the
    trees of assignments 4 and 5 the rotation inside the module is still a stub)."""
    _module_gradcheck(dict(rope_base=100.0, num_kv_heads=1))


def test_attention_module_on_flash_gradients_by_finite_differences():
    """The same with ``attn_impl="flash"``: a test of assignment 5 (in assignment 4's tree
    flash attention is still a stub)."""
    _module_gradcheck(dict(attn_impl="flash"))


def _module_gradcheck(options):
    mha = to_float64(nn.MultiHeadAttention(8, 2, dropout=0.0, **options))
    x = mt.randn(2, 4, 8, dtype="float64", requires_grad=True)
    assert mt.gradcheck(lambda x: mha(x, x, x, is_causal=True, need_weights=False)[0], [x])
    assert mt.gradcheck(lambda x: mha(x, x, x, is_causal=True)[1], [x])  # the weights' path


@pytest.mark.parametrize("norm_first", [True, False])
def test_block_gradients_by_finite_differences(norm_first):
    block = to_float64(nn.TransformerEncoderBlock(8, 2, 16, dropout=0.0, norm_first=norm_first, norm="rmsnorm"))
    x = mt.randn(1, 5, 8, dtype="float64", requires_grad=True)
    assert mt.gradcheck(lambda x: block(x, is_causal=True), [x], fast_mode=True)


@pytest.mark.parametrize(
    "call",
    [
        lambda: nn.Linear(4, 5)([[1.0, 2.0, 3.0, 4.0]]),
        lambda: nn.Linear(4, 5)(None),
        lambda: nn.LayerNorm(4)([1.0, 2.0, 3.0, 4.0]),
        lambda: nn.RMSNorm(4)(None),
        lambda: nn.MultiHeadAttention(8, 2)(None, None, None),
        lambda: nn.GPT(5, d_model=8, num_heads=2, num_layers=1, max_seq_len=4)([[1, 2]]),
        lambda: nn.TransformerEncoder(5, 8, 2, 16, 1, 4)([[1, 2, 3]]),
    ],
    ids=["linear-list", "linear-none", "layernorm", "rmsnorm", "attention", "gpt", "encoder"],
)
def test_modules_given_something_other_than_a_tensor_raise_type_error(call):
    with pytest.raises(TypeError, match=r"expected a Tensor, got (list|NoneType)"):
        call()


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: nn.GELU("x"), "approximate must be 'none' or 'tanh'"),
        (lambda: nn.LayerNorm(0), "normalized_shape"),
        (lambda: nn.RMSNorm((4, 0)), "normalized_shape"),
        (lambda: nn.LayerNorm(4, eps=-1), "eps must be a finite number > 0"),
        (lambda: nn.LayerNorm(4, eps=0.0), "eps must be a finite number > 0"),
        (lambda: nn.RMSNorm(4, eps="small"), "eps must be a finite number > 0"),
        (lambda: nn.GPT(5, num_layers=-1), "num_layers must be a positive int"),
        (lambda: nn.GPT(5, num_layers=0), "num_layers must be a positive int"),
    ],
)
def test_bad_constructor_arguments_raise_value_error(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_token_ids_outside_the_vocabulary_raise_instead_of_wrapping():
    model = nn.GPT(5, d_model=8, num_heads=2, num_layers=1, max_seq_len=4)
    for bad in ([[-1, 2]], [[5, 2]]):
        with pytest.raises(ValueError, match=r"\[0, 5\)"):
            model(mt.tensor(bad))


# ---- empty batch and sequence dims, as PyTorch --------------------------------------------------
EMPTY_SHAPES = [(0, 5, 6), (2, 0, 6), (0, 0, 6)]


def _torch_twin(ours, torch):
    """The PyTorch layer of ``ours`` in float64, holding the same weights."""
    theirs = {
        nn.Linear: lambda m: torch.nn.Linear(m.in_features, m.out_features),
        nn.LayerNorm: lambda m: torch.nn.LayerNorm(m.normalized_shape, eps=m.eps),
        nn.RMSNorm: lambda m: torch.nn.RMSNorm(m.normalized_shape, eps=m.eps),
        nn.Embedding: lambda m: torch.nn.Embedding(m.num_embeddings, m.embedding_dim, padding_idx=m.padding_idx),
    }[type(ours)](ours).double()
    with torch.no_grad():
        for name, p in ours.named_parameters():
            getattr(theirs, name).copy_(torch.tensor(p.numpy()))
    return theirs


@pytest.mark.parametrize("shape", EMPTY_SHAPES)
@pytest.mark.parametrize(
    "make",
    [lambda: nn.Linear(6, 4), lambda: nn.LayerNorm(6), lambda: nn.RMSNorm(6), lambda: nn.Embedding(6, 4)],
    ids=["Linear", "LayerNorm", "RMSNorm", "Embedding"],
)
def test_layers_take_empty_batch_and_sequence_dims_as_pytorch(make, shape, device, torch):
    ours = to_float64(make(), device)
    theirs = _torch_twin(ours, torch)
    if isinstance(ours, nn.Embedding):
        x, xt = mt.zeros(*shape[:2], dtype="int64", device=device), torch.zeros(shape[:2], dtype=torch.int64)
    else:
        x, xt = x64(*shape, device=device), torch.zeros(shape, dtype=torch.float64)
        x.requires_grad_()
    out, expected = ours(x), theirs(xt)
    assert out.shape == tuple(expected.shape)
    out.backward(mt.zeros(*out.shape, dtype="float64", device=device))
    expected.backward(torch.zeros(expected.shape, dtype=torch.float64))
    if x.requires_grad:
        assert x.grad.shape == x.shape
    for name, p in ours.named_parameters():  # no rows: every parameter gets a zero gradient
        np.testing.assert_array_equal(p.grad.numpy(), getattr(theirs, name).grad.numpy())


@pytest.mark.parametrize("need_weights", [True, False])
@pytest.mark.parametrize("attn_impl", ["naive", "flash"])
def test_attention_takes_an_empty_batch_as_pytorch(attn_impl, need_weights, torch):
    ours = to_float64(nn.MultiHeadAttention(8, 2, dropout=0.0, attn_impl=attn_impl))
    theirs = torch.nn.MultiheadAttention(8, 2, bias=False, batch_first=True).double()
    x = x64(0, 5, 8).requires_grad_()
    xt = torch.zeros(0, 5, 8, dtype=torch.float64, requires_grad=True)
    (out, weights), (t_out, t_weights) = (
        ours(x, x, x, need_weights=need_weights),
        theirs(xt, xt, xt, average_attn_weights=False),
    )
    assert out.shape == tuple(t_out.shape) == (0, 5, 8)
    assert weights is None if not need_weights else weights.shape == tuple(t_weights.shape)
    out.sum().backward()
    t_out.sum().backward()
    assert x.grad.shape == (0, 5, 8)
    assert all(not np.any(p.grad.numpy()) for p in ours.parameters())
    assert not theirs.in_proj_weight.grad.any()


def test_blocks_and_models_take_an_empty_batch():
    shape = (0, 4)
    x = x64(*shape, 8).requires_grad_()
    encoder, decoder = (
        nn.TransformerEncoderBlock(8, 2, 16, dropout=0.0),
        nn.TransformerDecoderBlock(8, 2, 16, dropout=0.0),
    )
    out = to_float64(encoder)(x, is_causal=True) + to_float64(decoder)(x, x64(0, 3, 8))
    out.sum().backward()
    assert out.shape == x.grad.shape == x.shape
    ids = mt.zeros(*shape, dtype="int64")
    gpt = nn.GPT(7, d_model=8, num_heads=2, num_layers=1, max_seq_len=6)
    logits = gpt(ids)
    logits.sum().backward()
    assert logits.shape == (*shape, 7)
    assert all(p.grad is not None and not np.any(p.grad.numpy()) for p in gpt.parameters())


@pytest.mark.parametrize("shape", [(2, 0), (0, 0)])
def test_the_flash_model_takes_an_empty_sequence(shape):
    gpt = nn.GPT(7, d_model=8, num_heads=2, num_layers=1, max_seq_len=6, attn_impl="flash")
    logits = gpt(mt.zeros(*shape, dtype="int64"))
    logits.sum().backward()
    assert logits.shape == (*shape, 7)
    assert all(not np.any(p.grad.numpy()) for p in gpt.parameters())


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: nn.KVCache(0), "num_layers must be a positive int"),
        (lambda: nn.KVCache(2, window=0), "window must be a positive int"),
        (lambda: nn.KVCache(2, window=-3), "window must be a positive int"),
        (lambda: nn.KVCache(2, max_positions=2.5), "max_positions must be a positive int"),
    ],
)
def test_kv_cache_rejects_sizes_that_cannot_be(make, message):
    """KVCache(2, window=0) once kept k[:, :, n + 1:] (nothing) and KVCache(0) failed only
    at its first use with an IndexError."""
    with pytest.raises(ValueError, match=message):
        make()


def test_sizes_may_be_numpy_ints():
    """nn.Linear(np.int64(3), 4) (a size read from an array or a config loaded with NumPy)
    was rejected as "not a positive int"; PyTorch takes NumPy ints."""
    three, two = np.int64(3), np.int32(2)
    assert nn.Linear(three, two)(mt.ones(1, 3)).shape == (1, 2)
    assert nn.MultiHeadAttention(np.int64(8), two, dropout=0.0)(*[mt.ones(1, 3, 8)] * 3)[0].shape == (1, 3, 8)
    assert nn.KVCache(two, window=three).window == 3


def test_load_state_dict_rejects_values_that_are_not_arrays():
    """A list among the values once failed with "'list' object has no attribute 'shape'"."""
    model = nn.Linear(3, 2)
    state = model.state_dict()
    state["weight"] = state["weight"].tolist()
    with pytest.raises(TypeError, match="load_state_dict: weight must be a Tensor or an array, got list"):
        model.load_state_dict(state)


@pytest.mark.parametrize("in_features, out_features", [(0, 3), (3, 0), (0, 0)])
def test_linear_with_an_empty_feature_dim_as_pytorch(torch, in_features, out_features):
    """torch.nn.Linear(0, 3) maps every row to its bias; Linear(3, 0) gives empty rows."""
    layer = nn.Linear(in_features, out_features, dtype="float64")
    x = mt.zeros(2, in_features, dtype="float64", requires_grad=True)
    y = layer(x)
    reference = torch.nn.functional.linear(
        torch.zeros(2, in_features, dtype=torch.float64),
        torch.tensor(layer.weight.numpy()),
        torch.tensor(layer.bias.numpy()),
    )
    assert y.shape == tuple(reference.shape)
    np.testing.assert_array_equal(y.numpy(), reference.numpy())
    y.backward(mt.ones(*y.shape, dtype="float64"))
    assert x.grad.shape == (2, in_features) and layer.bias.grad.shape == (out_features,)
