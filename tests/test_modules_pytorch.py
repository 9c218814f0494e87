"""Modules and checkpoints with PyTorch's signatures and results: load_state_dict's
missing and unexpected keys, NumPy numbers in saved settings, LayerNorm and RMSNorm
without affine parameters or bias, Embedding(max_norm=...)."""

import numpy as np
import pytest

import minitorch_attn as mt
import minitorch_attn.functional as F
from minitorch_attn import nn, optim
from minitorch_attn.app import checkpoint


def model():
    return nn.Sequential(nn.Linear(3, 4), nn.LayerNorm(4))


@pytest.mark.parametrize("strict", [True, False])
def test_load_state_dict_returns_the_missing_and_unexpected_keys(strict):
    a, b = model(), model()
    result = b.load_state_dict(a.state_dict(), strict=strict)
    assert result == ([], []) and result.missing_keys == [] and result.unexpected_keys == []
    state = a.state_dict()
    del state["0.bias"]
    state["extra.weight"] = mt.zeros(2)
    result = b.load_state_dict(state, strict=False)
    assert result.missing_keys == ["0.bias"] and result.unexpected_keys == ["extra.weight"]
    np.testing.assert_array_equal(b[0].weight.numpy(), a[0].weight.numpy())


def test_load_state_dict_result_is_torchs_named_tuple(torch):
    result = torch.nn.Linear(2, 2).load_state_dict({"weight": torch.zeros(2, 2)}, strict=False)
    ours = nn.Linear(2, 2).load_state_dict({"weight": mt.zeros(2, 2)}, strict=False)
    assert tuple(ours) == tuple(result) and ours._fields == result._fields


@pytest.mark.parametrize(
    "make",
    [
        lambda p: optim.AdamW(
            p, lr=np.float32(1e-3), betas=(np.float32(0.9), np.float64(0.99)), weight_decay=np.float64(0.1)
        ),
        lambda p: optim.SGD(p, lr=np.float64(0.1), momentum=np.float32(0.5)),
    ],
    ids=["AdamW", "SGD"],
)
def test_numpy_numbers_in_hyperparameters_and_config_save_and_load(tmp_path, make):
    m = model()
    opt = make(m.parameters())
    m(mt.randn(2, 3)).sum().backward()
    opt.step()
    path = tmp_path / "c.npz"
    checkpoint.save(path, m, opt, config={"d_model": np.int64(4), "dropout": np.float32(0.25)}, step=np.int32(7))
    loaded = checkpoint.load(path)
    assert loaded["config"] == {"d_model": 4, "dropout": 0.25}
    fresh = model()
    fresh_opt = make(fresh.parameters())
    checkpoint.restore(loaded, fresh, fresh_opt)
    assert fresh_opt.param_groups[0]["lr"] == pytest.approx(float(opt.param_groups[0]["lr"]))


def test_what_json_cannot_store_is_a_clear_error(tmp_path):
    with pytest.raises(TypeError, match="a checkpoint stores numbers, strings, lists and dicts"):
        checkpoint.save(tmp_path / "c.npz", model(), config={"f": object()})


@pytest.mark.parametrize(
    "affine, bias, params",
    [(True, True, ["weight", "bias"]), (True, False, ["weight"]), (False, True, []), (False, False, [])],
)
def test_layer_norm_without_affine_or_bias(affine, bias, params):
    ln = nn.LayerNorm(4, elementwise_affine=affine, bias=bias)
    assert [n for n, _ in ln.named_parameters()] == params
    x = mt.randn(3, 4)
    want = F.layer_norm(x, (4,), ln.weight, ln.bias)
    np.testing.assert_array_equal(ln(x).numpy(), want.numpy())
    if not affine:
        np.testing.assert_array_equal(ln(x).numpy(), F.layer_norm(x, (4,)).numpy())


@pytest.mark.parametrize("affine", [True, False])
def test_rms_norm_without_affine(affine):
    rn = nn.RMSNorm(4, elementwise_affine=affine)
    assert [n for n, _ in rn.named_parameters()] == (["weight"] if affine else [])
    x = mt.randn(3, 4)
    np.testing.assert_array_equal(rn(x).numpy(), F.rms_norm(x, (4,), rn.weight).numpy())


def test_norm_flags_are_read_by_their_truth_as_pytorch_reads_them():
    # torch.nn.LayerNorm(4, bias=0) has no bias; the flags of PyTorch's module constructors
    # are plain Python truth tests (a functional op's flags, is_causal, training, are checked)
    assert nn.LayerNorm(4, bias=0).bias is None and nn.LayerNorm(4, bias=0).weight is not None
    assert nn.RMSNorm(4, elementwise_affine=0).weight is None
    assert nn.LayerNorm(4, elementwise_affine=None).weight is None


def test_norm_modules_match_torch(torch):
    x = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    for ours, theirs in [
        (nn.LayerNorm(4, bias=False), torch.nn.LayerNorm(4, bias=False)),
        (nn.LayerNorm(4, elementwise_affine=False), torch.nn.LayerNorm(4, elementwise_affine=False)),
        (nn.RMSNorm(4, elementwise_affine=False), torch.nn.RMSNorm(4, elementwise_affine=False)),
    ]:
        assert len(ours.parameters()) == len(list(theirs.parameters()))
        np.testing.assert_allclose(
            ours(mt.tensor(x)).numpy(),
            theirs(torch.tensor(x)).detach().numpy(),
            rtol=0,
            atol=16 * np.finfo(np.float32).eps,
        )


def renormed(weight, idx, max_norm, p):
    """PyTorch's embedding_renorm_ in NumPy."""
    w = weight.copy()
    for i in np.unique(idx):
        norm = np.sum(np.abs(w[i]) ** p) ** (1 / p)
        if norm > max_norm:
            w[i] *= max_norm / (norm + 1e-7)
    return w


@pytest.mark.parametrize("norm_type", [1.0, 2.0, 3.5])
def test_embedding_max_norm_renormalizes_the_looked_up_rows_in_place(norm_type):
    e = nn.Embedding(6, 4, max_norm=1.5, norm_type=norm_type)
    before = e.weight.numpy().copy()
    idx = np.array([[0, 2, 2], [5, 0, 1]])
    version = e.weight._version
    y = e(mt.tensor(idx))
    want = renormed(before, idx, 1.5, norm_type)
    np.testing.assert_allclose(e.weight.numpy(), want, rtol=4 * np.finfo(np.float32).eps)
    np.testing.assert_allclose(y.numpy(), want[idx], rtol=4 * np.finfo(np.float32).eps)
    np.testing.assert_array_equal(e.weight.numpy()[[3, 4]], before[[3, 4]])  # not looked up: untouched
    assert e.weight._version == version + 1 and e.weight.is_leaf
    y.sum().backward()
    np.testing.assert_array_equal(e.weight.grad.numpy()[:, 0], [2, 1, 2, 0, 0, 1])


def test_embedding_max_norm_with_padding_and_bad_values():
    e = nn.Embedding(4, 3, padding_idx=0, max_norm=0.5)
    e(mt.tensor([0, 1]))
    assert e.weight.numpy()[0].tolist() == [0.0, 0.0, 0.0]
    assert np.linalg.norm(e.weight.numpy()[1]) <= 0.5 + 1e-6
    for bad in (0, -1.0, "1"):
        with pytest.raises(ValueError, match="max_norm must be a positive number"):
            nn.Embedding(4, 3, max_norm=bad)
    before = e.weight.numpy().copy()
    with pytest.raises(ValueError):
        e(mt.tensor([-1, 2]))  # refused before any write
    np.testing.assert_array_equal(e.weight.numpy(), before)


def test_embedding_max_norm_matches_torch(torch):
    e = nn.Embedding(5, 3, max_norm=1.0)
    te = torch.nn.Embedding(5, 3, max_norm=1.0)
    with torch.no_grad():
        te.weight.copy_(torch.tensor(e.weight.numpy()))
    idx = [[0, 1, 1], [3, 0, 4]]
    np.testing.assert_allclose(
        e(mt.tensor(idx)).numpy(), te(torch.tensor(idx)).detach().numpy(), rtol=0, atol=4 * np.finfo(np.float32).eps
    )
    np.testing.assert_allclose(e.weight.numpy(), te.weight.detach().numpy(), rtol=0, atol=4 * np.finfo(np.float32).eps)
