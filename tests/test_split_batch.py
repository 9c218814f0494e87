"""A training step's batch in one part per thread (minitorch_attn.nn.parallel.SplitBatch):
the whole batch's loss and gradients, each part on its own thread and a replica of the
model that shares its weights, nothing split that would change what is computed."""

import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

import minitorch_attn as mt
import minitorch_attn.functional as F
from minitorch_attn import nn, optim
from minitorch_attn.app.train import next_char_loss
from minitorch_attn.speed import threads
from tests.conftest import float64_tolerance

VOCAB = 11
pytestmark = pytest.mark.filterwarnings("ignore:.*threads are more than the")  # 3 threads on a smaller machine


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


def in_float64(module):
    """``module`` with its weights in float64 (the layers make float32 ones)."""
    for p in module.parameters():
        p.data = p.data.astype(np.float64)
    return module


def tiny_gpt(dropout=0.0):
    """LLaMA's block at a tiny size, its weights in float64."""
    mt.manual_seed(0)
    return in_float64(nn.GPT(VOCAB, d_model=16, num_heads=2, num_layers=2, max_seq_len=8, dropout=dropout, **nn.LLAMA))


def batch(rng, rows):
    windows = rng.integers(0, VOCAB, size=(rows, 9))
    return mt.tensor(windows[:, :-1]), mt.tensor(windows[:, 1:])


def gradients(model):
    """Each parameter's gradient, a copy (None where it has none)."""
    return [None if p.grad is None else p.grad.numpy().copy() for p in model.parameters()]


def whole_batch(model, x, y, loss_fn=next_char_loss):
    """The reference: the batch in one call on one thread."""
    model.zero_grad()
    loss = loss_fn(model, x, y)
    loss.backward()
    return loss.item(), gradients(model)


def assert_same_step(split_result, whole_result, n_ops=64):
    (loss, grads), (loss_ref, grads_ref) = split_result, whole_result
    assert loss == pytest.approx(loss_ref, rel=0, abs=float64_tolerance(loss_ref, n_ops, "float64"))
    for g, ref in zip(grads, grads_ref, strict=True):
        assert (g is None) == (ref is None)
        if ref is not None:
            np.testing.assert_allclose(g, ref, rtol=0, atol=float64_tolerance(ref, n_ops, "float64"))


class Tiny(nn.Module):
    """An embedding, a head and a plain attribute that the forward reads."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, 6)
        self.head = nn.Linear(6, VOCAB)
        self.scale = 1.0
        in_float64(self)

    def forward(self, x):
        return self.head(self.emb(x)) * self.scale


def split_step(model, x, y, count=2, loss_fn=next_char_loss):
    threads.set_num_threads(count)
    try:
        model.zero_grad()
        return nn.SplitBatch(model, loss_fn).backward(x, y), gradients(model)
    finally:
        threads.set_num_threads(None)


@pytest.mark.parametrize("rows, count", [(4, 2), (5, 2), (7, 3)])
def test_the_parts_give_the_whole_batchs_loss_and_gradients(rng, rows, count):
    """Equal parts and unequal ones (5 rows on 2 threads: shares 2/5 and 3/5): the loss and
    every gradient of the batch in one call, to float64 rounding."""
    model = tiny_gpt()
    x, y = batch(rng, rows)
    reference = whole_batch(model, x, y)
    threads.set_num_threads(count)
    bounds = [rows * i // count for i in range(count + 1)]
    assert nn.SplitBatch(model, next_char_loss).parts(x) == list(zip(bounds, bounds[1:]))
    assert_same_step(split_step(model, x, y, count), reference)


def test_each_part_runs_on_a_thread_of_the_pool_and_sees_one_thread(rng):
    seen = []

    def loss_fn(model, x, y):
        seen.append((threading.current_thread().name, threads.get_num_threads(), x.shape[0]))
        return next_char_loss(model, x, y)

    split_step(tiny_gpt(), *batch(rng, 4), loss_fn=loss_fn)
    assert sorted(rows for _, _, rows in seen) == [2, 2]
    assert all(name.startswith("minitorch-attn") and n == 1 for name, n, _ in seen)


def test_work_split_over_the_pool_from_inside_a_job_of_the_pool_does_not_wait_for_it():
    """Inside a part (a job of the pool, whose threads all run parts) an op that splits
    itself over the pool runs its chunks on the part's own thread: GELU, split at any size
    here, and any job that asks the pool for jobs of its own. Each would wait for ever
    without that, so the check runs in its own process, with a time limit."""
    script = textwrap.dedent("""
        import numpy as np
        import minitorch_attn as mt, minitorch_attn.functional as F
        from minitorch_attn import nn
        from minitorch_attn.speed import pool, rows, threads
        rows.SPLITS["GELU"] = rows.Split(from_bytes=0)
        threads.set_num_threads(2)
        model = nn.Linear(4, 1)
        x = mt.tensor(np.random.default_rng(0).standard_normal((6, 4), dtype=np.float32))
        nn.SplitBatch(model, lambda m, x, y: ((F.gelu(m(x)) - y) ** 2).mean()).backward(x, mt.zeros((6, 1)))
        outer = lambda: sum(pool.run_on_threads(2, [lambda: 1, lambda: 2]))
        assert pool.run_on_threads(2, [outer, outer]) == [3, 3]
        print("no wait")
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "no wait" in done.stdout, done.stderr[-2000:]


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


def test_each_step_sees_the_model_as_it_is_now(rng):
    """Weights changed in place by the optimizer or replaced, a plain attribute changed,
    a parameter frozen or unfrozen, a layer added after a first split step: the next step
    computes with the model as it is then (its parts are made afresh each step)."""
    model = Tiny()
    x, y = batch(rng, 4)
    opt = optim.AdamW(model.parameters(), lr=0.1)
    split_step(model, x, y)
    opt.step()
    model.head.weight.data = model.head.weight.data * 0.5  # a new array
    model.scale = 3.0  # a plain attribute
    model.emb.weight.requires_grad_(False)  # frozen
    loss, grads = split_step(model, x, y)
    assert grads[0] is None
    assert_same_step((loss, grads), whole_batch(model, x, y))
    model.emb.weight.requires_grad_(True)
    model.extra = in_float64(nn.Linear(VOCAB, VOCAB))  # a layer added after a split step

    def fn(m, x, y):
        return next_char_loss(lambda t: m.extra(m(t)), x, y)

    reference = whole_batch(model, x, y, fn)
    assert_same_step(split_step(model, x, y, loss_fn=fn), reference)


def test_the_replicas_share_the_weights_and_keep_the_tied_ones_tied(rng):
    model = tiny_gpt()
    from minitorch_attn.nn.parallel import _replica

    replica = _replica(model, {})
    assert replica.lm_head.weight is replica.token_embedding.weight
    assert replica.lm_head.weight is not model.lm_head.weight
    assert all(
        q.data is p.data and q._version_counter is p._version_counter
        for p, q in zip(model.parameters(), replica.parameters(), strict=True)
    )


@pytest.mark.parametrize("how", ["an input that requires grad", "a weight outside the model"])
def test_a_loss_that_differentiates_something_else_than_the_model_is_refused(rng, how):
    """Two parts would write that tensor's .grad at the same time: refused with what to do."""
    model = Tiny()
    x, y = batch(rng, 4)
    outside = mt.tensor(rng.standard_normal((1, 8, VOCAB)), requires_grad=True)
    if how.startswith("an input"):
        x = mt.tensor(rng.standard_normal((4, 8, 6)), requires_grad=True)

        def fn(m, x, y):
            return F.cross_entropy(m.head(x).reshape(-1, VOCAB), y.reshape(-1))
    else:

        def fn(m, x, y):
            return F.cross_entropy((m(x) + outside).reshape(-1, VOCAB), y.reshape(-1))

    with pytest.raises(ValueError, match="not a parameter of the model.*loss.backward\\(\\) on the whole batch"):
        split_step(model, x, y, loss_fn=fn)
    assert (
        all(p.grad is None for p in model.parameters())
        and outside.grad is None
        and (not x.requires_grad or x.grad is None)
    )


def test_a_part_that_fails_leaves_no_gradient_and_the_next_step_is_right(rng):
    """Every part ends before the error is raised, and the model's gradients are only
    written once all parts are done: none is left over for the next step."""
    model = Tiny()
    x, y = batch(rng, 4)
    calls = []

    def flaky(model, x, y):
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("a part failed")
        return next_char_loss(model, x, y)

    with pytest.raises(RuntimeError, match="a part failed"):
        split_step(model, x, y, loss_fn=flaky)
    assert all(p.grad is None for p in model.parameters())
    reference = whole_batch(model, x, y)
    assert_same_step(split_step(model, x, y, loss_fn=flaky), reference)


@pytest.mark.parametrize(
    "why",
    [
        "one thread",
        "one row",
        "grad mode off",
        "dropout while training",
        "dropout of a submodule in training",
        "an embedding with max_norm",
        "a module's backward hook",
        "a module's forward hook",
        "a parameter's hook",
    ],
)
def test_the_batch_runs_whole_where_a_split_would_not_help_or_would_change_the_result(rng, why):
    threads.set_num_threads(1 if why == "one thread" else 2)
    model = tiny_gpt(dropout=0.5 if "dropout" in why else 0.0)
    if why == "dropout of a submodule in training":
        model.eval()
        model.blocks[0].train()
    if why.startswith("an embedding"):
        model.token_embedding.max_norm = 1.0
    handle = None
    if why == "a module's backward hook":
        handle = model.blocks[0].register_full_backward_hook(lambda module, grad_input, grad_output: None)
    if why == "a module's forward hook":
        handle = model.blocks[0].register_forward_hook(lambda module, args, output: None)
    if why == "a parameter's hook":
        handle = model.token_embedding.weight.register_hook(lambda grad: None)
    x, _ = batch(rng, 1 if why == "one row" else 4)
    split = nn.SplitBatch(model, next_char_loss)
    if why == "grad mode off":
        with mt.no_grad():
            assert split.parts(x) == [(0, 4)]
            with pytest.raises(RuntimeError):  # as loss.backward() there
                split.backward(*batch(rng, 4))
        return
    assert split.parts(x) == [(0, x.shape[0])]
    if handle is not None:  # each hook sees the whole batch once
        handle.remove()
        assert split.parts(x) == [(0, 2), (2, 4)]
    if why == "dropout while training":
        model.eval()
        assert split.parts(x) == [(0, 2), (2, 4)]  # in eval mode dropout draws nothing


def test_targets_may_be_none_and_must_match_the_rows(rng):
    model = Tiny()
    x, y = batch(rng, 4)

    def fn(m, x, y):
        return m(x).mean()

    reference = whole_batch(model, x, None, fn)
    assert_same_step(split_step(model, x, None, loss_fn=fn), reference)
    with pytest.raises(ValueError, match="x has 4 rows but y has 3"):
        split_step(model, x, y[:3])
    with pytest.raises(TypeError, match="targets y as a Tensor"):
        split_step(model, x, [1, 2, 3, 4])


def test_bad_arguments_are_refused_with_what_was_expected():
    with pytest.raises(TypeError, match="expected a Module"):
        nn.SplitBatch("model", next_char_loss)
    with pytest.raises(TypeError, match="loss_fn must be callable"):
        nn.SplitBatch(tiny_gpt(), None)
    with pytest.raises(TypeError, match="rows on its first axis"):
        nn.SplitBatch(tiny_gpt(), next_char_loss).parts(mt.tensor(3))


def test_a_ctrl_c_while_the_parts_run_returns_only_once_none_runs_on(rng, monkeypatch):
    """Ctrl-C lands in the calling thread while it waits for the parts: the KeyboardInterrupt
    is raised only after the running part has ended, and the model's gradients are those of
    before the call (no part adds its share afterwards)."""
    import os
    import signal
    import time

    model = Tiny()
    x, y = batch(rng, 4)
    finished = []

    def slow(model, x, y):
        loss = next_char_loss(model, x, y)
        if threading.current_thread() is not threading.main_thread():
            time.sleep(0.05)  # the caller is waiting for the parts by now
            if not finished:
                os.kill(os.getpid(), signal.SIGINT)  # a Ctrl-C while the caller waits
            time.sleep(0.3)
        finished.append(threading.current_thread().name)
        return loss

    with pytest.raises(KeyboardInterrupt):
        split_step(model, x, y, loss_fn=slow)
    running = len(finished)
    assert running >= 1 and all(p.grad is None for p in model.parameters())
    time.sleep(0.5)
    assert len(finished) == running and all(p.grad is None for p in model.parameters())
