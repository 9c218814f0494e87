"""Records of the activations and dropout of :mod:`minitorch_attn.functional.activations`
(SiLU's is homework task 6.1, with a sample of the SwiGLU feed-forward it gates).

ReLU's samples stay away from its kink at 0 (where the derivative jumps and finite
differences cannot agree with either side); dropout's reseed before every call, so the
finite differences see the backward's mask.
"""

import math

import numpy as np

import minitorch_attn as mt
import minitorch_attn.functional as F

from .record import TORCH_KEEPS_INTS, OneInput, OpInfo, Sample, register, seeded

EMPTY, SCALAR, NONFINITE = (frozenset({e}) for e in ("empty", "0-d", "nonfinite"))


def np_gelu(x, approximate="none"):
    x = np.asarray(x, dtype=np.float64)
    if approximate == "tanh":
        return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))
    return x * 0.5 * (1 + np.vectorize(math.erf, otypes=[np.float64])(x / math.sqrt(2)))


def np_gelu_backward(grads, x, approximate="none"):
    """d/dx x Φ(x) = Φ(x) + x φ(x); of the tanh form 0.5 x (1 + tanh u), u = c (x + 0.044715 x³):
    0.5 (1 + tanh u) + 0.5 x (1 - tanh² u) c (1 + 3 · 0.044715 x²)."""
    x = np.asarray(x, dtype=np.float64)
    if approximate == "tanh":
        c = math.sqrt(2 / math.pi)
        t = np.tanh(c * (x + 0.044715 * x**3))
        return [grads[0] * (0.5 * (1 + t) + 0.5 * x * (1 - t**2) * c * (1 + 3 * 0.044715 * x**2))]
    cdf = 0.5 * (1 + np.vectorize(math.erf, otypes=[np.float64])(x / math.sqrt(2)))
    return [grads[0] * (cdf + x * np.exp(-(x**2) / 2) / math.sqrt(2 * math.pi))]


def np_sigmoid(x):
    """σ(x) in float64 without overflow: exp(-log(1 + e^-x))."""
    return np.exp(-np.logaddexp(0.0, -np.asarray(x, dtype=np.float64)))


def np_dropout_backward(grads, x, p=0.5):
    """dx = g m / (1 - p), m the forward's mask: random, so read from the output of the seeded
    forward (the same draw as the op's; the inputs are drawn nonzero)."""
    kept = seeded(F.dropout)(mt.tensor(x), p).numpy() != 0
    return [grads[0] * kept / (1 - p), None]


# BEGIN REFERENCE 6.1
def np_silu(x):
    """x σ(x)."""
    return x * np_sigmoid(x)


def np_silu_backward(grads, x):
    """d(x σ(x)) = σ(x) (1 + x (1 - σ(x))) dx, with 1 - σ(x) = σ(-x)."""
    return [grads[0] * np_sigmoid(x) * (1 + x * np_sigmoid(-x))]


# END REFERENCE


def swiglu_from_ops(x, w1, w3, w2):
    """SwiGLU's gate and projections, ``w2(silu(w1 x) * w3 x)``, from the ops: a check of
    silu's backward inside the feed-forward it serves (the product rule around it)."""
    return F.linear(F.silu(F.linear(x, w1)) * F.linear(x, w3), w2)


# BEGIN REFERENCE 6.1
BACKWARD_SILU = "dx = g σ(x) (1 + x (1 - σ(x)))"
# END REFERENCE


RECORDS = register(
    __name__,
    [
        OpInfo(
            "gelu",
            F.gelu,
            ("F.gelu",),
            (
                Sample("gelu (exact)", lambda d: [d.randn(4, 5, scale=2.0)]),
                Sample("gelu (tanh)", lambda d: [d.randn(4, 5, scale=2.0)], kwargs=dict(approximate="tanh")),
                Sample("gelu (empty)", lambda d: [d.randn(0, 4)], edges=EMPTY),
                Sample("gelu (tanh, empty)", lambda d: [d.randn(2, 0)], kwargs=dict(approximate="tanh"), edges=EMPTY),
                Sample("gelu (0-d)", lambda d: [d.randn()], edges=SCALAR),
                Sample("gelu (large |x|)", lambda d: [d.values([-40.0, -10.0, 10.0, 40.0])], edges=NONFINITE),
            ),
            "Hendrycks & Gimpel 2016 (arXiv:1606.08415): x Φ(x), d/dx = Φ(x) + x φ(x); the tanh form of GPT-2",
            ref=np_gelu,
            ref_backward=np_gelu_backward,
            torch_ref=lambda torch, x, approximate="none": torch.nn.functional.gelu(x, approximate=approximate),
            task=None,
            n_ops=32,
            one_input=OneInput(F.gelu, lambda torch, x: torch.nn.functional.gelu(x), of_ints="TypeError"),
            forward="y = x Φ(x) (or its tanh form)",
            backward="dx = g (Φ(x) + x φ(x))",
        ),
        OpInfo(
            "sigmoid",
            F.sigmoid,
            ("F.sigmoid", "mt.sigmoid", "Tensor.sigmoid"),
            (
                Sample("sigmoid", lambda d: [d.randn(4, 5, scale=3.0)]),
                Sample("sigmoid (3-D)", lambda d: [d.randn(2, 3, 2)]),
                Sample("sigmoid (empty)", lambda d: [d.randn(0, 3)], edges=EMPTY),
                Sample("sigmoid (0-d)", lambda d: [d.randn()], edges=SCALAR),
                Sample("sigmoid (one element)", lambda d: [d.randn(1)], edges=frozenset({"one-element"})),
                Sample(
                    "sigmoid (large |x|, ±inf)",
                    lambda d: [d.values([-np.inf, -800.0, -40.0, 40.0, 800.0, np.inf])],
                    edges=NONFINITE,
                ),
            ),
            "σ(x) = 1 / (1 + e^-x) from e^-|x| (no overflow); dσ/dx = σ (1 - σ), from the output",
            ref=np_sigmoid,
            torch_ref=lambda torch, x: torch.sigmoid(x),
            ref_backward=lambda grads, x: [grads[0] * np_sigmoid(x) * np_sigmoid(-x)],
            task=None,
            exponentiates=False,
            one_input=OneInput(F.sigmoid, lambda torch, x: torch.sigmoid(x), of_ints="float"),
            forward="y = 1 / (1 + e^-x)",
            backward="dx = g y (1 - y)",
        ),
        OpInfo(
            "silu",
            F.silu,
            ("F.silu",),
            (
                Sample("silu", lambda d: [d.randn(4, 5, scale=3.0)]),
                Sample("silu (3-D)", lambda d: [d.randn(2, 3, 4)]),
                Sample(
                    "silu (SwiGLU: w2(silu(w1 x) * w3 x))",
                    lambda d: [d.randn(2, 3, 4), d.randn(6, 4), d.randn(6, 4), d.randn(4, 6)],
                    fn=swiglu_from_ops,
                ),
                Sample("silu (empty)", lambda d: [d.randn(0, 3)], edges=EMPTY),
                Sample("silu (0-d)", lambda d: [d.randn()], edges=SCALAR),
                Sample(
                    "silu (large |x|, inf)", lambda d: [d.values([-800.0, -40.0, 40.0, 800.0, np.inf])], edges=NONFINITE
                ),
            ),
            "Elfwing et al. 2018 (arXiv:1702.03118, eq. 4): x σ(x)",
            ref=np_silu,
            torch_ref=lambda torch, x: torch.nn.functional.silu(x),
            ref_backward=np_silu_backward,
            task="6.1",
            one_input=OneInput(F.silu, lambda torch, x: torch.nn.functional.silu(x), of_ints="TypeError"),
            forward="y = x σ(x)",
            backward=BACKWARD_SILU,
        ),
        OpInfo(
            "relu",
            F.relu,
            ("F.relu", "Tensor.relu"),
            (
                Sample("relu", lambda d: [d.away_from(4, 5)]),
                Sample("relu (empty)", lambda d: [d.randn(0, 4)], edges=EMPTY),
                Sample("relu (0-d)", lambda d: [d.values(0.7)], edges=SCALAR),
                Sample("relu (inf)", lambda d: [d.values([-np.inf, np.inf, 1.0])], edges=NONFINITE),
            ),
            "max(x, 0): d/dx = 1 for x > 0, 0 for x <= 0 (0 at the kink, as PyTorch)",
            ref=lambda x: np.maximum(x, 0.0),
            ref_backward=lambda grads, x: [grads[0] * (x > 0)],
            torch_ref=lambda torch, x: torch.relu(x),
            task=None,
            one_input=OneInput(
                F.relu,
                lambda torch, x: torch.nn.functional.relu(x),
                of_ints="TypeError",
                torch_differs=TORCH_KEEPS_INTS,
            ),
            forward="y = max(x, 0)",
            backward="dx = g [x > 0]",
        ),
        OpInfo(
            "dropout",
            seeded(F.dropout),
            ("F.dropout",),
            (
                Sample("dropout (p=0.3)", lambda d: [d.randn(4, 6)], fn=seeded(lambda x: F.dropout(x, 0.3))),
                Sample("dropout (p=0.5)", lambda d: [d.randn(3, 5), 0.5], gradcheck=True),
                Sample("dropout (empty)", lambda d: [d.randn(0, 3), 0.5], edges=EMPTY),
                Sample("dropout (0-d)", lambda d: [d.randn(), 0.2], edges=SCALAR),
            ),
            "Srivastava et al. 2014 (JMLR 15, eq. in §10, inverted): y = x m / (1-p); dx = g m / (1-p), same mask",
            ref=None,
            ref_backward=np_dropout_backward,
            torch_ref=None,
            task=None,
            not_differentiable_in=("p",),
            one_input=OneInput(
                lambda x: F.dropout(x, 0.0),
                lambda torch, x: torch.nn.functional.dropout(x, 0.0),
                of_ints="TypeError",
                torch_differs=dict(TORCH_KEEPS_INTS, bool="PyTorch computes it in bools; ours refuses (TypeError)"),
            ),
            forward="y = x m / (1-p), m ~ Bernoulli(1-p)",
            backward="dx = g m / (1-p), the same mask",
        ),
    ],
)
