"""Padding: :func:`pad` adds (or, with negative amounts, cuts) a border of a constant
around the last dims, with its hand-written backward (:class:`Pad`).
"""

from __future__ import annotations

import numbers

from ..core.autograd import Function
from ..core.tensor import Tensor


class Pad(Function):
    r"""Forward, for the padded dims, each with ``before`` and ``after`` amounts (``cut`` and
    ``placed`` are tuples of slices, one per dim)::

        1. inner = x cut where an amount is negative            (x[-before : size + after])
        2. out   = full(new shape, value);  out[placed] = inner  (placed: [max(before, 0) : ... ])

    So element ``q`` of ``x`` inside the cut lands at one place ``π(q)`` of ``out``
    (:math:`\mathrm{out}_{\pi(q)} = x_q`), every other place holds the constant ``value``,
    and a cut-off element lands nowhere.

    Backward: the border is a constant, :math:`\partial\,\mathrm{out}_p/\partial x_q = [p = \pi(q)]`
    (``[·]`` is 1 where it holds, else 0), so only the places that came from ``x`` get a
    gradient. 2-1: ``d_inner = g[placed]``; 1-1, into zeros of ``x``'s shape:

    .. math::

        dx_q = g_{\pi(q)} \text{ for } q \text{ in the cut},
        \qquad dx_q = 0 \text{ for a cut-off element}

    In the code: ``dx = zeros(x.shape);  dx[cut] = g[placed]``.
    """

    @staticmethod
    def forward(ctx, x, cut, placed, shape, value):
        xp = ctx.xp
        out = xp.full(shape, value, dtype=x.dtype, device=ctx.backend.device)  # 2
        out[placed] = x[cut]  # 1, 2
        ctx.cut, ctx.placed, ctx.shape = cut, placed, tuple(x.shape)
        return out

    @staticmethod
    def backward(ctx, grad_output):
        xp = ctx.xp
        grad = xp.zeros(ctx.shape, dtype=grad_output.dtype, device=ctx.backend.device)
        grad[ctx.cut] = grad_output[ctx.placed]  # 2-1, 1-1
        return grad


def pad(input: Tensor, pad: tuple[int, ...] | list[int], mode: str = "constant", value: float | None = None) -> Tensor:
    """Pad the last ``len(pad) // 2`` dims of ``input`` with ``value`` (0 by default), as
    ``F.pad``: ``pad = (left, right)`` pads the last dim, ``(left, right, top, bottom)`` the
    last two, and so on from the last dim backwards. A negative amount cuts that many
    elements instead. The output has ``input``'s dtype; dim ``d`` grows by ``before + after``.
    The gradient is ``grad_output`` at the places the input went to (0 on the border).

    Raises:
        TypeError: for a non-Tensor input, amounts that are not ints, or a value that is not
            a number.
        ValueError: for an odd number of amounts or more than twice the dims, a mode other
            than ``"constant"`` (``reflect``, ``replicate`` and ``circular`` are not
            implemented), or amounts that would leave a negative size.

    Catalogue record: ``opinfo/shape.py`` (its samples, references and checks).
    """
    if not isinstance(input, Tensor):
        raise TypeError(f"pad: expected a Tensor, got {type(input).__name__}")
    if mode != "constant":
        raise ValueError(f"pad: mode {mode!r} is not implemented; only mode='constant' is")
    pad = tuple(pad) if isinstance(pad, (tuple, list)) else pad
    if not isinstance(pad, tuple) or not all(isinstance(p, numbers.Integral) and not isinstance(p, bool) for p in pad):
        raise TypeError(f"pad: the amounts must be a tuple of ints (left, right, ...), got {pad!r}")
    if len(pad) % 2 or len(pad) // 2 > input.ndim:
        raise ValueError(
            f"pad: {len(pad)} amounts for a tensor of {input.ndim} dims: give two per padded dim, "
            f"at most {2 * input.ndim}"
        )
    value = 0.0 if value is None else value
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"pad: value must be a number, got {value!r}")
    cut, placed, shape = [slice(None)] * input.ndim, [slice(None)] * input.ndim, list(input.shape)
    for i in range(len(pad) // 2):
        d = input.ndim - 1 - i
        before, after, size = int(pad[2 * i]), int(pad[2 * i + 1]), input.shape[d]
        shape[d] = size + before + after
        if shape[d] < 0 or size + min(before, 0) + min(after, 0) < 0:
            raise ValueError(f"pad: amounts ({before}, {after}) leave a negative size of dim {d} (size {size})")
        cut[d] = slice(max(-before, 0), size - max(-after, 0))
        placed[d] = slice(max(before, 0), max(before, 0) + cut[d].stop - cut[d].start)
    return Pad.apply(input, cut=tuple(cut), placed=tuple(placed), shape=tuple(shape), value=float(value))


__all__ = ["pad"]  # what minitorch_attn.functional exports
