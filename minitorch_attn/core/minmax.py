"""The operations that choose between values: :func:`maximum`, :func:`minimum` and :func:`clamp`.

Each forward compares, and each backward sends ``grad_output`` to the value that was
chosen. The comparisons decide what happens at ties (the gradient is shared) and at NaN
(every comparison with NaN is False), and both are PyTorch's: see each class.
"""

from __future__ import annotations

import numbers

from .autograd import Function
from .dtypes import Scalar
from .ops import Broadcasting, broadcast_shapes
from .tensor import FLOAT_DTYPES, Tensor, dtype_name, result_dtype


class Maximum(Broadcasting):
    r"""Elementwise ``y = max(a, b)``.  The larger input gets ``grad_output``; a tie splits it
    half/half. With ``[·]`` 1 where it holds, else 0:

    .. math::

        \frac{\partial y}{\partial a} = [a > b] + \tfrac12\,[a = b],
        \qquad
        \frac{\partial y}{\partial b} = 1 - \frac{\partial y}{\partial a} = [a < b] + \tfrac12\,[a = b]

    Where either is NaN the result is NaN and, as PyTorch, both inputs get the whole
    ``grad_output`` (each one could be the NaN's cause): both derivatives are 1 there."""

    @staticmethod
    def select(xp, a, b):
        return xp.maximum(a, b), a > b  # the result, and where a wins outright

    @classmethod
    def forward(cls, ctx, a, b):
        xp = ctx.xp
        y, a_wins = cls.select(xp, a, b)
        if dtype_name(y.dtype) not in FLOAT_DTYPES:
            return y  # ints and bools: no gradient to share
        tie = xp.astype(a == b, y.dtype)
        either_nan = xp.astype(xp.isnan(y), y.dtype)
        share_a = xp.astype(a_wins, y.dtype) + 0.5 * tie + either_nan  # a's share of the gradient
        ctx.save_for_backward(share_a, 1.0 - share_a + either_nan)  # b's: the rest, or 1 at NaN
        return y

    @staticmethod
    def backward(ctx, grad_output):
        share_a, share_b = ctx.saved_tensors
        return grad_output * share_a, grad_output * share_b


class Minimum(Maximum):
    r"""Elementwise ``y = min(a, b)``: :class:`Maximum` with the comparison turned round (the
    smaller input gets the gradient, a tie splits it, NaN sends it to both):
    :math:`\partial y/\partial a = [a < b] + \tfrac12\,[a = b]`, and
    :math:`\partial y/\partial b = [a > b] + \tfrac12\,[a = b]`."""

    @staticmethod
    def select(xp, a, b):
        return xp.minimum(a, b), a < b


def maximum(a: Tensor | Scalar, b: Tensor | Scalar) -> Tensor:
    """Elementwise maximum of two tensors (or a tensor and a number), broadcasting; NaN
    propagates (as ``torch.maximum``). Dtype: PyTorch's promotion of the two.

    Catalogue record: ``opinfo/arithmetic.py`` (its samples, references and checks).
    """
    return Maximum.apply(a, b)


def minimum(a: Tensor | Scalar, b: Tensor | Scalar) -> Tensor:
    """Elementwise minimum of two tensors (or a tensor and a number), broadcasting; NaN
    propagates (as ``torch.minimum``). Dtype: PyTorch's promotion of the two.

    Catalogue record: ``opinfo/arithmetic.py`` (its samples, references and checks).
    """
    return Minimum.apply(a, b)


class Clamp(Function):
    r"""``y = min(max(x, low), high)`` elementwise, as ``torch.clamp``; either bound may be
    None, a number or a tensor that broadcasts with ``x``.

    Backward (each branch of the two comparisons sends the gradient ``g`` to the value it
    chose; a bound that is None is no branch; ``[·]`` is 1 where it holds, else 0):

    .. math::

        dx &= g\,[\mathrm{low} \le x \le \mathrm{high}]
            &&\text{(x was kept)}

        d\mathrm{low} &= g\,[x < \mathrm{low} \text{ and } \mathrm{low} < \mathrm{high}]
            &&\text{(low was chosen)}

        d\mathrm{high} &= g\,[x > \mathrm{high} \text{ or } \mathrm{high} < \mathrm{low}]
            &&\text{(high was chosen, also when low > high)}

    These are PyTorch's ``clamp_backward_min_max``. Every comparison with a NaN is False,
    so where ``x`` or a bound is NaN, ``y`` is NaN (NumPy's maximum and minimum propagate
    it) and nothing gets a gradient: PyTorch's behaviour.
    """

    @staticmethod
    def forward(ctx, x, low, high):
        xp, device = ctx.xp, ctx.backend.device
        low = low if low is None or hasattr(low, "shape") else xp.asarray(low, dtype=x.dtype, device=device)
        high = high if high is None or hasattr(high, "shape") else xp.asarray(high, dtype=x.dtype, device=device)
        ctx.save_for_backward(x, low, high)
        y = x if low is None else xp.maximum(x, low)
        return y if high is None else xp.minimum(y, high)

    @staticmethod
    def backward(ctx, grad_output):
        x, low, high = ctx.saved_tensors
        xp = ctx.xp
        zero = xp.zeros((), dtype=grad_output.dtype, device=ctx.backend.device)
        kept = xp.ones_like(x, dtype=xp.bool)
        if low is not None:
            kept = kept & (x >= low)
        if high is not None:
            kept = kept & (x <= high)
        grad_x = xp.where(kept, grad_output, zero) if ctx.needs_input_grad[0] else None
        grad_low = grad_high = None
        if ctx.needs_input_grad[1]:
            chose_low = x < low if high is None else (x < low) & (low < high)
            grad_low = xp.where(chose_low, grad_output, zero)
        if ctx.needs_input_grad[2]:
            chose_high = x > high if low is None else (x > high) | (high < low)
            grad_high = xp.where(chose_high, grad_output, zero)
        return grad_x, grad_low, grad_high


def clamp(x: Tensor, min: Tensor | Scalar | None = None, max: Tensor | Scalar | None = None) -> Tensor:
    """Clamp ``x`` into ``[min, max]``, as ``torch.clamp``; see :class:`Clamp`.

    Shapes: ``min`` and ``max`` are None, numbers, or tensors that broadcast with ``x``;
    the result has the broadcast shape (any size may be 0). Dtype: PyTorch's promotion of
    ``x`` and the bounds (``clamp(int_tensor, min=0.5)`` is float32, the default float
    dtype). Gradients reach tensor bounds. ``min > max`` gives ``max``, as PyTorch.

    Raises:
        ValueError: if both bounds are None, or the shapes do not broadcast.
        TypeError: for a bound that is neither None, a number nor a Tensor.

    Catalogue record: ``opinfo/arithmetic.py`` (its samples, references and checks).
    """
    if min is None and max is None:
        raise ValueError("clamp: at least one of 'min' or 'max' must not be None")
    for name, bound in (("min", min), ("max", max)):
        if not (
            bound is None
            or isinstance(bound, Tensor)
            or isinstance(bound, numbers.Real)
            and not isinstance(bound, bool)
        ):
            raise TypeError(f"clamp: {name} must be None, a number or a Tensor, got {type(bound).__name__}")
    target = result_dtype(x, min, max)
    shapes = [tuple(getattr(a, "shape", ())) for a in (x, min, max) if a is not None]
    if broadcast_shapes(*shapes) is None:
        raise ValueError(f"clamp: the shapes {', '.join(map(str, shapes))} do not broadcast together")
    operands = (a.to(dtype=target) if isinstance(a, Tensor) and a.dtype != target else a for a in (x, min, max))
    return Clamp.apply(*operands)  # all of one dtype now: the bounds' arrays are made in it
