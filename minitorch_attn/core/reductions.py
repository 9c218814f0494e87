"""Reductions: sum, mean, max (amax), min (amin), var and std over any dims, each a :class:`Function` with its backward.

A reduction maps many elements to one, so its backward spreads each upstream gradient
``grad_output`` back over the elements it came from: equally (sum, mean), to the maxima
(max), or in proportion to each element's distance from the mean (var). ``grad_output`` has
the reduced shape; :func:`_keepdim_shape` re-inserts the reduced axes as size 1 so that it
broadcasts back over them, whatever ``keepdim`` was.
"""

from __future__ import annotations

import builtins
import math
import numbers

import numpy

from .autograd import Function
from .dtypes import Dims, Scalar
from .ops import _check_keepdim, _normalize_dims
from .tensor import FLOAT_DTYPES, Tensor


def _reduced_axes(dim, ndim, keepdim=False):
    """The axes a reduction runs over: ``dim`` checked by :func:`_normalize_dims`; ``()`` or
    ``[]`` means all of them (as PyTorch), and a 0-d tensor has none to remove (its dim 0
    or -1 is the element itself). ``keepdim`` is checked too (:func:`_check_keepdim`)."""
    _check_keepdim(keepdim)
    axes = _normalize_dims(None if isinstance(dim, (tuple, list)) and len(dim) == 0 else dim, ndim)
    return () if ndim == 0 else axes


def _keepdim_shape(shape, axes):
    return tuple(1 if i in axes else s for i, s in enumerate(shape))


class Sum(Function):
    r"""``y = Σ x`` over ``dim`` (None = all).  Backward: ``dx``, of ``x``'s shape.

    .. derivation 1.4 begin
    :math:`\partial y/\partial x_i = 1` for
    every summed element, so each receives ``grad_output`` (:math:`dx_i = g`), i.e.
    ``grad_output`` broadcast back over the reduced axes.
    .. derivation end
    """

    @staticmethod
    def forward(ctx, x, dim=None, keepdim=False):
        axes = _reduced_axes(dim, x.ndim, keepdim)
        ctx.shape, ctx.axes = tuple(x.shape), axes
        return ctx.xp.sum(x, axis=axes, keepdims=keepdim)

    @staticmethod
    def backward(ctx, grad_output):
        # BEGIN SOLUTION 1.4
        xp = ctx.xp
        grad_output = xp.reshape(grad_output, _keepdim_shape(ctx.shape, ctx.axes))
        return xp.broadcast_to(grad_output, ctx.shape)
        # END SOLUTION


class Mean(Function):
    r"""``y = Σ x / n``, the mean over ``dim`` (None = all), n = count reduced.  Backward: ``dx``.

    .. derivation 1.4 begin
    :math:`\partial y/\partial x_i = 1/n`, so :math:`dx_i = g/n`, ``grad_output / n`` broadcast back.
    .. derivation end

    The mean of no elements is NaN, as in PyTorch (its gradient is empty, as the input)."""

    @staticmethod
    def forward(ctx, x, dim=None, keepdim=False):
        axes = _reduced_axes(dim, x.ndim, keepdim)
        count = math.prod(x.shape[a] for a in axes)
        ctx.shape, ctx.axes, ctx.count = tuple(x.shape), axes, builtins.max(count, 1)  # count 0: nothing to divide
        total = ctx.xp.sum(x, axis=axes, keepdims=keepdim)
        return total / count if count else total * math.nan

    @staticmethod
    def backward(ctx, grad_output):
        # BEGIN SOLUTION 1.4
        xp = ctx.xp
        grad_output = xp.reshape(grad_output, _keepdim_shape(ctx.shape, ctx.axes))
        return xp.broadcast_to(grad_output / ctx.count, ctx.shape)
        # END SOLUTION


class Max(Function):
    r"""Largest value ``y`` over ``dim`` (as ``torch.amax``).  Backward: ``dx``; ties share the
    gradient evenly, and a NaN is the maximum of its row.

    .. derivation 1.4 begin
    .. hint 1.4: which elements does a small change of the maximum's position move y by?
    ``grad_output`` goes to the position(s) of the maximum; ties share it evenly:

    .. math::

        dx_i = g\,\frac{h_i}{\sum_j h_j},
        \qquad h_i = [x_i = y \text{ or } x_i \text{ is NaN}]

    (``[·]`` is 1 where it holds, else 0; the sum runs over the reduced elements). A NaN is
    the maximum of its row (the result is NaN), so the row's NaNs share its gradient, as
    ``torch.max(x)``'s (``torch.amax`` gives NaN to the whole row: its count of ties is 0 there).
    .. derivation end
    """

    @staticmethod
    def forward(ctx, x, dim=None, keepdim=False):
        xp = ctx.xp
        axes = _reduced_axes(dim, x.ndim, keepdim)
        if any(x.shape[a] == 0 for a in axes):  # PyTorch raises too: no elements have no maximum
            where = "a tensor with no elements" if dim is None else "a dim of size 0"
            raise ValueError(f"max: the maximum over {where} is undefined (shape {tuple(x.shape)}, dim {dim})")
        y = xp.max(x, axis=axes, keepdims=True)
        ctx.save_for_backward(x, y)
        ctx.axes = axes
        return y if keepdim else xp.reshape(y, tuple(s for i, s in enumerate(x.shape) if i not in axes))

    @staticmethod
    def backward(ctx, grad_output):
        # BEGIN SOLUTION 1.4
        x, y = ctx.saved_tensors
        xp = ctx.xp
        hit = xp.astype((x == y) | xp.isnan(x), grad_output.dtype)  # a NaN only where y is NaN
        share = hit / xp.sum(hit, axis=ctx.axes, keepdims=True)
        return xp.reshape(grad_output, y.shape) * share
        # END SOLUTION


class Var(Function):
    r"""Variance over ``dim`` with ``correction`` (1 = unbiased, torch.var's default).

    Forward: m = mean(x), v = sum((x - m)^2) / (n - correction).

    .. derivation 1.4 begin
    .. hint 1.4: differentiate through m as well: what does the term through m sum to?
    Backward, with :math:`c` the correction and :math:`\partial m/\partial x_i = 1/n`; the
    term through :math:`m` sums to zero:

    .. math::

        \frac{\partial v}{\partial x_i} = \frac{2}{n - c}\Big((x_i - m) - \frac1n \sum_j (x_j - m)\Big)
            = \frac{2\,(x_i - m)}{n - c}

    and :math:`dx_i = g\,\partial v/\partial x_i`.
    .. derivation end

    With no degrees of freedom (``n <= correction``) PyTorch takes ``n - c`` as 0: v is
    NaN (0 / 0) for a constant row, else inf, and ``2 / (n - c)`` is inf, so the gradient
    is ``±inf`` with the sign of ``g (x_i - m)``, NaN where ``x_i = m`` (``0 · inf``), as
    PyTorch's with ``dim``. PyTorch's full reduction (``dim=None``) gives ``+inf`` to every
    element whatever the sign of ``x_i - m``; that sign is wrong, and this follows the math."""

    @staticmethod
    def forward(ctx, x, dim=None, keepdim=False, correction=1):
        xp = ctx.xp
        axes = _reduced_axes(dim, x.ndim, keepdim)
        n = math.prod(x.shape[a] for a in axes)
        centered = x - xp.sum(x, axis=axes, keepdims=True) / builtins.max(n, 1)  # the mean (no NaN for n = 0)
        ctx.save_for_backward(centered)
        ctx.axes, ctx.denominator = axes, n - correction if n > correction else 0.0
        ctx.scale = 2.0 / ctx.denominator if n > correction else math.inf  # 2 / (n - c); no dof: 2 / 0
        squares = xp.sum(centered * centered, axis=axes, keepdims=keepdim)
        if n <= correction:
            return xp.where(squares > 0, xp.full_like(squares, math.inf), xp.full_like(squares, math.nan))
        return squares / ctx.denominator

    @staticmethod
    def backward(ctx, grad_output):
        # BEGIN SOLUTION 1.4
        (centered,) = ctx.saved_tensors
        grad_output = ctx.xp.reshape(grad_output, _keepdim_shape(centered.shape, ctx.axes))
        return grad_output * centered * ctx.scale
        # END SOLUTION


class Std(Var):
    r"""Standard deviation ``s = sqrt(v)`` over ``dim``, ``v`` the :class:`Var` with ``correction``.

    Backward, by the chain rule through the root and then :class:`Var`'s backward.

    .. derivation 1.4 begin
    .. math::

        \frac{\partial s}{\partial x_i} = \frac{1}{2s}\,\frac{\partial v}{\partial x_i}
            = \frac{x_i - m}{(n - c)\,s}
    .. derivation end

    At ``s = 0`` (a constant row, or one element with ``correction=0``) ``s`` has a corner,
    as ``|t|`` at 0: ``s`` is a norm of the centered row, ``‖x - m‖ / sqrt(n - c)``, and a
    norm is not differentiable where it vanishes. The formula would give ``0 / 0 = NaN``;
    the gradient there is 0 instead, as PyTorch's (``std_backward`` masks it so), and 0
    is a subgradient (``s`` is convex and has its minimum there). With no degrees of
    freedom (``n <= c``) ``s`` is inf or NaN and so is the gradient, NaN, as PyTorch's.
    """

    @staticmethod
    def forward(ctx, x, dim=None, keepdim=False, correction=1):
        v = Var.forward(ctx, x, dim=dim, keepdim=keepdim, correction=correction)
        s = ctx.xp.sqrt(v)
        ctx.save_for_backward(ctx.saved_tensors[0], s)  # centered, s
        return s

    @staticmethod
    def backward(ctx, grad_output):
        centered, s = ctx.saved_tensors
        xp, shape = ctx.xp, _keepdim_shape(centered.shape, ctx.axes)
        s, grad_output = xp.reshape(s, shape), xp.reshape(grad_output, shape)
        corner = s == 0  # a constant row: the subgradient 0
        ds_dv = xp.where(corner, 0.0, 0.5 / xp.where(corner, 1.0, s))  # 1 / (2s)
        return grad_output * ds_dv * centered * ctx.scale  # (1 / 2s) · 2 (x - m) / (n - c)


class VarWithoutDegrees(Var):
    r""":class:`Var` where no degree of freedom is left (``n <= correction``): the same forward
    and backward, where the scale :math:`1 / (n - c)` is infinite, so ``0 · inf`` gives NaN
    where the gradient's factor :math:`x_i - m` is 0, as meant: NumPy's warning about it is
    silenced."""

    @staticmethod
    def backward(ctx, grad_output):
        with numpy.errstate(invalid="ignore"):
            return Var.backward(ctx, grad_output)


class StdWithoutDegrees(Std):
    r""":class:`Std` where no degree of freedom is left: the same backward with
    :math:`n - c = 0`, NaN, without NumPy's warning (as :class:`VarWithoutDegrees`)."""

    @staticmethod
    def backward(ctx, grad_output):
        with numpy.errstate(invalid="ignore"):
            return Std.backward(ctx, grad_output)


def _spread(name, function, without_degrees, x, dim, keepdim, correction, unbiased):
    """``var`` or ``std`` (``name``) of ``x``: the arguments checked, then ``function``, or
    ``without_degrees`` when ``n <= correction`` leaves no degree of freedom."""
    _check_float_input(x, name)
    dim, correction = _legacy_correction(dim, correction, unbiased)
    if isinstance(correction, bool) or not isinstance(correction, numbers.Real):
        raise TypeError(f"{name}: correction must be a number (or None for 1), got {correction!r}")
    shape = x.shape if isinstance(x, Tensor) else ()
    if math.prod(shape[a] for a in _reduced_axes(dim, len(shape), keepdim)) <= correction:
        function = without_degrees
    return function.apply(x, dim=dim, keepdim=keepdim, correction=correction)


# ---- functional spellings (they shadow builtins, as torch.sum does: the code above says builtins.max)
def sum(x: Tensor, dim: Dims = None, keepdim: bool = False) -> Tensor:
    """Sum over ``dim`` (an int, a tuple, or None for all), keeping size-1 dims if ``keepdim``;
    ValueError if out of range.

    Catalogue record: ``opinfo/reductions.py`` (its samples, references and checks).
    """
    return Sum.apply(x, dim=dim, keepdim=keepdim)


def _check_float_input(x, what):
    if isinstance(x, Tensor) and x.dtype not in FLOAT_DTYPES:
        raise TypeError(
            f"{what}: needs a float32 or float64 tensor to average, got {x.dtype} "
            f"(as PyTorch; convert with .float() first)"
        )


def mean(x: Tensor, dim: Dims = None, keepdim: bool = False) -> Tensor:
    """Mean over ``dim`` (an int, a tuple, or None for all); ``keepdim`` keeps size-1 dims.

    Catalogue record: ``opinfo/reductions.py`` (its samples, references and checks).
    """
    _check_float_input(x, "mean")
    return Mean.apply(x, dim=dim, keepdim=keepdim)


def max(x: Tensor, dim: Dims = None, keepdim: bool = False) -> Tensor:
    """Largest values over ``dim`` (values only, as torch.amax); ties share the gradient.

    Catalogue record: ``opinfo/reductions.py`` (its samples, references and checks).
    """
    return Max.apply(x, dim=dim, keepdim=keepdim)


amax = max


def _legacy_correction(dim, correction, unbiased):
    """PyTorch's older spellings: ``var(x, True)`` (a bool where ``dim`` goes, meaning
    ``unbiased``), ``unbiased=False`` (``correction=0``) and ``correction=None`` (1)."""
    if isinstance(dim, bool):
        dim, unbiased = None, dim
    if unbiased is not None:
        if not isinstance(unbiased, bool):
            raise TypeError(f"unbiased must be True or False, got {unbiased!r}")
        correction = int(unbiased)
    return dim, 1 if correction is None else correction


def var(
    x: Tensor, dim: Dims = None, keepdim: bool = False, correction: Scalar = 1, unbiased: bool | None = None
) -> Tensor:
    """Variance over ``dim``, divided by ``n - correction`` (1: unbiased, as torch.var;
    None means 1, as PyTorch). ``unbiased`` (``var(x, True)``, ``unbiased=False``): PyTorch's
    older spelling of ``correction``.

    Raises:
        TypeError: for a non-float tensor, or a correction that is not a number (any real
            number, as PyTorch: ``correction=-1`` divides by ``n + 1``).

    Catalogue record: ``opinfo/reductions.py`` (its samples, references and checks).
    """
    return _spread("var", Var, VarWithoutDegrees, x, dim, keepdim, correction, unbiased)


def min(x: Tensor, dim: Dims = None, keepdim: bool = False) -> Tensor:
    """Smallest values over ``dim`` (values only, as torch.amin): ``min(x) = -max(-x)``, so the
    gradient goes to the minimal elements and ties share it, as :class:`Max`'s.

    Catalogue record: ``opinfo/reductions.py`` (its samples, references and checks).
    """
    if isinstance(x, Tensor) and any(x.shape[a] == 0 for a in _reduced_axes(dim, x.ndim)):
        raise ValueError(
            f"min: the minimum over {'a tensor with no elements' if dim is None else 'a dim of size 0'} "
            f"is undefined (shape {tuple(x.shape)}, dim {dim})"
        )
    if isinstance(x, Tensor) and x.dtype == "bool":  # no negation of bools: min is not(max(not x))
        return ~Max.apply(~x, dim=dim, keepdim=keepdim)
    return -Max.apply(-x, dim=dim, keepdim=keepdim)


amin = min


def std(
    x: Tensor, dim: Dims = None, keepdim: bool = False, correction: Scalar = 1, unbiased: bool | None = None
) -> Tensor:
    """Standard deviation over ``dim``, ``sqrt(var(x, dim, correction))`` (as torch.std).
    Shapes, dtypes and arguments as :func:`var`. Backward (:class:`Std`):
    ``dx = g (x - mean) / ((n - correction) std)``, and 0 where the std is 0 (a constant
    row, one element with ``correction=0``), as PyTorch.

    Raises:
        TypeError: as :func:`var`.

    Catalogue record: ``opinfo/reductions.py`` (its samples, references and checks).
    """
    return _spread("std", Std, StdWithoutDegrees, x, dim, keepdim, correction, unbiased)
