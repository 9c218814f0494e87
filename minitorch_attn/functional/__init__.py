"""The operations of a Transformer, each one :class:`Function` with a hand-written backward.

Import it as PyTorch users import ``torch.nn.functional``::

    import minitorch_attn.functional as F
    y = F.layer_norm(x, (d_model,), weight, bias)

Every backward here is closed-form: its docstring derives it (the Jacobian or the chain
of local derivatives, in steps a reader can check with a pencil) and, where there are
several steps, its code lines carry the number of the forward step they undo. None is composed from the primitive ops of
:mod:`minitorch_attn.core` (those serve the tests as an independent reference;
:func:`embedding` is the core's lookup op ``Take``). Each is checked by finite
differences in :mod:`minitorch_attn.gradcheck` and against PyTorch in the tests.

One module per topic, in reading order (each lists its ops in its ``__all__``; the table of
operations, written from the catalogue on the documentation site, lists them all):

* :mod:`.softmax`       -- the softmax family and the cross-entropy loss;
* :mod:`.losses`        -- the negative log-likelihood of log-probabilities;
* :mod:`.activations`   -- elementwise activations and dropout;
* :mod:`.normalization` -- LayerNorm and RMSNorm;
* :mod:`.linear`        -- the linear map and the embedding lookup;
* :mod:`.attention`     -- scaled dot-product attention and its weights, and
  :func:`causal_mask` (from :mod:`._attention_common`);
* :mod:`.flash`         -- :func:`flash_attention`, the same attention in blocks;
* :mod:`.rotary`        -- rotary positions for queries and keys;
* :mod:`.padding`       -- a constant border around the last dims.

Private helpers: :mod:`._checks` (argument checks), :mod:`._attention_common` (what the two
attention kernels share: argument checks, the causal rule, the grouped-query layout, and
their notation), flash attention's :mod:`._flash_tiles` and :mod:`._flash_dropout`. What makes them fast
without changing a number (the pool of threads, chunks of rows, sums as products with
ones) is :mod:`minitorch_attn.speed`, read after the course.

Conventions: ``grad_output`` is the upstream gradient ``dL/d(output)`` (``dO`` inside the
attention kernels, where the papers' names rule); sequence lengths are ``N_q`` (queries)
and ``N_k`` (keys), ``S`` is always a matrix of scores and ``lse`` a log-sum-exp; dtypes
are kept (float32 in, float32 out); operations that exponentiate subtract the row maximum
first (one helper, ``shifted._shifted_logsumexp``).
"""

from . import activations as _activations
from . import attention as _attention
from . import flash as _flash
from . import linear as _linear
from . import losses as _losses
from . import normalization as _normalization
from . import padding as _padding
from . import rotary as _rotary
from . import softmax as _softmax
from ._attention_common import causal_mask
from .activations import *  # noqa: F403  each topic module says what it exports in its __all__
from .attention import *  # noqa: F403
from .flash import *  # noqa: F403
from .linear import *  # noqa: F403
from .losses import *  # noqa: F403
from .normalization import *  # noqa: F403
from .padding import *  # noqa: F403
from .rotary import *  # noqa: F403
from .softmax import *  # noqa: F403

# the public ops, in reading order: a new op in a topic's __all__ is exported with no edit here
__all__ = ["causal_mask"] + [
    name
    for module in (_softmax, _losses, _activations, _normalization, _linear, _attention, _flash, _rotary, _padding)
    for name in module.__all__
]
