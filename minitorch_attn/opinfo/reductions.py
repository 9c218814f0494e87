"""Records of the reductions of :mod:`minitorch_attn.core.reductions`: sum, mean, max, min, var,
std (homework task 1.4 for the first four).

A reduction's backward puts the reduced axes back (size 1, whatever ``keepdim`` was) and
broadcasts the upstream gradient over them; the samples reduce over the last, the first,
several and all axes, with and without ``keepdim``.
"""

import numpy as np

import minitorch_attn as mt

from .gradients import BY_LINEARITY
from .record import OneInput, OpInfo, Sample, register

EMPTY, SCALAR, ONE, DIM = (frozenset({e}) for e in ("empty", "0-d", "one-element", "dim"))


def _axes(dim):
    return tuple(dim) if isinstance(dim, (tuple, list)) else dim


def np_sum(x, dim=None, keepdim=False):
    return np.sum(x, axis=_axes(dim), keepdims=keepdim)


def np_mean(x, dim=None, keepdim=False):
    return np.mean(x, axis=_axes(dim), keepdims=keepdim)


def np_max(x, dim=None, keepdim=False):
    return np.max(x, axis=_axes(dim), keepdims=keepdim)


def np_var(x, dim=None, keepdim=False, correction=1):
    return np.var(x, axis=_axes(dim), keepdims=keepdim, ddof=correction)


# BEGIN REFERENCE 1.4
def _upstream(g, x, dim, keepdim):
    """The upstream gradient with the reduced axes put back (size 1), and those axes."""
    axes = tuple(range(np.ndim(x))) if dim is None else tuple(d % np.ndim(x) for d in np.atleast_1d(dim))
    return (np.asarray(g) if keepdim else np.expand_dims(g, axes)), axes


def _extremum_backward(reduce, grads, x, dim, keepdim):
    """d max(x) = g shared equally among the elements equal to the maximum (``reduce`` = np.max;
    np.min for min)."""
    g, axes = _upstream(grads[0], x, dim, keepdim)
    hits = x == reduce(x, axis=axes, keepdims=True)
    return [g * hits / np.maximum(hits.sum(axis=axes, keepdims=True), 1)]


def np_max_backward(grads, x, dim=None, keepdim=False):
    return _extremum_backward(np.max, grads, x, dim, keepdim)


def np_min_backward(grads, x, dim=None, keepdim=False):
    return _extremum_backward(np.min, grads, x, dim, keepdim)


def np_var_backward(grads, x, dim=None, keepdim=False, correction=1):
    """dx = 2 (x - mean) g / (n - c)."""
    g, axes = _upstream(grads[0], x, dim, keepdim)
    n = int(np.prod([np.shape(x)[a] for a in axes]))
    return [2 * (x - x.mean(axis=axes, keepdims=True)) * g / (n - correction)]


def np_std_backward(grads, x, dim=None, keepdim=False, correction=1):
    """dx = (x - mean) g / ((n - c) std): it gives var's (held back with it)."""
    g, axes = _upstream(grads[0], x, dim, keepdim)
    n = int(np.prod([np.shape(x)[a] for a in axes]))
    std = np.std(x, axis=axes, keepdims=True, ddof=correction)
    return [(x - x.mean(axis=axes, keepdims=True)) * g / ((n - correction) * std)]


# END REFERENCE


def torch_amin(torch, x, dim=None, keepdim=False):
    return x.amin() if dim is None else x.amin(dim, keepdim)


def torch_std(torch, x, dim=None, keepdim=False, correction=1):
    return x.std(dim, correction=correction, keepdim=keepdim)


def torch_amax(torch, x, dim=None, keepdim=False):
    return x.amax() if dim is None else x.amax(dim, keepdim)


def torch_var(torch, x, dim=None, keepdim=False, correction=1):
    return x.var(dim, correction=correction, keepdim=keepdim)


# torch.amax sends a NaN's gradient to a whole row whose maximum is NaN (0 ties / 0); ours follows
# torch.max(x): the row's NaNs share it (tests/test_nan.py, test_max_sends_the_gradient_to_the_nans)
MAX_AT_NAN = "the row's NaNs share the gradient, as torch.max(x); torch.amax gives the row NaN"


# BEGIN REFERENCE 1.4
BACKWARD_SUM = "dx = broadcast(g)"
BACKWARD_MEAN = "dx = broadcast(g) / n"
BACKWARD_MAX = "dx = broadcast(g) [x = y] / (number of ties)"
BACKWARD_VAR = "dx = 2 (x - mean) broadcast(g) / (n - c)"
BACKWARD_STD = "dx = (x - mean) broadcast(g) / ((n - c) y)"  # gives var's
# END REFERENCE


RECORDS = register(
    __name__,
    [
        OpInfo(
            "sum",
            mt.sum,
            ("mt.sum", "Tensor.sum"),
            (
                Sample(
                    "sum (dim, keepdim)",
                    lambda d: [d.randn(2, 3, 4)],
                    kwargs=dict(dim=(0, 2), keepdim=True),
                    edges=DIM,
                    gradcheck=True,
                ),
                Sample("sum (all)", lambda d: [d.randn(2, 3)]),
                Sample("sum (dim 1)", lambda d: [d.randn(2, 3, 4)], kwargs=dict(dim=1), edges=DIM, gradcheck=True),
                Sample("sum (empty dim)", lambda d: [d.randn(3, 0)], kwargs=dict(dim=1), edges=EMPTY),
                Sample("sum (one element)", lambda d: [d.randn(4, 1)], kwargs=dict(dim=-1), edges=ONE),
                Sample("sum (0-d)", lambda d: [d.randn()], edges=SCALAR),
            ),
            "the sum over dim (task 1.4)",
            ref=np_sum,
            ref_backward=BY_LINEARITY,
            torch_ref=lambda torch, x, dim=None, keepdim=False: x.sum() if dim is None else x.sum(dim, keepdim),
            task="1.4",
            one_input=OneInput(mt.sum, lambda torch, x: torch.sum(x), of_ints="int64"),
            forward="y = Σ_dim x",
            backward=BACKWARD_SUM,
        ),
        OpInfo(
            "mean",
            mt.mean,
            ("mt.mean", "Tensor.mean"),
            (
                Sample("mean (dim)", lambda d: [d.randn(2, 3, 4)], kwargs=dict(dim=-1)),
                Sample(
                    "mean (dims 0 and 1, keepdim)",
                    lambda d: [d.randn(2, 3, 4)],
                    kwargs=dict(dim=(0, 1), keepdim=True),
                    edges=DIM,
                    gradcheck=True,
                ),
                Sample("mean (empty batch)", lambda d: [d.randn(0, 3)], kwargs=dict(dim=1), edges=EMPTY),
                Sample("mean (one element)", lambda d: [d.randn(1, 3)], kwargs=dict(dim=0), edges=ONE),
                Sample("mean (0-d)", lambda d: [d.randn()], edges=SCALAR),
            ),
            "mean = sum / n (task 1.4)",
            ref=np_mean,
            ref_backward=BY_LINEARITY,
            torch_ref=lambda torch, x, dim=None, keepdim=False: x.mean() if dim is None else x.mean(dim, keepdim),
            task="1.4",
            one_input=OneInput(mt.mean, lambda torch, x: torch.mean(x), of_ints="TypeError"),
            forward="y = Σ_dim x / n",
            backward=BACKWARD_MEAN,
        ),
        OpInfo(
            "max",
            mt.max,
            ("mt.max", "mt.amax", "Tensor.max", "Tensor.amax"),
            (
                Sample("max (dim, no ties)", lambda d: [d.distinct(3, 5)], kwargs=dict(dim=1)),
                Sample("max (all, no ties)", lambda d: [d.distinct(2, 3)], gradcheck=True),
                Sample(
                    "max (dim 0, keepdim)",
                    lambda d: [d.distinct(3, 4)],
                    kwargs=dict(dim=0, keepdim=True),
                    edges=DIM,
                    gradcheck=True,
                ),
                Sample("max (empty batch)", lambda d: [d.randn(0, 3)], kwargs=dict(dim=1), edges=EMPTY),
                Sample(
                    "max (ties, inf)",
                    lambda d: [d.values([[1.0, 1.0, 0.0], [-np.inf, -np.inf, -np.inf]])],
                    kwargs=dict(dim=1),
                    edges=frozenset({"nonfinite"}),
                ),
                Sample("max (0-d)", lambda d: [d.randn()], edges=SCALAR),
            ),
            "the gradient goes to the maximal elements, shared equally among ties (as torch.amax)",
            ref=np_max,
            ref_backward=np_max_backward,
            torch_ref=torch_amax,
            task="1.4",
            one_input=OneInput(
                lambda x: mt.max(x, dim=-1), lambda torch, x: torch.amax(x, dim=-1), nan_gradient_differs=MAX_AT_NAN
            ),
            forward="y = max_dim x",
            backward=BACKWARD_MAX,
        ),
        OpInfo(
            "var",
            mt.var,
            ("mt.var", "Tensor.var"),
            (
                Sample("var (dim, unbiased)", lambda d: [d.randn(3, 6)], kwargs=dict(dim=1)),
                Sample(
                    "var (biased, keepdim)",
                    lambda d: [d.randn(2, 3, 4)],
                    kwargs=dict(dim=(1, 2), keepdim=True, correction=0),
                ),
                Sample("var (all)", lambda d: [d.randn(3, 4)], gradcheck=True),
                Sample("var (empty batch)", lambda d: [d.randn(0, 4)], kwargs=dict(dim=1), edges=EMPTY),
                Sample(
                    "var (one element, biased)", lambda d: [d.randn(3, 1)], kwargs=dict(dim=1, correction=0), edges=ONE
                ),
            ),
            "var = Σ(x - mean)² / (n - c) (task 1.4)",
            ref=np_var,
            ref_backward=np_var_backward,
            torch_ref=torch_var,
            task="1.4",
            one_input=OneInput(mt.var, lambda torch, x: torch.var(x), of_ints="TypeError"),
            forward="y = Σ (x - mean)² / (n - c)",
            backward=BACKWARD_VAR,
        ),
        OpInfo(
            "min",
            mt.min,
            ("mt.min", "mt.amin", "Tensor.min", "Tensor.amin"),
            (
                Sample("min (dim, no ties)", lambda d: [d.distinct(3, 5)], kwargs=dict(dim=1)),
                Sample("min (all, no ties)", lambda d: [d.distinct(2, 3)], gradcheck=True),
                Sample(
                    "min (dims 0 and 2, keepdim)",
                    lambda d: [d.distinct(2, 3, 4)],
                    kwargs=dict(dim=(0, 2), keepdim=True),
                    edges=DIM,
                    gradcheck=True,
                ),
                Sample("min (empty batch)", lambda d: [d.randn(0, 3)], kwargs=dict(dim=1), edges=EMPTY),
                Sample(
                    "min (ties, inf)",
                    lambda d: [d.values([[0.0, 0.0, 1.0], [np.inf, np.inf, np.inf]])],
                    kwargs=dict(dim=1),
                    edges=frozenset({"nonfinite"}),
                ),
                Sample("min (0-d)", lambda d: [d.randn()], edges=SCALAR),
            ),
            "min(x) = -max(-x): the gradient goes to the minimal elements, shared equally among ties (as torch.amin)",
            ref=lambda x, dim=None, keepdim=False: np.min(x, axis=_axes(dim), keepdims=keepdim),
            ref_backward=np_min_backward,
            torch_ref=torch_amin,
            task=None,
            one_input=OneInput(
                lambda x: mt.min(x, dim=-1), lambda torch, x: torch.amin(x, dim=-1), nan_gradient_differs=MAX_AT_NAN
            ),
            forward="y = min_dim x = -max_dim(-x)",
            backward="as max's, of -x",
        ),
        OpInfo(
            "std",
            mt.std,
            ("mt.std", "Tensor.std"),
            (
                Sample("std (dim, unbiased)", lambda d: [d.randn(3, 6)], kwargs=dict(dim=1)),
                Sample(
                    "std (biased, dims, keepdim)",
                    lambda d: [d.randn(2, 3, 4)],
                    kwargs=dict(dim=(0, 2), keepdim=True, correction=0),
                    edges=DIM,
                    gradcheck=True,
                ),
                Sample("std (all)", lambda d: [d.randn(3, 4)]),
                Sample("std (empty batch)", lambda d: [d.randn(0, 4)], kwargs=dict(dim=1), edges=EMPTY),
            ),
            "std = sqrt(var), by the chain rule through var and sqrt",
            ref=lambda x, dim=None, keepdim=False, correction=1: np.std(
                x, axis=_axes(dim), keepdims=keepdim, ddof=correction
            ),
            ref_backward=np_std_backward,
            torch_ref=torch_std,
            task=None,
            one_input=OneInput(mt.std, lambda torch, x: torch.std(x), of_ints="TypeError"),
            forward="y = √var(x)",
            backward=BACKWARD_STD,
        ),
    ],
)
