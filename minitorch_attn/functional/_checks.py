"""Argument checks shared by the operations of :mod:`minitorch_attn.functional`.

Each raises a ValueError or TypeError that names the operation, what it received and what
it expected, before any array is touched.
"""

from __future__ import annotations

import math
import numbers

import numpy

from ..core.dtypes import get_default_dtype
from ..core.tensor import FLOAT_DTYPES, Tensor, _is_int


def _check_eps(eps, what, dtype):
    """A normalization's ``eps``: a finite number > 0 that stays > 0 in ``dtype``. With
    eps = 0 a row with nothing to normalize (constant for LayerNorm, all zeros for
    RMSNorm) would divide 0 by 0: NaN in its output and gradient."""
    if isinstance(eps, bool) or not isinstance(eps, numbers.Real) or not 0 < eps < math.inf:
        raise ValueError(
            f"{what}: eps must be a finite number > 0, got {eps!r} (with eps = 0 a row with "
            f"nothing to normalize would be 0 / 0)"
        )
    if numpy.asarray(eps, dtype=dtype) == 0:
        raise ValueError(
            f"{what}: eps = {eps!r} rounds to 0 in {dtype}; it must be > 0 there "
            f"(at least {numpy.finfo(dtype).smallest_subnormal})"
        )
    return float(eps)


def _check_probability(p, what):
    if isinstance(p, bool) or not isinstance(p, numbers.Real) or not 0.0 <= p <= 1.0:
        raise ValueError(f"{what} must be a probability in [0, 1], got {p!r}")
    return float(p)


def _axis(dim, ndim, what):
    if not _is_int(dim) or not -max(ndim, 1) <= dim < max(ndim, 1):
        raise ValueError(f"{what}: dim {dim!r} is out of range for a tensor with {ndim} dims")
    return int(dim) % max(ndim, 1)


def _check_flag(value, what):
    """A yes/no option (``training``, ``is_causal``): only True or False, so that a string
    such as "False" is not read as True."""
    if not isinstance(value, bool):
        raise TypeError(f"{what} must be True or False, got {value!r}")


def as_float(x, what):
    """``x``; an integer or bool Tensor in the default float dtype instead (PyTorch's
    promotion for the ops that compute in floats: ``sigmoid(int_tensor)`` is float32)."""
    if isinstance(x, Tensor) and x.dtype not in FLOAT_DTYPES:
        return x.to(dtype=get_default_dtype())
    return x


def _check_float(x, what):
    if not isinstance(x, Tensor):
        raise TypeError(f"{what}: expected a Tensor, got {type(x).__name__}")
    if x.dtype not in FLOAT_DTYPES:
        raise TypeError(f"{what}: expected a float32 or float64 tensor, got {x.dtype}")


def _normalized_axes(x, normalized_shape, weight, bias, what):
    """Check ``normalized_shape`` against ``x``'s trailing dims and the affine parameters;
    return the normalized axes (the last ``len(normalized_shape)`` dims)."""
    _check_float(x, what)
    shape = (normalized_shape,) if _is_int(normalized_shape) else normalized_shape
    if not isinstance(shape, (tuple, list)) or not all(_is_int(s) for s in shape):
        raise TypeError(f"{what}: normalized_shape must be an int or a sequence of ints, got {normalized_shape!r}")
    shape = tuple(int(s) for s in shape)
    if not shape or len(shape) > x.ndim or x.shape[x.ndim - len(shape) :] != shape:
        raise ValueError(f"{what}: normalized_shape {shape} must equal the trailing dims of the input {x.shape}")
    for name, p in (("weight", weight), ("bias", bias)):
        if p is not None:
            _check_float(p, f"{what}: {name}")
            if p.shape != shape:
                raise ValueError(f"{what}: {name} has shape {p.shape}, expected normalized_shape {shape}")
            if p.dtype != x.dtype:
                raise TypeError(f"{what}: {name} is {p.dtype} but the input is {x.dtype}")
    return tuple(range(x.ndim - len(shape), x.ndim))


def _bad_targets(xp, target, valid, C, ignore_index):
    """The ValueError of targets that are neither a class index nor ``ignore_index``."""
    kept = xp.where(valid, target, xp.zeros_like(target))
    return ValueError(
        f"cross_entropy: targets must be class indices in [0, {C}) or ignore_index="
        f"{ignore_index}; got values from {int(xp.min(kept))} to {int(xp.max(kept))}"
    )
