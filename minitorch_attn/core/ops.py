"""The primitive differentiable operations, each a :class:`Function` with its backward.

Every backward returns ``dL/d(input)`` from ``grad_output = dL/d(output)``. Gradients
may keep the broadcast shape of the output: the engine sums them back to each input's
shape (:func:`minitorch_attn.core.autograd.sum_to_shape`), so no backward here un-broadcasts.
No backward modifies ``grad_output`` in place.

Shapes follow NumPy broadcasting; dtypes follow PyTorch's promotion: float32 stays float32,
also with Python-float operands, and an integer tensor meeting a float (or divided) becomes
float32, or the other operand's float dtype (:meth:`Broadcasting.promote`). Sources: the derivative of each elementary
function; matmul and reductions as in any autograd text (e.g. Baydin et al.,
arXiv:1502.05767).
"""

from __future__ import annotations

import builtins
import math  # noqa: F401 (for the tasks' code, as handed out: math.sqrt, -math.inf)
import numbers

from .autograd import Function
from .tensor import FLOAT_DTYPES, Tensor, float_result_dtype, get_default_dtype, result_dtype


def _normalize_dims(dim, ndim, what="dim"):
    """``dim`` (None, an int or a tuple of ints, negatives allowed) -> a sorted tuple of axes.

    A 0-d tensor accepts dim 0 and -1, as PyTorch, and has no axes to reduce: ``()``.

    Raises:
        TypeError: for a dim that is not an int (a bool or a float is refused, not read as 0/1).
        ValueError: for a dim out of range.
    """
    if dim is None:
        return tuple(range(ndim))
    try:
        dims = (dim,) if isinstance(dim, numbers.Integral) or not hasattr(dim, "__iter__") else tuple(dim)
    except TypeError:  # a 0-d array: iterable in name only
        raise TypeError(f"{what} must be an int or a tuple of ints, got {dim!r}") from None
    out = []
    for d in dims:
        if isinstance(d, bool) or not isinstance(d, numbers.Integral):
            raise TypeError(f"{what} must be an int or a tuple of ints, got {d!r}")
        if not -builtins.max(ndim, 1) <= d < builtins.max(ndim, 1):
            raise ValueError(f"{what} {d!r} is out of range for a tensor with {ndim} dimensions")
        out.append(int(d) % builtins.max(ndim, 1))
    return tuple(sorted(set(out))) if ndim else ()


def _check_keepdim(keepdim):
    """A reduction's ``keepdim``: True or False only, as PyTorch checks it (``keepdim=1``,
    ``None`` or ``"no"`` are a TypeError there too, not read by their truth)."""
    if not isinstance(keepdim, bool):
        raise TypeError(f"keepdim must be True or False, got {keepdim!r}")


# ---- broadcasting, checked where it can fail ------------------------------------------------------
def broadcast_shapes(*shapes):
    """NumPy's broadcast of several shapes, or None when they do not broadcast: compared
    from the last dim backwards, sizes must be equal or 1 (a missing dim counts as 1)."""
    distinct = set(shapes) - {()}
    if len(distinct) <= 1:  # speed: equal shapes, or a number beside a tensor
        return distinct.pop() if distinct else ()
    out = []
    for i in range(1, builtins.max((len(s) for s in shapes), default=0) + 1):
        sizes = {s[-i] for s in shapes if i <= len(s)} - {1}
        if len(sizes) > 1:
            return None
        out.append(sizes.pop() if sizes else 1)
    return tuple(reversed(out))


class Broadcasting(Function):
    """An elementwise operation whose operands (Tensors or Python numbers) broadcast together:
    ``apply`` checks their shapes first, so a mismatch is a ValueError that names them, and
    brings integer operands to a float dtype where PyTorch would (:meth:`promote`)."""

    promotes = True  # arithmetic: an integer tensor meeting a float becomes float
    true_division = False  # division: integers become float even between themselves

    @classmethod
    def apply(cls, *args, **options):
        shapes = [tuple(getattr(a, "shape", ())) for a in args]
        if broadcast_shapes(*shapes) is None:
            raise ValueError(
                f"{cls.__name__}: the shapes {', '.join(map(str, shapes))} do not broadcast "
                f"together (NumPy rules: trailing dims must be equal or 1)"
            )
        return super().apply(*(cls.promote(args) if cls.promotes else args), **options)

    @classmethod
    def promote(cls, args):
        """PyTorch's promotion where NumPy's differs (:func:`~minitorch_attn.core.dtypes.result_dtype`):
        an integer (or bool) tensor meeting a float tensor takes its dtype, and meeting a
        Python float, or divided, takes the default float dtype (float32); NumPy would make
        float64 of both. Float operands are left to NumPy, whose rule is the same for them."""
        if all(a.dtype in FLOAT_DTYPES for a in args if isinstance(a, Tensor)):
            return args  # speed: the common case (float operands) returns at once
        target = float_result_dtype(*args) if cls.true_division else result_dtype(*args)
        return tuple(a.to(dtype=target) if isinstance(a, Tensor) and a.dtype != target else a for a in args)


# ---- elementwise arithmetic -------------------------------------------------------------------
class Add(Broadcasting):
    r"""``y = a + b`` with broadcasting.  :math:`\partial y/\partial a = 1`,
    :math:`\partial y/\partial b = 1`: both get ``grad_output``."""

    @staticmethod
    def forward(ctx, a, b):
        return a + b

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output, grad_output


class Sub(Broadcasting):
    r"""``y = a - b`` with broadcasting.  :math:`\partial y/\partial a = 1`,
    :math:`\partial y/\partial b = -1`."""

    @staticmethod
    def forward(ctx, a, b):
        return a - b

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output, -grad_output


class Mul(Broadcasting):
    r"""``y = a * b`` with broadcasting.

    .. derivation 1.2 begin
    :math:`\partial y/\partial a = b`,
    :math:`\partial y/\partial b = a`.
    .. derivation end
    """

    @staticmethod
    def forward(ctx, a, b):
        need_a, need_b = ctx.needs_input_grad
        ctx.save_for_backward(a if need_b else None, b if need_a else None)  # only what a gradient uses
        return a * b

    @staticmethod
    def backward(ctx, grad_output):
        # BEGIN SOLUTION 1.2
        a, b = ctx.saved_tensors
        return (
            grad_output * b if ctx.needs_input_grad[0] else None,
            grad_output * a if ctx.needs_input_grad[1] else None,
        )
        # END SOLUTION


class Div(Broadcasting):
    r"""``y = a / b`` with broadcasting (true division: integers give float32, as PyTorch).

    .. derivation 1.2 begin
    :math:`\partial y/\partial a = 1/b`, :math:`\partial y/\partial b = -a/b^2`: the code
    forms ``da = g / b`` and then ``db = -da · a / b``.
    .. derivation end
    """

    true_division = True

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a / b

    @staticmethod
    def backward(ctx, grad_output):
        # BEGIN SOLUTION 1.2
        a, b = ctx.saved_tensors
        grad_a = grad_output / b
        return grad_a, (-grad_a * a / b if ctx.needs_input_grad[1] else None)
        # END SOLUTION


class Neg(Function):
    r"""``y = -x``.  :math:`dy/dx = -1`."""

    @staticmethod
    def forward(ctx, x):
        return -x

    @staticmethod
    def backward(ctx, grad_output):
        return -grad_output


class Pow(Function):
    r"""``y = x ** p`` for a Python-number exponent ``p``.

    .. derivation 1.2 begin
    :math:`dy/dx = p\,x^{p-1}`
    (0 for ``p = 0``, also at ``x = 0``: ``x^0`` is 1 everywhere).
    .. derivation end
    """

    @staticmethod
    def forward(ctx, x, exponent):
        ctx.save_for_backward(x)
        ctx.exponent = exponent
        return x**exponent

    @staticmethod
    def backward(ctx, grad_output):
        # BEGIN SOLUTION 1.2
        (x,) = ctx.saved_tensors
        p = ctx.exponent
        return grad_output * (p * x ** (p - 1)) if p != 0 else grad_output * 0, None
        # END SOLUTION


def pow(x, exponent):
    """``x ** exponent`` with a number exponent (Python or NumPy; a tensor exponent raises TypeError).

    Dtypes as PyTorch: an int tensor to a float power is the default float dtype
    (``int ** 0.5`` is float32), to an int power stays int.

    Raises:
        TypeError: for an exponent that is not a number.
        ValueError: for an int tensor to a negative int power (as PyTorch).

    Catalogue record: ``opinfo/arithmetic.py`` (its samples, references and checks).
    """
    if isinstance(exponent, (Tensor, bool)) or not isinstance(exponent, numbers.Real):
        raise TypeError(f"pow supports a number exponent only, got {type(exponent).__name__}")
    exponent = int(exponent) if isinstance(exponent, numbers.Integral) else float(exponent)
    if isinstance(x, Tensor) and x.dtype not in FLOAT_DTYPES:
        target = result_dtype(x, exponent)
        if target not in FLOAT_DTYPES and exponent < 0:
            raise ValueError(f"pow: integers to negative integer powers are not allowed ({x.dtype} ** {exponent})")
        x = x.to(dtype=target) if target != x.dtype else x
    return Pow.apply(x, exponent)


class Elementwise(Function):
    r"""``y = f(x)`` element by element, for the functions below: each gives ``function``
    (``f``) and its ``derivative`` (``f'``), written from the input ``x`` or from the
    output ``y``, whichever is cheaper. The Jacobian is diagonal, so the backward is
    :math:`dx = g\,f'(x)` (``g`` the ``grad_output``), here once for all of them.
    ``from_output`` says which one the derivative reads, and only that one is saved (so
    an in-place write to the other one afterwards is no error, as in PyTorch)."""

    from_output = False
    float_only = True  # an int or bool input is cast to the default float dtype first (not so abs)

    @classmethod
    def apply(cls, x):
        if cls.float_only and isinstance(x, Tensor) and x.dtype not in FLOAT_DTYPES:
            x = x.to(dtype=get_default_dtype())  # exp(int) is float32, as PyTorch
        return super().apply(x)

    @classmethod
    def forward(cls, ctx, x):
        y = cls.function(ctx.xp, x)
        ctx.save_for_backward(None if cls.from_output else x, y if cls.from_output else None)
        return y

    @classmethod
    def backward(cls, ctx, grad_output):
        x, y = ctx.saved_tensors
        return grad_output * cls.derivative(ctx.xp, x, y)


class Exp(Elementwise):
    r"""``y = exp(x)``.

    .. derivation 1.2 begin
    :math:`dy/dx = e^x = y`: the output itself.
    .. derivation end
    """

    from_output = True
    function = staticmethod(lambda xp, x: xp.exp(x))

    @staticmethod
    def derivative(xp, x, y):
        # BEGIN SOLUTION 1.2
        return y
        # END SOLUTION


class Log(Elementwise):
    r"""``y = log(x)`` (natural).

    .. derivation 1.2 begin
    :math:`dy/dx = 1/x`.
    .. derivation end
    """

    function = staticmethod(lambda xp, x: xp.log(x))

    @staticmethod
    def derivative(xp, x, y):
        # BEGIN SOLUTION 1.2
        return 1.0 / x
        # END SOLUTION


class Sqrt(Elementwise):
    r"""``y = sqrt(x)``.

    .. derivation 1.2 begin
    :math:`dy/dx = 1/(2\sqrt{x}) = 1/(2y)`, from the output.
    .. derivation end
    """

    from_output = True
    function = staticmethod(lambda xp, x: xp.sqrt(x))

    @staticmethod
    def derivative(xp, x, y):
        # BEGIN SOLUTION 1.2
        return 0.5 / y
        # END SOLUTION


class Tanh(Elementwise):
    r"""``y = tanh(x)``.

    .. derivation 1.2 begin
    :math:`dy/dx = 1 - \tanh^2 x = 1 - y^2`, from the output.
    .. derivation end
    """

    from_output = True
    function = staticmethod(lambda xp, x: xp.tanh(x))

    @staticmethod
    def derivative(xp, x, y):
        # BEGIN SOLUTION 1.2
        return 1.0 - y * y
        # END SOLUTION


class Abs(Elementwise):
    r"""``y = |x|``.  :math:`dy/dx = \operatorname{sign}(x) = [x > 0] - [x < 0]` (``[·]`` is 1
    where it holds, else 0): 1 for x > 0, -1 for x < 0, 0 at x = 0 and at NaN (as
    PyTorch; NumPy's ``sign(nan)`` is NaN, so the sign is built from the two comparisons)."""

    float_only = False  # |int| stays int, as PyTorch
    function = staticmethod(lambda xp, x: xp.abs(x))

    @staticmethod
    def derivative(xp, x, y):
        return xp.astype(x > 0, x.dtype) - xp.astype(x < 0, x.dtype)


class Clone(Function):
    r"""``y``, a copy of ``x`` in memory of its own.  :math:`dy/dx = 1`."""

    @staticmethod
    def forward(ctx, x):
        return ctx.xp.asarray(x, copy=True)

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output


class Cast(Function):
    r"""Change dtype (float32 <-> float64).  The identity on values (to rounding), so
    :math:`dy/dx = 1`, and the gradient is cast back to ``x``'s dtype."""

    @staticmethod
    def forward(ctx, x, dtype):
        return ctx.xp.astype(x, ctx.backend.dtype(dtype))

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output  # the engine casts every gradient to its input's dtype


# ---- matrix product ------------------------------------------------------------------------------
def transposed_copy(xp, x):
    """``xᵀ`` (the last two axes swapped) as a row-major array of its own. speed: NumPy's
    *batched* matmul with a transposed view as its second operand misses its BLAS fast
    path and is 10 to 300 times slower; the copy is small next to the product."""
    x_t = xp.matrix_transpose(x)
    return xp.reshape(x_t, x_t.shape, copy=True)


def matmul_transposed(xp, a, b):
    """``a @ bᵀ`` on raw arrays: ``(..., m, k) @ (..., n, k)ᵀ -> (..., m, n)``, with ``bᵀ``
    copied first (see :func:`transposed_copy`)."""
    return xp.matmul(a, transposed_copy(xp, b))


class MatMul(Function):
    r"""``a @ b`` as ``numpy.matmul``: batched, with broadcast batch dims, 1-D operands allowed.

    Shapes: ``(..., n, k) @ (..., k, m) -> (..., n, m)``; a 1-D ``a`` is a row ``(1, k)`` and
    a 1-D ``b`` a column ``(k, 1)``, the added dim removed from the result.

    Backward: ``(dA, dB)`` for ``C = A B`` (``A = a``, ``B = b``), each of its operand's shape.

    .. derivation 1.5 begin
    .. hint 1.5: write C_ij as a sum over k and differentiate one entry at a time.
    :math:`C_{ij} = \sum_k A_{ik} B_{kj}`, so
    :math:`\partial C_{ij}/\partial A_{ik} = B_{kj}` and :math:`\partial C_{ij}/\partial B_{kj} = A_{ik}`;
    with ``dC`` the ``grad_output``:

    .. math::

        dA_{ik} = \sum_j dC_{ij} B_{kj} = (dC\,B^\top)_{ik},
        \qquad
        dB_{kj} = \sum_i A_{ik}\, dC_{ij} = (A^\top dC)_{kj}
    .. derivation end

    Summing over broadcast batch dims is the engine's job; a 1-D operand's gradient is
    computed as that of its row (or column), summed over the batch dims and the added
    dim removed again.

    Raises:
        ValueError: for 0-d operands or mismatched inner dimensions.
    """

    @staticmethod
    def forward(ctx, a, b):
        if a.ndim == 0 or b.ndim == 0:
            raise ValueError("matmul: both operands need at least one dimension")
        if a.shape[-1] != b.shape[-2 if b.ndim > 1 else 0]:
            raise ValueError(
                f"matmul: inner dimensions differ: {tuple(a.shape)} @ {tuple(b.shape)} "
                f"(the last dim of the first must equal the {'second-to-last' if b.ndim > 1 else 'only'} dim "
                "of the second)"
            )
        if b.ndim > 2:  # speed: see matmul_transposed (a batched right operand must be row-major)
            b = ctx.xp.reshape(b, b.shape, copy=True)
        ctx.save_for_backward(a, b)
        return ctx.xp.matmul(a, b)

    @staticmethod
    def backward(ctx, grad_output):
        # BEGIN SOLUTION 1.5
        a, b = ctx.saved_tensors
        xp = ctx.xp
        a2 = a[None, :] if a.ndim == 1 else a  # (k,) -> (1, k)
        b2 = b[:, None] if b.ndim == 1 else b  # (k,) -> (k, 1)
        if a.ndim == 1:
            grad_output = xp.expand_dims(grad_output, axis=grad_output.ndim - 1 if b.ndim > 1 else 0)
        if b.ndim == 1:
            grad_output = xp.expand_dims(grad_output, axis=grad_output.ndim)
        grad_a = matmul_transposed(xp, grad_output, b2) if ctx.needs_input_grad[0] else None  # dA = dC Bᵀ
        grad_b = xp.matmul(xp.matrix_transpose(a2), grad_output) if ctx.needs_input_grad[1] else None  # dB = Aᵀ dC
        if a.ndim == 1 and grad_a is not None:
            grad_a = xp.reshape(
                xp.sum(grad_a, axis=tuple(range(grad_a.ndim - 2))) if grad_a.ndim > 2 else grad_a, (-1,)
            )
        if b.ndim == 1 and grad_b is not None:
            grad_b = xp.reshape(
                xp.sum(grad_b, axis=tuple(range(grad_b.ndim - 2))) if grad_b.ndim > 2 else grad_b, (-1,)
            )
        return grad_a, grad_b
        # END SOLUTION


def matmul(a: Tensor, b: Tensor) -> Tensor:
    """Matrix product of two tensors, as ``numpy.matmul`` (see :class:`MatMul`).

    Catalogue record: ``opinfo/arithmetic.py`` (its samples, references and checks).
    """
    return MatMul.apply(a, b)


# ---- functional spellings (they shadow builtins, as torch.sum does: the code above says builtins.max)
def exp(x: Tensor) -> Tensor:
    """Elementwise e^x (see :class:`Exp`); any shape, float dtypes.

    Catalogue record: ``opinfo/arithmetic.py`` (its samples, references and checks).
    """
    return Exp.apply(x)


def log(x: Tensor) -> Tensor:
    """Elementwise natural logarithm (see :class:`Log`); any shape, float dtypes.

    Catalogue record: ``opinfo/arithmetic.py`` (its samples, references and checks).
    """
    return Log.apply(x)


def sqrt(x: Tensor) -> Tensor:
    """Elementwise square root (see :class:`Sqrt`); any shape, float dtypes.

    Catalogue record: ``opinfo/arithmetic.py`` (its samples, references and checks).
    """
    return Sqrt.apply(x)


def tanh(x: Tensor) -> Tensor:
    """Elementwise hyperbolic tangent (see :class:`Tanh`); any shape, float dtypes.

    Catalogue record: ``opinfo/arithmetic.py`` (its samples, references and checks).
    """
    return Tanh.apply(x)


def abs(x: Tensor) -> Tensor:
    """Elementwise absolute value (see :class:`Abs`); any shape.

    Catalogue record: ``opinfo/arithmetic.py`` (its samples, references and checks).
    """
    return Abs.apply(x)
