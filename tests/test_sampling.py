"""Sampling: the KV cache gives the logits of a full recomputation, the sampling options are
checked, and only checkpoints of the training job load."""

import io

import numpy as np
import pytest

import minitorch_attn as mt
from minitorch_attn import nn
from minitorch_attn.app import checkpoint as ckpt
from minitorch_attn.app import sampling
from minitorch_attn.app.data import CharVocab
from tests.conftest import float64_tolerance


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


@pytest.mark.parametrize(
    "options, message",
    [
        (dict(top_k=0), "top_k must be an int >= 1"),
        (dict(top_k=-1), "top_k must be an int >= 1"),
        (dict(temperature=-1.0), "temperature must be a finite number >= 0"),
        (dict(temperature=float("nan")), "temperature must be a finite number >= 0"),
        (dict(max_new_tokens=-5), "max_new_tokens must be an int >= 0"),
        (dict(top_p=0.0), r"top_p must be a number in \(0, 1\]"),
        (dict(top_p=1.5), r"top_p must be a number in \(0, 1\]"),
        (dict(top_p=float("nan")), r"top_p must be a number in \(0, 1\]"),
    ],
)
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


# ---- nucleus (top-p) sampling on hand-made distributions --------------------------------------------
PROBS = np.array([0.5, 0.3, 0.15, 0.05])


def _kept(p):
    return [int(i) for i in np.flatnonzero(p)]


@pytest.mark.parametrize(
    "top_p, kept",
    [
        (0.45, [0]),  # the likeliest alone crosses 0.45
        (0.6, [0, 1]),  # 0.5 < 0.6: the token that crosses (0.3, reaching 0.8) is kept
        (0.9, [0, 1, 2]),
        (0.96, [0, 1, 2, 3]),
        (1.0, [0, 1, 2, 3]),
    ],
)
def test_top_p_keeps_the_likeliest_tokens_up_to_the_one_that_crosses_the_threshold(top_p, kept):
    p = sampling.sampling_probabilities(np.log(PROBS), top_p=top_p)
    assert _kept(p) == kept
    np.testing.assert_allclose(p[kept], PROBS[kept] / PROBS[kept].sum(), rtol=1e-12)  # renormalized


def test_top_p_after_temperature_and_top_k():
    # temperature 0.5 squares the probabilities: 0.685, 0.247, 0.062, 0.007
    assert _kept(sampling.sampling_probabilities(np.log(PROBS), temperature=0.5, top_p=0.9)) == [0, 1]
    # top-k 3 first (0.526, 0.316, 0.158), then top-p 0.5: the first crosses already
    assert _kept(sampling.sampling_probabilities(np.log(PROBS), top_k=3, top_p=0.5)) == [0]
    assert _kept(sampling.sampling_probabilities(np.log(PROBS), top_k=2, top_p=0.9)) == [0, 1]


def test_top_p_takes_equal_probabilities_in_order_of_id():
    p = sampling.sampling_probabilities(np.zeros(4), top_p=0.3)
    np.testing.assert_allclose(p, [0.5, 0.5, 0, 0])


def test_sampling_with_top_p_draws_only_kept_tokens_in_their_proportions():
    rng = np.random.default_rng(0)
    draws = np.array([sampling._next_id(np.log(PROBS), 1.0, None, rng, top_p=0.6) for _ in range(4000)])
    assert set(draws.tolist()) == {0, 1}
    assert np.mean(draws == 0) == pytest.approx(0.5 / 0.8, abs=0.03)


def test_generation_takes_top_p():
    model = _tiny_gpt()
    one = sampling.generate_ids(model, [1, 2], 12, temperature=1.0, top_p=1e-9, rng=np.random.default_rng(0))
    greedy = sampling.generate_ids(model, [1, 2], 12, temperature=0)
    assert one == greedy  # a nucleus of one token is the likeliest token
    streamed = io.StringIO()
    text = sampling.generate(model, CharVocab("abcdefghi"), "ab", max_new_tokens=6, top_p=0.5, seed=3, stream=streamed)
    assert streamed.getvalue() == text and len(text) == 8


def _float64_gpt(rng, **options):
    """A small GPT in float64 with weights large enough to give distinct logits (std 0.3)."""
    model = nn.GPT(11, d_model=16, num_heads=4, num_layers=2, **options)
    for p in model.parameters():
        p.data = mt.tensor(rng.normal(0.0, 0.3, p.shape), dtype="float64").data
    return model


@pytest.mark.parametrize(
    "pos_encoding, max_seq_len, prompt",
    [
        ("learned", 2, [1, 2]),  # the case of the report: positions run out at once
        ("learned", 4, [3, 1, 4]),
        ("rope", 3, [1, 2]),  # the window slides from the third new token on
        ("rope", 4, [5, 3, 1, 4, 1, 5, 9]),  # a prompt longer than the window
    ],
)
def test_cached_generation_equals_uncached_past_max_seq_len(rng, pos_encoding, max_seq_len, prompt):
    """Greedy steps in float64 well past max_seq_len: the same ids and, at every step, the same
    logits (learned positions: the last max_seq_len tokens; rope: a sliding window)."""
    model = _float64_gpt(rng, max_seq_len=max_seq_len, pos_encoding=pos_encoding, num_kv_heads=2)
    steps = 4 * max_seq_len
    cached, logits_cached = sampling.generate_ids(
        model, prompt, steps, temperature=0, use_cache=True, return_logits=True
    )
    plain, logits_plain = sampling.generate_ids(
        model, prompt, steps, temperature=0, use_cache=False, return_logits=True
    )
    reference = np.array(logits_plain)
    assert cached == plain
    np.testing.assert_allclose(
        np.array(logits_cached), reference, rtol=0, atol=float64_tolerance(reference, n_ops=100, dtype="float64")
    )


def test_a_checkpoint_without_pos_encoding_loads_with_learned_positions(tmp_path):
    model = _tiny_gpt()
    config = {k: v for k, v in model.config.items() if k not in ("pos_encoding", "rope_base")}
    ckpt.save(tmp_path / "old.npz", model, config=config, vocab="abcdefghi", step=0, history={})
    loaded, _, _ = sampling.load_model(tmp_path / "old.npz")
    assert loaded.pos_encoding == "learned"
    idx = mt.tensor([[1, 2, 3]])
    np.testing.assert_array_equal(loaded(idx).numpy(), model(idx).numpy())


def test_an_interrupted_sample_puts_the_model_back_in_training_mode():
    model = nn.GPT(vocab_size=5, d_model=8, num_heads=2, num_layers=1, max_seq_len=8, dropout=0.1)

    def ctrl_c(_token):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        sampling.generate_ids(model, [1], 5, on_token=ctrl_c)
    assert all(m.training for m in model.modules())  # its dropout still works in the next step
    with nn.in_eval_mode(model):
        assert not any(m.training for m in model.modules())
    model.eval()
    with nn.in_eval_mode(model):
        pass
    assert not model.training  # the mode it had, not always training
    with pytest.raises(TypeError, match="needs a Module"):
        with nn.in_eval_mode("model"):
            pass
