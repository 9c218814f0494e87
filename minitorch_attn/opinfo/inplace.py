"""Records of the in-place writes of :mod:`minitorch_attn.core.inplace` that carry a gradient.

In grad mode ``a.add_(b)`` is recorded as ``a = a + b`` on a copy of ``a``'s old values, so
each record differentiates ``x.clone().add_(...)``: the gradient reaches ``x`` through the
clone and the other operand directly, as the out-of-place op would send it.
"""

import numpy as np

from .arithmetic import np_clamp_backward, np_div_backward
from .gradients import BY_LINEARITY
from .record import OpInfo, Sample, register

EMPTY, BROADCAST = frozenset({"empty"}), frozenset({"broadcast"})


def in_place(name):
    """``x.clone().<name>(*args, **kwargs)``: the write, on a tensor of the graph."""

    def op(x, *args, **kwargs):
        return getattr(x.clone(), name)(*args, **kwargs)

    op.__name__ = name
    return op


def positive(d, *shape):
    return d.uniform(*shape, low=0.5, high=2.0)


RECORDS = register(
    __name__,
    [
        OpInfo(
            "add_",
            in_place("add_"),
            ("Tensor.add_",),
            (
                Sample("add_ (broadcast)", lambda d: [d.randn(3, 4), d.randn(4)], edges=BROADCAST, gradcheck=True),
                Sample("add_ (empty)", lambda d: [d.randn(0, 2), d.randn(2)], edges=EMPTY),
            ),
            "as add: d(a + b) = da + db",
            ref=np.add,
            ref_backward=BY_LINEARITY,
            torch_ref=lambda torch, a, b: a.clone().add_(b),
            differentiable_in=("self", "other"),
            forward="a += b",
            backward="as add, with a's old values",
        ),
        OpInfo(
            "sub_",
            in_place("sub_"),
            ("Tensor.sub_",),
            (
                Sample("sub_", lambda d: [d.randn(3, 4), d.randn(3, 4)]),
                Sample("sub_ (empty)", lambda d: [d.randn(0, 2), d.randn(0, 2)], edges=EMPTY),
            ),
            "as sub: d(a - b) = da - db",
            ref=np.subtract,
            ref_backward=BY_LINEARITY,
            torch_ref=lambda torch, a, b: a.clone().sub_(b),
            differentiable_in=("self", "other"),
            forward="a -= b",
            backward="as sub, with a's old values",
        ),
        OpInfo(
            "mul_",
            in_place("mul_"),
            ("Tensor.mul_",),
            (
                Sample("mul_ (broadcast)", lambda d: [d.randn(3, 4), d.randn(3, 1)], edges=BROADCAST, gradcheck=True),
                Sample("mul_ (empty)", lambda d: [d.randn(0, 2), d.randn(2)], edges=EMPTY),
            ),
            "as mul, with a's old values",
            ref=np.multiply,
            ref_backward=BY_LINEARITY,
            torch_ref=lambda torch, a, b: a.clone().mul_(b),
            differentiable_in=("self", "other"),
            forward="a *= b",
            backward="as mul, with a's old values",
        ),
        OpInfo(
            "div_",
            in_place("div_"),
            ("Tensor.div_",),
            (
                Sample("div_", lambda d: [d.randn(3, 4), positive(d, 3, 4)]),
                Sample("div_ (empty)", lambda d: [d.randn(0, 2), positive(d, 2)], edges=EMPTY),
            ),
            "as div",
            ref=np.divide,
            ref_backward=np_div_backward,
            torch_ref=lambda torch, a, b: a.clone().div_(b),
            differentiable_in=("self", "other"),
            forward="a /= b",
            backward="as div, with a's old values",
        ),
        OpInfo(
            "clamp_",
            in_place("clamp_"),
            ("Tensor.clamp_",),
            (
                Sample("clamp_", lambda d: [d.away_from(4, 5, points=(-0.5, 0.5))], kwargs=dict(min=-0.5, max=0.5)),
                Sample("clamp_ (empty)", lambda d: [d.randn(0, 3)], kwargs=dict(min=0.0), edges=EMPTY),
            ),
            "as clamp: dx where min <= x <= max, else 0",
            ref=lambda x, min=None, max=None: np.clip(x, min, max),
            ref_backward=np_clamp_backward,
            torch_ref=lambda torch, x, min=None, max=None: x.clone().clamp_(min, max),
            forward="x clamped in place",
            backward="as clamp, with x's old values",
        ),
        OpInfo(
            "copy_",
            in_place("copy_"),
            ("Tensor.copy_",),
            (
                Sample(
                    "copy_ (broadcast)",
                    lambda d: [d.randn(3, 4, requires_grad=False), d.randn(4)],
                    edges=BROADCAST,
                    gradcheck=True,
                ),
                Sample("copy_ (empty)", lambda d: [d.randn(0, 2, requires_grad=False), d.randn(0, 2)], edges=EMPTY),
            ),
            "the written values are src's: the gradient goes to src (summed over its broadcast), none to x",
            ref=lambda x, src: np.broadcast_to(src, x.shape).copy(),
            ref_backward=BY_LINEARITY,
            torch_ref=lambda torch, x, src: x.clone().copy_(src),
            differentiable_in=("src",),
            forward="x[...] = src",
            backward="dsrc = unbroadcast(g), dx = none",
        ),
    ],
)
