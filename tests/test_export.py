"""Export to PyTorch: the export command's files, the PyTorch GPT they load into, and its
logits against ours on real text, for learned and rotary positions."""

import json
import sys

import numpy as np
import pytest

import minitorch_attn as mt
from minitorch_attn import nn
from minitorch_attn.app import checkpoint, cli, data, sampling
from tests.conftest import float64_tolerance

pytest.importorskip("safetensors")

CASES = {  # GPT options; the length of the text windows (rope: past max_seq_len, so attention slides)
    "learned": (dict(pos_encoding="learned"), 16),
    "rope": (dict(pos_encoding="rope", norm="rmsnorm", tie_weights=False, fused_qkv=False, num_kv_heads=1), 40),
}


def write_checkpoint(path, rng, options):
    """A training checkpoint of a small GPT over the characters of real text, with weights
    drawn large enough (std 0.1) for the positions and every layer to matter."""
    vocab = data.CharVocab.from_text(data.load_corpus())
    model = nn.GPT(len(vocab), d_model=32, num_heads=4, num_layers=2, max_seq_len=16, **options)
    for p in model.parameters():
        p.data = mt.tensor(rng.normal(0.0, 0.1, p.shape), dtype="float32").data
    checkpoint.save(path, model, config=model.config, vocab=vocab.chars, step=7, history={})
    return model, vocab


def text_batch(vocab, length, rng):
    """Three windows of the Python language reference."""
    ids = vocab.encode(data.load_corpus())
    starts = rng.integers(0, len(ids) - length, 3)
    return np.stack([ids[s : s + length] for s in starts])


@pytest.mark.parametrize("case", sorted(CASES))
def test_pytorch_logits_equal_ours_on_real_text(case, torch, tmp_path, rng, capsys):
    from minitorch_attn.app.torch_gpt import GPT

    options, length = CASES[case]
    model, vocab = write_checkpoint(tmp_path / "checkpoint.npz", rng, options)
    out = tmp_path / "model.safetensors"
    assert cli.main(["export", "--checkpoint", str(tmp_path / "checkpoint.npz"), "--out", str(out)]) == 0
    assert "GPT.from_export" in capsys.readouterr().out
    exported = json.loads((tmp_path / "model.json").read_text(encoding="utf-8"))
    assert exported["vocab"] == vocab.chars and exported["step"] == 7
    assert exported["config"]["pos_encoding"] == case and "attn_impl" not in exported["config"]

    theirs, their_vocab = GPT.from_export(str(out))
    assert their_vocab.chars == vocab.chars
    assert set(theirs.state_dict()) == set(model.state_dict()) | {"lm_head.weight"}
    batch = text_batch(vocab, length, rng)
    ours32 = model.eval()(mt.tensor(batch)).numpy()
    with torch.no_grad():
        theirs32 = theirs(torch.tensor(batch)).numpy()
        theirs64 = theirs.double()(torch.tensor(batch)).numpy()
    for p in model.parameters():  # our float64 reference
        p.data = mt.tensor(p.numpy(), dtype="float64").data
    reference = model(mt.tensor(batch)).numpy()

    # the same function: in float64 the two agree to float64 rounding ...
    np.testing.assert_allclose(theirs64, reference, rtol=0, atol=float64_tolerance(reference, 10, "float64"))
    # ... and in float32 each is within a few float32 roundings of it (measured: about one)
    tolerance = float64_tolerance(reference, 10, "float32")
    np.testing.assert_allclose(theirs32, reference, rtol=0, atol=tolerance)
    np.testing.assert_allclose(ours32, reference, rtol=0, atol=tolerance)


def test_sampling_continues_in_pytorch(torch, tmp_path, rng):
    from minitorch_attn.app.torch_gpt import GPT

    model, vocab = write_checkpoint(tmp_path / "c.npz", rng, dict(pos_encoding="rope"))
    cli.main(["export", "--checkpoint", str(tmp_path / "c.npz"), "--out", str(tmp_path / "m.safetensors")])
    theirs, their_vocab = GPT.from_export(str(tmp_path / "m.safetensors"))
    prompt = list(vocab.encode("The "))
    ours = sampling.generate_ids(model, prompt, 24, temperature=0)  # past max_seq_len = 16
    assert theirs.generate(prompt, 24, temperature=0) == ours
    assert len(their_vocab.decode(theirs.generate(prompt, 5, temperature=0.8, top_k=3))) == 5


def test_export_refuses_a_wrong_suffix_a_missing_folder_and_reports_missing_safetensors(
    tmp_path, rng, capsys, monkeypatch
):
    write_checkpoint(tmp_path / "c.npz", rng, {})
    for out, message in (("m.pt", "must be a .safetensors file"), ("no/such/m.safetensors", "does not exist")):
        assert cli.main(["export", "--checkpoint", str(tmp_path / "c.npz"), "--out", str(tmp_path / out)]) == 2
        assert message in capsys.readouterr().err
    monkeypatch.setitem(sys.modules, "safetensors.numpy", None)
    assert cli.main(["export", "--checkpoint", str(tmp_path / "c.npz"), "--out", str(tmp_path / "m.safetensors")]) == 2
    assert 'pip install -e ".[export]"' in capsys.readouterr().err
    assert not (tmp_path / "m.safetensors").exists()


def test_the_pytorch_module_without_torch_names_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)
    monkeypatch.delitem(sys.modules, "minitorch_attn.app.torch_gpt", raising=False)
    with pytest.raises(ImportError, match=r"pip install torch"):
        import minitorch_attn.app.torch_gpt  # noqa: F401


def test_an_earlier_export_is_kept_unless_overwrite(tmp_path, rng, capsys):
    pytest.importorskip("safetensors")
    write_checkpoint(tmp_path / "c.npz", rng, {})
    command = ["export", "--checkpoint", str(tmp_path / "c.npz"), "--out", str(tmp_path / "m.safetensors")]
    assert cli.main(command) == 0
    before = (tmp_path / "m.safetensors").read_bytes()
    (tmp_path / "m.json").write_text("{}")  # the user's own edit, kept
    assert cli.main(command) == 2
    assert "--overwrite" in capsys.readouterr().err
    assert (tmp_path / "m.safetensors").read_bytes() == before and (tmp_path / "m.json").read_text() == "{}"
    assert cli.main(command + ["--overwrite"]) == 0
    assert json.loads((tmp_path / "m.json").read_text())["step"] == 7
