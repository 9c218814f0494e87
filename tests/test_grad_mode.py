"""Grad mode is per thread, nests, and decorates plain, recursive and generator functions
as PyTorch's (``torch.no_grad``, ``torch.enable_grad``, ``torch.set_grad_enabled``)."""

import threading

import pytest

import minitorch_attn as mt

MODES = [
    pytest.param(mt.no_grad, False, id="no_grad"),
    pytest.param(mt.enable_grad, True, id="enable_grad"),
    pytest.param(lambda: mt.set_grad_enabled(False), False, id="set_grad_enabled(False)"),
    pytest.param(lambda: mt.set_grad_enabled(True), True, id="set_grad_enabled(True)"),
]


def in_thread(function):
    """Run ``function`` in a new thread and return what it returned (or raise what it raised)."""
    result = {}

    def run():
        try:
            result["value"] = function()
        except BaseException as error:
            result["error"] = error

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    if "error" in result:
        raise result["error"]
    return result["value"]


def records():
    x = mt.tensor([1.0, 2.0], requires_grad=True)
    return (x * 2).requires_grad


@pytest.mark.parametrize("make, mode", MODES)
def test_a_new_thread_starts_with_grad_enabled(make, mode):
    with make():
        assert mt.is_grad_enabled() is mode
        assert in_thread(mt.is_grad_enabled) is True
        assert in_thread(records) is True
    assert mt.is_grad_enabled() is True


@pytest.mark.parametrize("make, mode", MODES)
def test_a_block_in_another_thread_leaves_this_thread_alone(make, mode):
    inside, release = threading.Event(), threading.Event()

    def other():
        with mt.no_grad():
            inside.set()
            release.wait(10)

    thread = threading.Thread(target=other)
    thread.start()
    inside.wait(10)
    try:
        assert mt.is_grad_enabled() is True
        assert records() is True
    finally:
        release.set()
        thread.join()


@pytest.mark.parametrize("outer", [True, False])
@pytest.mark.parametrize("make, mode", MODES)
def test_blocks_nest_and_put_back_the_mode_they_found(outer, make, mode):
    with mt.set_grad_enabled(outer):
        with make():
            assert mt.is_grad_enabled() is mode
            with mt.no_grad():
                assert mt.is_grad_enabled() is False
                with mt.enable_grad():
                    assert mt.is_grad_enabled() is True
                assert mt.is_grad_enabled() is False
            assert mt.is_grad_enabled() is mode
        assert mt.is_grad_enabled() is outer
    assert mt.is_grad_enabled() is True


@pytest.mark.parametrize("make, mode", MODES)
def test_the_mode_comes_back_after_an_error(make, mode):
    with mt.set_grad_enabled(not mode):
        with pytest.raises(KeyError):
            with make():
                raise KeyError("x")
        assert mt.is_grad_enabled() is (not mode)


@pytest.mark.parametrize("make, mode", MODES)
def test_a_recursive_decorated_function_puts_back_the_mode(make, mode):
    seen = []

    @make()
    def depth(n):
        seen.append(mt.is_grad_enabled())
        return 0 if n == 0 else 1 + depth(n - 1)

    for outer in (True, False):
        with mt.set_grad_enabled(outer):
            assert depth(4) == 4
            assert mt.is_grad_enabled() is outer
    assert seen == [mode] * 10
    assert mt.is_grad_enabled() is True


@pytest.mark.parametrize("make, mode", MODES)
def test_a_decorated_generator_runs_its_body_in_the_mode_and_the_caller_in_its_own(make, mode):
    @make()
    def steps(n):
        for i in range(n):
            got = yield mt.is_grad_enabled()
            assert got == i
        return "done"

    for outer in (True, False):
        with mt.set_grad_enabled(outer):
            gen = steps(3)
            assert next(gen) is mode
            assert mt.is_grad_enabled() is outer  # between steps: the caller's mode
            assert gen.send(0) is mode
            assert mt.is_grad_enabled() is outer
            assert gen.send(1) is mode
            with pytest.raises(StopIteration) as stop:
                gen.send(2)
            assert stop.value.value == "done"
            assert mt.is_grad_enabled() is outer


def test_a_decorated_generator_sees_throw_and_close_in_its_mode():
    seen = []

    @mt.no_grad()
    def body():
        try:
            yield 1
        except ValueError:
            seen.append(("throw", mt.is_grad_enabled()))
            yield 2
        finally:
            seen.append(("finally", mt.is_grad_enabled()))

    gen = body()
    assert next(gen) == 1
    assert gen.throw(ValueError("x")) == 2
    gen.close()
    assert seen == [("throw", False), ("finally", False)]
    assert mt.is_grad_enabled() is True


def test_no_grad_decorates_without_parentheses_and_keeps_the_name():
    @mt.no_grad
    def evaluate(x):
        """Docstring."""
        return (x * 2).requires_grad, mt.is_grad_enabled()

    assert evaluate(mt.tensor([1.0], requires_grad=True)) == (False, False)
    assert evaluate.__name__ == "evaluate" and evaluate.__doc__ == "Docstring."
    assert mt.is_grad_enabled() is True


def test_set_grad_enabled_called_as_a_function_sets_the_mode():
    try:
        mt.set_grad_enabled(False)
        assert mt.is_grad_enabled() is False
        assert records() is False
    finally:
        mt.set_grad_enabled(True)
    assert records() is True


def test_set_grad_enabled_as_a_decorator_does_not_change_the_mode_where_it_is_written():
    @mt.set_grad_enabled(False)
    def f():
        return mt.is_grad_enabled()

    assert mt.is_grad_enabled() is True
    assert f() is False
    assert mt.is_grad_enabled() is True


@pytest.mark.parametrize("bad", [0, 1, None, "no"])
def test_set_grad_enabled_refuses_a_mode_that_is_not_a_bool(bad):
    with pytest.raises(TypeError, match="True or False"):
        mt.set_grad_enabled(bad)
    assert mt.is_grad_enabled() is True


def test_torch_agrees_on_threads_and_generators(torch):
    with torch.no_grad():
        assert in_thread(torch.is_grad_enabled) is True

    @torch.no_grad()
    def steps():
        yield torch.is_grad_enabled()

    gen = steps()
    assert next(gen) is False and torch.is_grad_enabled() is True
