"""Sampling: the KV cache gives the logits of a full recomputation, the sampling options are
checked, and only checkpoints of the training job load."""

import numpy as np
import pytest

from minitorch_attn import checkpoint as ckpt
from minitorch_attn import nn, sampling
from minitorch_attn.data import CharVocab


def _tiny_gpt(vocab_size=9, max_seq_len=12):
    return nn.GPT(vocab_size, d_model=16, num_heads=2, num_layers=2, max_seq_len=max_seq_len)


def test_cached_and_uncached_generation_give_the_same_logits():
    model = _tiny_gpt()
    prompt = [1, 2, 3, 4]
    cached, logits_cached = sampling.generate_ids(model, prompt, 8, temperature=0, use_cache=True, return_logits=True)
    plain, logits_plain = sampling.generate_ids(model, prompt, 8, temperature=0, use_cache=False, return_logits=True)
    assert cached == plain
    np.testing.assert_allclose(np.array(logits_cached), np.array(logits_plain), rtol=1e-4, atol=1e-5)


def test_generation_runs_past_the_context_and_samples_top_k():
    model = _tiny_gpt(max_seq_len=6)
    rng = np.random.default_rng(0)
    new = sampling.generate_ids(model, [0], 20, temperature=1.0, top_k=2, rng=rng)
    assert len(new) == 20 and all(0 <= i < 9 for i in new)
    vocab = CharVocab("abcdefghi")
    text = sampling.generate(model, vocab, "a€b", max_new_tokens=5, seed=1)  # unseen € does not crash
    assert text.startswith("a€b") and len(text) == 8


@pytest.mark.parametrize("options, message", [
    (dict(top_k=0), "top_k must be an int >= 1"), (dict(top_k=-1), "top_k must be an int >= 1"),
    (dict(temperature=-1.0), "temperature must be a finite number >= 0"),
    (dict(temperature=float("nan")), "temperature must be a finite number >= 0"),
    (dict(max_new_tokens=-5), "max_new_tokens must be an int >= 0"),
])
def test_generate_rejects_bad_sampling_options(options, message):
    model, vocab = _tiny_gpt(), CharVocab("abcdefghi")
    with pytest.raises(ValueError, match=message):
        sampling.generate(model, vocab, "ab", **{"max_new_tokens": 3, **options})
    text = sampling.generate(model, vocab, "ab", max_new_tokens=3, top_k=100, seed=0)  # k > vocabulary: all
    assert len(text) == 5


def test_a_checkpoint_whose_vocabulary_does_not_fit_its_model_is_refused(tmp_path):
    model = _tiny_gpt()
    path = tmp_path / "c.npz"
    ckpt.save(path, model, config=model.config, vocab="abc", step=0, history={})
    with pytest.raises(ckpt.CheckpointError, match="vocabulary of 3 characters but a model with vocab_size 9"):
        sampling.load_model(path)
    ckpt.save(path, model, config=model.config, vocab="abcdefghi")
    with pytest.raises(ckpt.CheckpointError, match="has no step, history"):
        sampling.load_model(path)
