"""BLAS threads decided by the library (minitorch_attn.speed.threads), the busy-machine helper,
and the Functions that declare themselves row-wise run in chunks of rows on the pool
(minitorch_attn.speed.rows): the normalizations by rows, GELU, SiLU and attention by their
first axis."""

import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import minitorch_attn as mt
import minitorch_attn.functional as F
from minitorch_attn import nn, optim
from minitorch_attn.app import measure
from minitorch_attn.speed import rows, threads
from tests.conftest import float64_tolerance


@pytest.fixture(autouse=True)
def _library_chooses(monkeypatch):
    """Each test starts with no set_num_threads and gets the BLAS count back afterwards."""
    monkeypatch.setattr(threads, "_requested", None)
    before = threads.blas_thread_count()
    yield
    threads._set_blas(before)


def test_blas_threads_sets_and_restores_the_count():
    with threads.blas_threads(2):
        with threads.blas_threads(1):
            assert threads.blas_thread_count() == 1
        assert threads.blas_thread_count() == 2
        with pytest.raises(KeyError), threads.blas_threads(1):
            raise KeyError("the count comes back after an error too")
        assert threads.blas_thread_count() == 2


def test_set_num_threads_fixes_blas_and_the_pool_and_none_gives_the_choice_back():
    threads.set_num_threads(1)
    assert threads.blas_thread_count() == 1 and threads.get_num_threads() == 1 and threads.chosen_by_user()
    assert threads.FastestThreads().candidates == (1,)
    threads.set_num_threads(None)
    assert not threads.chosen_by_user() and threads.get_num_threads() == threads.available_cores()


@pytest.mark.parametrize("bad, error", [(0, ValueError), (-2, ValueError), (1.5, TypeError), (True, TypeError)])
def test_set_num_threads_rejects_bad_counts(bad, error):
    with pytest.raises(error, match="set_num_threads: expected an int >= 1"):
        threads.set_num_threads(bad)


class FakeClock:
    """A clock that advances by the time the work "took" at the current BLAS count."""

    def __init__(self, seconds_per_count):
        self.now, self.seconds_per_count = 0.0, seconds_per_count

    def __call__(self):
        return self.now

    def work(self):
        self.now += self.seconds_per_count[threads.blas_thread_count()]


def run(chooser, clock, repetitions):
    used = []
    for _ in range(repetitions):
        with chooser:
            clock.work()
        used.append(chooser.current)
    return used


def test_fastest_threads_alternates_a_trial_keeps_the_faster_and_checks_again():
    clock = FakeClock({1: 1.0, 2: 3.0})  # a busy machine: one thread is faster
    chooser = threads.FastestThreads(candidates=(1, 2), trial=2, period=4, warmup=2, clock=clock)
    used = run(chooser, clock, 14)
    assert used == [1, 1, 1, 2, 2, 1, 1, 1, 1, 1, 1, 2, 2, 1]  # warm-up, trial (A B, B A), period, trial
    assert chooser.choice == 1 and chooser.most_used() == 1 and chooser.trials_done == 2

    clock.seconds_per_count = {1: 2.0, 2: 1.0}  # the load went away: the next trial picks two
    assert run(chooser, clock, 12) == [1, 1, 1, 1, 1, 2, 2, 1, 2, 2, 2, 2]
    assert chooser.choice == 2


def test_fastest_threads_does_not_time_the_slow_first_steps():
    """A job's first steps are slower than the rest (first allocations, cold caches): timed,
    they would make the count tried first look slow. They run untimed, with one thread."""
    clock = FakeClock({1: 1.0, 2: 1.5})
    first_steps = iter([50.0, 20.0])  # what the first two steps take, at any count
    chooser = threads.FastestThreads(candidates=(1, 2), trial=1, period=100, clock=clock)
    used = []
    for _ in range(6):
        with chooser:
            extra = next(first_steps, None)
            clock.now += extra if extra is not None else clock.seconds_per_count[threads.blas_thread_count()]
        used.append(chooser.current)
    assert used[:2] == [1, 1] and chooser.choice == 1  # the trial (steps 3-4) was timed warm


@pytest.mark.parametrize(
    "options, error",
    [
        (dict(candidates=()), ValueError),
        (dict(candidates=(0, 2)), ValueError),
        (dict(candidates=(1, 2.0)), TypeError),
        (dict(trial=0), ValueError),
        (dict(trial=2.0), TypeError),
        (dict(period=-1), ValueError),
        (dict(period=0.5), TypeError),
        (dict(warmup=-1), ValueError),
        (dict(warmup=True), TypeError),
    ],
)
def test_fastest_threads_rejects_arguments_that_would_never_decide(options, error):
    """trial 0, a negative warmup or period, ... made the chooser crash later or never
    time anything; each is refused at once, saying which argument."""
    with pytest.raises(error, match="FastestThreads: "):
        threads.FastestThreads(**{"candidates": (1, 2), **options})


def test_fastest_threads_with_one_candidate_never_trials():
    clock = FakeClock({1: 1.0, 2: 1.0})
    assert run(threads.FastestThreads(candidates=(2,), clock=clock), clock, 5) == [2] * 5


def test_busy_starts_cpu_bound_helpers_and_stops_them():
    with measure.busy(2) as helpers:
        time.sleep(0.2)
        assert [h.poll() for h in helpers] == [None, None]  # running
    assert all(h.returncode is not None for h in helpers)  # stopped and reaped


def test_busy_stops_its_helpers_on_ctrl_c():
    with pytest.raises(KeyboardInterrupt):
        with measure.busy(1) as helpers:
            raise KeyboardInterrupt
    assert helpers[0].returncode is not None


def _running(pid):
    """True while process ``pid`` runs (a zombie waiting to be reaped has stopped)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="reads process states from /proc")
def test_busy_helpers_end_with_a_parent_that_was_killed():
    """A parent killed with SIGKILL runs no clean-up: its helper notices and stops, even
    one killed before the helper has started up."""
    script = (
        "import time; from minitorch_attn.app import measure\n"
        "with measure.busy(1) as h:\n"
        "    print(h[0].pid, flush=True); time.sleep(60)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    helper_pid = int(parent.stdout.readline())
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    for _ in range(100):  # it checks its parent every few tens of ms
        if not _running(helper_pid):
            return
        time.sleep(0.05)
    os.kill(helper_pid, signal.SIGKILL)
    pytest.fail("the busy helper outlived its killed parent")


def test_busy_rejects_a_negative_count():
    with pytest.raises(ValueError, match="busy"):
        with measure.busy(-1):
            pass


def test_alternating_medians_warms_up_finds_each_functions_threads_and_alternates(monkeypatch):
    monkeypatch.setattr(threads, "available_cores", lambda: 2)
    calls = []
    fns = {
        "a": lambda: calls.append(("a", threads.blas_thread_count())),
        "b": lambda: calls.append(("b", threads.blas_thread_count())),
    }
    medians, chosen = measure.alternating_medians(fns, repeats=3, warmup=1)
    assert set(medians) == set(chosen) == {"a", "b"} and all(m >= 0 for m in medians.values())
    assert set(chosen.values()) <= {1, 2}
    # a: 1 warm-up + 4 trial calls (1 2, 2 1), b the same; then a b a b a b at the chosen counts
    assert [name for name, _ in calls] == ["a"] * 5 + ["b"] * 5 + ["a", "b"] * 3
    assert [count for _, count in calls[1:5]] == [1, 2, 2, 1]
    assert [count for name, count in calls[10:] if name == "a"] == [chosen["a"]] * 3


# ---- row-wise Functions in chunks of rows -----------------------------------------------------------
def _split_from(monkeypatch, from_bytes, chunk_bytes=None):
    """Every row-wise Function runs on the pool from ``from_bytes`` of its first input on."""
    for name in list(rows.SPLITS):
        monkeypatch.setitem(rows.SPLITS, name, rows.Split(from_bytes, chunk_bytes))


def _in_chunks(y):
    """Whether the call that made ``y`` ran in chunks of rows."""
    return "row_chunks" in vars(y.grad_fn.ctx)


# ---- normalizations by chunks of rows ---------------------------------------------------------------
@pytest.mark.parametrize("norm", ["layer_norm", "rms_norm"])
@pytest.mark.parametrize("normalized_shape", [(8,), (2, 4)])
def test_norms_in_row_chunks_on_threads_equal_one_call(monkeypatch, rng, norm, normalized_shape):
    """Chunks of rows (here 3 rows each, spread over 2 threads) give the output and the
    input's gradient of one call exactly, and the parameters' gradients to rounding."""
    monkeypatch.setattr(threads, "_requested", 2)
    x_data = rng.standard_normal((5, 7) + normalized_shape)
    upstream = mt.tensor(rng.standard_normal(x_data.shape))
    params = [rng.standard_normal(normalized_shape) for _ in range(2 if norm == "layer_norm" else 1)]

    def run(chunk_bytes):
        _split_from(monkeypatch, 2 * chunk_bytes + 1, chunk_bytes)
        x = mt.tensor(x_data, requires_grad=True)
        ps = [mt.tensor(p, requires_grad=True) for p in params]
        y = getattr(F, norm)(x, normalized_shape, *ps)
        y.backward(upstream)
        return y, [x.grad.numpy()] + [p.grad.numpy() for p in ps]

    norm_class = {"layer_norm": "LayerNorm", "rms_norm": "RMSNorm"}
    (y_chunked, grads_chunked), (y_whole, grads_whole) = run(3 * 8 * 8), run(10**9)
    assert _in_chunks(y_chunked) and not _in_chunks(y_whole)
    assert y_chunked.grad_fn.function is y_whole.grad_fn.function is getattr(F.normalization, norm_class[norm])
    np.testing.assert_array_equal(y_chunked.numpy(), y_whole.numpy())
    np.testing.assert_array_equal(grads_chunked[0], grads_whole[0])
    for chunked, whole in zip(grads_chunked[1:], grads_whole[1:]):
        np.testing.assert_allclose(chunked, whole, rtol=0, atol=float64_tolerance(whole, n_ops=35, dtype="float64"))


def test_row_chunks_free_their_saved_arrays_with_the_graph(monkeypatch, rng):
    _split_from(monkeypatch, 129, 64)
    x = mt.tensor(rng.standard_normal((6, 8)), requires_grad=True)
    y = F.layer_norm(x, 8)
    assert _in_chunks(y)
    y.backward(mt.ones_like(y))
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        y.backward(mt.ones_like(y))


# ---- GELU and attention by chunks of their first axis ----------------------------------------------
def _forward_backward(fn, arrays, upstream, seed=0):
    tensors = [mt.tensor(a, requires_grad=True) for a in arrays]
    y = fn(*tensors)
    y.backward(mt.tensor(upstream))
    return y, [t.grad.numpy() for t in tensors]


@pytest.mark.parametrize("case", ["gelu tanh", "gelu exact", "attention", "attention, causal, GQA"])
def test_gelu_and_attention_on_threads_equal_one_call(monkeypatch, rng, case):
    """Chunks of the first axis on 2 threads give the output and every gradient of one
    call exactly: each entry's work is the same, only where it runs differs."""
    monkeypatch.setattr(threads, "_requested", 2)
    if case.startswith("gelu"):
        arrays = [rng.standard_normal((5, 3, 4)) * 3]

        def fn(x):
            return F.gelu(x, approximate="tanh" if "tanh" in case else "none")

        out_shape = (5, 3, 4)
    else:
        heads_kv = 1 if "GQA" in case else 2
        arrays = [
            rng.standard_normal((5, 2, 6, 4)),
            rng.standard_normal((5, heads_kv, 7, 4)),
            rng.standard_normal((5, heads_kv, 7, 3)),
        ]

        def fn(q, k, v):
            return F.scaled_dot_product_attention(q, k, v, is_causal="causal" in case, enable_gqa="GQA" in case)

        out_shape = (5, 2, 6, 3)
    upstream = rng.standard_normal(out_shape)
    _split_from(monkeypatch, 0)
    y_chunked, grads_chunked = _forward_backward(fn, arrays, upstream)
    _split_from(monkeypatch, 10**12)
    y_whole, grads_whole = _forward_backward(fn, arrays, upstream)
    assert _in_chunks(y_chunked) and not _in_chunks(y_whole)
    assert y_chunked.grad_fn.function is y_whole.grad_fn.function
    np.testing.assert_array_equal(y_chunked.numpy(), y_whole.numpy())
    for chunked, whole in zip(grads_chunked, grads_whole):
        np.testing.assert_array_equal(chunked, whole)


def test_attention_with_dropout_or_a_mask_runs_in_one_call(monkeypatch, rng):
    """Dropout draws its mask from one seeded stream, in one order: never split over threads
    (a mask, which may have a batch dim of its own, is not split either)."""
    monkeypatch.setattr(threads, "_requested", 2)
    _split_from(monkeypatch, 0)
    q, k, v = (mt.tensor(rng.standard_normal((4, 2, 5, 3)), requires_grad=True) for _ in range(3))
    assert not _in_chunks(F.scaled_dot_product_attention(q, k, v, dropout_p=0.5))
    mask = mt.tensor(rng.standard_normal((4, 2, 5, 5)) > 0)
    assert not _in_chunks(F.scaled_dot_product_attention(q, k, v, attn_mask=mask))
    assert _in_chunks(F.scaled_dot_product_attention(q, k, v))


def test_the_pool_runs_the_thread_count_that_fastest_threads_chose():
    """Inside a repetition the pool has the chooser's count (one thread where one is faster,
    as on a busy machine), BLAS too; outside it, one per core again."""
    chooser = threads.FastestThreads(candidates=(1,))
    with chooser:
        assert threads.get_num_threads() == 1 and threads.blas_thread_count() == 1
    assert threads.get_num_threads() == threads.available_cores()
    with threads.FastestThreads(candidates=(1,)).best():
        assert threads.get_num_threads() == 1


def test_more_threads_than_cores_is_allowed_with_a_warning(monkeypatch):
    """As torch.set_num_threads, any count >= 1 is taken; above the cores it says why that
    is slow (a --threads 99 run took minutes for its validation) and what to give."""
    monkeypatch.setattr(threads, "available_cores", lambda: 2)
    with pytest.warns(UserWarning, match="3 threads are more than the 2 cores.*expected at most 2"):
        threads.set_num_threads(3)
    assert threads.get_num_threads() == 3
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        threads.set_num_threads(2)


@pytest.mark.parametrize("work", ["optimizer step", "silu in chunks"])
def test_the_pools_jobs_keep_the_callers_errstate(monkeypatch, work):
    """A job on a thread of the pool sees the caller's ``numpy.errstate`` (a context
    variable, which a new thread would not see): ``ignore`` stays silent there (the suite
    turns a RuntimeWarning into an error) and ``raise`` raises FloatingPointError from it."""
    monkeypatch.setattr(threads, "_requested", 2)
    _split_from(monkeypatch, 0)

    def run():
        if work == "optimizer step":
            params = [nn.Parameter(mt.zeros(n, dtype="float32")) for n in (4, 3, 2)]
            for p in params:
                p.grad = mt.ones(*p.shape, dtype="float32")
            params[1].grad = mt.tensor([np.inf, 0.0, 0.0], dtype="float32")
            return optim.Adam(params).step()  # on the pool: inf / inf
        return F.silu(mt.tensor(np.full((4, 3), -np.inf), dtype="float32"))  # in chunks: -inf * 0

    with np.errstate(all="ignore"):
        run()
    with np.errstate(all="raise"), pytest.raises(FloatingPointError):
        run()


def test_a_ctrl_c_while_the_caller_takes_a_jobs_lock_leaves_the_pool_working():
    """A Ctrl-C that lands while the caller of the pool blocks on the lock of a job's
    future (held for a moment by the job's thread as the job ends) must leave no lock held:
    the KeyboardInterrupt comes once both jobs have ended, and the pool runs the next jobs.
    With ``concurrent.futures.wait``, which takes every future's lock in turn, it kept the
    one taken before and waited for ever. Run in its own process, with a time limit; the
    lock is held here by a thread of the test until the caller blocks on it, and the jobs
    end only after the Ctrl-C."""
    script = textwrap.dedent("""
        import signal, sys, threading, time
        from minitorch_attn.speed import pool as parallel
        signal.signal(signal.SIGINT, signal.default_int_handler)   # as at a terminal
        main, futures, pool, go = threading.main_thread().ident, [], parallel._pool(2), threading.Event()

        def blocked(frame):           # in concurrent.futures (or threading, called from there)
            return frame.f_code.co_filename.endswith("_base.py") or (
                frame.f_code.co_filename.endswith("threading.py") and blocked(frame.f_back))

        def hold(future):             # the job's end holds the future's lock, as it does for a moment
            with future._condition:
                seen = []
                while len(seen) < 20:   # the same instruction of concurrent.futures, 20 looks running
                    frame = sys._current_frames()[main]
                    seen = seen + [(frame.f_code, frame.f_lasti)] if blocked(frame) and \\
                        (not seen or seen[-1] == (frame.f_code, frame.f_lasti)) else []
                    time.sleep(0.005)
                signal.pthread_kill(main, signal.SIGINT)
                go.set()              # the jobs end now, after the Ctrl-C
                time.sleep(0.1)

        class Recording:
            def submit(self, *args):
                futures.append(pool.submit(*args))
                if len(futures) == 2:   # the one a wait over all takes last
                    threading.Thread(target=hold, args=(max(futures, key=id),)).start()
                return futures[-1]

        parallel._pool = lambda threads: Recording()
        try:
            parallel.run_on_threads(2, [lambda: go.wait() and 1, lambda: go.wait() and 2])
        except KeyboardInterrupt:
            print("interrupted", [f.done() for f in futures])
        parallel._pool = lambda threads: pool
        print("then", parallel.run_on_threads(2, [lambda: 3, lambda: 4]))
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "interrupted [True, True]" in done.stdout and "then [3, 4]" in done.stdout, done.stdout


def test_a_ctrl_c_while_the_pool_hands_out_jobs_leaves_the_pool_working():
    """A Ctrl-C (a real SIGINT) that lands inside ``submit`` just as it takes a lock of
    ``threading`` (the pool's idle-thread semaphore) is noted, not raised there: the
    KeyboardInterrupt comes from ``run_on_threads`` once its jobs have ended, and the next jobs run.
    Raised there, it left that lock held and the next hand-out waited for ever. The signal
    is sent from a profile hook as the C call that takes the lock returns, so that Python
    handles it right after the lock is taken; in its own process, with a time limit."""
    script = textwrap.dedent("""
        import signal, sys, threading, time
        from minitorch_attn.speed import pool
        signal.signal(signal.SIGINT, signal.default_int_handler)   # as at a terminal
        job = lambda: time.sleep(0.001)
        pool.run_on_threads(2, [job] * 4)                                 # the pool's threads exist
        enter, acquire, sent = threading.Condition.__enter__.__code__, threading.Semaphore.acquire.__code__, []

        def profile(frame, event, arg):   # just after the C call that took the lock returned
            if event == "c_return" and frame.f_code is enter and frame.f_back.f_code is acquire and not sent:
                sent.append(1)
                signal.raise_signal(signal.SIGINT)

        sys.setprofile(profile)
        try:
            pool.run_on_threads(2, [job] * 4)
            print("not interrupted")
        except KeyboardInterrupt:
            print("interrupted")
        sys.setprofile(None)
        print("sent", len(sent), "then", pool.run_on_threads(2, [lambda: 3, lambda: 4]))
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "interrupted" in done.stdout and "sent 1 then [3, 4]" in done.stdout, done.stdout


def test_blas_threads_gives_the_count_back_after_a_ctrl_c_while_it_sets_it():
    """An exception that lands just after BLAS's count was set, before the block starts (a
    Ctrl-C's KeyboardInterrupt; here a stand-in, which pytest-xdist does not take for the
    user stopping the run), still gives the previous count back (it was left at 1)."""

    class Interrupted(Exception):
        pass

    real_set = threads._set_blas
    counts = threads._blas_counts
    outside = real_set(2)
    try:
        before = counts()

        def set_then_interrupted(n):
            real_set(n)
            raise Interrupted

        threads._set_blas = set_then_interrupted
        with pytest.raises(Interrupted), threads.blas_threads(1):
            pass
        assert counts() == before
    finally:
        threads._set_blas = real_set
        threads._restore_blas(outside)


# ---- the graph names the op at any thread count -------------------------------------------------------
ROW_WISE = {  # every Function that declares row_wise: (call, input shapes, the input its backward saves)
    "GELU": (lambda x: F.gelu(x, approximate="tanh"), [(6, 3, 4)], 0),
    "SiLU": (F.silu, [(6, 3, 4)], 0),
    "ScaledDotProductAttention": (
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
        [(6, 2, 5, 4)] * 3,
        0,
    ),
    "LayerNorm": (lambda x, w, b: F.layer_norm(x, (4,), w, b), [(6, 3, 4), (4,), (4,)], 1),
    "RMSNorm": (lambda x, w: F.rms_norm(x, (4,), w), [(6, 3, 4), (4,)], 1),
}


def _row_wise_functions():
    """The names of every Function of the package that declares ``row_wise``."""
    found, stack = set(), [mt.Function]
    while stack:
        cls = stack.pop()
        stack.extend(cls.__subclasses__())
        if cls.row_wise is not None and cls.__module__.startswith("minitorch_attn."):
            found.add(cls.__name__)
    return found


def test_every_row_wise_function_is_checked_here():
    assert _row_wise_functions() == set(ROW_WISE)


@pytest.mark.parametrize("name", sorted(ROW_WISE))
def test_in_chunks_on_two_threads_the_graph_records_the_op_itself(monkeypatch, rng, name):
    """At 2 threads, run in chunks of rows, the output's ``grad_fn`` is the op's own node (as
    at one thread), and an in-place write to what it saved names that op in the error."""
    monkeypatch.setattr(threads, "_requested", 2)
    _split_from(monkeypatch, 0)
    fn, shapes, saved = ROW_WISE[name]
    tensors = [mt.tensor(rng.standard_normal(s), requires_grad=True) for s in shapes]
    y = fn(*tensors)
    assert _in_chunks(y) and repr(y.grad_fn) == f"<{name}Backward>" and y.grad_fn.function.__name__ == name
    with mt.no_grad():
        tensors[saved].add_(1.0)
    with pytest.raises(RuntimeError, match=f"argument {saved} of <{name}Backward>"):
        y.backward(mt.ones_like(y))


SAME_AT_ANY_THREADS = dict(
    ROW_WISE,
    **{
        "softmax": (lambda x: F.softmax(x, dim=-1), [(6, 3, 4)], None),
        "log_softmax": (lambda x: F.log_softmax(x, dim=1), [(6, 3, 4)], None),
        "logsumexp": (lambda x: mt.logsumexp(x, dim=-1), [(6, 3, 4)], None),
        "flash": (
            lambda q, k, v: F.flash_attention(q, k, v, is_causal=True, block_size_q=2, block_size_k=3),
            [(6, 2, 5, 4)] * 3,
            None,
        ),
    },
)


@pytest.mark.parametrize("name", sorted(SAME_AT_ANY_THREADS))
def test_two_threads_give_the_numbers_of_one(monkeypatch, rng, name):
    """Each op at 2 threads, in chunks where it has any (every pool threshold at 0), gives
    the output and the inputs' gradients of one thread bit for bit; a norm's gain and bias,
    summed over the chunks of rows, to rounding."""
    fn, shapes, _ = SAME_AT_ANY_THREADS[name]
    arrays = [rng.standard_normal(s) for s in shapes]
    _split_from(monkeypatch, 0)
    results = []
    for count in (1, 2):
        monkeypatch.setattr(threads, "_requested", count)
        tensors = [mt.tensor(a, requires_grad=True) for a in arrays]
        y = fn(*tensors)
        y.backward(mt.tensor(np.random.default_rng(1).standard_normal(y.shape)))
        results.append([y.numpy()] + [t.grad.numpy() for t in tensors])
    (one, *grads_one), (two, *grads_two) = results
    np.testing.assert_array_equal(two, one)
    np.testing.assert_array_equal(grads_two[0], grads_one[0])
    for shared_two, shared_one in zip(grads_two[1:], grads_one[1:]):
        if name in ("LayerNorm", "RMSNorm"):
            np.testing.assert_allclose(
                shared_two, shared_one, rtol=0, atol=float64_tolerance(shared_one, n_ops=35, dtype="float64")
            )
        else:
            np.testing.assert_array_equal(shared_two, shared_one)


def test_attention_of_a_query_without_a_batch_axis_runs_whole(monkeypatch, rng):
    """A 2-d query ``(N_q, E)`` has no batch axis: its first axis is the queries, the keys'
    is the keys. Split by the same rows they gave a wrong output at two threads (rows of
    the query beside the wrong keys: off by 1.4 at (4096, 64) with 100 keys); now such a
    call runs whole. 3-d with grouped-query heads neither (its first axis is the heads)."""
    monkeypatch.setattr(threads, "_requested", 2)
    _split_from(monkeypatch, 0)
    q, k, v = (mt.tensor(rng.standard_normal(s), requires_grad=True) for s in [(12, 4), (5, 4), (5, 4)])
    y = F.scaled_dot_product_attention(q, k, v)
    assert not _in_chunks(y)
    monkeypatch.setattr(threads, "_requested", 1)
    np.testing.assert_allclose(y.numpy(), F.scaled_dot_product_attention(q, k, v).numpy(), rtol=1e-12)
    monkeypatch.setattr(threads, "_requested", 2)
    q = mt.tensor(rng.standard_normal((4, 6, 3)), requires_grad=True)
    k, v = (mt.tensor(rng.standard_normal((2, 5, 3)), requires_grad=True) for _ in range(2))
    assert not _in_chunks(F.scaled_dot_product_attention(q, k, v, enable_gqa=True))
