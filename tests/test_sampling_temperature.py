"""Any positive temperature, however small, is greedy decoding in the limit and never
NaN; the training progress bar goes to a terminal only, the log lines everywhere."""

import io

import numpy as np
import pytest

from minitorch_attn import nn
from minitorch_attn.app.sampling import _next_id, generate_ids, sampling_probabilities
from minitorch_attn.app.train import _Progress

TINY = [1e-2, 1e-8, 1e-30, 1e-200, 1e-300, 5e-324]


@pytest.mark.parametrize("temperature", TINY)
@pytest.mark.parametrize("filters", [{}, {"top_k": 3}, {"top_p": 0.9}, {"top_k": 2, "top_p": 0.5}])
def test_a_tiny_temperature_puts_all_the_mass_on_the_likeliest(temperature, filters):
    rng = np.random.default_rng(0)
    for _ in range(20):
        logits = rng.standard_normal(7) * 20 + rng.uniform(-1e6, 1e6)
        logits[rng.integers(7)] = -np.inf
        p = sampling_probabilities(logits, temperature, **filters)
        assert np.all(np.isfinite(p))
        if temperature < 1e-3 or np.sort(logits)[-1] - np.sort(logits)[-2] > 1.0:
            assert p[np.argmax(logits)] == 1.0
        assert _next_id(logits, temperature, filters.get("top_k"), rng, filters.get("top_p")) == np.argmax(logits)


def test_huge_logits_at_a_tiny_temperature():
    p = sampling_probabilities([1e300, -1e300, 3.0], 1e-300)
    np.testing.assert_array_equal(p, [1.0, 0.0, 0.0])


def test_ties_for_the_maximum_share_it():
    np.testing.assert_array_equal(sampling_probabilities([2.0, 5.0, 5.0], 1e-300), [0.0, 0.5, 0.5])


@pytest.mark.parametrize("temperature", [1e-30, 5e-324])
def test_generation_at_a_tiny_temperature_is_greedy(temperature):
    model = nn.GPT(9, d_model=16, num_heads=2, num_layers=2, max_seq_len=12)
    greedy = generate_ids(model, [1, 2, 3], 8, temperature=0)
    tiny = generate_ids(model, [1, 2, 3], 8, temperature=temperature, rng=np.random.default_rng(1))
    assert tiny == greedy


def _run_bar(monkeypatch, tty, disable):
    stream = io.StringIO()
    stream.isatty = lambda: tty
    monkeypatch.setattr("sys.stderr", stream)
    progress = _Progress(50, None, 0, disable=disable)
    for step in range(50):
        progress.update(step, 0.01 * step, f"loss {step}")
    progress.close(0.5)
    return stream.getvalue()


def test_the_bar_goes_to_a_terminal_only(monkeypatch):
    assert _run_bar(monkeypatch, tty=False, disable=None) == ""  # a log file: no bar
    assert "50/50" in _run_bar(monkeypatch, tty=True, disable=None)  # a terminal: the bar
    assert _run_bar(monkeypatch, tty=True, disable=True) == ""  # --quiet


def test_the_training_job_leaves_the_decision_to_tqdm():
    import inspect

    from minitorch_attn.app import train

    assert "disable=True if args.quiet else None" in inspect.getsource(
        train.run_training
    ) or "disable=True if args.quiet else None" in inspect.getsource(train)
