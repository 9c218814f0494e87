"""The engine: order of work, accumulation, graph release, no_grad, custom Functions.

The tests of the engine (task 1.1) use ops whose backward is no other task's: add, subtract,
abs, einsum's product, and :class:`Times` below (the library's ``*`` is task 1.2's, its
``sum`` task 1.4's), and no broadcasting (task 1.3 sums it back), so that they pass or fail
with the engine's code alone."""

import numpy as np
import pytest

import minitorch_attn as mt
from minitorch_attn import Function
from minitorch_attn.opinfo.engine import FirstOnly  # backward returns None for b


class Times(Function):
    """``a * b`` for tensors of one shape, written here: d/da = b, d/db = a."""

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a * b

    @staticmethod
    def backward(ctx, grad_output):
        a, b = ctx.saved_tensors
        return grad_output * b, grad_output * a


def times(a, b):
    return Times.apply(a, b)


@pytest.mark.task_1_1
def test_a_node_used_twice_receives_the_sum():
    a = mt.tensor([1.0, 2.0], requires_grad=True)
    b = a + a
    c = b + b
    c.backward(mt.ones(2))
    np.testing.assert_array_equal(a.grad.numpy(), [4.0, 4.0])


@pytest.mark.task_1_1
def test_diamond_graph():
    x = mt.tensor(3.0, requires_grad=True)
    y = times(x, x)  # dy/dx = 2x
    z = times(y, x) + y  # dz/dx = 3x^2 + 2x
    z.backward()
    assert x.grad.item() == 3 * 9 + 2 * 3


@pytest.mark.task_1_1
def test_a_long_chain_does_not_hit_the_recursion_limit():
    x = mt.tensor(1.0, requires_grad=True)
    y = x
    for _ in range(10_000):
        y = y + 1.0
    y.backward()
    assert x.grad.item() == 1.0


@pytest.mark.task_1_1
def test_leaf_gradients_accumulate_until_cleared():
    x = mt.tensor([1.0, -1.0], requires_grad=True)
    ones = mt.ones(2)
    (x + x + x).backward(ones)
    (x + x + x).backward(ones)
    np.testing.assert_array_equal(x.grad.numpy(), [6.0, 6.0])
    x.zero_grad()
    assert x.grad is None
    (x + x + x).backward(ones)
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, 3.0])
    x.grad = None
    (x + 1.0).backward(ones)
    np.testing.assert_array_equal(x.grad.numpy(), [1.0, 1.0])


@pytest.mark.task_1_1
def test_second_backward_through_a_freed_graph_raises():
    x = mt.tensor([1.0, 2.0], requires_grad=True)
    y = times(x, x)
    y.backward(mt.ones(2))
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        y.backward(mt.ones(2))


@pytest.mark.task_1_1
def test_retain_graph_allows_a_second_backward():
    x = mt.tensor([1.0, 2.0], requires_grad=True)
    y = times(x, x)
    y.backward(mt.ones(2), retain_graph=True)
    y.backward(mt.ones(2))
    np.testing.assert_array_equal(x.grad.numpy(), [4.0, 8.0])


@pytest.mark.task_1_1
def test_saved_arrays_are_released_after_backward():
    x = mt.tensor([1.0, 2.0], requires_grad=True)
    y = times(x, x)
    node = y.grad_fn
    (y + 1.0).backward(mt.ones(2))
    assert node.ctx._saved == ()
    with pytest.raises(RuntimeError, match="second time"):
        node.ctx.saved_tensors  # noqa: B018 (reading it raises)


@pytest.mark.task_1_1
def test_no_grad_builds_no_graph():
    x = mt.tensor([1.0], requires_grad=True)
    with mt.no_grad():
        y = x * 2
    assert not y.requires_grad and y.grad_fn is None
    assert mt.is_grad_enabled()

    @mt.no_grad()
    def double(t):
        return t * 2

    assert not double(x).requires_grad


@pytest.mark.task_1_1
def test_backward_on_a_non_scalar_needs_grad():
    x = mt.randn(3, requires_grad=True)
    with pytest.raises(ValueError, match="single-element tensor"):
        (x * 2).backward()
    with pytest.raises(ValueError, match="grad has shape"):
        (x * 2).backward(mt.ones(4))


@pytest.mark.task_1_1
def test_backward_without_requires_grad_raises():
    with pytest.raises(RuntimeError, match="does not require grad"):
        mt.ones(1).backward()


@pytest.mark.task_1_1
def test_upstream_gradient_is_never_modified_in_place():
    x = mt.randn(2, 3, requires_grad=True)
    w = mt.randn(2, 3, requires_grad=True)
    upstream = mt.randn(2, 3)
    before = upstream.numpy().copy()
    y = times(times(x, w) + x, w).abs() + x - mt.einsum("ij,ij->ij", w, w)
    y.backward(upstream)
    np.testing.assert_array_equal(upstream.numpy(), before)


@pytest.mark.task_1_1
def test_leaf_gradients_never_share_a_buffer():
    a = mt.randn(3, requires_grad=True)
    b = mt.randn(3, requires_grad=True)
    upstream = mt.ones(3)
    (a + b).backward(upstream)
    a.grad.data[0] = 100.0  # an optimizer mutating one gradient must not touch the other
    assert b.grad.numpy()[0] == 1.0 and upstream.numpy()[0] == 1.0


@pytest.mark.task_1_1
def test_gradients_have_their_inputs_dtype():
    x = mt.randn(4, 3, dtype="float32", requires_grad=True)
    y = mt.randn(4, 3, dtype="float64", requires_grad=True)
    z = x + y  # float64
    assert z.dtype == "float64"
    z.backward(mt.ones((4, 3), dtype="float64"))
    assert x.grad.shape == (4, 3) and x.grad.dtype == "float32"
    assert y.grad.shape == (4, 3) and y.grad.dtype == "float64"


def test_gradients_have_their_inputs_shape_and_dtype_after_broadcasting():
    x = mt.randn(4, 1, dtype="float32", requires_grad=True)
    y = mt.randn(3, dtype="float64", requires_grad=True)
    z = x + y  # float64 result of shape (4, 3)
    assert z.dtype == "float64"
    z.backward(mt.ones((4, 3), dtype="float64"))
    assert x.grad.shape == (4, 1) and x.grad.dtype == "float32"
    assert y.grad.shape == (3,) and y.grad.dtype == "float64"


@pytest.mark.task_1_1
def test_float32_stays_float32_with_python_floats(device):
    x = mt.randn(3, device=device, requires_grad=True)
    for y in (x * 0.5, x + 1.0, 2.0 - x, x / 3.0, x**2.0, (x * 0.1).exp(), x.mean(), x.var()):
        assert y.dtype == "float32"


@pytest.mark.task_1_1
def test_custom_function_with_two_outputs():
    class SinCos(Function):
        """(sin x, cos x); d/dx = cos x · grad_sin - sin x · grad_cos."""

        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            xp = ctx.xp
            return xp.sin(x), xp.cos(x)

        @staticmethod
        def backward(ctx, grad_sin, grad_cos):
            (x,) = ctx.saved_tensors
            xp = ctx.xp
            return grad_sin * xp.cos(x) - grad_cos * xp.sin(x)

    x = mt.tensor([0.3, 1.2], dtype="float64", requires_grad=True)
    s, c = SinCos.apply(x)
    (s + s).backward(mt.ones(2, dtype="float64"))  # the cos output is unused: its gradient is zero
    np.testing.assert_allclose(x.grad.numpy(), 2 * np.cos([0.3, 1.2]), rtol=1e-15)
    assert mt.gradcheck(lambda t: SinCos.apply(t), [mt.tensor([0.3, 1.2], dtype="float64", requires_grad=True)])


@pytest.mark.task_1_1
def test_backward_returning_the_wrong_number_of_gradients_is_reported():
    class Bad(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1

        @staticmethod
        def backward(ctx, grad_output):
            return grad_output, grad_output

    x = mt.randn(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="Bad.backward returned 2 gradients, expected 1"):
        Bad.apply(x).backward(mt.ones(2))


@pytest.mark.task_1_1
def test_backward_of_several_outputs_at_once():
    x = mt.tensor([1.0, 2.0], requires_grad=True)
    mt.backward([x + x, times(x, x)], [mt.ones(2), mt.ones(2)])
    np.testing.assert_array_equal(x.grad.numpy(), [4.0, 6.0])


def test_none_from_a_backward_is_a_zero_gradient_for_a_non_leaf_input():
    x = mt.tensor([1.0, 2.0], requires_grad=True)
    y = mt.tensor([3.0, 4.0], requires_grad=True)
    b = y * 3  # not a leaf: its node receives nothing
    FirstOnly.apply(x, b).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 2.0])
    assert y.grad is None  # no gradient reached it at all, as in PyTorch


def test_none_from_a_backward_adds_nothing_to_the_other_paths():
    y = mt.tensor([3.0, 4.0], requires_grad=True)
    b = y * 3
    (FirstOnly.apply(y, b) + b * b).sum().backward()  # d/dy = 2 + 2·b·3
    np.testing.assert_array_equal(y.grad.numpy(), 2 + 18 * np.array([3.0, 4.0]))


def test_none_for_one_output_of_a_two_output_node():
    x = mt.tensor([0.5, -1.0], requires_grad=True)
    first, second = mt.split(x * 1.0, 1)  # one node, two outputs
    FirstOnly.apply(first, second).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 0.0])


def test_errors_of_a_forward_keep_their_own_message():
    class Strict(Function):
        @staticmethod
        def forward(ctx, x):
            raise ValueError("my input cannot broadcast to what I need")

    with pytest.raises(ValueError, match="^my input cannot broadcast to what I need$"):
        Strict.apply(mt.randn(2))


def test_backward_of_something_that_is_not_a_tensor_is_a_type_error():
    with pytest.raises(TypeError, match="backward: expected Tensors"):
        mt.backward([3.0])
    x = mt.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(TypeError, match="grad must be a Tensor or an array of numbers"):
        (x * 2).backward("x")
    with pytest.raises(TypeError, match="grad must be a Tensor or an array of numbers"):
        (x * 2).backward([None, None])
