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

One module per topic, in reading order:

* :mod:`.softmax`       -- :func:`softmax`, :func:`log_softmax`, :func:`cross_entropy`;
* :mod:`.activations`   -- :func:`gelu`, :func:`relu`, :func:`dropout`;
* :mod:`.normalization` -- :func:`layer_norm`, :func:`rms_norm`;
* :mod:`.linear`        -- :func:`linear`, :func:`embedding`;
* :mod:`.attention`     -- :func:`scaled_dot_product_attention`, :func:`attention_weights`,
  and :func:`causal_mask` (from :mod:`._attention_common`);
* :mod:`.flash`         -- :func:`flash_attention`, the same attention in blocks;
* :mod:`.rotary`        -- :func:`rotary_embedding`, rotary positions for queries and keys.

Private helpers: :mod:`._checks` (argument checks), :mod:`._attention_common` (what the two
attention kernels share: argument checks, the causal rule, the grouped-query layout, and
their notation), and flash attention's :mod:`._flash_tiles`, :mod:`._flash_dropout` and
:mod:`._parallel`.

Conventions: ``grad_output`` is the upstream gradient ``dL/d(output)`` (``dO`` inside the
attention kernels, where the papers' names rule); sequence lengths are ``N_q`` (queries)
and ``N_k`` (keys), ``S`` is always a matrix of scores and ``lse`` a log-sum-exp; dtypes
are kept (float32 in, float32 out); operations that exponentiate subtract the row maximum
first (one helper, ``softmax._shifted_logsumexp``).
"""

from ._attention_common import causal_mask
from .activations import dropout, gelu, relu
from .attention import attention_weights, scaled_dot_product_attention
from .flash import flash_attention
from .linear import embedding, linear
from .normalization import layer_norm, rms_norm
from .rotary import rotary_embedding
from .softmax import cross_entropy, log_softmax, softmax

__all__ = [
    "causal_mask", "softmax", "log_softmax", "cross_entropy", "gelu", "relu", "dropout",
    "layer_norm", "rms_norm", "linear", "embedding", "scaled_dot_product_attention",
    "attention_weights", "flash_attention", "rotary_embedding",
]
