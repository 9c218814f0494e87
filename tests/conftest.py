"""Shared fixtures.

``device`` runs a test on NumPy ("cpu") and on array-api-strict ("strict", a non-default
device that rejects hidden NumPy calls), and on CuPy ("cuda", marked ``cuda``) when a GPU
is present. ``torch`` is PyTorch, or a skip when it is not installed.

``student`` is the library under test of the held-back tests (``tests/instructor/``).
When the homework grader runs them (its judge plugin, ``minitorch_attn.homework.judge``),
they run in a trusted process: ``student`` is the student's library in a process of its
own, and ``minitorch_attn`` as imported in the test is the instructor's. A test draws its
inputs, sends them (``student.send``), asks the student's library for outputs and
gradients, and compares them with a reference computed in the test's own process. What
comes back is a claim of the student's process, so a test decides from what it chose
itself (the upstream gradients' shapes, the number of outputs, which inputs have a
gradient), and only ever compares a reply with a reference. Everywhere else ``student`` is
the library this process imports, and the tests are ordinary tests.
"""

import functools
import signal
import threading
import zlib

import numpy as np
import pytest

import minitorch_attn as mt
from minitorch_attn.homework.judge import judge_of
from minitorch_attn.homework.remote import Local


@functools.cache
def cuda_available():
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:
        return False


DEVICE_PARAMS = [
    "cpu",
    "strict",
    pytest.param(
        "cuda", marks=[pytest.mark.cuda, pytest.mark.skipif(not cuda_available(), reason="needs CuPy and a CUDA GPU")]
    ),
]


@pytest.fixture(params=DEVICE_PARAMS)
def device(request):
    """Each device the engine supports (cuda only where present)."""
    return request.param


@pytest.fixture
def torch():
    """PyTorch in float64 as a reference; the test is skipped without it."""
    return pytest.importorskip("torch")


@pytest.fixture(autouse=True)
def _seed():
    mt.manual_seed(0)
    yield
    for backend in mt.core.backend._backends.values():  # a device's checks not read by the test end with it
        backend._waiting.clear()


@pytest.fixture(autouse=True)
def _signals_as_at_a_terminal():
    """Every test starts with Ctrl-C raising KeyboardInterrupt, as in a program started
    from a terminal, and ends with the signal handlers it found.

    How the suite was started decides what a process inherits: a shell without job control
    starts a background job (``pytest &``, a CI script's ``&``, ``nohup``) with SIGINT
    ignored, and Python then leaves it ignored, so ``_thread.interrupt_main()`` and a real
    SIGINT do nothing and a test of what Ctrl-C does would wait for ever. A test that
    installs a handler (a command run in-process sets one for SIGHUP and SIGTERM) must not leave it to
    the tests after it on the same worker either."""
    if threading.current_thread() is not threading.main_thread():  # signals belong to the main thread
        yield
        return
    saved = {number: signal.getsignal(number) for number in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM)}
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        for number, handler in saved.items():
            if handler is not None:  # None: set outside Python, which cannot be restored from here
                signal.signal(number, handler)


def float64_tolerance(reference, n_ops=1, dtype="float32"):
    """A tolerance derived from the dtype's machine epsilon, a number of rounding steps
    and the magnitude of a float64 reference: ``n_ops * eps * max(1, max|reference|)``."""
    eps = float(np.finfo(dtype).eps)
    return n_ops * eps * max(1.0, float(np.max(np.abs(reference), initial=0.0)))


def expect_close(ours, expected, *, what, n_ops=8, dtype="float64", rtol=None, atol=None, equal_nan=False):
    """Assert the array ``ours`` equals ``expected`` to a tolerance, with a message that
    says which array differs (``what``: "softmax (4, 6) float64, gradient of x"), how many
    elements, the worst one (its index, both values) and the tolerance.

    The tolerance is ``atol`` if given, else ``rtol * max(1, max|expected|)``, else
    ``float64_tolerance(expected, n_ops, dtype)``. Infinities must match exactly; a NaN is
    wrong (with ``equal_nan``, a NaN of ``ours`` where ``expected`` has one is right).
    ``ours`` may be an array, a number or a tensor (its ``.numpy()``); None fails ("no gradient")."""
    if ours is None:
        raise AssertionError(f"{what}: no gradient (None) where one was expected")
    if hasattr(ours, "numpy") and not isinstance(ours, np.ndarray):
        ours = ours.numpy()
    got, expected = np.array(ours, dtype=np.float64), np.asarray(expected, dtype=np.float64)
    if got.shape != expected.shape:
        raise AssertionError(f"{what}: shape {got.shape}, expected {expected.shape}")
    finite = expected[np.isfinite(expected)]
    if atol is not None:
        tolerance = atol
    elif rtol is not None:
        tolerance = rtol * max(1.0, float(np.max(np.abs(finite), initial=0.0)))
    else:
        tolerance = float64_tolerance(finite, n_ops, dtype)
    same = (np.isinf(expected) & (got == expected)) | (equal_nan & np.isnan(expected) & np.isnan(got))
    error = np.where(same, 0.0, np.abs(got - expected))
    error = np.where(np.isnan(error), np.inf, error)
    wrong = error > tolerance
    if wrong.any():
        worst = np.unravel_index(int(np.argmax(error)), error.shape) if error.ndim else ()
        raise AssertionError(
            f"{what}: {int(wrong.sum())} of {wrong.size} elements wrong; worst at {tuple(int(i) for i in worst)}: "
            f"yours {got[worst]:.10g}, expected {expected[worst]:.10g} (tolerance {tolerance:.3g})"
        )


def node_backward(output, grad):
    """The gradients that the node which made ``output`` returns for the upstream array
    ``grad``, asked of its Function directly, as the engine asks it: a tuple, one entry per
    input of the op (None where it has none), of the broadcast shape where the op broadcasts.
    A test of one op's backward this way needs neither the engine (homework task 1.1) nor
    the sum over broadcast dims (task 1.3)."""
    node = output.grad_fn
    grads = node.function.backward(node.ctx, grad)
    return grads if isinstance(grads, tuple) else (grads,)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items):
    """Tests that use the ``torch`` fixture carry the ``torch`` marker (``pytest -m torch``).

    The suite runs on two worker processes (pytest-xdist, ``-n 2 --dist loadgroup`` in
    setup.cfg). Each file's tests stay on one worker, so a module's fixtures (the demos run
    once, the homework trees built once) are made once; a file that marks itself with an
    ``xdist_group`` shares its worker with the others of that group. The two files of
    grading tests need no shared worker: each grading process runs student code as a
    student account of its own (``homework/sandbox.py``, one lock per account), so one
    grader's clean-up never ends another's processes.

    The files that take minutes (:data:`LONG_FILES`: graders, demos, training runs) are
    collected first, so that the workers begin with them and the short files fill in around
    them, instead of one long file starting last and running alone at the end. Only the
    order of the files changes; each test's result does not depend on it."""
    for item in items:
        if "torch" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.torch)
        if item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::")[0]))
    rank = {name: n for n, name in enumerate(LONG_FILES)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(LONG_FILES)))  # stable: same order within


LONG_FILES = (
    "tests/test_homework.py",
    "tests/test_grading_isolation.py",
    "tests/test_demos.py",
    "tests/test_train.py",
    "tests/test_cli.py",
    "tests/test_stop_signals.py",
)
"""The files of the suite that run longest, longest first (``pytest --durations``)."""


@pytest.fixture
def rng(request):
    """A NumPy generator seeded from the test's own id: each test draws the same inputs
    whether it runs alone or in the whole suite, and no test shifts another's numbers.
    Under the homework grader's judge, also from the grading's secret seed (the same for
    the same submission, new for new code: held-back inputs cannot be memorised)."""
    own = zlib.crc32(request.node.nodeid.encode())
    judge = judge_of(request.config)
    return np.random.default_rng(own if judge is None else [judge.seed, own])


LOCAL = Local()


@pytest.fixture
def student(request):
    """The library under test of the held-back tests (see the module docstring)."""
    judge = judge_of(request.config)
    if judge is None:
        yield LOCAL
        return
    judge.student.begin(judge.timeout)
    try:
        yield judge.student
    finally:
        judge.student.reset()
