"""minitorch-attn: a readable autograd engine for the core of the Transformer.

Every differentiable operation has a hand-written forward and backward on plain arrays
(NumPy on ``"cpu"``, CuPy on ``"cuda"``), and every backward is proven by finite
differences (:func:`gradcheck`). Start with :class:`Tensor`, :class:`Function` and
:func:`tensor`; the Transformer's operations are in :mod:`minitorch_attn.functional`.
"""

from .autograd import Function, backward, is_grad_enabled, no_grad
from .backend import get_default_device, manual_seed, set_default_device
from .gradcheck import GradcheckError, GradcheckReport, check_gradients, gradcheck
from .ops import (
    cat, chunk, clamp, concat, expand, flatten, masked_fill, matmul, maximum, minimum, permute,
    pow, reshape, split, squeeze, stack, transpose, tril, triu, unsqueeze, where,
)
from .ops import abs, amax, exp, log, max, mean, sqrt, sum, tanh, var  # noqa: A004 (torch's names)
from .tensor import (
    Tensor, arange, bool_, dtype_name, float32, float64, full, int32, int64, ones, ones_like, rand,
    randint, randn, tensor, zeros, zeros_like,
)

from . import functional  # noqa: E402  (import minitorch_attn.functional as F)

__version__ = "0.1.0"
