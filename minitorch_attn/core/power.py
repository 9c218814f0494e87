"""Powers with a tensor exponent: ``x ** t``, ``2.0 ** t`` (:meth:`Tensor.__rpow__`, the usual
way to write rotary frequencies ``base ** (-2i / d)``), and :func:`pow`, which takes either.

A number exponent goes to :class:`~.ops.Pow` (the power rule alone). With a tensor
exponent both operands may vary, and broadcast, so the op is :class:`TensorPow` below.
"""

from __future__ import annotations

import math
import numbers

from .dtypes import Scalar
from .ops import Broadcasting
from .ops import pow as number_pow
from .tensor import Tensor


class TensorPow(Broadcasting):
    r"""``y = a ** b`` elementwise with broadcasting, ``b`` a tensor (``a`` a tensor or a number).

    Backward, from :math:`y = e^{b \log a}`:

    .. derivation 1.2 begin

    .. math::

        \frac{\partial y}{\partial a} = b\,a^{b-1}
            \quad\text{(the power rule)},
        \qquad
        \frac{\partial y}{\partial b} = y \log a
            \quad\text{(the exponential's rule: } \tfrac{d}{db}\,c^b = c^b \log c\text{)}
    .. derivation end

    Where PyTorch defines the limits, so do we: ``dy/da = 0`` where ``b = 0`` (``a^0 = 1``
    everywhere, also at 0), and ``dy/db = 0`` where ``a = 0`` and ``b >= 0`` (``0^b`` is 0
    or 1 there, flat in ``b``), instead of ``0 · log 0 = NaN``. A negative base has no
    real logarithm: its ``dy/db`` is NaN, as PyTorch's.
    """

    @staticmethod
    def forward(ctx, a, b):
        y = a**b
        ctx.save_for_backward(a, b, y)
        return y

    @staticmethod
    def backward(ctx, grad_output):
        a, b, y = ctx.saved_tensors
        xp = ctx.xp
        grad_a = grad_b = None
        if ctx.needs_input_grad[0]:
            base = xp.where(b == 0, 1.0, a)  # b = 0: no 0^-1 to form, the result is 0 anyway
            grad_a = grad_output * xp.where(b == 0, 0.0, b * base ** (b - 1))  # b a^(b-1)
        if ctx.needs_input_grad[1] and isinstance(a, numbers.Real):  # a number base: log a is a number
            log_a = math.log(a) if a > 0 else (-math.inf if a == 0 else math.nan)
            grad_b = grad_output * (xp.where(b >= 0, 0.0, y * log_a) if a == 0 else y * log_a)  # y log a
        elif ctx.needs_input_grad[1]:
            at_zero = (a == 0) & (b >= 0)
            grad_b = grad_output * xp.where(at_zero, 0.0, y * xp.log(xp.where(at_zero, 1.0, a)))  # y log a
        return grad_a, grad_b


def pow(input: Tensor | Scalar, exponent: Tensor | Scalar) -> Tensor:
    """``input ** exponent`` elementwise, as ``torch.pow``: a tensor to a number power (see
    :class:`~.ops.Pow`), a tensor to a tensor power, or a number to a tensor power
    (``mt.pow(2.0, t)``, also written ``2.0 ** t``), with broadcasting (see ``TensorPow``).
    Integer tensors become float where PyTorch's promotion says so.

    Raises:
        TypeError: when neither operand is a Tensor, or an operand is not a number or Tensor.
        ValueError: for shapes that do not broadcast.

    Catalogue record: ``opinfo/arithmetic.py`` (its samples, references and checks).
    """
    if not isinstance(exponent, Tensor):
        if not isinstance(input, Tensor):
            raise TypeError(
                f"pow: expected a Tensor base or exponent, got {type(input).__name__} and {type(exponent).__name__}"
            )
        if isinstance(exponent, bool) or not isinstance(exponent, numbers.Real):
            raise TypeError(f"pow: the exponent must be a number or a Tensor, got {type(exponent).__name__}")
        return number_pow(input, exponent)  # a number exponent: ops.pow, with PyTorch's int rules
    if not isinstance(input, (Tensor, numbers.Real)) or isinstance(input, bool):
        raise TypeError(f"pow: the base must be a number or a Tensor, got {type(input).__name__}")
    return TensorPow.apply(input, exponent)
