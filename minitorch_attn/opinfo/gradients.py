"""The records' closed-form gradients (``ref_backward``), in float64 NumPy, apart from the engine.

A record's ``ref_backward(grads, *arrays, **kwargs)`` gives each input's gradient under the
upstream gradients ``grads`` (one per output), with no use of the op's own backward, so the
backward is checked exactly (up to rounding) where PyTorch is not installed. Two kinds:

* **By linearity**, :data:`BY_LINEARITY`, for an op that is affine in each float input while
  the others are held (every shape op, sums and means, products, matmul, einsum, linear,
  rotary). Column ``j`` of its Jacobian is exactly ``f(e_j) - f(0)`` (``e_j`` the ``j``-th
  unit array), so the gradient is ``∂s/∂x_j = Σ_k g_k (f(e_j) - f(0))_k``: the forward
  reference run once per input element, no calculus written twice. An output that is the
  same infinity at ``e_j`` and at 0 does not depend on ``x_j`` (``where``'s unselected
  ``inf``): its term is 0.
* **Rules of calculus**, written in the records (``g * exp(x)``, the LayerNorm formula), with
  :func:`unbroadcast` to sum a gradient of the broadcast shape back to its input's shape.
"""

import numpy as np


# BEGIN REFERENCE 1.3
def unbroadcast(grad, shape):
    """``grad`` (of a broadcast shape) summed back to ``shape``: over the leading dims the
    input did not have and the dims where it had size 1."""
    grad = np.asarray(grad, dtype=np.float64)
    grad = grad.sum(axis=tuple(range(grad.ndim - len(shape)))) if grad.ndim > len(shape) else grad
    axes = tuple(i for i, n in enumerate(shape) if n == 1 and grad.shape[i] != 1)
    return grad.sum(axis=axes, keepdims=True).reshape(shape) if axes else grad.reshape(shape)


# END REFERENCE


def _outputs(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


def by_linearity(ref, argnums=None):
    """The ``ref_backward`` of an op affine in each float array argument (those in ``argnums``,
    default all): ``∂s/∂x_j = Σ_k g_k (f(e_j) - f(0))_k``, one forward per element."""

    def ref_backward(grads, *args, **kwargs):
        result = []
        for i, x in enumerate(args):
            if not (isinstance(x, np.ndarray) and x.dtype.kind == "f") or (argnums is not None and i not in argnums):
                result.append(None)
                continue

            def at(value, i=i):
                values = list(args)
                values[i] = value
                with np.errstate(all="ignore"):
                    return [np.asarray(o, dtype=np.float64) for o in _outputs(ref(*values, **kwargs))]

            zero = at(np.zeros_like(x))
            gradient = np.zeros(x.size)
            for j in range(x.size):
                unit = np.zeros(x.size, dtype=x.dtype)
                unit[j] = 1
                for g, column, base in zip(grads, at(unit.reshape(x.shape)), zero):
                    if g is not None:
                        change = np.where(column == base, 0.0, column - base)
                        gradient[j] += float(np.sum(np.asarray(g, dtype=np.float64) * change))
            result.append(gradient.reshape(x.shape))
        return result

    return ref_backward


class _ByLinearity:
    """The marker ``ref_backward=BY_LINEARITY`` of a record: :func:`by_linearity` of its ``ref``."""

    def __repr__(self):
        return "BY_LINEARITY"


BY_LINEARITY = _ByLinearity()
