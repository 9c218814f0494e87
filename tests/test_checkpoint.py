"""Checkpoints: round trip of weights, config and optimizer state; atomic writes; clear errors."""

import os

import numpy as np
import pytest

import minitorch_attn as mt
import minitorch_attn.functional as F
from minitorch_attn import nn, optim
from minitorch_attn.app import checkpoint

CONFIG = dict(vocab_size=11, d_model=16, num_heads=2, num_layers=1, max_seq_len=8)


def _trained(steps=2):
    model = nn.GPT(**CONFIG)
    opt = optim.AdamW(model.parameters(), lr=1e-2)
    idx = mt.randint(0, 11, (2, 8))
    for _ in range(steps):
        opt.zero_grad()
        F.cross_entropy(model(idx).reshape(-1, 11), idx.reshape(-1)).backward()
        opt.step()
    return model, opt, idx


def test_round_trip_restores_weights_config_extra_and_optimizer(tmp_path):
    model, opt, idx = _trained()
    path = tmp_path / "model.npz"
    checkpoint.save(path, model, opt, config=model.config, vocab="abc", step=2)
    loaded = checkpoint.load(path)
    assert loaded["config"] == model.config and loaded["extra"] == {"vocab": "abc", "step": 2}

    clone = nn.GPT(**loaded["config"])
    clone_opt = optim.AdamW(clone.parameters(), lr=1e-2)
    checkpoint.restore(loaded, clone, clone_opt)
    np.testing.assert_array_equal(clone(idx).numpy(), model(idx).numpy())

    for m, o in [(model, opt), (clone, clone_opt)]:  # one more step continues identically
        o.zero_grad()
        F.cross_entropy(m(idx).reshape(-1, 11), idx.reshape(-1)).backward()
        o.step()
    np.testing.assert_array_equal(clone(idx).numpy(), model(idx).numpy())


def test_file_is_plain_arrays_readable_without_pickle(tmp_path):
    model, opt, _ = _trained(1)
    path = tmp_path / "model.npz"
    checkpoint.save(path, model, opt, config=model.config)
    with np.load(path, allow_pickle=False) as data:
        assert "meta" in data.files and data["meta"].dtype == np.uint8
        assert "model/token_embedding.weight" in data.files
        assert any(name.startswith("optim/") for name in data.files)


def test_missing_truncated_and_foreign_files_raise_clear_errors(tmp_path):
    with pytest.raises(checkpoint.CheckpointError, match="no checkpoint"):
        checkpoint.load(tmp_path / "nope.npz")
    model, opt, _ = _trained(1)
    path = tmp_path / "model.npz"
    checkpoint.save(path, model, opt, config=model.config)
    data = path.read_bytes()
    truncated = tmp_path / "truncated.npz"
    truncated.write_bytes(data[: len(data) // 2])
    with pytest.raises(checkpoint.CheckpointError, match="truncated or corrupt"):
        checkpoint.load(truncated)
    garbage = tmp_path / "garbage.npz"
    garbage.write_bytes(b"not a zip file at all")
    with pytest.raises(checkpoint.CheckpointError, match="truncated or corrupt"):
        checkpoint.load(garbage)
    foreign = tmp_path / "foreign.npz"
    np.savez(foreign, weights=np.zeros(3))
    with pytest.raises(checkpoint.CheckpointError, match="no 'meta' record"):
        checkpoint.load(foreign)


def test_mismatched_model_lists_the_differences(tmp_path):
    model, _, _ = _trained(0)
    path = tmp_path / "model.npz"
    checkpoint.save(path, model, config=model.config)
    wider = nn.GPT(**{**CONFIG, "d_model": 8})
    with pytest.raises(
        checkpoint.CheckpointError, match=r"token_embedding.weight: checkpoint \(11, 16\), model \(11, 8\)"
    ):
        checkpoint.restore(checkpoint.load(path), wider)
    deeper = nn.GPT(**{**CONFIG, "num_layers": 2})
    with pytest.raises(checkpoint.CheckpointError, match=r"missing keys \['blocks.1"):
        checkpoint.restore(checkpoint.load(path), deeper)
    with pytest.raises(checkpoint.CheckpointError, match="holds AdamW state, not SGD"):
        saved = checkpoint.load(path)
        saved["optimizer"] = {"type": "AdamW", "param_groups": [], "state": {}}
        checkpoint.restore(saved, model, optim.SGD(model.parameters()))


def test_failed_save_leaves_the_old_file_and_no_temporary(tmp_path, monkeypatch):
    model, opt, _ = _trained(1)
    path = tmp_path / "model.npz"
    checkpoint.save(path, model, opt, config=model.config)
    before = path.read_bytes()

    def crash(*args, **kwargs):
        raise KeyboardInterrupt  # e.g. Ctrl-C while the file is being written

    monkeypatch.setattr(np, "savez", crash)
    with pytest.raises(KeyboardInterrupt):
        checkpoint.save(path, model, opt, config=model.config)
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["model.npz"]
    monkeypatch.undo()
    with pytest.raises(TypeError):  # not JSON: nothing is written either
        checkpoint.save(tmp_path / "other.npz", model, config={"bad": object()})
    assert os.listdir(tmp_path) == ["model.npz"]


def test_a_saved_checkpoint_has_the_usual_file_mode(tmp_path):
    import os
    import stat

    from minitorch_attn import nn
    from minitorch_attn.app import checkpoint

    path = tmp_path / "c.npz"
    checkpoint.save(path, nn.Linear(2, 2))
    mask = os.umask(0)
    os.umask(mask)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o666 & ~mask


def _with_meta(path, meta, **arrays):
    import json

    np.savez(path, meta=np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8), **arrays)
    return path


def test_other_files_and_garbled_records_raise_checkpoint_errors(tmp_path):
    np.save(tmp_path / "array.npy", np.zeros(3))
    (tmp_path / "notes.txt").write_text("hello")
    for path in (tmp_path / "array.npy", tmp_path / "notes.txt"):
        with pytest.raises(checkpoint.CheckpointError, match=r"not an \.npz \(zip\) archive"):
            checkpoint.load(path)
    np.savez(tmp_path / "objects.npz", meta=np.array([object()], dtype=object))
    with pytest.raises(checkpoint.CheckpointError, match="pickled Python objects") as error:
        checkpoint.load(tmp_path / "objects.npz")
    assert "allow_pickle" not in str(error.value)
    with pytest.raises(checkpoint.CheckpointError, match="is a folder"):
        checkpoint.load(tmp_path)
    garbled = [
        ([1, 2], "a JSON list"),
        (3, "a JSON int"),
        ({"format_version": 1, "config": {}, "extra": {}}, "missing: optimizer"),
    ]
    for meta, message in garbled:
        with pytest.raises(checkpoint.CheckpointError, match=message):
            checkpoint.load(_with_meta(tmp_path / "meta.npz", meta))
    bad_optimizer = {
        "format_version": 1,
        "config": {},
        "extra": {},
        "optimizer": {"type": "SGD", "param_groups": [], "scalars": {}},
    }
    with pytest.raises(checkpoint.CheckpointError, match="corrupt optimizer record"):
        checkpoint.load(_with_meta(tmp_path / "optim.npz", bad_optimizer, **{"optim/x/m": np.zeros(2)}))


def test_save_to_an_unusable_place_names_the_path_and_keeps_what_is_there(tmp_path):
    model = nn.Linear(2, 2)
    with pytest.raises(checkpoint.CheckpointError, match="nofolder.*does not exist") as error:
        checkpoint.save(tmp_path / "nofolder" / "x.npz", model)
    assert ".tmp-" not in str(error.value)
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "keep.txt").write_text("kept")
    with pytest.raises(checkpoint.CheckpointError, match="is a folder"):
        checkpoint.save(tmp_path / "runs", model)
    assert (tmp_path / "runs" / "keep.txt").read_text() == "kept"
    path = tmp_path / "model.npz"
    checkpoint.save(path, model)
    before = path.read_bytes()
    with pytest.raises(TypeError, match="needs a Module.*NoneType"):
        checkpoint.save(path, None)
    with pytest.raises(TypeError, match="optimizer must be an Optimizer"):
        checkpoint.save(path, model, optimizer={})
    assert path.read_bytes() == before


def test_a_failed_write_is_a_checkpoint_error_naming_the_path(tmp_path, monkeypatch):
    def disk_full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(np, "savez", disk_full)
    with pytest.raises(checkpoint.CheckpointError, match=r"model\.npz.*No space left"):
        checkpoint.save(tmp_path / "model.npz", nn.Linear(2, 2))
    assert os.listdir(tmp_path) == []
