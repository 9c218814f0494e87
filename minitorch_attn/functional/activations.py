"""Activations and dropout: GELU, sigmoid, SiLU, ReLU and inverted dropout, with hand-written backward passes.

Each acts elementwise, so its Jacobian is diagonal and its backward is ``grad_output``
(``g`` in the derivations) times the local derivative ``dy/dx``.
"""

from __future__ import annotations

import math

from ..core.autograd import Function
from ..core.tensor import Tensor
from ..speed import RowWise, fused_kernels
from ._checks import _check_flag, _check_float, _check_probability, as_float

_TANH_A = math.sqrt(2.0 / math.pi)  # u = x (a + b x²) in the tanh form of GELU
_TANH_B = 0.044715 * _TANH_A
_TANH_CLIP = 1e4  # |x| past which h is exactly 0 or 1 in both float dtypes (it is from |x| = 20)
_EXP_CAP = 80.0  # the largest argument given to exp: e^80 is finite in float32 (its limit is e^88.7)
_INV_SQRT_2 = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


def _dropout_scale(backend, shape, p, dtype):
    """Inverted-dropout multiplier: ``1/(1-p)`` where kept (probability 1-p), 0 where dropped.

    Drawn from the backend's seeded stream (:func:`minitorch_attn.manual_seed`), always in
    float32, so one seed gives one mask whatever the dtype; ``p == 1`` gives all zeros.
    Saved by the forward, reused by the backward.
    """
    xp = backend.xp
    if p >= 1.0:
        return xp.zeros(shape, dtype=dtype, device=backend.device)
    kept = backend.uniform(shape, "float32") >= p
    return xp.astype(kept, dtype) * (1.0 / (1.0 - p))


class GELU(Function):
    r"""Gaussian Error Linear Unit, ``x Φ(x)`` (Hendrycks & Gimpel, arXiv:1606.08415, eq. 1).

    Exact (``approximate="none"``)::

        1. Φ = (1 + erf(x/√2)) / 2          (the standard normal CDF)
        2. y = x Φ

    2-1, by the product rule (the derivative of a CDF is its density :math:`\varphi`):

    .. math::

        \frac{dy}{dx} = \Phi + x\,\frac{d\Phi}{dx} = \Phi + x\,\varphi,
        \qquad \varphi = \frac{e^{-x^2/2}}{\sqrt{2\pi}}

    Tanh (``approximate="tanh"``, the paper's eq. 2 and GPT-2's)::

        1. u = √(2/π) (x + 0.044715 x³) = x (a + b x²),  a = √(2/π), b = 0.044715 a
        2. h = (1 + tanh(u)) / 2                        (Φ's stand-in, between 0 and 1)
        3. y = x h

    .. derivation 1.2 begin
    Backward, each line undoing the forward line of its number (3 by the product rule;
    2 with :math:`1 - \tanh^2 = (1 - \tanh)(1 + \tanh) = (2 - 2h)(2h)`):

    .. math::

        3.\quad \frac{dy}{dx} &= h + x\,\frac{dh}{dx}

        2.\quad \frac{dh}{dx} &= \frac{1 - \tanh^2 u}{2}\,\frac{du}{dx} = 2h\,(1 - h)\,\frac{du}{dx}

        1.\quad \frac{du}{dx} &= a + 3b\,x^2

    so :math:`dy/dx = h\,\big(1 + x\,(1 - h)\,(2a + 6b\,x^2)\big)`.
    .. derivation end

    Large ``|x|``: beyond ``|x| = 20``, h is 1 (x > 0) or below 2e-35 (x < 0, see
    below), and dy/dx is its limit, 1 or 0, to rounding; but ``x (1 - h) · 6b x²`` would be
    ``0 · inf = NaN`` once ``x²`` overflows (``|x| > 1.8e19`` in float32; PyTorch returns
    that NaN). The backward therefore reads x clipped to ±1e4, which changes no h.

    The backward reuses ``Φ`` (or ``h``) saved by the forward rather than recomputing it:
    erf and tanh are the expensive parts on NumPy.

    Step 2 is computed as ``h = 1 / (1 + e^(-2u))``, the same number (``tanh(u) = 2σ(2u) - 1``,
    so ``(1 + tanh(u))/2 = σ(2u)``) with one exponential where ``tanh`` takes two;
    ``-2u`` is capped at 80 so that ``e^(-2u)`` never overflows (there ``h < 2e-35``, where
    the tanh form rounds it to 0).
    """

    row_wise = RowWise()  # elementwise: any rows may be computed apart (minitorch_attn.speed)

    @staticmethod
    def forward(ctx, x, approximate="none"):
        xp = ctx.xp
        ctx.approximate = approximate
        if approximate == "tanh":
            u = x * (_TANH_A + _TANH_B * (x * x))  # 1. u = x (a + b x²)
            h = 1.0 / (1.0 + xp.exp(xp.minimum(-2.0 * u, _EXP_CAP)))  # 2. h = (1 + tanh u)/2 = 1/(1 + e^-2u)
            ctx.save_for_backward(x, h)
            return x * h  # 3
        cdf = 0.5 * (1.0 + ctx.backend.erf(x * _INV_SQRT_2))  # 1. Φ
        ctx.save_for_backward(x, cdf)
        return x * cdf  # 2

    @staticmethod
    def backward(ctx, grad_output):
        x, saved = ctx.saved_tensors
        xp = ctx.xp
        if ctx.approximate == "tanh":
            h = saved
            x = xp.clip(x, -_TANH_CLIP, _TANH_CLIP)  # no 0 · inf (see above)
            two_du_dx = 2.0 * _TANH_A + 6.0 * _TANH_B * (x * x)  # 1: 2 du/dx = 2a + 6b x²
            x_dh_dx_over_h = (1.0 - h) * (x * two_du_dx)  # 2: x dh/dx / h = x (1 - h) 2 du/dx
            return grad_output * (h * (1.0 + x_dh_dx_over_h))  # 3: dy/dx = h (1 + x dh/dx / h)
        pdf = _INV_SQRT_2PI * xp.exp(-0.5 * x * x)  # φ
        return grad_output * (saved + x * pdf)  # 2-1: Φ + x φ


def gelu(x: Tensor, approximate: str = "none") -> Tensor:
    """GELU activation, elementwise (as ``F.gelu``): ``x Φ(x)``, Φ the standard normal CDF.

    ``approximate="none"`` uses erf (the backend's); ``"tanh"`` the tanh approximation of
    GPT-2. Any shape, float32/float64, shape and dtype kept. At x = 1: 0.8413447461 (exact)
    and 0.8411919906 (tanh). Source: Hendrycks & Gimpel, arXiv:1606.08415.

    Raises:
        TypeError: for a non-float tensor. ValueError: for another ``approximate``.

    Catalogue record: ``opinfo/activations.py`` (its samples, references and checks).
    """
    _check_float(x, "gelu")
    if approximate not in ("none", "tanh"):
        raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    return GELU.apply(x, approximate=approximate)


class Sigmoid(Function):
    r"""The logistic function ``σ(x) = 1 / (1 + e^-x)``::

        1. e = e^-|x|                    (<= 1: never overflows)
        2. s = 1 / (1 + e) for x >= 0,  e / (1 + e) for x < 0     (both are σ(x))

    2-1: :math:`\dfrac{ds}{dx} = \dfrac{e^{-x}}{(1 + e^{-x})^2} = s\,(1 - s)`, since
    :math:`1 - s = e^{-x}/(1 + e^{-x})`. The backward reads the output ``s`` saved by the
    forward, not ``x``.
    """

    @staticmethod
    def forward(ctx, x):
        xp = ctx.xp
        e = xp.exp(-xp.abs(x))  # 1
        s = xp.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))  # 2
        ctx.save_for_backward(s)
        return s

    @staticmethod
    def backward(ctx, grad_output):
        (s,) = ctx.saved_tensors
        return grad_output * (s * (1.0 - s))  # 2-1


def sigmoid(x: Tensor) -> Tensor:
    """Logistic sigmoid ``1 / (1 + e^-x)``, elementwise (as ``torch.sigmoid``); shape and
    dtype kept, values in [0, 1], no overflow for any finite ``x`` (``σ(-800) = 0``,
    ``σ(800) = 1``). At x = 1: 0.7310585786. Source: Verhulst's logistic function; its
    derivative ``σ (1 - σ)``.

    Integer and bool tensors give the default float dtype (PyTorch's promotion).

    Raises:
        TypeError: for an argument that is not a Tensor.

    Catalogue record: ``opinfo/activations.py`` (its samples, references and checks).
    """
    x = as_float(x, "sigmoid")
    _check_float(x, "sigmoid")
    return Sigmoid.apply(x)


class SiLU(Function):
    r"""Sigmoid Linear Unit, ``x σ(x)`` (Elfwing et al. 2018, arXiv:1702.03118, eq. 4; Swish-1
    in Ramachandran et al. 2017), the gate of LLaMA's SwiGLU feed-forward::

        1. s = σ(x) = 1 / (1 + e^-x)     (= e^x / (1 + e^x) = e^x to rounding for x < -80,
                                          where e^-x would overflow)
        2. y = x s

    Backward: ``dx``, from the upstream gradient ``g`` and what the forward saves (``x``, ``s``).

    .. derivation 6.1 begin
    .. hint 6.1: step 2 is a product of two functions of x; step 1 is the sigmoid (see Sigmoid's backward).
    Backward: 2 by the product rule, 1 by the sigmoid's own derivative:

    .. math::

        2.\quad \frac{dy}{dx} = s + x\,\frac{ds}{dx}
        \qquad
        1.\quad \frac{ds}{dx} = s\,(1 - s)

    so :math:`dy/dx = s\,\big(1 + x\,(1 - s)\big)`. The backward reuses ``s`` saved by the forward.
    .. derivation end

    Overflow: ``e^-x`` overflows float32 below x = -88.7. The forward caps the exponent at
    80 (e^80 is finite in float32) and, where x lies below -80, takes ``s = e^x``
    instead: ``1 + e^x`` is exactly 1 in both float dtypes once x < -37, so
    ``e^x / (1 + e^x)`` is ``e^x`` to the last digit. No entry is ever computed from an
    infinity.
    """

    row_wise = RowWise()  # elementwise: any rows may be computed apart (minitorch_attn.speed)

    @staticmethod
    def forward(ctx, x):
        kernels = fused_kernels()
        if kernels is not None:  # speed: the same s in fewer passes (minitorch_attn/speed/fused.py)
            s = kernels.silu_sigmoid(ctx.backend, x)
            ctx.save_for_backward(x, s)
            return x * s
        # BEGIN SOLUTION 6.1
        xp = ctx.xp
        e = xp.exp(xp.minimum(-x, _EXP_CAP))  # e^-x, capped at e^80
        s = xp.where(x < -_EXP_CAP, xp.exp(xp.minimum(x, -_EXP_CAP)), 1.0 / (1.0 + e))  # 1. s = 1 / (1 + e^-x);
        ctx.save_for_backward(x, s)  #    e^x below -80 (see above)
        return x * s  # 2
        # END SOLUTION

    @staticmethod
    def backward(ctx, grad_output):
        # BEGIN SOLUTION 6.1
        x, s = ctx.saved_tensors
        return grad_output * (s * (1.0 + x * (1.0 - s)))  # 2, 1: s + x s (1 - s)
        # END SOLUTION


def silu(x: Tensor) -> Tensor:
    """SiLU (swish) activation ``x σ(x)``, elementwise (as ``F.silu``); shape and dtype kept.
    At x = 1: 0.7310585786. Source: Elfwing et al., arXiv:1702.03118, eq. 4.

    Raises:
        TypeError: for a non-float tensor.

    Catalogue record: ``opinfo/activations.py`` (its samples, references and checks).
    """
    _check_float(x, "silu")
    return SiLU.apply(x)


class ReLU(Function):
    r"""``y = max(x, 0)``.  Backward: :math:`dy/dx = [x > 0]`, 1 where ``x > 0``, else 0 (0 at
    x = 0, as PyTorch), so :math:`dx = g\,[x > 0]`: ``grad_output`` where ``x > 0`` and 0 elsewhere.

    NaN, as PyTorch: ``relu(nan)`` is NaN and its gradient passes (``x > 0`` is False for
    NaN, so the test is written ``not x <= 0``, which is True for it)."""

    @staticmethod
    def forward(ctx, x):
        xp = ctx.xp
        positive = ~(x <= 0)  # x > 0, or NaN
        ctx.save_for_backward(positive)
        return xp.where(positive, x, xp.zeros((), dtype=x.dtype, device=ctx.backend.device))

    @staticmethod
    def backward(ctx, grad_output):
        (positive,) = ctx.saved_tensors
        xp = ctx.xp
        return xp.where(positive, grad_output, xp.zeros((), dtype=grad_output.dtype, device=ctx.backend.device))


def relu(x: Tensor) -> Tensor:
    """Rectified linear unit ``max(x, 0)``, elementwise (as ``F.relu``); shape and dtype kept.
    The gradient at exactly 0 is 0, as in PyTorch; NaN stays NaN and passes its gradient.
    Source: Nair & Hinton 2010.

    Raises:
        TypeError: for a non-float tensor.

    Catalogue record: ``opinfo/activations.py`` (its samples, references and checks).
    """
    _check_float(x, "relu")
    return ReLU.apply(x)


class Dropout(Function):
    r"""Inverted dropout: ``y = x ∘ m`` with ``m = 1/(1-p)`` kept (probability 1-p), else 0.

    Backward: :math:`\partial y_i/\partial x_i = m_i` elementwise, so :math:`dx = g \circ m`
    (``grad_output ∘ m``), with the very mask of the forward (saved, not redrawn).
    Source: Srivastava et al. 2014 (JMLR 15), with the scaling moved to training time.
    """

    @staticmethod
    def forward(ctx, x, p=0.5):
        scale = _dropout_scale(ctx.backend, x.shape, p, x.dtype)
        ctx.save_for_backward(scale)
        return x * scale

    @staticmethod
    def backward(ctx, grad_output):
        (scale,) = ctx.saved_tensors
        return grad_output * scale


def dropout(x: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zero each element with probability ``p`` and scale the rest by ``1/(1-p)`` (as ``F.dropout``).

    The identity (``x`` itself) when ``training`` is False or ``p == 0``; zeros when
    ``p == 1``. Random numbers come from the seeded stream of :func:`manual_seed`. With
    ``inplace`` (read by its truth, as PyTorch reads it) the result is written into ``x``
    (``Tensor.copy_``, PyTorch's in-place rules) and ``x`` returned.

    Raises:
        TypeError: for a non-float tensor or a ``training`` that is not a bool.
        ValueError: for ``p`` outside [0, 1].

    Catalogue record: ``opinfo/activations.py`` (its samples, references and checks).
    """
    _check_float(x, "dropout")
    p = _check_probability(p, "dropout: p")
    _check_flag(training, "dropout: training")
    if not training or p == 0.0:
        return x
    return x.copy_(Dropout.apply(x, p=p)) if inplace else Dropout.apply(x, p=p)


__all__ = ["gelu", "sigmoid", "silu", "relu", "dropout"]  # what minitorch_attn.functional exports
