"""The training job end to end: the ``train`` and ``sample`` commands on a few kilobytes of
text, resuming, and Ctrl-C."""

import importlib.util
import json

import numpy as np
import pytest

import minitorch_attn as mt
from minitorch_attn import nn, optim
from minitorch_attn.app import checkpoint as ckpt
from minitorch_attn.app import cli, data, sampling, train, train_pictures
from minitorch_attn.speed import threads


@pytest.fixture
def small_text(tmp_path):
    path = tmp_path / "corpus.txt"
    path.write_text(data.load_corpus()[:6000], encoding="utf-8")
    return path


TINY = [
    "--d-model",
    "32",
    "--num-layers",
    "1",
    "--num-heads",
    "2",
    "--block-size",
    "32",
    "--batch-size",
    "8",
    "--lr",
    "1e-2",
    "--warmup-steps",
    "5",
    "--eval-interval",
    "20",
    "--eval-windows",
    "4",
    "--sample-tokens",
    "20",
    "--time-budget",
    "0",
    "--quiet",
]


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
    history = ckpt.load(out / "checkpoint.npz")["extra"]["history"]
    assert history["val_step"] == [20, 40]  # the estimates only: the whole split's value is in metrics.json
    first, last = np.mean(history["train_bpc"][:5]), np.mean(history["train_bpc"][-5:])
    assert last < first - 1.0, (first, last)  # the loss falls
    # the cosine decay ends at 0 (--min-lr-ratio's default): the rate left for a next step
    assert ckpt.load(out / "checkpoint.npz")["optimizer"]["param_groups"][0]["lr"] == pytest.approx(0.0, abs=1e-9)

    capsys.readouterr()
    assert (
        cli.main(
            [
                "sample",
                "--checkpoint",
                str(out / "checkpoint.npz"),
                "--prompt",
                "The ",
                "--max-new-tokens",
                "15",
                "--top-k",
                "5",
                "--top-p",
                "0.9",
                "--temperature",
                "0.5",
                "--seed",
                "0",
            ]
        )
        == 0
    )
    printed = capsys.readouterr().out
    assert printed.startswith("The ") and len(printed.rstrip("\n")) >= 19

    resumed = tmp_path / "resumed"
    cli.main(
        [
            "train",
            "--text",
            str(small_text),
            "--steps",
            "5",
            "--out",
            str(resumed),
            "--resume",
            str(out / "checkpoint.npz"),
            *TINY,
        ]
    )
    assert json.loads((resumed / "metrics.json").read_text())["steps"] == 45
    # the schedule restarted from the --lr given, not from where the first run's decay ended
    groups = ckpt.load(resumed / "checkpoint.npz")["optimizer"]["param_groups"]
    assert groups[0]["lr"] == pytest.approx(1e-2)  # the 5th of 5 warmup steps: the full rate


def test_ctrl_c_saves_a_checkpoint_and_exits_130(small_text, tmp_path, monkeypatch):
    real_get_batch, calls = train.get_batch, []

    def interrupt_on_the_fourth_batch(*args, **kwargs):
        calls.append(1)
        if len(calls) == 4:
            raise KeyboardInterrupt
        return real_get_batch(*args, **kwargs)

    monkeypatch.setattr(train, "get_batch", interrupt_on_the_fourth_batch)
    out = tmp_path / "run"
    assert cli.main(["train", "--text", str(small_text), "--steps", "100", "--out", str(out), *TINY]) == 130
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["interrupted"] and metrics["steps"] == 3
    assert ckpt.load(out / "checkpoint.npz")["extra"]["step"] == 3


def test_ctrl_c_during_an_optimizer_step_lets_the_step_land_whole(small_text, tmp_path, monkeypatch):
    # Ctrl-C noted in the middle of step 5 (as a signal is: raised at the next line of Python):
    # the weights, moments, step count and history all include step 5, or none would
    import _thread

    real_update, updates = optim.AdamW._update, []

    def update_noting_ctrl_c(self, *args):  # called once per parameter
        updates.append(1)
        if len(updates) == 4 * len(self.state) + 1:  # the first parameter of step 5
            _thread.interrupt_main()
        return real_update(self, *args)

    monkeypatch.setattr(optim.AdamW, "_update", update_noting_ctrl_c)
    out = tmp_path / "run"
    assert cli.main(["train", "--text", str(small_text), "--steps", "100", "--out", str(out), *TINY]) == 130
    saved = ckpt.load(out / "checkpoint.npz")
    history = saved["extra"]["history"]
    assert saved["extra"]["step"] == 5 and history["step"] == [1, 2, 3, 4, 5] and len(history["train_bpc"]) == 5
    counts = {int(s["step"]) for s in saved["optimizer"]["state"].values()}
    assert counts == {5}, counts  # every parameter's Adam moments took step 5


def test_sample_reports_a_bad_checkpoint(tmp_path, capsys):
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"oops")
    assert cli.main(["sample", "--checkpoint", str(bad)]) == 2
    assert "truncated or corrupt" in capsys.readouterr().err


def test_weight_decay_reaches_every_matrix_position_embeddings_included_and_no_vector():
    model = nn.GPT(9, d_model=16, num_heads=2, num_layers=1, max_seq_len=8)
    opt = train.make_optimizer(model, lr=0.1, weight_decay=0.5)
    decayed = {id(p) for group in opt.param_groups if group["weight_decay"] for p in group["params"]}
    names = {name for name, p in model.named_parameters() if id(p) in decayed}
    assert {"position_embedding.weight", "token_embedding.weight", "blocks.0.attn.W_o.weight"} <= names
    assert all((id(p) in decayed) == (p.ndim >= 2) for p in model.parameters())
    before = {name: p.numpy().copy() for name, p in model.named_parameters()}
    for p in model.parameters():
        p.grad = mt.zeros(*p.shape)  # the Adam step is 0: only the decay moves a weight
    opt.step()
    for name, p in model.named_parameters():
        factor = 1 - 0.1 * 0.5 if p.ndim >= 2 else 1.0
        np.testing.assert_allclose(p.numpy(), before[name] * factor, rtol=1e-6, err_msg=name)


class _CopyModel(nn.Module):
    """A stand-in model for a text with period ``P``: at position ``t`` of a window it puts a
    logit of ``L`` on the character ``P - 1`` positions back (which the period makes the
    next one), and equal logits where it has not seen that many characters (``t < P - 1``)."""

    P, L, V = 6, 30.0, 7

    def forward(self, x):
        x = np.asarray(x.data)
        logits = np.zeros(x.shape + (self.V,))
        for t in range(self.P - 1, x.shape[1]):
            logits[np.arange(x.shape[0]), t, x[:, t - (self.P - 1)]] = self.L
        return mt.tensor(logits)


@pytest.mark.parametrize("length", [41, 46, 200, 203])
def test_validation_scores_each_character_once_and_from_half_a_context(length):
    # block 16, stride 8: only the first window's first P - 1 = 5 positions lack the context
    # that predicts them; windows that do not overlap would lose 5 of every 16, and a text
    # whose length is not a whole number of strides still has its last characters scored
    m = _CopyModel
    ids = np.arange(length) % m.P
    blind, seen = np.log(m.V), np.log1p((m.V - 1) * np.exp(-m.L))  # nats per character
    expected = ((m.P - 1) * blind + (length - 1 - (m.P - 1)) * seen) / (length - 1) / np.log(2)
    model = m()
    got = train.evaluate_bpc(model, ids, block_size=16, batch_size=3)
    np.testing.assert_allclose(got, expected, rtol=4 * np.finfo(np.float64).eps * length)
    assert model.training  # restored


def test_a_validation_estimate_scores_windows_spread_over_the_text():
    ids = np.arange(401) % _CopyModel.P  # 400 predictions: 49 windows, none shorter
    whole = train.evaluate_bpc(_CopyModel(), ids, block_size=16)
    assert train.evaluate_bpc(_CopyModel(), ids, block_size=16, max_windows=10**6) == whole
    # 4 windows, the first of them whole: 16 + 3 * 8 predictions, 5 of them blind
    m = _CopyModel
    estimate = (5 * np.log(m.V) + 35 * np.log1p((m.V - 1) * np.exp(-m.L))) / 40 / np.log(2)
    np.testing.assert_allclose(
        train.evaluate_bpc(_CopyModel(), ids, block_size=16, max_windows=4),
        estimate,
        rtol=4 * np.finfo(np.float64).eps * 40,
    )
    for too_few in (ids[:16], ids[:0], []):  # [] reads as float64: still "too few"
        with pytest.raises(ValueError, match="too few for one window of 16"):
            train.evaluate_bpc(_CopyModel(), too_few, block_size=16)


def test_validation_takes_ids_of_any_integer_dtype_and_refuses_other_input():
    ids = np.arange(203) % _CopyModel.P
    whole = train.evaluate_bpc(_CopyModel(), ids, block_size=16)
    for dtype in (np.uint8, np.uint16, np.uint32, np.int32):  # unsigned: -100 must not wrap to 156
        assert train.evaluate_bpc(_CopyModel(), ids.astype(dtype), block_size=16) == whole, dtype
    assert train.evaluate_bpc(_CopyModel(), ids.tolist(), block_size=16) == whole
    for bad in (ids.reshape(7, 29), ids.astype(np.float64), np.int64(3), "some text"):
        with pytest.raises(TypeError, match="1-D array of token ids"):
            train.evaluate_bpc(_CopyModel(), bad, block_size=16)
    for name, value in (
        ("block_size", 0),
        ("batch_size", 0),
        ("batch_size", -1),
        ("max_windows", 0),
        ("block_size", 2.0),
        ("max_windows", True),
    ):
        with pytest.raises(ValueError, match=f"{name} must be an int >= 1"):
            train.evaluate_bpc(_CopyModel(), ids, **{"block_size": 16, name: value})


def test_the_model_is_back_in_training_mode_after_an_error_in_validation():
    class Failing(_CopyModel):
        def forward(self, x):
            raise RuntimeError("out of memory")

    model = Failing()
    with pytest.raises(RuntimeError, match="out of memory"):
        train.evaluate_bpc(model, np.arange(40) % _CopyModel.P, block_size=16)
    assert model.training


def test_the_validation_of_the_whole_split_is_drawn_apart_from_the_estimates():
    plt = pytest.importorskip("matplotlib.pyplot")
    history = {"step": [1, 2, 3, 4], "train_bpc": [5.0, 4.0, 3.5, 3.0], "val_step": [2, 4], "val_bpc": [4.2, 3.4]}
    fig = train_pictures.loss_figure(plt, history, baseline=3.3, final=(4, 3.1), windows=64)
    ax = fig.axes[0]
    lines = {line.get_label(): line for line in ax.get_lines()}
    estimates, final = lines["validation estimate (64 windows)"], lines["validation, whole split (3.10)"]
    assert list(estimates.get_xdata()) == [2, 4] and list(estimates.get_ydata()) == [4.2, 3.4]
    assert list(final.get_xdata()) == [4] and list(final.get_ydata()) == [3.1]
    assert final.get_marker() != estimates.get_marker() and final.get_linestyle() == "None"
    plt.close(fig)


def test_rope_is_trained_saved_and_restored(small_text, tmp_path):
    out = tmp_path / "rope"
    assert (
        cli.main(
            [
                "train",
                "--text",
                str(small_text),
                "--steps",
                "3",
                "--out",
                str(out),
                "--pos-encoding",
                "rope",
                "--eval-interval",
                "100",
                *TINY,
            ]
        )
        == 0
    )
    model, vocab, checkpoint = sampling.load_model(out / "checkpoint.npz")
    assert checkpoint["config"]["pos_encoding"] == "rope" and model.pos_encoding == "rope"
    assert "position_embedding.weight" not in model.state_dict()
    text = sampling.generate(model, vocab, "The ", max_new_tokens=40, temperature=0)  # past the 32 of --block-size
    assert len(text) == 44


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
        assert (
            cli.main(["train", "--text", str(small_text), "--steps", "8", "--out", str(fixed), "--threads", "1", *TINY])
            == 0
        )
        assert json.loads((fixed / "metrics.json").read_text())["blas_threads"] == {"1": 8}
    finally:
        threads.set_num_threads(None)
        threads._set_blas(before)
