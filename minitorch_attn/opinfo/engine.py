"""Records of what the engine itself differentiates: a dtype change, and a user's own
:class:`~minitorch_attn.Function` whose backward returns None for an input.
"""

import minitorch_attn as mt

from .gradients import BY_LINEARITY
from .record import OpInfo, Sample, register


class FirstOnly(mt.Function):
    r"""``f(a, b) = 2a``: :math:`\partial f/\partial a = 2`, and ``b`` takes part only through
    its shape, so :math:`\partial f/\partial b = 0`: its gradient is zero and backward says so
    with ``None``, which the engine treats as a zero gradient."""

    @staticmethod
    def forward(ctx, a, b):
        return a * 2

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output * 2, None


def first_only_of_a_non_leaf(a, b):
    """``FirstOnly(a, exp(b)) + b``: the None reaches a node that is not a leaf, and ``b``
    still gets its gradient (1) along the other path."""
    return FirstOnly.apply(a, b.exp()) + b


def cast(x, dtype):
    """``x.to(dtype)``, the differentiable dtype change."""
    return x.to(dtype=dtype)


RECORDS = register(
    __name__,
    [
        OpInfo(
            "cast",
            cast,
            ("Tensor.to", "Tensor.float", "Tensor.double"),
            (
                Sample("cast to float64", lambda d: [d.randn(3)], fn=lambda a: a.double() * 2),
                Sample("cast to float32", lambda d: [d.randn(2, 3), "float32"], gradcheck=False),
                Sample("cast (empty)", lambda d: [d.randn(0, 2), "float64"], edges=frozenset({"empty"})),
            ),
            "the identity on values: the gradient is cast back to the input's dtype",
            ref=lambda x, dtype: x.astype(dtype),
            ref_backward=lambda grads, x, dtype: [grads[0].astype(dtype), None],
            torch_ref=lambda torch, x, dtype: x.to(getattr(torch, dtype)),
            task=None,
            not_differentiable_in=("dtype",),
            keeps_dtype=False,
            forward="y = x in another dtype",
            backward="dx = g cast to x's dtype",
        ),
        OpInfo(
            "clone",
            lambda x: x.clone(),
            ("Tensor.clone",),
            (
                Sample("clone", lambda d: [d.randn(3, 2)]),
                Sample("clone (empty)", lambda d: [d.randn(0, 2)], edges=frozenset({"empty"})),
                Sample("clone (0-d)", lambda d: [d.randn()], edges=frozenset({"0-d"})),
            ),
            "a copy in memory of its own: the identity on values and gradients",
            ref=lambda x: x.copy(),
            ref_backward=BY_LINEARITY,
            torch_ref=lambda torch, x: x.clone(),
            task=None,
            forward="y = a copy of x",
            backward="dx = g",
        ),
        OpInfo(
            "custom Function",
            first_only_of_a_non_leaf,
            ("Function.apply",),
            (Sample("custom Function returning None", lambda d: [d.randn(2, 3), d.randn(2, 3)]),),
            "a backward may return None for an input: a zero gradient, never an error",
            ref=lambda a, b: 2 * a + b,
            ref_backward=BY_LINEARITY,
            torch_ref=lambda torch, a, b: 2 * a + b,
            task=None,
            differentiable_in=("a", "b"),
            no_empty="a test of the engine's routing, not of an operation",
            forward="y = a Function whose backward returns None",
            backward="dx = 0 (None is a zero gradient)",
        ),
    ],
)
