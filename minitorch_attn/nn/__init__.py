"""Modules: parameters held together, and the layers of the Transformer built from them.

A :class:`Module` owns :class:`Parameter` s and sub-modules, found by assigning them as
attributes (``self.weight = Parameter(...)``, ``self.attn = MultiHeadAttention(...)``),
exactly as in ``torch.nn``. Every layer's ``forward`` only calls the hand-written,
gradient-checked operations of :mod:`minitorch_attn.functional` and of the core, so
autograd differentiates a whole Transformer through them.

One module per topic, in reading order:

1. :mod:`.module`: :class:`Parameter`, :class:`Module`, :class:`Sequential`, :class:`ModuleList`;
   :mod:`~minitorch_attn.nn.hooks`: a module's forward and backward hooks (``register_forward_hook``, ...)
2. :mod:`.layers`: :class:`Linear`, :class:`Embedding`, :class:`Dropout`, :class:`GELU`,
   :class:`SiLU`, :class:`LayerNorm`, :class:`RMSNorm`
3. :mod:`.attention`: :class:`MultiHeadAttention` (self-, cross-, causal, grouped-query, fused QKV, a
   key/value cache for generation)
4. :mod:`.transformer`: :class:`FeedForward`, :class:`SwiGLU`, :class:`TransformerEncoderBlock`,
   :class:`TransformerEncoder`, :class:`TransformerDecoderBlock`, :class:`GPT`
5. :mod:`.parallel`: :class:`SplitBatch` (a batch's backward in parts, one per thread, each
   on a replica of the model that shares its weights)

Sources: Vaswani et al., "Attention Is All You Need", arXiv:1706.03762 (§3.2 attention,
§3.3 feed-forward, §3.4 embeddings); Xiong et al., arXiv:2002.04745 (Pre-LN);
Radford et al. 2019, "Language Models are Unsupervised Multitask Learners" (GPT-2:
decoder-only, learned positions, N(0, 0.02) initialization, tied embeddings);
Ainslie et al., arXiv:2305.13245 (grouped-query attention); Su et al., arXiv:2104.09864
(rotary positions, ``GPT(pos_encoding="rope")``); Shazeer, arXiv:2002.05202 (SwiGLU);
Touvron et al., arXiv:2302.13971 (LLaMA's block, ``GPT(**LLAMA)``).
"""

from .attention import KVCache, MultiHeadAttention
from .layers import GELU, Dropout, Embedding, LayerNorm, Linear, RMSNorm, SiLU, skip_init
from .module import Module, ModuleList, Parameter, Sequential, in_eval_mode
from .parallel import SplitBatch
from .transformer import (
    GPT,
    LLAMA,
    FeedForward,
    SwiGLU,
    TransformerDecoderBlock,
    TransformerEncoder,
    TransformerEncoderBlock,
    init_gpt2,
    swiglu_width,
)

__all__ = [
    "Parameter",
    "Module",
    "ModuleList",
    "Sequential",
    "Linear",
    "Embedding",
    "Dropout",
    "GELU",
    "SiLU",
    "LayerNorm",
    "RMSNorm",
    "KVCache",
    "MultiHeadAttention",
    "FeedForward",
    "SwiGLU",
    "swiglu_width",
    "LLAMA",
    "TransformerEncoderBlock",
    "TransformerDecoderBlock",
    "TransformerEncoder",
    "GPT",
    "init_gpt2",
    "in_eval_mode",
    "SplitBatch",
    "skip_init",
]
