"""Records of LayerNorm and RMSNorm, :mod:`minitorch_attn.functional.normalization`
(homework tasks 3.1 and 3.2).

Their samples normalize one and two trailing dims, with and without the affine
parameters, a row far from 0 (LayerNorm's two-pass variance), a constant row (exactly
the bias) and empty batches or feature dims.
"""

import numpy as np

import minitorch_attn.functional as F

from .record import OneInput, OpInfo, Sample, register

EMPTY, ONE, NONFINITE = (frozenset({e}) for e in ("empty", "one-element", "nonfinite"))


def _axes(x, normalized_shape):
    n = 1 if isinstance(normalized_shape, int) else len(normalized_shape)
    return tuple(range(x.ndim - n, x.ndim))


# BEGIN REFERENCE 3.1
def np_layer_norm(x, normalized_shape, weight=None, bias=None, eps=1e-5):
    axes = _axes(x, normalized_shape)
    if not x.size:
        y = x.copy()
    else:
        centred = x - x.mean(axis=axes, keepdims=True)
        y = centred / np.sqrt((centred**2).mean(axis=axes, keepdims=True) + eps)
    y = y * weight if weight is not None else y
    return y + bias if bias is not None else y


# END REFERENCE


# BEGIN REFERENCE 3.2
def np_rms_norm(x, normalized_shape, weight=None, eps=None):
    eps = np.finfo(x.dtype).eps if eps is None else eps
    axes = _axes(x, normalized_shape)
    y = x / np.sqrt((x**2).mean(axis=axes, keepdims=True) + eps) if x.size else x.copy()
    return y * weight if weight is not None else y


# END REFERENCE


# BEGIN REFERENCE 3.1
def np_layer_norm_backward(grads, x, normalized_shape, *args, **kwargs):
    """n = (x - μ) r, r = 1/√(σ² + ε); dn = g w; dx = r (dn - mean(dn) - n mean(dn n)) (means
    over the normalized axes); dw = Σ g n, db = Σ g (over the other axes)."""
    options = dict(zip(("weight", "bias", "eps"), args), **kwargs)
    weight, bias, eps = options.get("weight"), options.get("bias"), options.get("eps", 1e-5)
    axes = _axes(x, normalized_shape)
    g = np.asarray(grads[0], dtype=np.float64)
    others = tuple(range(x.ndim - len(axes)))
    if not x.size:
        n, dx = x.copy(), np.zeros_like(x)
    else:
        centred = x - x.mean(axis=axes, keepdims=True)
        r = 1 / np.sqrt((centred**2).mean(axis=axes, keepdims=True) + eps)
        n = centred * r
        dn = g * weight if weight is not None else g
        dx = r * (dn - dn.mean(axis=axes, keepdims=True) - n * (dn * n).mean(axis=axes, keepdims=True))
    dw = (g * n).sum(axis=others) if weight is not None else None
    db = g.sum(axis=others) if bias is not None else None
    return [dx, None, dw, db][: 2 + len(args)]


# END REFERENCE


# BEGIN REFERENCE 3.2
def np_rms_norm_backward(grads, x, normalized_shape, *args, **kwargs):
    """r = 1/√(mean(x²) + ε), n = x r; dn = g w; dx = r (dn - n mean(dn n)); dw = Σ g n."""
    options = dict(zip(("weight", "eps"), args), **kwargs)
    weight, eps = options.get("weight"), options.get("eps")
    eps = np.finfo(x.dtype).eps if eps is None else eps
    axes = _axes(x, normalized_shape)
    g = np.asarray(grads[0], dtype=np.float64)
    if not x.size:
        n, dx = x.copy(), np.zeros_like(x)
    else:
        r = 1 / np.sqrt((x**2).mean(axis=axes, keepdims=True) + eps)
        n = x * r
        dn = g * weight if weight is not None else g
        dx = r * (dn - n * (dn * n).mean(axis=axes, keepdims=True))
    dw = (g * n).sum(axis=tuple(range(x.ndim - len(axes)))) if weight is not None else None
    return [dx, None, dw][: 2 + len(args)]


# END REFERENCE


def torch_rms_norm(torch, x, normalized_shape, weight=None, eps=None):
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    return torch.nn.functional.rms_norm(x, shape, weight, eps)


def torch_layer_norm(torch, x, normalized_shape, weight=None, bias=None, eps=1e-5):
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    return torch.nn.functional.layer_norm(x, shape, weight, bias, eps)


# BEGIN REFERENCE 3.1
BACKWARD_LAYER_NORM = "ĝ = g w; dx = rstd (ĝ - mean(ĝ) - x̂ mean(ĝ x̂)), dw = Σ g x̂, db = Σ g"
# END REFERENCE


# BEGIN REFERENCE 3.2
BACKWARD_RMS_NORM = "ĝ = g w; dx = rstd (ĝ - x̂ mean(ĝ x̂)), dw = Σ g x̂"
# END REFERENCE


RECORDS = register(
    __name__,
    [
        OpInfo(
            "layer_norm",
            F.layer_norm,
            ("F.layer_norm",),
            (
                Sample("layer_norm (weight, bias)", lambda d: [d.randn(3, 6), (6,), d.randn(6), d.randn(6)]),
                Sample(
                    "layer_norm (2 trailing dims)",
                    lambda d: [d.randn(2, 3, 2, 2), (2, 2), d.randn(2, 2), d.randn(2, 2)],
                ),
                Sample(
                    "layer_norm (no affine, shifted)",
                    lambda d: [d.randn(3, 5, scale=0.1)],
                    fn=lambda x: F.layer_norm(x + 100.0, 5),
                    n_ops=16 * 1000,
                ),
                Sample(
                    "layer_norm (weight only, eps)",
                    lambda d: [d.randn(2, 5), 5, d.randn(5)],
                    kwargs=dict(eps=1e-3),
                    gradcheck=True,
                    tasks=("3.1",),
                ),
                Sample(
                    "layer_norm (constant row)",
                    lambda d: [d.values([[3.0, 3.0, 3.0], [1.0, 2.0, 4.0]]), 3, d.randn(3), d.randn(3)],
                    edges=ONE,
                ),
                Sample("layer_norm (empty batch)", lambda d: [d.randn(0, 4), 4, d.randn(4), d.randn(4)], edges=EMPTY),
                Sample("layer_norm (0 features)", lambda d: [d.randn(3, 0), 0, d.randn(0), d.randn(0)], edges=EMPTY),
            ),
            "Ba et al. 2016 (arXiv:1607.06450, eq. 15-16); the derivation is in LayerNorm's docstring",
            ref=np_layer_norm,
            ref_backward=np_layer_norm_backward,
            torch_ref=torch_layer_norm,
            task="3.1",
            n_ops=64,
            differentiable_in=("input", "weight", "bias"),
            not_differentiable_in=(),
            one_input=OneInput(
                lambda x: F.layer_norm(x, (3,)),
                lambda torch, x: torch.nn.functional.layer_norm(x, (3,)),
                of_ints="TypeError",
            ),
            forward="y = x̂ w + b, x̂ = (x - mean) rstd, rstd = 1/√(var + ε)",
            backward=BACKWARD_LAYER_NORM,
        ),
        OpInfo(
            "rms_norm",
            F.rms_norm,
            ("F.rms_norm",),
            (
                Sample("rms_norm (weight)", lambda d: [d.randn(3, 6), (6,), d.randn(6)]),
                Sample(
                    "rms_norm (2 dims, eps, no weight)", lambda d: [d.randn(2, 2, 3), (2, 3)], kwargs=dict(eps=1e-5)
                ),
                Sample(
                    "rms_norm (zero row)",
                    lambda d: [d.values([[0.0, 0.0, 0.0], [1.0, -2.0, 0.5]]), 3, d.randn(3)],
                    kwargs=dict(eps=1e-6),
                    edges=ONE,
                ),  # eps=None is finfo(dtype).eps: not one value for float32 and 64
                Sample("rms_norm (empty batch)", lambda d: [d.randn(2, 0, 4), 4, d.randn(4)], edges=EMPTY),
                Sample("rms_norm (0 features)", lambda d: [d.randn(3, 0), 0, d.randn(0)], edges=EMPTY),
            ),
            "Zhang & Sennrich 2019 (arXiv:1910.07467, eq. 4); the derivation is in RMSNorm's docstring",
            ref=np_rms_norm,
            ref_backward=np_rms_norm_backward,
            torch_ref=torch_rms_norm,
            task="3.2",
            n_ops=64,
            differentiable_in=("input", "weight"),
            one_input=OneInput(
                lambda x: F.rms_norm(x, (3,)),
                lambda torch, x: torch.nn.functional.rms_norm(x, (3,)),
                of_ints="TypeError",
            ),
            forward="y = x̂ w, x̂ = x rstd, rstd = 1/√(mean(x²) + ε)",
            backward=BACKWARD_RMS_NORM,
        ),
    ],
)
