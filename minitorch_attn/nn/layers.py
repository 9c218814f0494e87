"""Layers: :class:`Linear`, :class:`Embedding`, :class:`Dropout`, :class:`GELU`, :class:`SiLU`, :class:`LayerNorm`,
:class:`RMSNorm`.

Each holds its parameters and calls one operation of :mod:`minitorch_attn.functional`.
"""

from __future__ import annotations

import contextvars
import math
import numbers
from typing import Any, TypeVar

from .. import functional as F
from ..core.factories import ones, rand, randn, tensor, zeros
from ..core.grad_mode import no_grad
from ..core.shape_ops import where
from ..core.tensor import Tensor, _is_int
from ..functional._checks import _check_eps, _check_probability
from ..functional.linear import padding_row
from .module import Module, Parameter, _check_positive_int, _check_tensor

_INITIALIZE = contextvars.ContextVar("initialize", default=True)  # False inside skip_init
ModuleT = TypeVar("ModuleT", bound=Module)


def skip_init(module_cls: type[ModuleT], *args: Any, **kwargs: Any) -> ModuleT:
    """``module_cls(*args, **kwargs)`` without the random initialisation of its parameters, as
    ``torch.nn.utils.skip_init``: every weight that would be drawn at random starts at zeros
    instead (PyTorch leaves it uninitialised memory), and no random number is drawn, so the
    seeded stream is left as it was. For weights that are loaded right after
    (:meth:`GPT.from_pretrained <minitorch_attn.nn.GPT.from_pretrained>`): it saves drawing,
    scaling and holding a throw-away copy of every parameter. Norms still start at ones."""
    token = _INITIALIZE.set(False)
    try:
        return module_cls(*args, **kwargs)
    finally:
        _INITIALIZE.reset(token)


def _normal(shape, std, device, dtype):
    if not _INITIALIZE.get():
        return zeros(shape, device=device, dtype=dtype)
    return randn(*shape, device=device, dtype=dtype) * std


def _norm_arguments(normalized_shape):
    """``normalized_shape`` as a tuple of positive ints, after checking it."""
    shape = (normalized_shape,) if _is_int(normalized_shape) else tuple(normalized_shape)
    for size in shape:
        _check_positive_int("normalized_shape", size)
    return shape


class Linear(Module):
    """``y = x Wᵀ + b`` with ``W (out_features, in_features)``, as ``torch.nn.Linear``.

    Shapes: ``(..., in_features) -> (..., out_features)``. Initialization is PyTorch's:
    ``W, b ~ U(-1/sqrt(in), 1/sqrt(in))`` (the Transformer models re-initialize, see
    :func:`init_gpt2`). Either size may be 0, as in PyTorch: ``in_features = 0`` maps every
    row to the bias.

    Raises:
        ValueError: for a size that is not an int >= 0.
    """

    def __init__(
        self, in_features: int, out_features: int, bias: bool = True, device: str | None = None, dtype: str = "float32"
    ) -> None:
        super().__init__()
        in_features = _check_positive_int("in_features", in_features, allow_zero=True)
        out_features = _check_positive_int("out_features", out_features, allow_zero=True)
        self.in_features, self.out_features = in_features, out_features
        bound = 1.0 / math.sqrt(in_features) if in_features else 0.0
        self.weight = Parameter(_uniform((out_features, in_features), bound, device, dtype))
        self.bias = Parameter(_uniform((out_features,), bound, device, dtype)) if bias else None

    def forward(self, x: Tensor) -> Tensor:
        _check_tensor("Linear", x)
        return F.linear(x, self.weight, self.bias)  # (batch, T, in) is one (batch T, in) matrix there

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


def _uniform(shape, bound, device, dtype):
    if not _INITIALIZE.get():
        return zeros(shape, device=device, dtype=dtype)
    return (rand(*shape, device=device, dtype=dtype) * 2.0 - 1.0) * bound


class Embedding(Module):
    """A lookup table: ``weight[idx]``, as ``torch.nn.Embedding``.

    Shapes: ``idx (...)`` int64 -> ``(..., embedding_dim)``. The backward scatter-adds
    into the rows that were looked up, so a token id used several times receives the sum
    of its gradients. Initialization: ``N(0, 1)`` as PyTorch.

    ``padding_idx``: the row of a padding token. It starts at zeros and gets no gradient
    (see :func:`~minitorch_attn.functional.embedding`), so it stays zeros while training;
    a negative value counts from the end.

    ``max_norm``: as PyTorch, each forward first rescales, in place and without a graph,
    every looked-up row whose ``norm_type``-norm exceeds ``max_norm`` to the norm
    ``max_norm`` (``row *= max_norm / (norm + 1e-7)``); the weight's version goes up, so
    a graph that saved the weight before sees the change.

    Raises:
        ValueError: for sizes that are not positive ints, a ``padding_idx`` outside
            ``[-num_embeddings, num_embeddings)``, or a ``max_norm`` or ``norm_type``
            that is not a positive number.
    """

    def __init__(
        self,
        num_embeddings: int,
        embedding_dim: int,
        padding_idx: int | None = None,
        max_norm: float | None = None,
        norm_type: float = 2.0,
        device: str | None = None,
        dtype: str = "float32",
    ) -> None:
        super().__init__()
        _check_positive_int("num_embeddings", num_embeddings)
        _check_positive_int("embedding_dim", embedding_dim)
        for name, value in (("max_norm", max_norm), ("norm_type", norm_type)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, numbers.Real) or not value > 0):
                raise ValueError(f"Embedding: {name} must be a positive number, got {value!r}")
        self.max_norm = None if max_norm is None else float(max_norm)
        self.norm_type = float(norm_type)
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.padding_idx = padding_row(padding_idx, num_embeddings)
        self.weight = Parameter(
            randn(num_embeddings, embedding_dim, device=device, dtype=dtype)
            if _INITIALIZE.get()
            else zeros((num_embeddings, embedding_dim), device=device, dtype=dtype)
        )
        if self.padding_idx is not None:
            with no_grad():
                self.weight[self.padding_idx] = 0.0

    def forward(self, idx: Tensor) -> Tensor:
        if self.max_norm is not None:
            self._renorm(idx)
        return F.embedding(idx, self.weight, padding_idx=self.padding_idx)

    def _renorm(self, idx):
        """PyTorch's ``embedding_renorm_``: the looked-up rows longer than ``max_norm``, cut
        to it, in place (each row once however often it is looked up)."""
        index = idx.reshape(-1) if isinstance(idx, Tensor) else tensor(idx, dtype="int64").reshape(-1)
        if index.numel() == 0 or index.dtype not in ("int32", "int64") or int(index.numpy().min()) < 0:
            return  # nothing to do, or F.embedding refuses the indices (before any write)
        with no_grad():
            rows = self.weight[index].reshape(-1, self.embedding_dim).detach()  # IndexError past the end
            p = self.norm_type
            norms = (rows.abs() ** p).sum(-1, keepdim=True) ** (1.0 / p)
            scale = where(norms > self.max_norm, self.max_norm / (norms + 1e-7), 1.0)
            self.weight[index] = rows * scale  # a repeated row gets the same value each time

    def extra_repr(self) -> str:
        padding = "" if self.padding_idx is None else f", padding_idx={self.padding_idx}"
        max_norm = "" if self.max_norm is None else f", max_norm={self.max_norm}"
        return f"{self.num_embeddings}, {self.embedding_dim}{padding}{max_norm}"


class Dropout(Module):
    """Zero each element with probability ``p`` (in [0, 1]) and scale the rest by
    ``1/(1-p)`` while training; the identity in eval mode (Srivastava et al., JMLR 2014;
    inverted dropout). ``inplace``: write into the input (as ``F.dropout``'s).

    Raises:
        ValueError: for ``p`` outside [0, 1].
    """

    def __init__(self, p: float = 0.5, inplace: bool = False) -> None:
        super().__init__()
        self.p = _check_probability(p, "Dropout: p")  # 0 and 1 too, as PyTorch (1: zeros)
        self.inplace = inplace

    def forward(self, x: Tensor) -> Tensor:
        if not self.training or self.p == 0.0:
            return x
        return F.dropout(x, p=self.p, training=True, inplace=self.inplace)

    def extra_repr(self) -> str:
        return f"p={self.p}" + (", inplace=True" if self.inplace else "")


class GELU(Module):
    """``x Φ(x)`` (Hendrycks & Gimpel, arXiv:1606.08415), exact (``approximate="none"``)
    or with the tanh approximation (``"tanh"``), as ``torch.nn.GELU``."""

    def __init__(self, approximate: str = "none") -> None:
        super().__init__()
        if approximate not in ("none", "tanh"):
            raise ValueError(f"approximate must be 'none' or 'tanh', got {approximate!r}")
        self.approximate = approximate

    def forward(self, x: Tensor) -> Tensor:
        return F.gelu(x, approximate=self.approximate)

    def extra_repr(self) -> str:
        return f"approximate={self.approximate!r}"


class SiLU(Module):
    """``x σ(x)`` (Elfwing et al., arXiv:1702.03118, eq. 4), as ``torch.nn.SiLU``: the gate
    of :class:`~minitorch_attn.nn.SwiGLU`."""

    def forward(self, x: Tensor) -> Tensor:
        return F.silu(x)


class LayerNorm(Module):
    """Normalize the last dimension to zero mean and unit variance, then scale and shift
    (Ba et al., arXiv:1607.06450, eq. 4), as ``torch.nn.LayerNorm(normalized_shape, eps,
    elementwise_affine, bias)``. ``weight`` starts at ones, ``bias`` at zeros;
    ``elementwise_affine=False`` has neither, ``bias=False`` no bias.

    Raises:
        ValueError: for a bad ``normalized_shape`` or ``eps``.
    """

    def __init__(
        self,
        normalized_shape: int | tuple[int, ...] | list[int],
        eps: float = 1e-5,
        elementwise_affine: bool = True,
        bias: bool = True,
        device: str | None = None,
        dtype: str = "float32",
    ) -> None:
        super().__init__()
        self.normalized_shape = _norm_arguments(normalized_shape)
        self.eps = _check_eps(eps, "LayerNorm", dtype)
        elementwise_affine, bias = bool(elementwise_affine), bool(bias)  # read by their truth, as PyTorch
        self.elementwise_affine = elementwise_affine
        self.weight = Parameter(ones(self.normalized_shape, device=device, dtype=dtype)) if elementwise_affine else None
        has_bias = elementwise_affine and bias
        self.bias = Parameter(zeros(self.normalized_shape, device=device, dtype=dtype)) if has_bias else None

    def forward(self, x: Tensor) -> Tensor:
        _check_tensor("LayerNorm", x)
        return F.layer_norm(x, self.normalized_shape, self.weight, self.bias, eps=self.eps)

    def extra_repr(self) -> str:
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"


class RMSNorm(Module):
    """Scale the last dimension by the inverse of its root mean square, then by a learned
    gain (Zhang & Sennrich, arXiv:1910.07467, eq. 4), as ``torch.nn.RMSNorm``. ``eps=None``
    (the default, as PyTorch and :func:`minitorch_attn.functional.rms_norm`) means the
    input dtype's machine epsilon. ``elementwise_affine=False`` has no gain (``weight`` is
    None), as PyTorch.

    Raises:
        ValueError: for a bad ``normalized_shape`` or ``eps``.
        TypeError: for an ``elementwise_affine`` that is not a bool.
    """

    def __init__(
        self,
        normalized_shape: int | tuple[int, ...] | list[int],
        eps: float | None = None,
        elementwise_affine: bool = True,
        device: str | None = None,
        dtype: str = "float32",
    ) -> None:
        super().__init__()
        self.normalized_shape = _norm_arguments(normalized_shape)
        self.eps = eps if eps is None else _check_eps(eps, "RMSNorm", dtype)
        self.elementwise_affine = elementwise_affine = bool(elementwise_affine)  # by its truth, as PyTorch
        self.weight = Parameter(ones(self.normalized_shape, device=device, dtype=dtype)) if elementwise_affine else None

    def forward(self, x: Tensor) -> Tensor:
        _check_tensor("RMSNorm", x)
        return F.rms_norm(x, self.normalized_shape, self.weight, eps=self.eps)

    def extra_repr(self) -> str:
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"


def _make_norm(norm, d_model, eps=None):
    """A block's norm: ``LayerNorm`` or ``RMSNorm`` of width ``d_model``; ``eps`` None is each
    one's default (1e-5 for LayerNorm, the dtype's machine epsilon for RMSNorm)."""
    if norm == "layernorm":
        return LayerNorm(d_model) if eps is None else LayerNorm(d_model, eps=eps)
    if norm == "rmsnorm":
        return RMSNorm(d_model, eps=eps)
    raise ValueError(f"norm must be 'layernorm' or 'rmsnorm', got {norm!r}")
