"""The arithmetic of the layers: the affine map ``x Wᵀ + b`` and the embedding lookup."""

from __future__ import annotations

import math

from ..core.autograd import Function
from ..core.backend import backend_of
from ..core.shape_ops import Take, where
from ..core.tensor import Tensor, _is_int
from ..speed import column_sums
from ._checks import _check_float


class Linear(Function):
    r"""``y = x Wᵀ + b``: ``x (..., in)``, ``W (out, in)``, ``b (out,)`` -> ``(..., out)``.

    Forward, with the leading dims flattened into rows first, so that every product is one
    2-D matrix multiply (a single BLAS call, much faster than a batched one with a
    broadcast weight)::

        1. X = x as (M, in)                 (M = the product of the leading dims)
        2. Y = X Wᵀ + b                     (M, out):  Y_mi = Σ_k X_mk W_ik + b_i

    Backward, with ``G = grad_output`` as (M, out). From 2,
    :math:`\partial Y_{mi}/\partial X_{mk} = W_{ik}`, :math:`\partial Y_{mi}/\partial W_{ik} = X_{mk}`
    and :math:`\partial Y_{mi}/\partial b_i = 1`; summing each over what it touches (2):

    .. math::

        dX_{mk} = \sum_i G_{mi} W_{ik},\ dX = G\,W
        \qquad
        dW_{ik} = \sum_m G_{mi} X_{mk},\ dW = G^\top X
        \qquad
        db_i = \sum_m G_{mi}

    (``dW`` and ``db`` summed over the rows), and 1: ``dx`` is ``dX`` reshaped back to x's shape.

    With ``in = 0`` the sum over k is empty: ``Y = b`` (zeros without a bias), as PyTorch.
    """

    @staticmethod
    def forward(ctx, x, weight, bias):
        xp = ctx.xp
        rows = xp.reshape(x, (math.prod(x.shape[:-1]), x.shape[-1]))  # 1. (M, in)
        ctx.save_for_backward(rows, weight)
        ctx.x_shape = tuple(x.shape)
        y = xp.matmul(rows, xp.matrix_transpose(weight))  # 2. (M, out)
        if bias is not None:
            y += bias  # speed: into the fresh product
        return xp.reshape(y, (*x.shape[:-1], weight.shape[0]))

    @staticmethod
    def backward(ctx, grad_output):
        rows, weight = ctx.saved_tensors
        xp = ctx.xp
        need_x, need_w, need_b = ctx.needs_input_grad
        G = xp.reshape(grad_output, (rows.shape[0], weight.shape[0]))  # (M, out)
        grad_x = xp.reshape(xp.matmul(G, weight), ctx.x_shape) if need_x else None  # 2, 1
        grad_w = xp.matmul(xp.matrix_transpose(G), rows) if need_w else None
        grad_b = column_sums(xp, G) if need_b else None  # speed: see speed/sums.py
        return grad_x, grad_w, grad_b


def linear(x: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """Affine map ``x Wᵀ + b`` (as ``F.linear``): ``x (..., in)``, ``weight (out, in)``,
    ``bias (out,)`` or None -> ``(..., out)``. Any of the sizes may be 0; with ``in = 0``
    the result is the bias (zeros without one), as in PyTorch.

    Raises:
        TypeError: for non-float tensors or mixed dtypes. ValueError: for mismatched shapes.

    Catalogue record: ``opinfo/linear.py`` (its samples, references and checks).
    """
    _check_float(x, "linear: input")
    _check_float(weight, "linear: weight")
    if weight.ndim != 2 or x.ndim < 1 or x.shape[-1] != weight.shape[1]:
        raise ValueError(f"linear: input {x.shape} (..., in) and weight {weight.shape} (out, in) do not match")
    if bias is not None:
        _check_float(bias, "linear: bias")
        if bias.shape != (weight.shape[0],):
            raise ValueError(f"linear: bias has shape {bias.shape}, expected ({weight.shape[0]},)")
    if len({t.dtype for t in (x, weight, bias) if t is not None}) != 1:
        raise TypeError("linear: input, weight and bias must share one dtype")
    return Linear.apply(x, weight, bias)


def embedding(indices: Tensor, weight: Tensor, padding_idx: int | None = None) -> Tensor:
    """Look up rows of ``weight (num_embeddings, dim)`` at integer ``indices (*)`` -> ``(*, dim)``
    (as ``F.embedding``).

    Backward: a scatter-add; row k of ``dweight`` is the sum of the upstream gradients of
    every position whose index is k (``backend.index_add``). This is the core's
    :class:`~minitorch_attn.ops.Take`, with the argument checks of an embedding.

    ``padding_idx`` (PyTorch's meaning): the positions holding this index pass no gradient
    back, so row ``padding_idx`` of ``dweight`` is 0 and that row never trains (a padding
    token keeps its vector, usually zeros: see :class:`~minitorch_attn.nn.Embedding`). A
    negative value counts from the end, as ``num_embeddings + padding_idx``.

    Raises:
        TypeError: for non-integer indices, a non-float weight, or a non-int ``padding_idx``.
        ValueError: for a weight that is not 2-D, an index outside ``[0, num_embeddings)``
            (negative indices are not wrapped around, as in PyTorch), or a ``padding_idx``
            outside ``[-num_embeddings, num_embeddings)``.

    Catalogue record: ``opinfo/linear.py`` (its samples, references and checks).
    """
    if not isinstance(indices, Tensor) or indices.dtype not in ("int32", "int64"):
        raise TypeError(
            f"embedding: indices must be an int64/int32 tensor, got {getattr(indices, 'dtype', type(indices).__name__)}"
        )
    _check_float(weight, "embedding: weight")
    if weight.ndim != 2:
        raise ValueError(f"embedding: weight must be (num_embeddings, dim), got shape {weight.shape}")
    if indices.device != weight.device:
        raise ValueError(f"embedding: indices are on '{indices.device}' but the weight is on '{weight.device}'")
    padding_idx = padding_row(padding_idx, weight.shape[0])
    if indices.numel():  # on a device read with the next copy to the host (core/backend.py)
        backend, ids, rows = backend_of(indices.data), indices.data, weight.shape[0]
        backend.check(
            (ids < 0) | (ids >= rows),
            lambda: ValueError(
                f"embedding: indices must be in [0, {rows}) (the rows of the weight), "
                f"got values from {int(backend.xp.min(ids))} to {int(backend.xp.max(ids))}"
            ),
        )
    rows = Take.apply(weight, indices)  # (*, dim)
    if padding_idx is None:
        return rows
    # the padding positions read their row like any other, but through a detached copy:
    # ``where`` sends their upstream gradient to the copy, which passes nothing back
    padding = (indices == padding_idx).unsqueeze(-1)  # (*, 1)
    return where(padding, rows.detach(), rows)


def padding_row(padding_idx, num_embeddings):
    """``padding_idx`` checked against ``num_embeddings`` rows and made non-negative (None stays None)."""
    if padding_idx is None:
        return None
    if not _is_int(padding_idx):
        raise TypeError(f"padding_idx must be an int or None, got {type(padding_idx).__name__}")
    padding_idx = int(padding_idx)
    if not -num_embeddings <= padding_idx < num_embeddings:
        raise ValueError(
            f"padding_idx must be in [-{num_embeddings}, {num_embeddings}) (a row of the weight), got {padding_idx}"
        )
    return padding_idx % num_embeddings


__all__ = ["linear", "embedding"]  # what minitorch_attn.functional exports
