"""The checker itself: it must catch the usual mistakes in a hand-written backward."""

import warnings

import numpy as np
import pytest

import minitorch_attn as mt
from minitorch_attn import Function, GradcheckError
from minitorch_attn.core import autograd


def f64(*shape, requires_grad=True, device="cpu"):
    return mt.randn(*shape, dtype="float64", device=device, requires_grad=requires_grad)


class Square(Function):
    """y = x², correct backward: 2 x g."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return 2 * x * grad_output


@pytest.mark.task_1_1
def test_a_correct_backward_passes(device):
    assert mt.gradcheck(Square.apply, [f64(3, 2, device=device)])
    assert mt.gradcheck(Square.apply, [f64(3, 2, device=device)], fast_mode=True)


def test_wrong_sign_is_caught():
    class WrongSign(Square):
        @staticmethod
        def backward(ctx, grad_output):
            (x,) = ctx.saved_tensors
            return -2 * x * grad_output

    with pytest.raises(GradcheckError, match="gradient of input 0"):
        mt.gradcheck(WrongSign.apply, [f64(3)])
    with pytest.raises(GradcheckError):
        mt.gradcheck(WrongSign.apply, [f64(3)], fast_mode=True)


def test_missing_factor_is_caught():
    class MissingFactor(Square):
        @staticmethod
        def backward(ctx, grad_output):
            (x,) = ctx.saved_tensors
            return x * grad_output

    with pytest.raises(GradcheckError):
        mt.gradcheck(MissingFactor.apply, [f64(4)])


class AddBias(Function):
    """y = x + b with b of shape (C,) broadcast over the rows of x (N, C)."""

    @staticmethod
    def forward(ctx, x, b):
        return x + b

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output, ctx.xp.sum(grad_output, axis=0)


def test_broadcasting_not_reduced_is_caught():
    class FirstRowOnly(AddBias):
        @staticmethod
        def backward(ctx, grad_output):
            return grad_output, grad_output[0, ...]  # forgets that b was used by every row

    assert mt.gradcheck(AddBias.apply, [f64(3, 4), f64(4)])
    with pytest.raises(GradcheckError, match="gradient of input 1"):
        mt.gradcheck(FirstRowOnly.apply, [f64(3, 4), f64(4)])


def test_a_gradient_of_the_wrong_shape_is_reported_by_the_engine():
    class WrongShape(AddBias):
        @staticmethod
        def backward(ctx, grad_output):
            return grad_output, grad_output[:, :2]

    with pytest.raises(RuntimeError, match=r"gradient of shape \(3, 2\) for an input of shape \(4,\)"):
        mt.gradcheck(WrongShape.apply, [f64(3, 4), f64(4)])


def test_overwrite_instead_of_accumulate_is_caught(monkeypatch):
    def overwrite(leaf, grad, xp):  # a broken engine: the last gradient wins
        leaf.grad = mt.Tensor(grad)

    x = f64(3)
    assert mt.gradcheck(lambda a: a * a + a, [x])
    monkeypatch.setattr(autograd, "_accumulate", overwrite)
    with pytest.raises(GradcheckError):
        mt.gradcheck(lambda a: a * a + a, [x])


def test_gradients_of_ones_are_caught_by_the_zero_upstream_check():
    class Ones(Square):
        @staticmethod
        def backward(ctx, grad_output):
            return ctx.xp.ones_like(grad_output)

    with pytest.raises(GradcheckError, match="zero upstream gradient gave a nonzero gradient"):
        mt.gradcheck(Ones.apply, [f64(3)])


def test_a_plain_sum_would_hide_what_a_random_upstream_gradient_catches():
    class CenterWrong(Function):
        """y = x - mean(x); a wrong backward that forgets the mean term (returns g).
        With a plain-sum loss (g = 1) both give a zero-sum difference that is missed."""

        @staticmethod
        def forward(ctx, x):
            return x - ctx.xp.mean(x)

        @staticmethod
        def backward(ctx, grad_output):
            return grad_output

    x = f64(5)
    y = CenterWrong.apply(x)
    y.sum().backward()  # plain sum: analytic 1, true gradient 0 -- yet for a plain-sum check
    with pytest.raises(GradcheckError):
        mt.gradcheck(CenterWrong.apply, [f64(5)])


def test_nondeterministic_backward_is_caught():
    class Noisy(Square):
        @staticmethod
        def backward(ctx, grad_output):
            (x,) = ctx.saved_tensors
            return 2 * x * grad_output + ctx.backend.normal(x.shape, "float64") * 1e-9

    with pytest.raises(GradcheckError, match="two backward runs differ"):
        mt.gradcheck(Noisy.apply, [f64(3)])


def test_failure_message_names_input_element_values_and_tolerances():
    class WrongAtOne(Square):
        @staticmethod
        def backward(ctx, grad_output):
            (x,) = ctx.saved_tensors
            grad = 2 * x * grad_output
            grad[1, 0] = grad[1, 0] + grad_output[1, 0]  # one element off by g
            return grad

    with pytest.raises(GradcheckError) as info:
        mt.gradcheck(WrongAtOne.apply, [f64(2, 2)])
    message = str(info.value)
    for part in ("input 0", "element (1, 0)", "analytic", "numeric", "atol", "rtol"):
        assert part in message


def test_float32_inputs_warn():
    x = mt.randn(3, requires_grad=True)
    with pytest.warns(UserWarning, match="float32"):
        mt.check_gradients(Square.apply, [x], eps=1e-3, atol=1e-2, rtol=1e-2)


def test_nothing_to_check_is_an_error():
    with pytest.raises(ValueError, match="no input has requires_grad"):
        mt.gradcheck(Square.apply, [f64(3, requires_grad=False)])


@pytest.mark.task_1_1
def test_user_gradients_are_left_untouched():
    x = f64(3)
    x.grad = mt.ones(3, dtype="float64")
    mt.gradcheck(Square.apply, [x])
    np.testing.assert_array_equal(x.grad.numpy(), np.ones(3))


# ---- the tolerances derived from the error of the differences (what the suite uses) ----
class Tanh(Function):
    """y = tanh x, correct backward: (1 - y²) g; ``OFF_BY`` scales it (1 when right)."""

    OFF_BY = 1.0

    @staticmethod
    def forward(ctx, x):
        y = ctx.xp.tanh(x)
        ctx.save_for_backward(y)
        return y

    @classmethod
    def backward(cls, ctx, grad_output):
        (y,) = ctx.saved_tensors
        return (1 - y * y) * grad_output * cls.OFF_BY


class TanhOffBy0_1Percent(Tanh):
    OFF_BY = 1.001


def test_pytorch_tolerances_let_a_backward_0_1_percent_off_pass_and_derived_ones_do_not():
    x = f64(4, 3)
    assert mt.gradcheck(TanhOffBy0_1Percent.apply, [x])  # rtol=1e-3: PyTorch's defaults, kept for users
    report = mt.check_gradients(TanhOffBy0_1Percent.apply, [x], derived=True)
    assert not report.passed and "allowed" in report.failure and "step" in report.failure
    assert not mt.check_gradients(TanhOffBy0_1Percent.apply, [x], derived=True, fast_mode=True).passed
    with pytest.raises(GradcheckError, match="allowed"):
        mt.gradcheck(TanhOffBy0_1Percent.apply, [x], derived=True)


def test_derived_tolerances_pass_a_correct_backward_with_room_and_are_tight(device):
    x = f64(4, 3, device=device)
    report = mt.check_gradients(Tanh.apply, [x], derived=True)
    assert report.passed, report.failure
    assert report.error_ratio < 0.1  # robust: a tenth of its allowance at most
    gradient_size = float(np.max(np.abs(1 - np.tanh(x.numpy()) ** 2)))
    assert report.max_tolerance < 1e-6 * gradient_size  # tight: far below 0.1% of the gradient
    assert 1e-6 <= report.step <= 1e-3


def test_the_derived_step_balances_truncation_against_rounding():
    """A linear function has no truncation error: the largest step; a curved one a smaller step."""
    assert mt.check_gradients(lambda x: x * 3.0, [f64(5)], derived=True).step == 1e-3
    assert mt.check_gradients(Tanh.apply, [f64(5)], derived=True).step < 1e-3


def test_gradcheck_keeps_pytorch_defaults():
    import inspect

    for function in (mt.gradcheck, mt.check_gradients):
        defaults = {k: p.default for k, p in inspect.signature(function).parameters.items()}
        assert (defaults["eps"], defaults["atol"], defaults["rtol"]) == (1e-6, 1e-5, 1e-3)
    assert inspect.signature(mt.check_gradients).parameters["derived"].default is False


def test_zero_tolerances_are_allowed_and_say_where_the_backward_is_off():
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no division by a zero tolerance
        report = mt.check_gradients(TanhOffBy0_1Percent.apply, [f64(3)], atol=0.0, rtol=0.0)
    assert not report.passed and report.error_ratio == float("inf")
