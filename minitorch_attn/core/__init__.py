"""The core of the engine: arrays, tensors, the autograd engine and the primitive operations.

Read it in this order:

1. :mod:`.backend`   -- one array namespace per device (NumPy, CuPy, array-api-strict) and
   the few kernels the array API standard lacks;
2. :mod:`.autograd`  -- :class:`Function` and the engine that walks the graph (:mod:`.context`:
   what one call keeps for its backward; :mod:`.inplace`: in-place writes and the version
   counts that backward checks);
   :mod:`~minitorch_attn.core.hooks` -- ``register_hook`` and ``retain_grad``: gradients watched as they pass;
3. :mod:`.tensor`    -- :class:`Tensor`, and :mod:`.factories` (``tensor``, ``zeros``, ``randn``, ...);
4. :mod:`.ops`       -- the arithmetic, elementwise and matmul operations (:mod:`.arithmetic`: their
   functional spellings, with ``alpha`` and ``rounding_mode``; :mod:`.power`: powers
   with a tensor exponent; :mod:`.einsum`: sums of products over lettered indices);
   :mod:`.minmax` -- maximum, minimum, clamp; :mod:`.reductions` -- sum, mean, max, var;
5. :mod:`.shape_ops` -- reshaping, indexing, joining and selecting; :mod:`.indexing` -- advanced
   indexing (index arrays, boolean masks) and gather.

``autograd`` and ``tensor`` know each other (the engine makes Tensors, ``Tensor.backward``
runs the engine): the package's one import cycle, and it stays here. Importing
``autograd`` first resolves it.
"""

# isort: off
from . import backend
from . import autograd  # before tensor: see the docstring (and isort off: this order resolves the cycle)
from . import hooks, tensor, ops, minmax, power, reductions, shape_ops, indexing, einsum, arithmetic, factories
# isort: on

__all__ = [
    "backend",
    "autograd",
    "hooks",
    "tensor",
    "factories",
    "ops",
    "minmax",
    "power",
    "reductions",
    "shape_ops",
    "indexing",
    "einsum",
    "arithmetic",
]
