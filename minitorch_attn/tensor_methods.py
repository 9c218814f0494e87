"""The operations PyTorch also offers as ``torch.Tensor`` methods, as methods of
:class:`~minitorch_attn.core.tensor.Tensor` here too: ``x.sigmoid()`` is ``mt.sigmoid(x)``,
``x.softmax(-1)`` is ``F.softmax(x, -1)``, ``x.add(y, alpha=2)`` is ``mt.add(x, y, alpha=2)``.

A method is its function with the tensor as the first argument (PyTorch's rule, and the
one here), so the table ``METHODS`` says all there is: a name and the function it calls.
``core/tensor.py`` defines the methods of the operations of ``core/`` that it imports; the
ones below call operations defined after it (:mod:`minitorch_attn.functional`, and the
core modules that import ``tensor``), so they are attached once both exist, when the
package is imported. ``Tensor.where(condition, other)`` is PyTorch's
``torch.where(condition, self, other)``: the tensor is the second argument there.
"""

from __future__ import annotations

from . import functional as F
from .core import arithmetic, minmax, ops, power, shape_ops
from .core.tensor import Tensor
from .functional.softmax import logsumexp


def where(self, condition, other):
    """``mt.where(condition, self, other)``, as ``torch.Tensor.where``."""
    return shape_ops.where(condition, self, other)


METHODS = {
    "add": arithmetic.add,
    "sub": arithmetic.sub,
    "div": arithmetic.div,
    "pow": power.pow,
    "matmul": ops.matmul,
    "maximum": minmax.maximum,
    "minimum": minmax.minimum,
    "tril": shape_ops.tril,
    "triu": shape_ops.triu,
    "where": where,
    "sigmoid": F.sigmoid,
    "relu": F.relu,
    "softmax": F.softmax,
    "log_softmax": F.log_softmax,
    "logsumexp": logsumexp,
}

for _name, _function in METHODS.items():
    setattr(Tensor, _name, _function)
