"""Records of the softmax family of :mod:`minitorch_attn.functional.softmax`: softmax,
log_softmax and cross_entropy (homework tasks 2.1 to 2.3).

All three exponentiate, so each has extreme-logit samples (±1000 in float64, ±80 in
float32) that overflow unless the row maximum is subtracted first, and ±inf / NaN rows
(a -inf entry is an exact 0; a NaN or +inf makes its whole row NaN, as in PyTorch).
"""

import numpy as np

import minitorch_attn as mt
import minitorch_attn.functional as F

from .record import OneInput, OpInfo, Sample, register, with_neg_inf

EMPTY, SCALAR, ONE, DIM, EXTREME, NONFINITE = (
    frozenset({e}) for e in ("empty", "0-d", "one-element", "dim", "extreme", "nonfinite")
)


# BEGIN REFERENCE 2.2
def np_log_softmax(x, dim=-1):
    """``x - max - log Σ exp(x - max)`` in float64; NaN rows stay NaN, -inf entries -inf."""
    x = np.asarray(x, dtype=np.float64)
    if x.ndim == 0:
        return np.zeros_like(x)
    with np.errstate(invalid="ignore", over="ignore"):
        top = np.max(x, axis=dim, keepdims=True) if x.shape[dim] else np.zeros_like(np.sum(x, dim, keepdims=True))
        top = np.where(top == -np.inf, 0.0, top)  # an all -inf row: NaN, as PyTorch; +inf or NaN: NaN
        shifted = x - top
        return shifted - np.log(np.sum(np.exp(shifted), axis=dim, keepdims=True))


# END REFERENCE


# BEGIN REFERENCE 2.1
def np_softmax(x, dim=-1):
    with np.errstate(invalid="ignore"):
        return np.exp(np_log_softmax(x, dim))


def np_softmax_backward(grads, x, dim=-1):
    """``p ∘ (g - Σ g p)``: the softmax Jacobian ``diag(p) - p pᵀ`` applied to ``g``."""
    p, g = np_softmax(x, dim), grads[0]
    if np.ndim(x) == 0:
        return [np.zeros_like(g)]
    return [p * (g - (g * p).sum(dim, keepdims=True))]


# END REFERENCE


# BEGIN REFERENCE 2.2
def np_log_softmax_backward(grads, x, dim=-1):
    """``g - p Σ g``."""
    p, g = np_softmax(x, dim), grads[0]
    if np.ndim(x) == 0:
        return [np.zeros_like(g)]
    return [g - p * g.sum(dim, keepdims=True)]


# END REFERENCE


# BEGIN REFERENCE 2.3
def np_cross_entropy_backward(
    grads, logits, target, weight=None, ignore_index=-100, label_smoothing=0.0, reduction="mean"
):
    """Per kept target: ``g_n ((1-ε) w_t + ε/C Σ_c w_c) p - g_n ((1-ε) w_t onehot + ε/C w)``, 0
    where ignored; the mean's ``g`` is divided by the summed weights of the targets kept."""
    logits = np.asarray(logits, dtype=np.float64)
    unbatched = logits.ndim == 1
    if unbatched:
        logits, target = logits[None], np.asarray(target).reshape(1)
    C = logits.shape[1]
    z = np.moveaxis(logits, 1, -1)  # (N, d1, ..., C)
    p = np_softmax(z, -1)
    target = np.asarray(target, dtype=np.int64)
    keep = target != ignore_index
    safe = np.where(keep, target, 0)
    w = np.ones(C) if weight is None else np.asarray(weight, dtype=np.float64)
    g = np.asarray(grads[0], dtype=np.float64)
    if reduction == "mean":
        g = np.broadcast_to(g / np.where(keep, w[safe], 0.0).sum(), target.shape)
    elif reduction == "sum":
        g = np.broadcast_to(g, target.shape)
    else:
        g = g.reshape(target.shape)
    onehot = np.eye(C)[safe]
    wt = w[safe][..., None]
    eps = label_smoothing
    dz = ((1 - eps) * wt + eps / C * w.sum()) * p - (1 - eps) * wt * onehot - eps / C * w
    dz = np.where(keep[..., None], dz * g[..., None], 0.0)
    dlogits = np.moveaxis(dz, -1, 1)
    return [dlogits[0] if unbatched else dlogits, None] + ([None] if weight is not None else [])


def np_cross_entropy(logits, target, weight=None, ignore_index=-100, label_smoothing=0.0, reduction="mean"):
    """PyTorch's definition: per target ``-w[t] ((1-ε) logp[t] + ε/C Σ_c w[c]/w[t] logp[c])``,
    0 where ignored; the mean divides by the summed weights of the targets kept."""
    logits = np.asarray(logits, dtype=np.float64)
    if logits.ndim == 1:
        logits, target = logits[None], np.asarray(target).reshape(1)
    C = logits.shape[1]
    logp = np_log_softmax(np.moveaxis(logits, 1, -1), -1)  # (N, d1, ..., C)
    target = np.asarray(target, dtype=np.int64)
    keep = target != ignore_index
    safe = np.where(keep, target, 0)
    w = np.ones(C) if weight is None else np.asarray(weight, dtype=np.float64)
    picked = np.take_along_axis(logp, safe[..., None], -1)[..., 0]
    smooth = (logp * w).sum(-1) / C
    loss = np.where(keep, -(1 - label_smoothing) * w[safe] * picked - label_smoothing * smooth, 0.0)
    if reduction == "none":
        return loss if np.ndim(loss) else loss
    if reduction == "sum":
        return loss.sum()
    with np.errstate(invalid="ignore"):
        return loss.sum() / np.where(keep, w[safe], 0.0).sum()


# END REFERENCE


def _nll_parts(logp, target, weight, ignore_index):
    """``(rows (M, C), target (M,), kept (M,), w (C,))`` with the class dim last."""
    logp = np.asarray(logp, dtype=np.float64)
    if logp.ndim == 1:
        logp, target = logp[None], np.asarray(target).reshape(1)
    C = logp.shape[1]
    rows = np.moveaxis(logp, 1, -1).reshape(-1, C)
    target = np.asarray(target, dtype=np.int64).reshape(-1)
    w = np.ones(C) if weight is None else np.asarray(weight, dtype=np.float64)
    return rows, target, target != ignore_index, w


def np_nll_loss(logp, target, weight=None, ignore_index=-100, reduction="mean"):
    rows, t, kept, w = _nll_parts(logp, target, weight, ignore_index)
    safe = np.where(kept, t, 0)
    wt = np.where(kept, w[safe], 0.0)
    with np.errstate(invalid="ignore"):
        loss = np.where(kept, -wt * rows[np.arange(len(t)), safe] if len(t) else 0.0, 0.0)
        if reduction == "none":
            return loss.reshape(np.shape(target))
        return loss.sum() if reduction == "sum" else loss.sum() / wt.sum()


def np_nll_loss_backward(grads, logp, target, weight=None, ignore_index=-100, reduction="mean"):
    rows, t, kept, w = _nll_parts(logp, target, weight, ignore_index)
    safe = np.where(kept, t, 0)
    wt = np.where(kept, w[safe], 0.0)
    g = np.asarray(grads[0], dtype=np.float64)
    factor = g.reshape(-1) if reduction == "none" else np.full(len(t), g / wt.sum() if reduction == "mean" else g)
    d = np.zeros_like(rows)
    d[np.arange(len(t)), safe] = -wt * factor
    shape = np.shape(logp)
    d = d.reshape(shape[:1] + shape[2:] + shape[1:2]) if len(shape) > 1 else d.reshape(shape)
    d = np.moveaxis(d, -1, 1) if len(shape) > 1 else d
    return [d, None] + ([None] if weight is not None else [])


def np_soft_cross_entropy(logits, target, weight=None, label_smoothing=0.0, reduction="mean"):
    """PyTorch's definition for probability targets: ``-Σ_c w_c ((1-ε) t_c + ε/C) logp_c`` per
    row; the mean divides by the number of rows."""
    logits, target = np.asarray(logits, np.float64), np.asarray(target, np.float64)
    C = logits.shape[1] if logits.ndim > 1 else logits.shape[0]
    axis = 1 if logits.ndim > 1 else 0
    logp = np_log_softmax(logits, axis)
    w = np.ones(C) if weight is None else np.asarray(weight, np.float64)
    w = w.reshape((C,) + (1,) * (logits.ndim - 2)) if logits.ndim > 1 else w
    q = (1 - label_smoothing) * target + label_smoothing / C
    loss = -(w * q * logp).sum(axis)
    if reduction == "none":
        return loss
    if reduction == "sum":
        return loss.sum()
    return loss.sum() / loss.size if loss.size else np.nan


def class_weights(d, classes):
    """Class weights in [0.2, 2), without a gradient."""
    return d.uniform(classes, low=0.2, high=2.0, requires_grad=False)


def np_soft_cross_entropy_backward(grads, logits, target, weight=None, label_smoothing=0.0, reduction="mean"):
    """``dlogits = (p Σ_c r_c - r) g``, ``dtarget = -(1-ε) w logp g`` with ``r = w ((1-ε) t + ε/C)``;
    ``g`` per row (none), or divided by the number of rows (mean)."""
    logits, target = np.asarray(logits, np.float64), np.asarray(target, np.float64)
    axis = 1 if logits.ndim > 1 else 0
    C = logits.shape[axis]
    logp = np_log_softmax(logits, axis)
    w = np.ones(C) if weight is None else np.asarray(weight, np.float64)
    w = w.reshape((C,) + (1,) * (logits.ndim - 2)) if logits.ndim > 1 else w
    r = w * ((1 - label_smoothing) * target + label_smoothing / C)
    g = np.asarray(grads[0], np.float64)
    rows = logits.size // C if C else 0
    g = np.expand_dims(g, axis) if reduction == "none" else (g / rows if reduction == "mean" and rows else g)
    dlogits = (np.exp(logp) * r.sum(axis, keepdims=True) - r) * g
    dtarget = -(1 - label_smoothing) * w * logp * g
    return [dlogits, dtarget] + ([None] if weight is not None else [])


def soft_targets(d, *shape):
    """Rows of class probabilities along dim 1 (a softmax of normal draws), with a gradient."""
    values = np.exp(d.rng.standard_normal(shape))
    return d._tensor(values / values.sum(axis=1 if len(shape) > 1 else 0, keepdims=True))


def padded_logits(d, *shape):
    """Normal logits whose last row is all -inf (a padding position, ignored by its target)."""
    values = d.rng.standard_normal(shape)
    values[-1] = -np.inf
    return d._tensor(values)


def torch_cross_entropy(torch, logits, target, weight=None, **options):
    return torch.nn.functional.cross_entropy(logits, target, weight=weight, **options)


def np_logsumexp(x, dim, keepdim=False):
    x = np.asarray(x, dtype=np.float64)
    if x.ndim == 0:
        return x
    with np.errstate(divide="ignore"):
        top = np.max(x, axis=dim, keepdims=True) if x.size else np.zeros_like(np.sum(x, dim, keepdims=True))
        top = np.where(np.isfinite(top), top, 0.0)
        out = top + np.log(np.sum(np.exp(x - top), axis=dim, keepdims=True))
    return out if keepdim else np.squeeze(out, axis=dim)


def np_logsumexp_backward(grads, x, dim, keepdim=False):
    """``g softmax(x)`` along ``dim``."""
    x = np.asarray(x, dtype=np.float64)
    if x.ndim == 0:
        return [np.asarray(grads[0], dtype=np.float64)]
    lse = np_logsumexp(x, dim, keepdim=True)
    g = np.asarray(grads[0]).reshape(lse.shape)
    return [g * np.exp(x - lse)]


# BEGIN REFERENCE 2.1
BACKWARD_SOFTMAX = "dx = p ∘ (g - Σ g p)"
# END REFERENCE


# BEGIN REFERENCE 2.2
BACKWARD_LOG_SOFTMAX = "dx = g - exp(y) Σ g"
# END REFERENCE


# BEGIN REFERENCE 2.3
BACKWARD_CROSS_ENTROPY = "dx = g w_t (softmax(x) - q) / Σ w, q = (1-ε) onehot(t) + ε/C"
# END REFERENCE


# one record a block, aligned by hand: the catalogue reads as a table
# fmt: off
RECORDS = register(__name__, [
    OpInfo("logsumexp", mt.logsumexp, ("mt.logsumexp", "Tensor.logsumexp"),
           (Sample("logsumexp (dim -1)", lambda d: [d.randn(3, 5, scale=3.0)], kwargs=dict(dim=-1)),
            Sample("logsumexp (dims 0, 2, keepdim)", lambda d: [d.randn(2, 3, 4)],
                   kwargs=dict(dim=(0, 2), keepdim=True),
                   edges=DIM, gradcheck=True),
            Sample("logsumexp (extreme logits)", lambda d: [d.extreme(4, 7)], kwargs=dict(dim=1), edges=EXTREME),
            Sample("logsumexp (-inf entries)", lambda d: [with_neg_inf(d, 3, 6)], kwargs=dict(dim=1), edges=NONFINITE),
            Sample("logsumexp (over a 0-length dim)", lambda d: [d.randn(3, 0)], kwargs=dict(dim=1), edges=EMPTY),
            Sample("logsumexp (one-element rows)", lambda d: [d.randn(3, 1)], kwargs=dict(dim=1), edges=ONE),
            Sample("logsumexp (0-d)", lambda d: [d.randn()], kwargs=dict(dim=0), edges=SCALAR)),
           "lse = m + log Σ exp(x - m), m = max; dx = g exp(x - lse) = g softmax(x)",
           ref=np_logsumexp, ref_backward=np_logsumexp_backward,
           torch_ref=lambda torch, x, dim, keepdim=False: torch.logsumexp(x, dim, keepdim=keepdim),
           task=None, exponentiates=True,
           one_input=OneInput(lambda x: mt.logsumexp(x, -1), lambda torch, x: torch.logsumexp(x, -1),
                              of_ints="float"),
           forward="y = m + log Σ exp(x - m), m = max x",
           backward="dx = g exp(x - y) = g softmax(x)"),
    OpInfo("softmax", F.softmax, ("F.softmax", "Tensor.softmax"),
           (Sample("softmax (dim -1)", lambda d: [d.randn(3, 5)]),
            Sample("softmax (dim 0, 3-D)", lambda d: [d.randn(4, 2, 3)], kwargs=dict(dim=0)),
            Sample("softmax (-inf entries)", lambda d: [with_neg_inf(d, 3, 6)]),
            Sample("softmax (extreme logits)", lambda d: [d.extreme(4, 7)], edges=EXTREME),
            Sample("softmax (extreme logits, dim 0)", lambda d: [d.extreme(4, 7)], kwargs=dict(dim=0),
                   edges=EXTREME | DIM),
            Sample("softmax (nan and +inf rows)", lambda d: [d.values([[1.0, np.nan, 0.0], [0.0, np.inf, 1.0],
                                                                       [-np.inf, 0.0, 2.0]])], edges=NONFINITE),
            Sample("softmax (over a 0-length dim)", lambda d: [d.randn(2, 0)], edges=EMPTY),
            Sample("softmax (empty batch)", lambda d: [d.randn(0, 3)], kwargs=dict(dim=0), edges=EMPTY),
            Sample("softmax (one-element rows)", lambda d: [d.randn(3, 1)], edges=ONE),
            Sample("softmax (0-d)", lambda d: [d.randn()], kwargs=dict(dim=0), edges=SCALAR)),
           "p = exp(x - max) / Σ exp(x - max); dx = p ∘ (g - Σ g p) (the softmax Jacobian diag(p) - p pᵀ)",
           ref=np_softmax, ref_backward=np_softmax_backward, torch_ref=lambda torch, x, dim=-1: x.softmax(dim),
           task="2.1", exponentiates=True,
           one_input=OneInput(F.softmax, lambda torch, x: torch.nn.functional.softmax(x, -1), of_ints="TypeError"),
           forward="p = exp(x - max) / Σ exp(x - max)",
           backward=BACKWARD_SOFTMAX),
    OpInfo("log_softmax", F.log_softmax, ("F.log_softmax", "Tensor.log_softmax"),
           (Sample("log_softmax", lambda d: [d.randn(3, 5, scale=3.0)]),
            Sample("log_softmax (dim 1)", lambda d: [d.randn(2, 4, 3)], kwargs=dict(dim=1)),
            Sample("log_softmax (extreme logits)", lambda d: [d.extreme(4, 7)], edges=EXTREME),
            Sample("log_softmax (extreme logits, dim 0)", lambda d: [d.extreme(4, 7)], kwargs=dict(dim=0),
                   edges=EXTREME | DIM),
            Sample("log_softmax (-inf entries)", lambda d: [d.values([[0.5, -np.inf, 1.0], [0.0, -np.inf, 3.0]])],
                   edges=NONFINITE),
            Sample("log_softmax (over a 0-length dim)", lambda d: [d.randn(3, 0, 2)], kwargs=dict(dim=1), edges=EMPTY),
            Sample("log_softmax (one-element rows)", lambda d: [d.randn(2, 1)], edges=ONE),
            Sample("log_softmax (0-d)", lambda d: [d.randn()], kwargs=dict(dim=-1), edges=SCALAR)),
           "log p = x - logsumexp(x); dx = g - p Σ g (never through 1/p)",
           ref=np_log_softmax, ref_backward=np_log_softmax_backward,
           torch_ref=lambda torch, x, dim=-1: x.log_softmax(dim), task="2.2", exponentiates=True,
           one_input=OneInput(F.log_softmax, lambda torch, x: torch.nn.functional.log_softmax(x, -1),
                              of_ints="TypeError"),
           forward="y = x - logsumexp(x)",
           backward=BACKWARD_LOG_SOFTMAX),
    OpInfo("nll_loss", F.nll_loss, ("F.nll_loss",),
           (Sample("nll_loss (mean, ignore_index)", lambda d: [d.randn(6, 5), d.ints([0, 4, -100, 2, 2, 1])]),
            Sample("nll_loss (N,C,d, weight, sum)",
                   lambda d: [d.randn(2, 4, 3), d.integers(0, 4, 2, 3), class_weights(d, 4)],
                   kwargs=dict(reduction="sum")),
            Sample("nll_loss (none, weight)",
                   lambda d: [d.randn(4, 3), d.ints([1, -1, 0, 2]), class_weights(d, 3)],
                   kwargs=dict(ignore_index=-1, reduction="none")),
            Sample("nll_loss (weighted mean)",
                   lambda d: [d.randn(5, 3), d.ints([1, 0, 0, 2, 1]), class_weights(d, 3)]),
            Sample("nll_loss (-inf log-probabilities)", lambda d: [d.values([[0.0, -np.inf], [-np.inf, 0.0]]),
                                                                   d.ints([0, 1])], edges=NONFINITE),
            Sample("nll_loss (unbatched)", lambda d: [d.randn(4), d.ints(2)], edges=SCALAR, gradcheck=True),
            Sample("nll_loss (one class)", lambda d: [d.randn(3, 1), d.ints([0, 0, 0])], edges=ONE),
            Sample("nll_loss (empty batch, sum)", lambda d: [d.randn(0, 3), d.ints(np.zeros(0))],
                   kwargs=dict(reduction="sum"), edges=EMPTY),
            Sample("nll_loss (empty batch, mean)", lambda d: [d.randn(0, 3), d.ints(np.zeros(0))], edges=EMPTY)),
           "loss = -w_t logp_t; dlogp = -w_t onehot(t) (÷ Σ w_t for the mean)",
           ref=np_nll_loss, ref_backward=np_nll_loss_backward,
           torch_ref=lambda torch, x, t, weight=None, **o: torch.nn.functional.nll_loss(x, t, weight=weight, **o),
           task=None, differentiable_in=("input",), not_differentiable_in=("target", "weight"),
           one_input=OneInput(lambda x: F.nll_loss(x, mt.tensor([0, 2])), lambda torch,
                              x: torch.nn.functional.nll_loss(x, torch.tensor([0, 2])), of_ints="TypeError"),
           forward="loss = -w_t logp_t (mean: ÷ Σ w_t)",
           backward="dlogp = -g w_t onehot(t) (÷ Σ w_t for the mean)"),
    OpInfo("cross_entropy (probability targets)", F.cross_entropy, ("F.cross_entropy",),
           (Sample("cross_entropy (soft targets)", lambda d: [d.randn(4, 5), soft_targets(d, 4, 5)]),
            Sample("cross_entropy (soft, weight, smoothing)",
                   lambda d: [d.randn(4, 3), soft_targets(d, 4, 3), class_weights(d, 3)],
                   kwargs=dict(label_smoothing=0.2)),
            Sample("cross_entropy (soft, N,C,d, none)", lambda d: [d.randn(2, 3, 4), soft_targets(d, 2, 3, 4)],
                   kwargs=dict(reduction="none"), edges=DIM, gradcheck=True),
            Sample("cross_entropy (soft, sum, extreme)", lambda d: [d.extreme(3, 4), soft_targets(d, 3, 4)],
                   kwargs=dict(reduction="sum"), edges=EXTREME),
            Sample("cross_entropy (soft, unbatched)", lambda d: [d.randn(4), soft_targets(d, 4)], edges=SCALAR,
                   gradcheck=True),
            Sample("cross_entropy (soft, empty batch)", lambda d: [d.randn(0, 3), soft_targets(d, 0, 3)],
                   kwargs=dict(reduction="sum"), edges=EMPTY)),
           "r = w ((1-ε) t + ε/C): dlogits = p Σ r - r, dt = -(1-ε) w logp (÷ rows for the mean, as PyTorch)",
           ref=np_soft_cross_entropy, ref_backward=np_soft_cross_entropy_backward, torch_ref=torch_cross_entropy,
           task=None, exponentiates=True, n_ops=32,
           differentiable_in=("input", "target"), not_differentiable_in=("weight",),
           forward="loss = -Σ r log_softmax(x), r = w ((1-ε) t + ε/C)",
           backward="dx = g (p Σ r - r), dt = -g (1-ε) w log p (÷ rows for the mean)"),
    OpInfo("cross_entropy", F.cross_entropy, ("F.cross_entropy",),
           (Sample("cross_entropy (mean, ignore_index)",
                   lambda d: [d.randn(6, 5), d.ints([0, 4, -100, 2, 2, -100])]),
            Sample("cross_entropy (N,C,d, smoothing,sum)", lambda d: [d.randn(2, 4, 3), d.integers(0, 4, 2, 3)],
                   kwargs=dict(label_smoothing=0.1, reduction="sum")),
            Sample("cross_entropy (none)", lambda d: [d.randn(4, 3), d.ints([1, -1, 0, 2])],
                   kwargs=dict(ignore_index=-1, reduction="none")),
            Sample("cross_entropy (weight,smooth,ignore)",
                   lambda d: [d.randn(6, 5), d.ints([0, 4, -100, 2, 2, 1]),
                              d.uniform(5, low=0.2, high=2.0, requires_grad=False)],
                   kwargs=dict(label_smoothing=0.2)),
            Sample("cross_entropy (weight, -inf padding)",
                   lambda d: [padded_logits(d, 4, 3), d.ints([2, 0, 1, -100]),
                              class_weights(d, 3)],
                   kwargs=dict(reduction="none"),
                   torch_wrong="PyTorch 2.13 gives the ignored all -inf row a NaN gradient; it adds nothing to the "
                               "loss, so its gradient is 0"),
            Sample("cross_entropy (extreme logits, smoothing)", lambda d: [d.extreme(5, 7), d.ints([1, 0, 6, 3, 3])],
                   kwargs=dict(label_smoothing=0.1), edges=EXTREME),
            Sample("cross_entropy (unbatched)", lambda d: [d.randn(4), d.ints(2)], edges=SCALAR, gradcheck=True),
            Sample("cross_entropy (one class)", lambda d: [d.randn(3, 1), d.ints([0, 0, 0])], edges=ONE),
            Sample("cross_entropy (empty batch, sum)", lambda d: [d.randn(0, 3), d.ints(np.zeros(0))],
                   kwargs=dict(reduction="sum"), edges=EMPTY)),
           "Szegedy et al. 2016 (arXiv:1512.00567 §7) for smoothing: dlogits = w_t (softmax - q) / Σ w, "
           "q = (1-ε) onehot + ε/C",
           ref=np_cross_entropy, ref_backward=np_cross_entropy_backward, torch_ref=torch_cross_entropy, task="2.3",
           exponentiates=True, n_ops=32,
           differentiable_in=("input",), not_differentiable_in=("target", "weight"),
           one_input=OneInput(lambda x: F.cross_entropy(x, mt.tensor([0, 2])), lambda torch,
                              x: torch.nn.functional.cross_entropy(x, torch.tensor([0, 2])), of_ints="TypeError"),
           forward="loss = -w_t log softmax(x)_t (label smoothing ε)",
           backward=BACKWARD_CROSS_ENTROPY),
])
# fmt: on
