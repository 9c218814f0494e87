"""minitorch-attn: a readable autograd engine for the core of the Transformer.

Every differentiable operation has a hand-written forward and backward on plain arrays
(NumPy on ``"cpu"``, CuPy on ``"cuda"``), and every backward is proven by finite
differences (:func:`gradcheck`). Start with :class:`Tensor`, :class:`Function` and
:func:`tensor`; the Transformer's operations are in :mod:`minitorch_attn.functional`.
"""

from . import (
    functional,  # import minitorch_attn.functional as F
    tensor_methods,  # noqa: F401  x.sigmoid(), x.softmax(dim), x.add(y): PyTorch's Tensor methods
)
from .core.arithmetic import add, div, sub
from .core.autograd import Function, backward
from .core.backend import get_default_device, manual_seed, set_default_device
from .core.einsum import einsum
from .core.factories import (
    arange,
    full,
    ones,
    ones_like,
    rand,
    randint,
    randn,
    tensor,
    zeros,
    zeros_like,
)
from .core.grad_mode import enable_grad, is_grad_enabled, no_grad, set_grad_enabled
from .core.indexing import gather
from .core.minmax import clamp, maximum, minimum
from .core.ops import abs, exp, log, matmul, sqrt, tanh  # torch's names
from .core.power import pow  # torch.pow: the package's names are torch's, builtins shadowed
from .core.reductions import amax, amin, max, mean, min, std, sum, var  # torch's names
from .core.shape_ops import (
    cat,
    chunk,
    concat,
    expand,
    flatten,
    masked_fill,
    permute,
    reshape,
    split,
    squeeze,
    stack,
    transpose,
    tril,
    triu,
    unsqueeze,
    where,
)
from .core.tensor import (
    Tensor,
    bool_,
    dtype_name,
    float32,
    float64,
    get_default_dtype,
    int32,
    int64,
    result_dtype,
    set_default_dtype,
)
from .functional import sigmoid  # torch.sigmoid
from .functional.softmax import logsumexp  # torch.logsumexp (F has none)
from .gradcheck import GradcheckError, GradcheckReport, check_gradients, gradcheck
from .graph import draw_graph
from .speed import (
    get_num_threads,
    keep_freed_memory,  # the commands, demos and benchmarks call it; a program may too
    set_num_threads,
)

__version__ = "0.1.0"

# the public names, as ``from minitorch_attn import *`` gives them (and what a type checker re-exports)
__all__ = [
    "Function",
    "backward",
    "enable_grad",
    "is_grad_enabled",
    "no_grad",
    "set_grad_enabled",
    "get_default_device",
    "manual_seed",
    "set_default_device",
    "Tensor",
    "tensor",
    "arange",
    "full",
    "ones",
    "ones_like",
    "rand",
    "randint",
    "randn",
    "zeros",
    "zeros_like",
    "bool_",
    "dtype_name",
    "float32",
    "float64",
    "int32",
    "int64",
    "get_default_dtype",
    "set_default_dtype",
    "result_dtype",
    "add",
    "sub",
    "div",
    "pow",
    "matmul",
    "einsum",
    "abs",
    "exp",
    "log",
    "sqrt",
    "tanh",
    "sigmoid",
    "logsumexp",
    "clamp",
    "maximum",
    "minimum",
    "amax",
    "amin",
    "max",
    "mean",
    "min",
    "std",
    "sum",
    "var",
    "cat",
    "chunk",
    "concat",
    "expand",
    "flatten",
    "gather",
    "masked_fill",
    "permute",
    "reshape",
    "split",
    "squeeze",
    "stack",
    "transpose",
    "tril",
    "triu",
    "unsqueeze",
    "where",
    "get_num_threads",
    "set_num_threads",
    "keep_freed_memory",
    "GradcheckError",
    "GradcheckReport",
    "check_gradients",
    "gradcheck",
    "draw_graph",
    "functional",
]
