"""The training job: data helpers, the bigram baseline, sampling with a KV cache, and an
end-to-end run of the ``train`` and ``sample`` commands on a few kilobytes of text."""

import importlib.util
import json
import math

import numpy as np
import pytest

from minitorch_attn import cli, nn, threads, train


def test_vocab_round_trip_and_unknown_characters():
    vocab = train.CharVocab.from_text("hello world")
    assert vocab.chars == " dehlorw" and len(vocab) == 8
    assert vocab.decode(vocab.encode("world hello")) == "world hello"
    assert vocab.decode(vocab.encode("héllo")) == "h llo"      # é was never seen: a space
    assert vocab.unknown_count == 1
    with pytest.raises(ValueError):
        train.CharVocab("aa")


def test_split_and_batches():
    ids = np.arange(100, dtype=np.int64)
    tr, va = train.split_ids(ids, 0.1)
    assert len(tr) == 90 and va[0] == 90
    x, y = train.get_batch(tr, 4, 8, np.random.default_rng(0))
    assert x.shape == y.shape == (4, 8) and x.dtype == "int64"
    np.testing.assert_array_equal(x.numpy()[:, 1:], y.numpy()[:, :-1])
    with pytest.raises(ValueError, match="too few"):
        train.get_batch(ids[:5], 2, 8, np.random.default_rng(0))


def test_bigram_baseline_by_hand():
    # train "abab...": P(b|a) = (n_ab + 1) / (n_a + 2); val "ab" is one a->b transition
    tr = np.array([0, 1] * 5)
    bpc = train.bigram_bpc(tr, np.array([0, 1]), 2)
    assert bpc == pytest.approx(-math.log2((5 + 1) / (5 + 2)))


def test_default_corpus_is_the_python_reference():
    text = train.load_corpus()
    assert len(text) > 400_000 and "lambda" in text


def _tiny_gpt(vocab_size=9, max_seq_len=12):
    return nn.GPT(vocab_size, d_model=16, num_heads=2, num_layers=2, max_seq_len=max_seq_len)


def test_cached_and_uncached_generation_give_the_same_logits():
    model = _tiny_gpt()
    prompt = [1, 2, 3, 4]
    cached, logits_cached = train.generate_ids(model, prompt, 8, temperature=0, use_cache=True, return_logits=True)
    plain, logits_plain = train.generate_ids(model, prompt, 8, temperature=0, use_cache=False, return_logits=True)
    assert cached == plain
    np.testing.assert_allclose(np.array(logits_cached), np.array(logits_plain), rtol=1e-4, atol=1e-5)


def test_generation_runs_past_the_context_and_samples_top_k():
    model = _tiny_gpt(max_seq_len=6)
    rng = np.random.default_rng(0)
    new = train.generate_ids(model, [0], 20, temperature=1.0, top_k=2, rng=rng)
    assert len(new) == 20 and all(0 <= i < 9 for i in new)
    vocab = train.CharVocab("abcdefghi")
    text = train.generate(model, vocab, "a€b", max_new_tokens=5, seed=1)  # unseen € does not crash
    assert text.startswith("a€b") and len(text) == 8


@pytest.fixture
def small_text(tmp_path):
    path = tmp_path / "corpus.txt"
    path.write_text(train.load_corpus()[:6000], encoding="utf-8")
    return path


TINY = ["--d-model", "32", "--num-layers", "1", "--num-heads", "2", "--block-size", "32",
        "--batch-size", "8", "--lr", "1e-2", "--warmup-steps", "5", "--eval-interval", "20",
        "--eval-windows", "4", "--sample-tokens", "20", "--time-budget", "0", "--quiet"]


def test_train_and_sample_end_to_end(small_text, tmp_path, capsys):
    out = tmp_path / "run"
    assert cli.main(["train", "--text", str(small_text), "--steps", "40", "--out", str(out), *TINY]) == 0
    metrics = json.loads((out / "metrics.json").read_text())
    for key in ("steps", "tokens_per_s", "val_bpc", "bigram_bpc", "wall_s"):
        assert key in metrics
    assert metrics["steps"] == 40 and metrics["tokens_per_s"] > 0
    assert (out / "checkpoint.npz").exists()
    if importlib.util.find_spec("matplotlib"):
        assert (out / "loss.png").exists() and (out / "attention.png").exists()
    history = train.ckpt.load(out / "checkpoint.npz")["extra"]["history"]
    first, last = np.mean(history["train_bpc"][:5]), np.mean(history["train_bpc"][-5:])
    assert last < first - 1.0, (first, last)  # the loss falls

    capsys.readouterr()
    assert cli.main(["sample", "--checkpoint", str(out / "checkpoint.npz"), "--prompt", "The ",
                     "--max-new-tokens", "15", "--top-k", "5", "--temperature", "0.5", "--seed", "0"]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("The ") and len(printed.rstrip("\n")) >= 19

    resumed = tmp_path / "resumed"
    cli.main(["train", "--text", str(small_text), "--steps", "5", "--out", str(resumed),
              "--resume", str(out / "checkpoint.npz"), *TINY])
    assert json.loads((resumed / "metrics.json").read_text())["steps"] == 45
    # the schedule restarted from the --lr given, not from where the first run's decay ended
    groups = train.ckpt.load(resumed / "checkpoint.npz")["optimizer"]["param_groups"]
    assert groups[0]["lr"] == pytest.approx(1e-2)  # the 5th of 5 warmup steps: the full rate


def test_ctrl_c_saves_a_checkpoint(small_text, tmp_path, monkeypatch):
    real_get_batch, calls = train.get_batch, []

    def interrupt_on_the_fourth_batch(*args, **kwargs):
        calls.append(1)
        if len(calls) == 4:
            raise KeyboardInterrupt
        return real_get_batch(*args, **kwargs)

    monkeypatch.setattr(train, "get_batch", interrupt_on_the_fourth_batch)
    out = tmp_path / "run"
    cli.main(["train", "--text", str(small_text), "--steps", "100", "--out", str(out), *TINY])
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["interrupted"] and metrics["steps"] == 3
    assert train.ckpt.load(out / "checkpoint.npz")["extra"]["step"] == 3


def test_sample_reports_a_bad_checkpoint(tmp_path, capsys):
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"oops")
    assert cli.main(["sample", "--checkpoint", str(bad)]) == 2
    assert "truncated or corrupt" in capsys.readouterr().err


@pytest.mark.parametrize("options, message", [
    (dict(top_k=0), "top_k must be an int >= 1"), (dict(top_k=-1), "top_k must be an int >= 1"),
    (dict(temperature=-1.0), "temperature must be a finite number >= 0"),
    (dict(temperature=float("nan")), "temperature must be a finite number >= 0"),
    (dict(max_new_tokens=-5), "max_new_tokens must be an int >= 0"),
])
def test_generate_rejects_bad_sampling_options(options, message):
    model, vocab = _tiny_gpt(), train.CharVocab("abcdefghi")
    with pytest.raises(ValueError, match=message):
        train.generate(model, vocab, "ab", **{"max_new_tokens": 3, **options})
    text = train.generate(model, vocab, "ab", max_new_tokens=3, top_k=100, seed=0)  # k > vocabulary: all
    assert len(text) == 5


def test_a_checkpoint_whose_vocabulary_does_not_fit_its_model_is_refused(tmp_path):
    model = _tiny_gpt()
    path = tmp_path / "c.npz"
    train.ckpt.save(path, model, config=model.config, vocab="abc", step=0, history={})
    with pytest.raises(train.ckpt.CheckpointError, match="vocabulary of 3 characters but a model with vocab_size 9"):
        train.load_model(path)
    train.ckpt.save(path, model, config=model.config, vocab="abcdefghi")
    with pytest.raises(train.ckpt.CheckpointError, match="has no step, history"):
        train.load_model(path)


def test_train_times_blas_threads_and_threads_n_fixes_them(small_text, tmp_path, monkeypatch):
    """Without --threads the loop alternates one BLAS thread and one per core (a trial of
    3 steps each), then keeps the faster; --threads 1 runs every step with one thread."""
    monkeypatch.setattr(threads, "available_cores", lambda: 2)
    monkeypatch.setattr(threads, "_requested", None)
    before = threads.blas_thread_count()
    try:
        chosen = tmp_path / "chosen"
        assert cli.main(["train", "--text", str(small_text), "--steps", "8", "--out", str(chosen), *TINY]) == 0
        counts = json.loads((chosen / "metrics.json").read_text())["blas_threads"]
        assert counts["1"] >= 3 and counts["2"] >= 3 and counts["1"] + counts["2"] == 8
        fixed = tmp_path / "fixed"
        assert cli.main(["train", "--text", str(small_text), "--steps", "8", "--out", str(fixed), "--threads", "1",
                         *TINY]) == 0
        assert json.loads((fixed / "metrics.json").read_text())["blas_threads"] == {"1": 8}
    finally:
        threads.set_num_threads(None)
        threads._set_blas(before)

