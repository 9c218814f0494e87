"""Hugging Face folders: GPT-2 and Llama checkpoints made by transformers' own classes load
into our GPT with transformers' logits (``GPT.from_pretrained``); our checkpoints exported
with ``--format transformers`` load into transformers with our logits, and their tokenizer
encodes as ours; unsupported and malformed folders are refused with what is wrong.

Skipped without transformers, tokenizers, safetensors or PyTorch (the ``hf`` extra)."""

import json
import os

import numpy as np
import pytest

import minitorch_attn as mt
from minitorch_attn import nn
from minitorch_attn.app import checkpoint, cli, data, hf_export

pytest.importorskip("safetensors")
pytest.importorskip("tokenizers")
transformers = pytest.importorskip("transformers")
torch = pytest.importorskip("torch")

VOCAB = 61
GPT2 = dict(vocab_size=VOCAB, n_embd=32, n_layer=2, n_head=4, n_positions=24, bos_token_id=0, eos_token_id=0)
LLAMA = dict(
    vocab_size=VOCAB,
    hidden_size=32,
    intermediate_size=56,
    num_hidden_layers=2,
    num_attention_heads=4,
    max_position_embeddings=24,
    bos_token_id=0,
    eos_token_id=0,
)
CASES = {  # name: (config class, model class, options)
    "gpt2-tied": ("GPT2Config", "GPT2LMHeadModel", dict(GPT2)),
    "gpt2-untied": (
        "GPT2Config",
        "GPT2LMHeadModel",
        dict(GPT2, tie_word_embeddings=False, n_inner=40, layer_norm_epsilon=1e-3),
    ),
    "llama-untied-gqa": (
        "LlamaConfig",
        "LlamaForCausalLM",
        dict(LLAMA, num_key_value_heads=2, rope_theta=500.0, rms_norm_eps=1e-5),
    ),
    "llama-tied-bias": (
        "LlamaConfig",
        "LlamaForCausalLM",
        dict(LLAMA, tie_word_embeddings=True, attention_bias=True, num_key_value_heads=1),
    ),
}


def hf_model(case, seed=0):
    """A randomly initialised transformers model of ``case``, with weights of std 0.1 (the
    default 0.02 leaves logits too small for a comparison to mean much), biases and norm
    gains included."""
    config_class, model_class, options = CASES[case]
    torch.manual_seed(seed)
    model = getattr(transformers, model_class)(getattr(transformers, config_class)(**options))
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn_like(p) * 0.1 + (1.0 if p.ndim == 1 and p.shape[0] == 32 else 0.0))
    return model.eval()


def their_logits(model, ids):
    with torch.no_grad():
        return model(torch.tensor(ids)).logits.numpy()


def ids_batch(rng, length=20):
    return rng.integers(0, VOCAB, size=(2, length))


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """Each case saved once: ``{case: (folder, transformers model)}``."""
    root = tmp_path_factory.mktemp("hf")
    folders = {}
    for case in CASES:
        model = hf_model(case)
        model.save_pretrained(root / case)
        folders[case] = (root / case, model)
    return folders


@pytest.mark.parametrize("case", sorted(CASES))
def test_imported_logits_equal_transformers(case, saved, rng):
    folder, theirs = saved[case]
    ours = nn.GPT.from_pretrained(folder)
    ids = ids_batch(rng)
    expected = their_logits(theirs, ids)
    np.testing.assert_allclose(ours(mt.tensor(ids)).numpy(), expected, rtol=1e-5, atol=2e-5)
    assert np.abs(expected).max() > 0.5  # logits large enough for the comparison to mean something
    assert ours.config["tie_weights"] == (ours.lm_head.weight is ours.token_embedding.weight)


def test_imported_model_matches_the_config(saved):
    gpt2 = nn.GPT.from_pretrained(saved["gpt2-untied"][0])
    assert (gpt2.config["d_ff"], gpt2.norm.eps, gpt2.config["bias"]) == (40, 1e-3, True)
    llama = nn.GPT.from_pretrained(saved["llama-untied-gqa"][0])
    attn = llama.blocks[0].attn
    assert (attn.num_kv_heads, attn.rope_base, llama.norm.eps, llama.config["pos_encoding"]) == (2, 500.0, 1e-5, "rope")


def test_sharded_folder_loads(saved, tmp_path, rng):
    _, theirs = saved["llama-untied-gqa"]
    theirs.save_pretrained(tmp_path, max_shard_size="20KB")
    assert (tmp_path / "model.safetensors.index.json").exists() and not (tmp_path / "model.safetensors").exists()
    ids = ids_batch(rng)
    np.testing.assert_allclose(
        nn.GPT.from_pretrained(tmp_path)(mt.tensor(ids)).numpy(), their_logits(theirs, ids), rtol=1e-5, atol=2e-5
    )
    index = json.loads((tmp_path / "model.safetensors.index.json").read_text())
    os.remove(tmp_path / sorted(set(index["weight_map"].values()))[-1])
    with pytest.raises(ValueError, match="names the shard"):
        nn.GPT.from_pretrained(tmp_path)


def test_gpt2_names_of_the_hub_and_buffers_load(saved, tmp_path, rng):
    """The original ``gpt2`` on the Hub names its tensors without ``transformer.`` and stores
    each layer's causal mask (``h.0.attn.bias``); both are read as transformers reads them."""
    from safetensors.numpy import load_file, save_file

    folder, theirs = saved["gpt2-tied"]
    written = load_file(folder / "model.safetensors")
    tensors = {name.removeprefix("transformer."): value for name, value in written.items()}
    tensors["h.0.attn.bias"] = np.tril(np.ones((1, 1, 24, 24), dtype=np.float32))
    save_file(tensors, tmp_path / "model.safetensors")
    (tmp_path / "config.json").write_bytes((folder / "config.json").read_bytes())
    ids = ids_batch(rng)
    np.testing.assert_allclose(
        nn.GPT.from_pretrained(tmp_path)(mt.tensor(ids)).numpy(), their_logits(theirs, ids), rtol=1e-5, atol=2e-5
    )


def test_bfloat16_weights_are_widened(saved, tmp_path, rng):
    _, theirs = saved["llama-tied-bias"]
    theirs.to(torch.bfloat16).save_pretrained(tmp_path)
    theirs.float()
    wide = transformers.AutoModelForCausalLM.from_pretrained(tmp_path, dtype=torch.float32).eval()
    ids = ids_batch(rng)
    np.testing.assert_allclose(
        nn.GPT.from_pretrained(tmp_path)(mt.tensor(ids)).numpy(), their_logits(wide, ids), rtol=1e-5, atol=2e-5
    )


def test_backward_through_an_imported_model(saved, rng):
    model = nn.GPT.from_pretrained(saved["gpt2-tied"][0]).train()
    ids = mt.tensor(ids_batch(rng, 9))
    loss = mt.functional.cross_entropy(model(ids[:, :-1]).reshape(-1, VOCAB), ids[:, 1:].reshape(-1))
    loss.backward()
    assert all(p.grad is not None and np.isfinite(p.grad.numpy()).all() for p in model.parameters())


# ---- refused folders -------------------------------------------------------------------------


def copy_folder(source, target, config=None, tensors=None):
    """``source``'s folder in ``target``, its config.json updated by ``config`` and its
    tensors replaced by ``tensors`` (a function of the dict) where given."""
    from safetensors.numpy import load_file, save_file

    target.mkdir(exist_ok=True)
    written = json.loads((source / "config.json").read_text())
    written.update(config or {})
    (target / "config.json").write_text(json.dumps(written))
    weights = load_file(source / "model.safetensors")
    save_file(tensors(weights) if tensors else weights, target / "model.safetensors")
    return target


REFUSED = {  # name: (config changes, tensor changes, the message's words)
    "mistral": ({"architectures": ["MistralForCausalLM"]}, None, "MistralForCausalLM is not supported.*sliding"),
    "unknown": ({"architectures": ["FancyForCausalLM"]}, None, "'FancyForCausalLM' is not supported"),
    "rope-scaling": ({"rope_scaling": {"rope_type": "linear", "factor": 2.0}}, None, "rope scaling"),
    "rope-parameters": ({"rope_parameters": {"rope_type": "yarn", "rope_theta": 1e4}}, None, "rope scaling"),
    "sliding": ({"sliding_window": 8}, None, "sliding-window"),
    "experts": ({"num_local_experts": 4}, None, "mixture of experts"),
    "activation": ({"hidden_act": "gelu"}, None, "hidden_act='gelu'"),
    "head-dim": ({"head_dim": 16}, None, "head_dim=16"),
    "no-width": ({"hidden_size": None}, None, "hidden_size"),
    "missing": ({}, lambda t: {k: v for k, v in t.items() if k != "model.norm.weight"}, "missing model.norm.weight"),
    "extra": (
        {},
        lambda t: {**t, "model.layers.9.mlp.up_proj.weight": t["model.norm.weight"]},
        "left over model.layers.9",
    ),
    "shape": ({}, lambda t: {**t, "model.norm.weight": np.ones(5, np.float32)}, r"model.norm.weight \(5,\)"),
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_unsupported_and_malformed_folders_are_refused(name, saved, tmp_path):
    config, tensors, message = REFUSED[name]
    if name == "no-width":
        written = json.loads((saved["llama-untied-gqa"][0] / "config.json").read_text())
        del written["hidden_size"]
        folder = copy_folder(saved["llama-untied-gqa"][0], tmp_path)
        (folder / "config.json").write_text(json.dumps(written))
    else:
        folder = copy_folder(saved["llama-untied-gqa"][0], tmp_path, config, tensors)
    with pytest.raises(ValueError, match=message):
        nn.GPT.from_pretrained(folder)


def test_gpt2_features_we_lack_are_refused(saved, tmp_path):
    for change, words in (
        ({"activation_function": "relu"}, "activation_function='relu'"),
        ({"scale_attn_by_inverse_layer_idx": True}, "scale_attn_by_inverse_layer_idx"),
    ):
        with pytest.raises(ValueError, match=words):
            nn.GPT.from_pretrained(copy_folder(saved["gpt2-tied"][0], tmp_path / "x", change))


def test_pickles_are_never_loaded_and_the_message_says_how_to_convert(saved, tmp_path):
    (tmp_path / "config.json").write_bytes((saved["gpt2-tied"][0] / "config.json").read_bytes())
    (tmp_path / "pytorch_model.bin").write_bytes(b"not to be unpickled")
    with pytest.raises(ValueError, match="pytorch_model.bin.*never loaded.*save_pretrained"):
        nn.GPT.from_pretrained(tmp_path)


def test_folders_without_a_config_or_weights_are_refused(saved, tmp_path):
    with pytest.raises(ValueError, match="not a folder"):
        nn.GPT.from_pretrained(tmp_path / "nowhere")
    with pytest.raises(ValueError, match="no config.json"):
        nn.GPT.from_pretrained(tmp_path)
    (tmp_path / "config.json").write_text("[1, 2]")
    with pytest.raises(ValueError, match="JSON object"):
        nn.GPT.from_pretrained(tmp_path)
    (tmp_path / "config.json").write_bytes((saved["gpt2-tied"][0] / "config.json").read_bytes())
    with pytest.raises(ValueError, match="neither model.safetensors"):
        nn.GPT.from_pretrained(tmp_path)
    (tmp_path / "model.safetensors").write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00{broken}")
    with pytest.raises(ValueError, match="not a readable safetensors file"):
        nn.GPT.from_pretrained(tmp_path)
    os.remove(tmp_path / "model.safetensors")
    (tmp_path / "model.safetensors.index.json").write_text("{}")
    with pytest.raises(ValueError, match="no 'weight_map'"):
        nn.GPT.from_pretrained(tmp_path)


# ---- export to transformers ------------------------------------------------------------------

EXPORTS = {  # our GPT's options: a GPT-2 folder (no biases, untied, grouped-query) and a Llama one
    "gpt2": dict(tie_weights=False, num_kv_heads=2),
    "llama": dict(nn.LLAMA, num_kv_heads=2, max_seq_len=24),
    "llama-fused-bias": dict(nn.LLAMA, fused_qkv=True, bias=True, tie_weights=False, norm_eps=1e-5),
}


def write_checkpoint(path, rng, options):
    """A training checkpoint of a small GPT over the characters of the default corpus."""
    vocab = data.CharVocab.from_text(data.load_corpus())
    options = dict(dict(d_model=32, num_heads=4, num_layers=2, max_seq_len=16), **options)
    model = nn.GPT(len(vocab), **options)
    for p in model.parameters():
        p.data = mt.tensor(rng.normal(0.0, 0.1, p.shape), dtype="float32").data
    checkpoint.save(path, model, config=model.config, vocab=vocab.chars, step=3, history={})
    return model, vocab


@pytest.mark.parametrize("case", sorted(EXPORTS))
def test_exported_folder_loads_in_transformers_with_our_logits(case, tmp_path, rng, capsys):
    model, vocab = write_checkpoint(tmp_path / "c.npz", rng, EXPORTS[case])
    out = tmp_path / "exported"
    assert (
        cli.main(["export", "--format", "transformers", "--checkpoint", str(tmp_path / "c.npz"), "--out", str(out)])
        == 0
    )
    assert "AutoModelForCausalLM" in capsys.readouterr().out
    assert sorted(os.listdir(tmp_path)) == ["c.npz", "exported"]  # no temporary folder left
    theirs = transformers.AutoModelForCausalLM.from_pretrained(out).eval()
    ids = vocab.encode(data.load_corpus()[1000:1016])[None]
    ours = model.eval()(mt.tensor(ids)).numpy()
    np.testing.assert_allclose(their_logits(theirs, ids), ours, rtol=1e-5, atol=2e-5)
    np.testing.assert_allclose(nn.GPT.from_pretrained(out)(mt.tensor(ids)).numpy(), ours, rtol=1e-5, atol=2e-5)


def test_exported_tokenizer_encodes_and_decodes_as_our_vocabulary(tmp_path, rng):
    model, vocab = write_checkpoint(tmp_path / "c.npz", rng, EXPORTS["llama"])
    out = hf_export.export_transformers(tmp_path / "c.npz", tmp_path / "exported")
    tokenizer = transformers.AutoTokenizer.from_pretrained(out)
    text = "def f(x):\n\treturn x  # \u00e9 \u4e2d \U0001f600 unknown ones\r\n"
    ids = tokenizer(text)["input_ids"]
    assert ids == vocab.encode(text).tolist()
    assert tokenizer.decode(ids) == vocab.decode(ids)
    corpus = data.load_corpus()[:3000]
    assert tokenizer.decode(tokenizer(corpus)["input_ids"]) == corpus


def test_export_is_atomic_and_keeps_an_earlier_folder(tmp_path, rng):
    write_checkpoint(tmp_path / "c.npz", rng, EXPORTS["gpt2"])
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "mine.txt").write_text("keep me")
    with pytest.raises(ValueError, match="already exists.*--overwrite"):
        hf_export.export_transformers(tmp_path / "c.npz", tmp_path / "out")
    with pytest.raises(ValueError, match="not a folder that an export wrote .it holds mine.txt"):
        hf_export.export_transformers(tmp_path / "c.npz", tmp_path / "out", overwrite=True)
    assert os.listdir(tmp_path / "out") == ["mine.txt"]  # --overwrite replaces an earlier export only
    (tmp_path / "out" / "mine.txt").unlink()
    os.rmdir(tmp_path / "out")
    hf_export.export_transformers(tmp_path / "c.npz", tmp_path / "out")
    hf_export.export_transformers(tmp_path / "c.npz", tmp_path / "out", overwrite=True)
    assert sorted(os.listdir(tmp_path / "out")) == [
        "config.json",
        "model.safetensors",
        "tokenizer.json",
        "tokenizer_config.json",
    ]
    assert sorted(os.listdir(tmp_path)) == ["c.npz", "out"]


def test_a_block_transformers_lacks_is_refused(tmp_path, rng):
    write_checkpoint(tmp_path / "c.npz", rng, dict(pos_encoding="rope"))
    with pytest.raises(ValueError, match="neither GPT-2's.*nor LLaMA's"):
        hf_export.export_transformers(tmp_path / "c.npz", tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_sample_from_a_pretrained_folder_with_its_tokenizer(tmp_path, rng, capsys):
    write_checkpoint(tmp_path / "c.npz", rng, EXPORTS["llama"])
    out = hf_export.export_transformers(tmp_path / "c.npz", tmp_path / "exported")
    assert cli.main(["sample", "--pretrained", out, "--prompt", "The ", "--max-new-tokens", "12", "--seed", "1"]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("The ") and len(printed) == len("The ") + 12 + 1
    assert cli.main(["sample", "--pretrained", str(tmp_path / "nowhere")]) == 2
    assert "not a folder" in capsys.readouterr().err


def test_pretrained_demo_reads_a_folder(tmp_path, capsys):
    """demos/16_pretrained.py with --pretrained: a GPT-2 folder (random weights, our
    character tokenizer) through from_pretrained, the folder's tokenizer and the fine-tuning."""
    from pathlib import Path

    from minitorch_attn.app import demos_cli

    vocab = data.CharVocab.from_text(data.load_corpus())
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(transformers.GPT2Config(**dict(GPT2, vocab_size=len(vocab), n_positions=64)))
    model.save_pretrained(tmp_path / "gpt2")
    (tmp_path / "gpt2" / "tokenizer.json").write_text(hf_export.tokenizer_json(vocab))
    demos = Path(__file__).resolve().parents[1] / "demos"
    path = demos_cli.find_demo("pretrained", demos_cli.available_demos(demos))
    assert demos_cli.run_demo(path, ["--quick", "--pretrained", str(tmp_path / "gpt2"), "--out", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    assert "GPT.from_pretrained(" in printed and '"it" is token 42, "trophy" [4, 5, 6, 7, 8, 9]' in printed
    assert "no evidence" not in printed and "(falls)" in printed


def test_skip_init_draws_nothing_and_starts_at_zeros():
    mt.manual_seed(3)
    expected = mt.randn(4).numpy()
    mt.manual_seed(3)
    model = nn.skip_init(nn.GPT, 20, d_model=16, num_heads=2, num_layers=1, max_seq_len=8, tie_weights=False)
    assert np.array_equal(mt.randn(4).numpy(), expected)  # the seeded stream is as it was
    norms = {"blocks.0.norm1.weight", "blocks.0.norm2.weight", "norm.weight"}
    for name, p in model.named_parameters():
        assert np.all(p.numpy() == (1.0 if name in norms else 0.0)), name
    assert nn.GPT(20, d_model=16, num_heads=2, num_layers=1, max_seq_len=8).lm_head.weight.numpy().std() > 0.01


def test_an_index_naming_shards_outside_the_folder_or_not_by_name_is_refused(tmp_path):
    # a shard is a file of the folder itself: "../x", an absolute path or a number is refused
    # by name, before anything is read
    import json

    from minitorch_attn.nn.pretrained import _weight_files

    outside = tmp_path / "outside.safetensors"
    outside.write_bytes(b"")
    folder = tmp_path / "model"
    folder.mkdir()
    for shard in ["../outside.safetensors", str(outside), 5]:
        (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {"w": shard}}))
        with pytest.raises(ValueError, match="not file names in the folder"):
            _weight_files(str(folder))


def test_overwrite_replaces_an_earlier_export_and_nothing_else(tmp_path, monkeypatch):
    # a mistyped --out with --overwrite ("", ".", "..", a project folder, a file) must not be removed
    from minitorch_attn.app.hf_export import write_folder

    files = {"config.json": b"{}", "model.safetensors": b"x"}
    earlier = write_folder(tmp_path / "export", files)
    assert write_folder(earlier, {**files, "config.json": b"{ }"}, overwrite=True) == earlier
    project = tmp_path / "project"
    (project / "child").mkdir(parents=True)
    (project / "notes.txt").write_text("mine")
    a_file = tmp_path / "a_file"
    a_file.write_text("mine")
    monkeypatch.chdir(project / "child")
    for out in ["", ".", "..", str(project), str(a_file)]:
        with pytest.raises(ValueError, match="not a folder that an export wrote"):
            write_folder(out, files, overwrite=True)
    assert (project / "notes.txt").read_text() == "mine" and a_file.read_text() == "mine"


@pytest.mark.parametrize("key, value", [("vocab_size", 10**12), ("n_positions", 10**12), ("n_layer", 10**9)])
def test_sizes_the_weights_cannot_hold_are_refused_before_anything_is_built(tmp_path, key, value):
    # a mistyped size allocated terabytes (MemoryError) or listed a billion layers (a hang)
    import json

    transformers = pytest.importorskip("transformers")
    config = transformers.GPT2Config(n_layer=1, n_head=2, n_embd=8, vocab_size=11, n_positions=16)
    transformers.GPT2LMHeadModel(config).save_pretrained(tmp_path)
    settings = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**settings, key: value}))
    with pytest.raises(ValueError, match="describes a model of at least .* parameters, but the folder's weights hold"):
        nn.GPT.from_pretrained(tmp_path)
