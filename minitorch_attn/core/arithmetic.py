"""The functional spellings of the arithmetic operators, with PyTorch's extra arguments:
``mt.add(a, b, alpha=2)`` is ``a + 2 b``, ``mt.sub(a, b, alpha=2)`` is ``a - 2 b``, and
``mt.div(a, b, rounding_mode="floor")`` rounds the quotient.

``alpha`` composes the operators of :mod:`.ops` (``alpha · b`` is a :class:`~.ops.Mul`,
so ``d/db = alpha``). A rounded quotient is piecewise constant, so its gradient is 0
wherever it is defined: :class:`RoundedDiv` returns zeros, as PyTorch does.
"""

from __future__ import annotations

import numbers

from .ops import Broadcasting
from .tensor import Tensor

ROUNDING_MODES = (None, "trunc", "floor")


def _check_alpha(alpha, what):
    if isinstance(alpha, bool) or not isinstance(alpha, numbers.Real):
        raise TypeError(f"{what}: alpha must be a number, got {alpha!r}")
    return alpha


def _is_bool(x):
    return isinstance(x, Tensor) and x.dtype == "bool"


def add(input, other, alpha=1):
    r"""``y = input + alpha * other``, broadcasting, as ``torch.add``;
    :math:`\partial y/\partial\,\mathrm{input} = 1`, :math:`\partial y/\partial\,\mathrm{other} = \alpha`.

    Raises:
        TypeError: for an ``alpha`` that is not a number. ValueError: for shapes that do
            not broadcast.

    Catalogue record: ``opinfo/arithmetic.py`` (its samples, references and checks).
    """
    alpha = _check_alpha(alpha, "add")
    if alpha == 1 or (_is_bool(other) and isinstance(alpha, numbers.Integral) and alpha):
        return input + other            # a bool times a nonzero int is the bool itself, as PyTorch
    return input + alpha * other


def sub(input, other, alpha=1):
    r"""``y = input - alpha * other``, broadcasting, as ``torch.sub``;
    :math:`\partial y/\partial\,\mathrm{input} = 1`, :math:`\partial y/\partial\,\mathrm{other} = -\alpha`.

    Raises:
        TypeError: for an ``alpha`` that is not a number. ValueError: for shapes that do
            not broadcast.

    Catalogue record: ``opinfo/arithmetic.py`` (its samples, references and checks).
    """
    alpha = _check_alpha(alpha, "sub")
    if _is_bool(input) or _is_bool(other):
        raise TypeError("sub: subtraction with a bool tensor is not supported, as in PyTorch "
                        "(use logical_xor, the ^ operator, or ~ instead)")
    return input - other if alpha == 1 else input - alpha * other


class RoundedDiv(Broadcasting):
    r"""``y = a / b`` rounded toward zero (``"trunc"``) or toward -inf (``"floor"``). Between
    integer tensors the result stays integer (as PyTorch); otherwise it is float. Backward:
    the result is a step function of ``a`` and ``b``, so
    :math:`\partial y/\partial a = \partial y/\partial b = 0` (wherever it is defined) and
    both gradients are 0."""

    promotes = True

    @staticmethod
    def forward(ctx, a, b, rounding_mode):
        xp = ctx.xp
        ctx.shapes = [getattr(x, "shape", ()) for x in (a, b)]
        floats = [x.dtype for x in (a, b) if hasattr(x, "dtype") and str(x.dtype).startswith("float")]
        if floats or isinstance(a, float) or isinstance(b, float):
            quotient = a / b
            return xp.floor(quotient) if rounding_mode == "floor" else xp.trunc(quotient)
        if rounding_mode == "floor":
            return a // b
        magnitude = xp.abs(a) // xp.abs(b)                         # trunc: round |a / b| down, then sign
        return xp.where((a < 0) != (b < 0), -magnitude, magnitude)

    @staticmethod
    def backward(ctx, grad_output):
        zeros = ctx.xp.zeros_like(grad_output)
        return zeros, zeros


def div(input, other, rounding_mode=None):
    """``input / other``, broadcasting, as ``torch.div``: true division (integers give float),
    or with ``rounding_mode="trunc"`` / ``"floor"`` the quotient rounded toward zero / -inf
    (integers then stay integer; the gradient is 0, as PyTorch's).

    Raises:
        TypeError: when neither operand is a Tensor (with a rounding mode).
        ValueError: for another ``rounding_mode``, or shapes that do not broadcast.

    Catalogue record: ``opinfo/arithmetic.py`` (its samples, references and checks).
    """
    if rounding_mode not in ROUNDING_MODES:
        raise ValueError(f"div: rounding_mode must be None, 'trunc' or 'floor', got {rounding_mode!r}")
    if rounding_mode is None:
        return input / other
    if not isinstance(input, Tensor) and not isinstance(other, Tensor):
        raise TypeError("div: expected a Tensor among the operands")
    return RoundedDiv.apply(input, other, rounding_mode=rounding_mode)

