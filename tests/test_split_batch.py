"""A training step's batch in one part per thread (minitorch_attn.nn.parallel.SplitBatch):
the whole batch's loss and gradients, each part on its own thread and a replica of the
model that shares its weights, nothing split that would change what is computed."""

import threading

import numpy as np
import pytest

import minitorch_attn as mt
import minitorch_attn.functional as F
from minitorch_attn import cli, nn, optim, threads
from minitorch_attn.functional import _parallel
from minitorch_attn.train import next_char_loss
from tests.conftest import float64_tolerance

VOCAB = 11


@pytest.fixture(autouse=True)
def _float64_and_the_librarys_threads(monkeypatch):
    """float64 by default (the comparisons are to rounding of float64); the thread count
    and BLAS's come back afterwards."""
    before_dtype, before_blas = mt.get_default_dtype(), threads.blas_thread_count()
    mt.set_default_dtype("float64")
    monkeypatch.setattr(threads, "_requested", None)
    yield
    mt.set_default_dtype(before_dtype)
    threads._set_blas(before_blas)


def tiny_gpt(dropout=0.0):
    """LLaMA's block at a tiny size, its weights in float64."""
    mt.manual_seed(0)
    model = nn.GPT(VOCAB, d_model=16, num_heads=2, num_layers=2, max_seq_len=8, dropout=dropout, **nn.LLAMA)
    for p in model.parameters():
        p.data = p.data.astype(np.float64)
    return model


def batch(rng, rows):
    windows = rng.integers(0, VOCAB, size=(rows, 9))
    return mt.tensor(windows[:, :-1]), mt.tensor(windows[:, 1:])


def gradients(model):
    return [p.grad.numpy().copy() for p in model.parameters()]


def whole_batch(model, x, y):
    """The reference: the batch in one call on one thread."""
    model.zero_grad()
    loss = next_char_loss(model, x, y)
    loss.backward()
    return loss.item(), gradients(model)


def assert_same_step(split_result, whole_result, n_ops=64):
    (loss, grads), (loss_ref, grads_ref) = split_result, whole_result
    assert loss == pytest.approx(loss_ref, rel=0, abs=float64_tolerance(loss_ref, n_ops, "float64"))
    for g, ref in zip(grads, grads_ref, strict=True):
        np.testing.assert_allclose(g, ref, rtol=0, atol=float64_tolerance(ref, n_ops, "float64"))


@pytest.mark.parametrize("rows, count", [(4, 2), (5, 2), (7, 3)])
def test_the_parts_give_the_whole_batchs_loss_and_gradients(rng, rows, count):
    """Equal parts and unequal ones (5 rows on 2 threads: shares 2/5 and 3/5): the loss and
    every gradient of the batch in one call, to float64 rounding."""
    model = tiny_gpt()
    x, y = batch(rng, rows)
    reference = whole_batch(model, x, y)
    threads.set_num_threads(count)
    split = nn.SplitBatch(model, next_char_loss)
    bounds = [rows * i // count for i in range(count + 1)]
    assert split.parts(x) == list(zip(bounds, bounds[1:]))
    model.zero_grad()
    assert_same_step((split.backward(x, y), gradients(model)), reference)
    assert len(split.replicas) == count - 1
    assert all(r.parameters()[0].grad is None for r in split.replicas)   # handed over to the model


def test_each_part_runs_on_its_own_thread_and_sees_one_thread(rng):
    seen = []

    def loss_fn(model, x, y):
        seen.append((threading.get_ident(), threads.get_num_threads(), x.shape[0]))
        return next_char_loss(model, x, y)

    threads.set_num_threads(2)
    nn.SplitBatch(tiny_gpt(), loss_fn).backward(*batch(rng, 4))
    assert len({ident for ident, _, _ in seen}) == 2
    assert [(n, rows) for _, n, rows in sorted(seen, key=lambda s: s[2])] == [(1, 2), (1, 2)]


@pytest.mark.timeout(60, method="signal")  # the deadlock this guards against would wait for ever: fail instead
def test_an_op_with_threads_of_its_own_inside_a_part_runs_its_chunks_itself(rng, monkeypatch):
    """GELU of any size goes to the pool here; inside a part (a job of that pool, whose
    threads all wait for the parts) it must run its chunks on the part's thread, not wait
    for a free thread of the pool: without that, this test hangs."""
    monkeypatch.setattr(_parallel, "PARALLEL_BYTES", 0)
    model = nn.Linear(5, 1)
    for p in model.parameters():
        p.data = p.data.astype(np.float64)

    def loss_fn(model, x, y):
        return ((F.gelu(model(x)) - y) ** 2).mean()

    x, y = mt.tensor(rng.standard_normal((6, 5))), mt.tensor(rng.standard_normal((6, 1)))
    threads.set_num_threads(1)
    loss_ref = loss_fn(model, x, y)
    loss_ref.backward()
    reference = (loss_ref.item(), gradients(model))
    model.zero_grad()
    threads.set_num_threads(2)
    assert_same_step((nn.SplitBatch(model, loss_fn).backward(x, y), gradients(model)), reference)


def test_it_accumulates_as_backward_does(rng):
    model = tiny_gpt()
    x, y = batch(rng, 4)
    _, once = whole_batch(model, x, y)
    threads.set_num_threads(2)
    split = nn.SplitBatch(model, next_char_loss)
    model.zero_grad()
    split.backward(x, y)
    split.backward(x, y)
    for g, ref in zip(gradients(model), once):
        np.testing.assert_allclose(g, 2 * ref, rtol=0, atol=float64_tolerance(2 * ref, 128, "float64"))


def test_the_replicas_share_the_weights_the_optimizer_changes_and_the_tied_ones(rng):
    """After AdamW's in-place step, and after a parameter's array is replaced, the next
    split step computes with the new weights; the replica's tied head is its embedding."""
    model = tiny_gpt()
    opt = optim.AdamW(model.parameters(), lr=0.1)
    threads.set_num_threads(2)
    split = nn.SplitBatch(model, next_char_loss)
    x, y = batch(rng, 4)
    split.backward(x, y)
    replica = split.replicas[0]
    assert replica.lm_head.weight is replica.token_embedding.weight
    assert all(q.data is p.data for p, q in zip(model.parameters(), replica.parameters()))
    opt.step()
    first = model.parameters()[1]
    first.data = first.data * 0.5                       # a new array, not an in-place change
    reference = whole_batch(model, x, y)
    model.zero_grad()
    assert_same_step((split.backward(x, y), gradients(model)), reference)


@pytest.mark.parametrize("why", ["one thread", "one row", "dropout while training"])
def test_the_batch_runs_whole_where_a_split_would_not_help_or_would_change_the_draws(rng, why):
    threads.set_num_threads(1 if why == "one thread" else 2)
    model = tiny_gpt(dropout=0.5 if why.startswith("dropout") else 0.0)
    x, _ = batch(rng, 1 if why == "one row" else 4)
    split = nn.SplitBatch(model, next_char_loss)
    assert split.parts(x) == [(0, x.shape[0])]
    if why.startswith("dropout"):
        model.eval()
        assert split.parts(x) == [(0, 2), (2, 4)]         # in eval mode dropout draws nothing


def test_bad_arguments_are_refused_with_what_was_expected():
    with pytest.raises(TypeError, match="expected a Module"):
        nn.SplitBatch("model", next_char_loss)
    with pytest.raises(TypeError, match="loss_fn must be callable"):
        nn.SplitBatch(tiny_gpt(), None)
    with pytest.raises(TypeError, match="rows on its first axis"):
        nn.SplitBatch(tiny_gpt(), next_char_loss).parts(mt.tensor(3))
    with pytest.raises(TypeError, match="expected a Module"):
        nn.replicate([1, 2])


def test_train_on_two_threads_gives_the_same_run_every_time(tmp_path):
    """Two runs of the same seed on two threads: the same weights to the last bit (the
    parts' gradients are always added in the same order)."""
    text = tmp_path / "text.txt"
    text.write_text("the quick brown fox jumps over the lazy dog. " * 40, encoding="utf-8")
    mt.set_default_dtype("float32")
    weights = []
    for run in ("a", "b"):
        out = tmp_path / run
        assert cli.main(["train", "--text", str(text), "--steps", "4", "--out", str(out), "--threads", "2",
                         "--d-model", "16", "--num-layers", "1", "--num-heads", "2", "--block-size", "16",
                         "--batch-size", "4", "--time-budget", "0", "--eval-interval", "100", "--eval-windows",
                         "2", "--sample-tokens", "0", "--quiet"]) == 0
        with np.load(out / "checkpoint.npz") as saved:
            weights.append({k: saved[k] for k in saved.files if not k.startswith("__")})
    assert weights[0].keys() == weights[1].keys()
    for key in weights[0]:
        np.testing.assert_array_equal(weights[0][key], weights[1][key], err_msg=key)
