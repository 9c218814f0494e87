"""Records of the arithmetic, elementwise and matrix-product operations of
:mod:`minitorch_attn.core.ops` (homework tasks 1.2, 1.3 and 1.5).

Each backward is one rule of calculus, applied element by element; broadcasting is undone
in one place, the engine (task 1.3), so the broadcast samples check that place.
"""

import numpy as np

import minitorch_attn as mt

from .gradients import BY_LINEARITY, unbroadcast
from .record import OneInput, OpInfo, Sample, register

EMPTY = frozenset({"empty"})
SCALAR = frozenset({"0-d"})
NONFINITE = frozenset({"nonfinite"})
BROADCAST = frozenset({"broadcast"})
DIM = frozenset({"dim"})


def unary(
    name, op, ref, torch_ref, source, ordinary, nonfinite=None, task="1.2", covers=None, one_input=None, **options
):
    """A record of an elementwise function of one tensor: the ordinary sample (from the
    gradient-check suite), an empty and a 0-d input, and ``nonfinite`` values if given; its
    one-input call is ``op(x)``, a float function of an int input, unless ``one_input`` says otherwise."""
    samples = [
        Sample(name, ordinary),
        Sample(f"{name} (empty)", lambda d: [d.randn(0, 3)], edges=EMPTY),
        Sample(f"{name} (0-d)", lambda d: [d.uniform(low=0.5, high=2.0)], edges=SCALAR),
    ]
    if nonfinite is not None:
        samples.append(Sample(f"{name} (inf, nan)", lambda d: [d.values(nonfinite)], edges=NONFINITE))
    return OpInfo(
        name,
        op,
        covers or (f"mt.{name}", f"Tensor.{name}"),
        tuple(samples),
        source,
        ref=ref,
        torch_ref=torch_ref,
        task=task,
        one_input=one_input or OneInput(op, torch_ref, of_ints="float"),
        **options,
    )


def binary_samples(name, ordinary, second=None, tasks=None):
    """The ordinary sample of a broadcasting binary op (its gradient check counting for
    ``tasks``, default the record's), an empty pair and a 0-d operand."""
    second = second or (lambda d, *shape: d.randn(*shape))
    return (
        Sample(name, ordinary, edges=BROADCAST, gradcheck=True, tasks=tasks),
        Sample(
            f"{name.split(' ')[0]} (empty, broadcast)", lambda d: [d.randn(0, 3), second(d, 3)], edges=EMPTY | BROADCAST
        ),
        Sample(f"{name.split(' ')[0]} (0-d and 2-D)", lambda d: [d.randn(), second(d, 2, 3)], edges=SCALAR | BROADCAST),
    )


def positive(d, *shape):
    return d.uniform(*shape, low=0.5, high=2.0)


# BEGIN REFERENCE 1.2
def np_div_backward(grads, a, b, rounding_mode=None):
    """d(a/b) = g / b for a, -g a / b² for b; a rounded quotient is a step function: 0."""
    g = grads[0]
    with np.errstate(all="ignore"):
        da, db = (g / b, -g * a / (b * b)) if rounding_mode is None else (0 * g, 0 * g)
    return [
        unbroadcast(da, np.shape(a)) if isinstance(a, np.ndarray) else None,
        unbroadcast(db, np.shape(b)) if isinstance(b, np.ndarray) else None,
    ]


def np_pow_backward(grads, a, b):
    """y = a^b: da = g b a^(b-1) (0 where b = 0), db = g a^b log a (0 where a = 0 <= b)."""
    g = grads[0]
    with np.errstate(all="ignore"):
        da = np.where(np.asarray(b) == 0, 0.0, g * b * np.power(a, np.asarray(b) - 1.0))
        db = np.where((np.asarray(a) == 0) & (np.asarray(b) >= 0), 0.0, g * np.power(a, b) * np.log(a))
    return [
        unbroadcast(da, np.shape(a)) if isinstance(a, np.ndarray) else None,
        unbroadcast(db, np.shape(b)) if isinstance(b, np.ndarray) else None,
    ]


def np_exp_backward(grads, x):
    """d(e^x) = e^x dx."""
    return [grads[0] * np.exp(x)]


def np_log_backward(grads, x):
    """d(log x) = dx / x."""
    return [grads[0] / x]


def np_sqrt_backward(grads, x):
    """d(√x) = dx / (2√x)."""
    return [grads[0] / (2 * np.sqrt(x))]


def np_tanh_backward(grads, x):
    """d(tanh x) = (1 - tanh² x) dx."""
    return [grads[0] * (1 - np.tanh(x) ** 2)]


# END REFERENCE


def np_extremum_backward(larger):
    """d max(a, b) = g to the larger (half each at a tie); min with ``larger=False``."""

    def ref_backward(grads, a, b):
        g = grads[0]
        wins = (a > b) if larger else (a < b)
        tie = 0.5 * (a == b)
        da, db = g * (wins + tie), g * ((~wins & (a != b)) + tie)
        return [unbroadcast(da, np.shape(a)), unbroadcast(db, np.shape(b))]

    return ref_backward


def np_clamp_backward(grads, x, *bounds, **kwargs):
    """dx = g inside [min, max] (bounds included); a tensor bound gets g where it is the result."""
    min, max = (list(bounds) + [kwargs.get("min"), kwargs.get("max")][len(bounds) :])[:2]
    g = grads[0]
    below = x < (-np.inf if min is None else min)
    above = (x > (np.inf if max is None else max)) & ~below
    bound_grads = [
        unbroadcast(g * hit, np.shape(bound)) if isinstance(bound, np.ndarray) else None
        for bound, hit in ((min, below), (max, above))
    ]
    return [unbroadcast(g * ~(below | above), x.shape)] + bound_grads[: len(bounds)]


# BEGIN REFERENCE 1.3
BACKWARD_ADD = "da = unbroadcast(g), db = unbroadcast(g)"
BACKWARD_SUB = "da = unbroadcast(g), db = -unbroadcast(g)"
# END REFERENCE


# BEGIN REFERENCE 1.2
BACKWARD_MUL = "da = unbroadcast(g b), db = unbroadcast(g a)"
BACKWARD_DIV = "da = unbroadcast(g / b), db = -unbroadcast(g a / b²)"
BACKWARD_POW = "dx = g p x^(p-1) (0 for p = 0)"
BACKWARD_EXP = "dx = g y"
BACKWARD_LOG = "dx = g / x"
BACKWARD_SQRT = "dx = g / (2 y)"
BACKWARD_TANH = "dx = g (1 - y²)"
BACKWARD_TENSOR_POW = "da = g b a^(b-1), db = g y log a (0 where a = 0 <= b)"  # gives pow's
# END REFERENCE


# BEGIN REFERENCE 1.5
BACKWARD_MATMUL = "dA = unbroadcast(G Bᵀ), dB = unbroadcast(Aᵀ G)"
# END REFERENCE


def np_div(a, b, rounding_mode=None):
    """a / b, rounded down (``"floor"``) or toward zero (``"trunc"``) if asked."""
    quotient = np.divide(a, b)
    if rounding_mode is None:
        return quotient
    return {"floor": np.floor, "trunc": np.trunc}[rounding_mode](quotient)


# one record a block, aligned by hand: the catalogue reads as a table
# fmt: off
RECORDS = register(__name__, [
    OpInfo("add", lambda a, b: a + b, ("Tensor.__add__", "Tensor.__radd__"),
           binary_samples("add (broadcast)", lambda d: [d.randn(3, 4), d.randn(4)]),
           "d(a + b) = da + db; broadcasting undone by summing over the broadcast axes",
           ref=np.add, ref_backward=BY_LINEARITY, torch_ref=lambda torch, a, b: a + b, task="1.3",
           differentiable_in=("self", "other"),
           forward="y = a + b",
           backward=BACKWARD_ADD),
    OpInfo("sub", lambda a, b: a - b, ("Tensor.__sub__", "Tensor.__rsub__"),
           binary_samples("sub (broadcast)", lambda d: [d.randn(2, 1, 3), d.randn(4, 1)]),
           "d(a - b) = da - db", ref=np.subtract,
           ref_backward=BY_LINEARITY, torch_ref=lambda torch, a, b: a - b, task="1.3",
           differentiable_in=("self", "other"),
           forward="y = a - b",
           backward=BACKWARD_SUB),
    OpInfo("mul", lambda a, b: a * b, ("Tensor.__mul__", "Tensor.__rmul__"),
           binary_samples("mul (broadcast)", lambda d: [d.randn(2, 1, 4, 3), d.randn(2, 1, 4, 1)],
                          tasks=("1.2", "1.3"))      # the product rule (1.2) and the sum over broadcast dims (1.3)
           + (Sample("mul (same node twice)", lambda d: [d.randn(3, 2)], fn=lambda a: a * a),),
           "the product rule; a tensor used twice gets both gradients added (task 1.1)",
           ref=np.multiply, ref_backward=BY_LINEARITY, torch_ref=lambda torch, a, b: a * b, task="1.2",
           differentiable_in=("self", "other"),
           forward="y = a b",
           backward=BACKWARD_MUL),
    OpInfo("div", lambda a, b: a / b, ("Tensor.__truediv__", "Tensor.__rtruediv__"),
           (Sample("div", lambda d: [d.randn(3, 4), positive(d, 3, 4)]),
            Sample("div (empty, broadcast)", lambda d: [d.randn(0, 3), positive(d, 3)], edges=EMPTY | BROADCAST),
            Sample("div (0-d and 2-D)", lambda d: [d.randn(), positive(d, 2, 3)], edges=SCALAR | BROADCAST),
            Sample("div (by zero and inf)", lambda d: [d.values([1.0, -1.0, 2.0]), d.values([0.0, np.inf, 0.5])],
                   edges=NONFINITE)),
           "the quotient rule", ref=np.divide,
           ref_backward=np_div_backward, torch_ref=lambda torch, a, b: a / b,
           task="1.2", differentiable_in=("self", "other"),
           forward="y = a / b",
           backward=BACKWARD_DIV),
    unary("neg", lambda a: -a, np.negative, lambda torch, a: -a, "d(-x) = -dx",
          lambda d: [d.randn(5)], nonfinite=[np.inf, -np.inf, np.nan], task=None, covers=("Tensor.__neg__",),
          ref_backward=BY_LINEARITY,
          one_input=OneInput(lambda a: -a, lambda torch, a: -a, refuses=("bool",)),
          forward="y = -x",
          backward="dx = -g"),
    OpInfo("pow", mt.pow, ("mt.pow", "Tensor.pow", "Tensor.__pow__"),
           (Sample("pow (scalar exponent)", lambda d: [positive(d, 4, 3), 2.5]),
            Sample("pow (integer exponent, negative base)", lambda d: [d.randn(3, 4), 3], gradcheck=True),
            Sample("pow (exponent 1)", lambda d: [d.randn(2, 3), 1], gradcheck=True),
            Sample("pow (empty)", lambda d: [d.randn(0, 2), 2.0], edges=EMPTY),
            Sample("pow (0-d)", lambda d: [positive(d), 0.5], edges=SCALAR),
            Sample("pow (exponent 0 at 0)", lambda d: [d.values([0.0, 1.0, -2.0]), 0], edges=NONFINITE)),
           "the power rule, and 0 for p = 0 (x^0 = 1 everywhere, also at x = 0)",
           ref=np.power, ref_backward=np_pow_backward, torch_ref=lambda torch, x, p: x ** p, task="1.2",
           differentiable_in=("self",), not_differentiable_in=("exponent",),
           one_input=OneInput(lambda x: mt.pow(x, 0.5), lambda torch, x: torch.pow(x, 0.5), of_ints="float"),
           forward="y = x^p (p a number)",
           backward=BACKWARD_POW),
    OpInfo("pow (tensor exponent)", mt.pow, ("mt.pow", "Tensor.__pow__"),
           (Sample("pow (tensor ** tensor)", lambda d: [positive(d, 3, 4), d.randn(3, 4)]),
            Sample("pow (tensor ** tensor, broadcast)", lambda d: [positive(d, 3, 1), d.randn(4)], edges=BROADCAST,
                   gradcheck=True),
            Sample("pow (number ** tensor)", lambda d: [2.5, d.randn(2, 3)], gradcheck=True),
            Sample("pow (zero base)", lambda d: [d.values([0.0, 0.0, 1.5]), d.values([0.0, 2.0, 0.5])],
                   gradcheck=False),
            Sample("pow (tensor exponent, empty)", lambda d: [positive(d, 0, 2), d.randn(0, 2)], edges=EMPTY),
            Sample("pow (tensor exponent, 0-d)", lambda d: [positive(d), d.randn()], edges=SCALAR)),
           "y = a^b with a tensor exponent; PyTorch's limits where a = 0 <= b",
           ref=lambda a, b: np.power(a, b), ref_backward=np_pow_backward,
           torch_ref=lambda torch, a, b: torch.pow(a, b), task=None,
           differentiable_in=("self", "exponent"),
           forward="y = a^b",
           backward=BACKWARD_TENSOR_POW),
    OpInfo("__rpow__", lambda x, base: base ** x, ("Tensor.__rpow__",),
           (Sample("__rpow__ (2 ** x)", lambda d: [d.randn(3, 4)], kwargs=dict(base=2.0)),
            Sample("__rpow__ (rotary frequencies)", lambda d: [d.values(-np.arange(8) / 8)], kwargs=dict(base=10000.0)),
            Sample("__rpow__ (base below 1)", lambda d: [d.randn(2, 3)], kwargs=dict(base=0.5)),
            Sample("__rpow__ (empty)", lambda d: [d.randn(0, 3)], kwargs=dict(base=2.0), edges=EMPTY),
            Sample("__rpow__ (0-d)", lambda d: [d.randn()], kwargs=dict(base=3.0), edges=SCALAR),
            Sample("__rpow__ (inf exponents)", lambda d: [d.values([-np.inf, 0.0, np.inf])], kwargs=dict(base=2.0),
                   edges=NONFINITE)),
           "y = c^x: dx = y log(c) g",
           ref=lambda x, base: np.power(base, x),
           ref_backward=lambda grads, x, base: [grads[0] * np.power(base, x) * np.log(base)],
           torch_ref=lambda torch, x, base: base ** x, task=None,
           differentiable_in=("self",),
           forward="y = c^x (c a number)",
           backward="dx = g y log c"),
    OpInfo("einsum", lambda *xs, equation: mt.einsum(equation, *xs), ("mt.einsum",),
           (Sample("einsum (matmul)", lambda d: [d.randn(3, 4), d.randn(4, 5)], kwargs=dict(equation="ij,jk->ik")),
            Sample("einsum (attention scores)", lambda d: [d.randn(2, 2, 3, 4), d.randn(2, 2, 5, 4)],
                   kwargs=dict(equation="bhqd,bhkd->bhqk")),
            Sample("einsum (three operands, implicit output)", lambda d: [d.randn(2, 3), d.randn(3, 4), d.randn(4)],
                   kwargs=dict(equation="ij,jk,k")),
            Sample("einsum (transpose)", lambda d: [d.randn(3, 4)], kwargs=dict(equation="ij->ji")),
            Sample("einsum (a sum over a dim)", lambda d: [d.randn(3, 4)], kwargs=dict(equation="ij->i"),
                   edges=DIM, gradcheck=True),
            Sample("einsum (outer product)", lambda d: [d.randn(3), d.randn(2)], kwargs=dict(equation="i,j->ij")),
            Sample("einsum (dot product, 0-d result)", lambda d: [d.randn(5), d.randn(5)],
                   kwargs=dict(equation="i,i->"), edges=SCALAR, gradcheck=True),
            Sample("einsum (an empty contracted dim)", lambda d: [d.randn(3, 0), d.randn(0, 2)],
                   kwargs=dict(equation="ij,jk->ik"), edges=EMPTY)),
           "out = Σ Π_k a_k over the letters not kept; da_k = einsum(g and the other operands -> a_k's letters)",
           ref=lambda *xs, equation: np.einsum(equation, *xs), ref_backward=BY_LINEARITY,
           torch_ref=lambda torch, *xs, equation: torch.einsum(equation, *xs), task=None,
           differentiable_in=("operands",),
           one_input=OneInput(lambda x: mt.einsum("ij,kj->ik", x, x), lambda torch,
                              x: torch.einsum("ij,kj->ik", x, x), refuses=("bool",)),
           forward="y = Σ Π_k a_k over the letters not kept",
           backward="da_k = einsum(g, the other operands -> a_k's letters)"),
    OpInfo("add (alpha)", mt.add, ("mt.add", "Tensor.add"),
           (Sample("add (alpha)", lambda d: [d.randn(3, 4), d.randn(4)], kwargs=dict(alpha=2.5), edges=BROADCAST,
                   gradcheck=True),
            Sample("add (alpha 1)", lambda d: [d.randn(2, 3), d.randn(2, 3)]),
            Sample("add (alpha, number)", lambda d: [d.randn(2, 3), 1.5], kwargs=dict(alpha=-2)),
            Sample("add (alpha, empty)", lambda d: [d.randn(0, 3), d.randn(3)], kwargs=dict(alpha=3.0), edges=EMPTY),
            Sample("add (alpha, 0-d)", lambda d: [d.randn(), d.randn()], kwargs=dict(alpha=0.5), edges=SCALAR)),
           "a + alpha b: da = g, db = alpha g",
           ref=lambda a, b, alpha=1: a + alpha * np.asarray(b), ref_backward=BY_LINEARITY,
           torch_ref=lambda torch, a, b, alpha=1: torch.add(a, b, alpha=alpha),
           task=None, differentiable_in=("input", "other"),
           one_input=OneInput(lambda x: mt.add(x, x, alpha=2), lambda torch, x: torch.add(x, x, alpha=2)),
           forward="y = a + alpha b",
           backward="da = unbroadcast(g), db = alpha unbroadcast(g)"),
    OpInfo("sub (alpha)", mt.sub, ("mt.sub", "Tensor.sub"),
           (Sample("sub (alpha)", lambda d: [d.randn(3, 4), d.randn(3, 1)], kwargs=dict(alpha=2.5), edges=BROADCAST,
                   gradcheck=True),
            Sample("sub (alpha 1)", lambda d: [d.randn(2, 3), d.randn(2, 3)]),
            Sample("sub (alpha, empty)", lambda d: [d.randn(0, 3), d.randn(3)], kwargs=dict(alpha=3.0), edges=EMPTY)),
           "a - alpha b: da = g, db = -alpha g",
           ref=lambda a, b, alpha=1: a - alpha * np.asarray(b), ref_backward=BY_LINEARITY,
           torch_ref=lambda torch, a, b, alpha=1: torch.sub(a, b, alpha=alpha),
           task=None, differentiable_in=("input", "other"),
           one_input=OneInput(lambda x: mt.sub(x, x, alpha=2), lambda torch, x: torch.sub(x, x, alpha=2),
                              refuses=("bool",)),
           forward="y = a - alpha b",
           backward="da = unbroadcast(g), db = -alpha unbroadcast(g)"),
    OpInfo("div (rounding_mode)", mt.div, ("mt.div", "Tensor.div"),
           (Sample("div (true division)", lambda d: [d.randn(3, 4), positive(d, 4)], edges=BROADCAST, gradcheck=True),
            Sample("div (floor)", lambda d: [d.randn(3, 4, scale=5.0), positive(d, 3, 4)],
                   kwargs=dict(rounding_mode="floor"), gradcheck=False),
            Sample("div (trunc)", lambda d: [d.randn(3, 4, scale=5.0), positive(d, 3, 4)],
                   kwargs=dict(rounding_mode="trunc"), gradcheck=False),
            Sample("div (floor, empty)", lambda d: [d.randn(0, 2), positive(d, 2)], kwargs=dict(rounding_mode="floor"),
                   edges=EMPTY),
            Sample("div (trunc, 0-d)", lambda d: [d.randn(scale=5.0), 2.0], kwargs=dict(rounding_mode="trunc"),
                   edges=SCALAR)),
           "true division as a / b; rounded ('trunc', 'floor') a step function: gradients 0, as PyTorch",
           ref=np_div,
           ref_backward=np_div_backward,
           torch_ref=lambda torch, a, b, rounding_mode=None: torch.div(a, b, rounding_mode=rounding_mode),
           task=None, differentiable_in=("input", "other"),
           one_input=OneInput(lambda x: mt.div(x, 2), lambda torch, x: torch.div(x, 2), of_ints="float"),
           forward="y = a / b, or trunc(a / b), floor(a / b)",
           backward="as div; rounded: da = db = 0 (a step function)"),
    unary("exp", mt.exp, np.exp, lambda torch, x: x.exp(), "the exponential; its derivative from the output",
          lambda d: [d.randn(3, 4)], nonfinite=[-np.inf, np.inf, np.nan],
          ref_backward=np_exp_backward,
          forward="y = e^x",
          backward=BACKWARD_EXP),
    unary("log", mt.log, np.log, lambda torch, x: x.log(), "the natural logarithm",
          lambda d: [d.uniform(3, 4, low=0.2, high=3.0)], nonfinite=[0.0, np.inf, np.nan],
          ref_backward=np_log_backward,
          forward="y = log x",
          backward=BACKWARD_LOG),
    unary("sqrt", mt.sqrt, np.sqrt, lambda torch, x: x.sqrt(), "the square root; its derivative from the output",
          lambda d: [d.uniform(3, 4, low=0.2, high=3.0)], nonfinite=[np.inf, np.nan, 4.0],
          ref_backward=np_sqrt_backward,
          forward="y = √x",
          backward=BACKWARD_SQRT),
    unary("tanh", mt.tanh, np.tanh, lambda torch, x: x.tanh(), "the hyperbolic tangent; its derivative from the output",
          lambda d: [d.randn(3, 4)], nonfinite=[-np.inf, np.inf, np.nan, 30.0],
          ref_backward=np_tanh_backward,
          forward="y = tanh x",
          backward=BACKWARD_TANH),
    unary("abs", mt.abs, np.abs, lambda torch, x: x.abs(), "d|x| = sign(x) dx (0 at x = 0, as PyTorch)",
          lambda d: [d.away_from(3, 4)], nonfinite=[-np.inf, np.inf, 0.0], task=None,
          ref_backward=lambda grads, x: [grads[0] * np.sign(x)],
          one_input=OneInput(mt.abs, lambda torch, x: x.abs(),
                             torch_differs={"bool": "PyTorch refuses abs of bools; ours keeps them, as NumPy"}),
          forward="y = |x|",
          backward="dx = g sign(x) (0 at x = 0)"),
    OpInfo("maximum", mt.maximum, ("mt.maximum", "Tensor.maximum"),
           (Sample("maximum", lambda d: [d.distinct(3, 4), d.distinct(3, 4)]),
            Sample("maximum (empty)", lambda d: [d.randn(0, 3), d.randn(0, 3)], edges=EMPTY),
            Sample("maximum (0-d and 2-D)", lambda d: [d.randn(), d.distinct(2, 3)], edges=SCALAR | BROADCAST),
            Sample("maximum (ties, inf)", lambda d: [d.values([1.0, np.inf, -np.inf]), d.values([1.0, 2.0, 0.0])],
                   edges=NONFINITE)),
           "d max(a, b) = da where a > b, db where b > a, half each at a tie (as PyTorch)",
           ref=np.maximum, ref_backward=np_extremum_backward(larger=True),
           torch_ref=lambda torch, a, b: torch.maximum(a, b), task=None,
           differentiable_in=("input", "other"),
           one_input=OneInput(lambda x: mt.maximum(x, 0.5), lambda torch, x: torch.maximum(x, torch.tensor(0.5)),
                              of_ints="float"),
           forward="y = max(a, b)",
           backward="da = g [a > b] + g/2 [a = b], db = g [b > a] + g/2 [a = b]"),
    OpInfo("minimum", mt.minimum, ("mt.minimum", "Tensor.minimum"),
           (Sample("minimum (broadcast)", lambda d: [d.distinct(3, 4), d.distinct(4)], edges=BROADCAST,
                   gradcheck=True),
            Sample("minimum (empty)", lambda d: [d.randn(0, 3), d.randn(3)], edges=EMPTY | BROADCAST),
            Sample("minimum (ties, inf)", lambda d: [d.values([1.0, np.inf, -np.inf]), d.values([1.0, 2.0, 0.0])],
                   edges=NONFINITE)),
           "min(a, b) = -max(-a, -b)", ref=np.minimum,
           ref_backward=np_extremum_backward(larger=False), torch_ref=lambda torch, a, b: torch.minimum(a, b),
           task=None, differentiable_in=("input", "other"),
           one_input=OneInput(lambda x: mt.minimum(x, 0.5), lambda torch, x: torch.minimum(x, torch.tensor(0.5)),
                              of_ints="float"),
           forward="y = min(a, b) = -max(-a, -b)",
           backward="da = g [a < b] + g/2 [a = b], db = g [b < a] + g/2 [a = b]"),
    OpInfo("clamp", mt.clamp, ("mt.clamp", "Tensor.clamp"),
           (Sample("clamp", lambda d: [d.away_from(4, 5, points=(-0.5, 0.5))], kwargs=dict(min=-0.5, max=0.5)),
            Sample("clamp (min only)", lambda d: [d.away_from(3, 4, points=(0.2,)), 0.2], gradcheck=True),
            Sample("clamp (tensor bounds, broadcast)",    # the bounds sit 0.07 from the values' grid of 0.1
                   lambda d: [d.distinct(3, 4), d.values([-0.33, -0.23, -0.43, -0.13]),
                              d.values([0.27, 0.17, 0.37, 0.07])], edges=BROADCAST, gradcheck=True),
            Sample("clamp (empty)", lambda d: [d.randn(0, 4)], kwargs=dict(min=-0.5, max=0.5), edges=EMPTY),
            Sample("clamp (0-d)", lambda d: [d.randn()], kwargs=dict(max=0.1), edges=SCALAR),
            Sample("clamp (inf)", lambda d: [d.values([-np.inf, np.inf, 0.0])], kwargs=dict(min=-1.0, max=1.0),
                   edges=NONFINITE)),
           "d clamp(x) = dx inside [min, max] (the bounds included, as PyTorch), 0 outside; a tensor bound "
           "gets the gradient where it is the result",
           ref=lambda x, min=None, max=None: np.minimum(np.maximum(x, -np.inf if min is None else min),
                                                        np.inf if max is None else max),
           ref_backward=np_clamp_backward,
           torch_ref=lambda torch, x, min=None, max=None: torch.clamp(x, min, max), task=None,
           differentiable_in=("input", "min", "max"),
           one_input=OneInput(lambda x: mt.clamp(x, min=0.5), lambda torch, x: torch.clamp(x, min=0.5),
                              of_ints="float"),
           forward="y = min(max(x, lo), hi)",
           backward="dx = g [lo <= x <= hi]; a tensor bound gets g where it binds"),
    OpInfo("matmul", mt.matmul, ("mt.matmul", "Tensor.matmul", "Tensor.__matmul__", "Tensor.__rmatmul__"),
           (Sample("matmul", lambda d: [d.randn(3, 4), d.randn(4, 2)]),
            Sample("matmul (batched, broadcast)", lambda d: [d.randn(2, 1, 3, 4), d.randn(3, 4, 2)],
                   edges=BROADCAST, gradcheck=True),
            Sample("matmul (1-D @ 2-D)", lambda d: [d.randn(4), d.randn(4, 3)]),
            Sample("matmul (batched @ 1-D)", lambda d: [d.randn(2, 3, 4), d.randn(4)]),
            Sample("matmul (1-D @ 1-D)", lambda d: [d.randn(4), d.randn(4)], gradcheck=False),
            Sample("matmul (inner dim 0)", lambda d: [d.randn(3, 0), d.randn(0, 2)], edges=EMPTY),
            Sample("matmul (empty batch)", lambda d: [d.randn(0, 3, 4), d.randn(4, 2)], edges=EMPTY | BROADCAST)),
           "the product rule over the sum of C = AB (task 1.5), summed over broadcast batch dims",
           ref=np.matmul, ref_backward=BY_LINEARITY, torch_ref=lambda torch, a, b: a @ b, task="1.5", n_ops=64,
           differentiable_in=("input", "other"),
           one_input=OneInput(lambda x: mt.matmul(x, x.T), lambda torch, x: torch.matmul(x, x.T),
                              torch_differs={"bool": "PyTorch has no bool matmul; ours keeps bools, as NumPy"}),
           forward="Y = A B",
           backward=BACKWARD_MATMUL),
])
# fmt: on
