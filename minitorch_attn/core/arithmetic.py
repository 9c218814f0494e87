"""The functional spellings of the arithmetic operators, with PyTorch's extra arguments:
``mt.add(a, b, alpha=2)`` is ``a + 2 b``, ``mt.sub(a, b, alpha=2)`` is ``a - 2 b``, and
``mt.div(a, b, rounding_mode="floor")`` rounds the quotient.

``alpha`` composes the operators of :mod:`.ops` (``alpha · b`` is a :class:`~.ops.Mul`,
so ``d/db = alpha``). A rounded quotient is piecewise constant, so its gradient is 0
wherever it is defined: :class:`RoundedDiv` returns zeros, as PyTorch does.
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy

from .dtypes import Scalar
from .factories import tensor
from .ops import Broadcasting
from .tensor import Tensor

ROUNDING_MODES = (None, "trunc", "floor")


def _check_alpha(alpha, what):
    if isinstance(alpha, bool) or not isinstance(alpha, numbers.Real):
        raise TypeError(f"{what}: alpha must be a number, got {alpha!r}")
    return alpha


def _operands(input: Tensor | Scalar, other: Tensor | Scalar, what: str) -> tuple[Any, Any]:
    """``input, other``, with ``input`` made a 0-d Tensor when both are numbers, as PyTorch
    does (``torch.div(7, 2)`` is ``tensor(3.5000)``, ``torch.add(2., 3)`` is float32)."""
    if isinstance(input, Tensor) or isinstance(other, Tensor):
        return input, other
    for value in (input, other):
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise TypeError(f"{what}: expected Tensors or numbers, got {type(value).__name__}")
    return tensor(input), other


def _is_bool(x):
    return isinstance(x, Tensor) and x.dtype == "bool"


def add(input: Tensor | Scalar, other: Tensor | Scalar, alpha: Scalar = 1) -> Tensor:
    r"""``y = input + alpha * other``, broadcasting, as ``torch.add``;
    :math:`\partial y/\partial\,\mathrm{input} = 1`, :math:`\partial y/\partial\,\mathrm{other} = \alpha`.

    Raises:
        TypeError: for an ``alpha`` that is not a number. ValueError: for shapes that do
            not broadcast.

    Catalogue record: ``opinfo/arithmetic.py`` (its samples, references and checks).
    """
    alpha = _check_alpha(alpha, "add")
    a, b = _operands(input, other, "add")  # Tensor or number each, at least one a Tensor
    if alpha == 1 or (_is_bool(b) and isinstance(alpha, numbers.Integral) and alpha):
        return a + b  # a bool times a nonzero int is the bool itself, as PyTorch
    return a + alpha * b


def sub(input: Tensor | Scalar, other: Tensor | Scalar, alpha: Scalar = 1) -> Tensor:
    r"""``y = input - alpha * other``, broadcasting, as ``torch.sub``;
    :math:`\partial y/\partial\,\mathrm{input} = 1`, :math:`\partial y/\partial\,\mathrm{other} = -\alpha`.

    Raises:
        TypeError: for an ``alpha`` that is not a number. ValueError: for shapes that do
            not broadcast.

    Catalogue record: ``opinfo/arithmetic.py`` (its samples, references and checks).
    """
    alpha = _check_alpha(alpha, "sub")
    a, b = _operands(input, other, "sub")
    if _is_bool(a) or _is_bool(b):
        raise TypeError(
            "sub: subtraction with a bool tensor is not supported, as in PyTorch "
            "(use logical_xor, the ^ operator, or ~ instead)"
        )
    return a - b if alpha == 1 else a - alpha * b


def _floor_divide(backend, a, b):
    """``floor(a / b)`` of floats as PyTorch computes it (``div_floor_floating`` in
    ``c10/util/generic_math.h``, also NumPy's ``floor_divide``), not as ``floor`` of the
    rounded quotient ``a / b``: that quotient can round up onto an integer the exact one
    is below (``a = 1, b = 0.1``: ``1 / 0.1`` is exactly 10.0, while 0.1 is stored a little
    above 1/10, so the exact quotient is below 10 and its floor is 9).

    1. ``mod = fmod(a, b)``, exact, with the sign of ``a``; ``a - mod`` is a multiple of ``b``;
    2. ``div = (a - mod) / b``, nearly an integer: the truncated quotient;
    3. where ``mod`` and ``b`` differ in sign, the truncation went up: ``div - 1``;
    4. round ``div`` to the integer it is near: its floor, plus 1 when more than 0.5 below;
    5. a zero keeps the sign of ``a / b``; ``b = 0`` gives IEEE's ``a / b`` (inf or NaN).
    """
    xp = backend.xp
    quotient = a / b
    mod = backend.fmod(a, b)  # 1
    div = (a - mod) / b  # 2
    div = xp.where((mod != 0) & ((b < 0) != (mod < 0)), div - 1, div)  # 3
    floordiv = xp.floor(div)  # 4
    floordiv = xp.where(div - floordiv > 0.5, floordiv + 1, floordiv)
    floordiv = xp.where(div == 0, xp.copysign(xp.zeros_like(floordiv), quotient), floordiv)  # 5
    return xp.where(b == 0, quotient, floordiv)


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
            with numpy.errstate(divide="ignore", invalid="ignore"):  # b = 0: inf or NaN, as IEEE's
                return _floor_divide(ctx.backend, a, b) if rounding_mode == "floor" else xp.trunc(a / b)
        if rounding_mode == "floor":
            return a // b
        magnitude = xp.abs(a) // xp.abs(b)  # trunc: round |a / b| down, then sign
        return xp.where((a < 0) != (b < 0), -magnitude, magnitude)

    @staticmethod
    def backward(ctx, grad_output):
        zeros = ctx.xp.zeros_like(grad_output)
        return zeros, zeros


def div(input: Tensor | Scalar, other: Tensor | Scalar, rounding_mode: str | None = None) -> Tensor:
    """``input / other``, broadcasting, as ``torch.div``: true division (integers give float),
    or with ``rounding_mode="trunc"`` / ``"floor"`` the quotient rounded toward zero / -inf
    (integers then stay integer; the gradient is 0, as PyTorch's).

    Raises:
        TypeError: for an operand that is neither a Tensor nor a number (two numbers give
            a 0-d Tensor, as PyTorch's).
        ValueError: for another ``rounding_mode``, or shapes that do not broadcast.

    Catalogue record: ``opinfo/arithmetic.py`` (its samples, references and checks).
    """
    if rounding_mode not in ROUNDING_MODES:
        raise ValueError(f"div: rounding_mode must be None, 'trunc' or 'floor', got {rounding_mode!r}")
    a, b = _operands(input, other, "div")
    if rounding_mode is None:
        return a / b
    return RoundedDiv.apply(a, b, rounding_mode=rounding_mode)
