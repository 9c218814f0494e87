"""Transformer blocks and models: the feed-forward networks (GELU and SwiGLU), encoder and decoder
blocks, :class:`TransformerEncoder`, :class:`GPT` (GPT-2's block, or LLaMA's with :data:`LLAMA`)."""

from __future__ import annotations

import math
import os
from typing import Any

from .. import functional as F
from ..core.factories import arange, zeros
from ..core.tensor import Tensor
from ..functional import causal_mask
from .attention import KVCache, MultiHeadAttention
from .layers import GELU, Dropout, Embedding, Linear, _make_norm, _normal
from .module import Module, ModuleList, Sequential, _check_positive_int, _check_tensor
from .pretrained import load_pretrained


class FeedForward(Sequential):
    """The position-wise feed-forward network (arXiv:1706.03762, §3.3): ``Linear(d_model, d_ff)``,
    GELU, ``Linear(d_ff, d_model)``."""

    def __init__(self, d_model: int, d_ff: int, approximate: str = "none") -> None:
        super().__init__(Linear(d_model, d_ff), GELU(approximate), Linear(d_ff, d_model))


class SwiGLU(Module):
    """The gated feed-forward network of LLaMA (Shazeer 2020, arXiv:2002.05202, eq. 6 "FFN_SwiGLU";
    Touvron et al. 2023, arXiv:2302.13971 §2.2)::

        SwiGLU(x) = w2(silu(w1 x) * w3 x)

    ``w1``, ``w3``: ``Linear(d_model, d_ff)``, ``w2``: ``Linear(d_ff, d_model)`` (LLaMA's names),
    no biases by default (as LLaMA). Three matrices instead of two, so at ``d_ff = 8/3
    d_model`` it has the parameters of a GELU network of width ``4 d_model``
    (:func:`swiglu_width`). Shapes: ``(..., d_model) -> (..., d_model)``.

    Forward, and the backward that autograd composes from the hand-written ones of the
    linear maps, silu and the product (``g`` the upstream gradient;
    the weight gradients sum over every row of ``...``)::

        1. a = w1 x,  b = w3 x             (..., d_ff): the gate and the value
        2. h = silu(a) * b
        3. y = w2 h                         (..., d_model)

        3. dh = g w2,  dw2 = gᵀ h
        2. da = dh * b * silu'(a),  db = dh * silu(a)     (product rule; silu's derivative, task 6.1)
        1. dx = da w1 + db w3,  dw1 = daᵀ x,  dw3 = dbᵀ x         (x feeds both: the two add up)
    """

    def __init__(self, d_model: int, d_ff: int, bias: bool = False) -> None:
        super().__init__()
        # BEGIN SOLUTION 6.2
        self.w1 = Linear(d_model, d_ff, bias=bias)
        self.w3 = Linear(d_model, d_ff, bias=bias)
        self.w2 = Linear(d_ff, d_model, bias=bias)
        # END SOLUTION

    def forward(self, x: Tensor) -> Tensor:
        # BEGIN SOLUTION 6.2
        return self.w2(F.silu(self.w1(x)) * self.w3(x))  # (..., d_ff) -> (..., d_model)
        # END SOLUTION


def swiglu_width(d_model: int) -> int:
    """LLaMA's hidden width for a SwiGLU network: ``2/3 · 4 d_model``, rounded up to a multiple
    of 8 (arXiv:2302.13971 §2.2): the parameters of a GELU network of width ``4 d_model``."""
    # BEGIN SOLUTION 6.2
    return -(-(8 * d_model) // (3 * 8)) * 8
    # END SOLUTION


MLPS = ("gelu", "swiglu")


def _make_mlp(mlp, d_model, d_ff, activation):
    """The feed-forward network of a block: GPT-2's GELU network (``"gelu"``, its GELU
    ``activation``: ``"none"`` or ``"tanh"``) or LLaMA's :class:`SwiGLU` without biases (``"swiglu"``)."""
    if mlp == "gelu":
        return FeedForward(d_model, d_ff, approximate=activation)
    if mlp == "swiglu":
        # BEGIN SOLUTION 6.3
        return SwiGLU(d_model, d_ff)
        # END SOLUTION
    raise ValueError(f"mlp must be one of {MLPS}, got {mlp!r}")


class TransformerEncoderBlock(Module):
    """Self-attention and a feed-forward network, each in a residual branch with a norm.

    Pre-LN (``norm_first=True``, the default; Xiong et al., arXiv:2002.04745)::

        x = x + dropout(attn(norm1(x)));   x = x + dropout(ffn(norm2(x)))

    Post-LN (``norm_first=False``, the original Transformer)::

        x = norm1(x + dropout(attn(x)));   x = norm2(x + dropout(ffn(x)))

    With ``is_causal=True`` this is the block of a decoder-only model (:class:`GPT`).
    ``mlp``: ``"gelu"`` (:class:`FeedForward`) or ``"swiglu"`` (:class:`SwiGLU`).
    Shapes: ``(batch, seq_len, d_model) -> (batch, seq_len, d_model)``.
    Extra keyword arguments (``num_kv_heads``, ``fused_qkv``, ``attn_impl``, ``bias``) go
    to :class:`MultiHeadAttention`. ``norm_eps``: the norms' epsilon (None: the norm's default).
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        d_ff: int,
        dropout: float = 0.1,
        norm_first: bool = True,
        norm: str = "layernorm",
        activation: str = "none",
        mlp: str = "gelu",
        norm_eps: float | None = None,
        **attention_options: Any,
    ) -> None:
        super().__init__()
        self.norm_first = norm_first
        self.attn = MultiHeadAttention(d_model, num_heads, dropout=dropout, **attention_options)
        self.norm1, self.norm2 = _make_norm(norm, d_model, norm_eps), _make_norm(norm, d_model, norm_eps)
        self.ffn = _make_mlp(mlp, d_model, d_ff, activation)
        self.dropout1, self.dropout2 = Dropout(dropout), Dropout(dropout)

    def forward(
        self,
        x: Tensor,
        attn_mask: Tensor | None = None,
        is_causal: bool = False,
        need_weights: bool = False,
        cache: KVCache | None = None,
        layer_index: int = 0,
    ) -> Tensor | tuple[Tensor, Tensor | None]:
        """Returns ``x`` or, with ``need_weights=True``, ``(x, attention weights)``. ``attn_mask``,
        ``is_causal``, ``cache`` and ``layer_index`` go to :meth:`MultiHeadAttention.forward`."""
        h = self.norm1(x) if self.norm_first else x
        a, weights = self.attn(
            h,
            h,
            h,
            attn_mask=attn_mask,
            is_causal=is_causal,
            need_weights=need_weights,
            cache=cache,
            layer_index=layer_index,
        )
        x = x + self.dropout1(a)
        if not self.norm_first:
            x = self.norm1(x)
        h = self.norm2(x) if self.norm_first else x
        x = x + self.dropout2(self.ffn(h))
        if not self.norm_first:
            x = self.norm2(x)
        return (x, weights) if need_weights else x


class TransformerDecoderBlock(Module):
    """Causal self-attention, cross-attention to an encoder output (``memory``), and a
    feed-forward network (arXiv:1706.03762, §3.1 "Decoder"), Pre-LN or Post-LN as
    :class:`TransformerEncoderBlock`.

    Shapes: ``x (batch, T, d_model)``, ``memory (batch, S, d_model)`` -> ``(batch, T, d_model)``.
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        d_ff: int,
        dropout: float = 0.1,
        norm_first: bool = True,
        norm: str = "layernorm",
        activation: str = "none",
        **attention_options: Any,
    ) -> None:
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout=dropout, **attention_options)
        self.cross_attn = MultiHeadAttention(d_model, num_heads, dropout=dropout, **attention_options)
        self.norm1, self.norm2, self.norm3 = (_make_norm(norm, d_model) for _ in range(3))
        self.ffn = FeedForward(d_model, d_ff, approximate=activation)
        self.dropout1, self.dropout2, self.dropout3 = Dropout(dropout), Dropout(dropout), Dropout(dropout)

    def _residual(self, x, norm, dropout, branch):
        if self.norm_first:
            return x + dropout(branch(norm(x)))
        return norm(x + dropout(branch(x)))

    def forward(self, x: Tensor, memory: Tensor, memory_mask: Tensor | None = None, is_causal: bool = True) -> Tensor:
        """``memory_mask``: bool, broadcastable to ``(batch, heads, T, S)``, True where a
        target position may attend to a source position (e.g. not padding)."""
        x = self._residual(
            x, self.norm1, self.dropout1, lambda h: self.self_attn(h, h, h, is_causal=is_causal, need_weights=False)[0]
        )
        x = self._residual(
            x,
            self.norm2,
            self.dropout2,
            lambda h: self.cross_attn(h, memory, memory, attn_mask=memory_mask, need_weights=False)[0],
        )
        return self._residual(x, self.norm3, self.dropout3, self.ffn)


def init_gpt2(model: Module, num_layers: int) -> None:
    """GPT-2's initialization (Radford et al. 2019; as in nanoGPT): every Linear and
    Embedding weight ``~ N(0, 0.02)``, biases 0, norms 1 and 0, and the projections that
    end a residual branch (``W_o`` and the last feed-forward Linear, a SwiGLU's ``w2``) ``~ N(0, 0.02 /
    sqrt(2 num_layers))``, so the residual stream's variance does not grow with depth."""
    for name, p in model.named_parameters():
        leaf = name.rsplit(".", 1)[-1]
        if leaf == "bias":
            p.data = zeros(p.shape, device=p.device, dtype=p.dtype).data
        elif p.ndim >= 2:
            residual = ".W_o." in name or name.endswith(("ffn.2.weight", "ffn.w2.weight"))
            std = 0.02 / math.sqrt(2 * num_layers) if residual else 0.02
            p.data = _normal(p.shape, std, p.device, p.dtype).data


POS_ENCODINGS = ("learned", "rope")


class _SelfAttentionStack(Module):
    """What :class:`TransformerEncoder` and :class:`GPT` share: token embedding, positions,
    dropout, ``num_layers`` :class:`TransformerEncoderBlock` s and a final norm, initialized
    as :func:`init_gpt2`. Each model decides how its blocks attend (an encoder sees the
    whole sequence, a decoder only the past). Its attribute names are the parameter names
    of both models' state dicts.

    Positions (``pos_encoding``):

    * ``"learned"``: a ``position_embedding`` table of ``max_seq_len`` rows added to the
      token embeddings (GPT-2); a sequence may not be longer than ``max_seq_len``.
    * ``"rope"``: no table; every attention layer rotates its queries and keys by their
      positions (:func:`~minitorch_attn.functional.rotary_embedding` with ``rope_base``),
      so attention sees relative positions and any length can be embedded.
    """

    def __init__(
        self,
        vocab_size: int,
        d_model: int,
        num_heads: int,
        d_ff: int,
        num_layers: int,
        max_seq_len: int,
        dropout: float = 0.1,
        pos_encoding: str = "learned",
        rope_base: float = 10000.0,
        **block_options: Any,
    ) -> None:
        super().__init__()
        num_layers = _check_positive_int("num_layers", num_layers)
        max_seq_len = _check_positive_int("max_seq_len", max_seq_len)
        if pos_encoding not in POS_ENCODINGS:
            raise ValueError(f"pos_encoding must be one of {POS_ENCODINGS}, got {pos_encoding!r}")
        self.max_seq_len, self.pos_encoding = max_seq_len, pos_encoding
        self.token_embedding = Embedding(vocab_size, d_model)
        if pos_encoding == "learned":
            self.position_embedding = Embedding(max_seq_len, d_model)
        else:  # every block's attention rotates its queries and keys
            # BEGIN SOLUTION 6.3
            block_options["rope_base"] = rope_base
            # END SOLUTION
        self.dropout = Dropout(dropout)
        self.blocks = ModuleList(
            TransformerEncoderBlock(d_model, num_heads, d_ff, dropout, **block_options) for _ in range(num_layers)
        )
        self.norm = _make_norm(block_options.get("norm", "layernorm"), d_model, block_options.get("norm_eps"))
        init_gpt2(self, num_layers)

    def embed(self, idx, offset=0):
        """Token embeddings, plus the learned embeddings of positions ``offset ...
        offset + seq_len - 1`` (rotary positions are applied inside attention)."""
        _check_tensor(type(self).__name__, idx)
        if idx.ndim != 2 or idx.dtype not in ("int64", "int32"):
            raise ValueError(
                f"expected token ids of shape (batch, seq_len) and an integer dtype, got {idx.shape} {idx.dtype}"
            )
        x = self.token_embedding(idx)  # (B, T, d_model)
        if self.pos_encoding == "learned":
            length = idx.shape[1]
            if offset + length > self.max_seq_len:
                raise ValueError(f"sequence of {offset + length} positions exceeds max_seq_len={self.max_seq_len}")
            x = x + self.position_embedding(arange(offset, offset + length, device=idx.device))
        return self.dropout(x)


class TransformerEncoder(_SelfAttentionStack):
    """An encoder (arXiv:1706.03762, §3.1 "Encoder", Pre-LN by default): token embedding,
    positions (learned, or rotary with ``pos_encoding="rope"``), ``num_layers`` encoder
    blocks in which every position attends to every other (unless ``attn_mask`` says
    otherwise), and a final norm. Initialized as :func:`init_gpt2`.

    Shapes: ``idx (batch, seq_len)`` int64 -> ``(batch, seq_len, d_model)``.
    Raises:
        TypeError: if ``idx`` is not a Tensor.
        ValueError: if ``idx`` is not 2-D integer ids, ``seq_len > max_seq_len`` with learned
            positions, or a token id is outside ``[0, vocab_size)``; an unknown ``pos_encoding``.
    """

    def forward(self, idx: Tensor, attn_mask: Tensor | None = None) -> Tensor:
        """``attn_mask``: bool, broadcastable to ``(batch, heads, seq_len, seq_len)``, True = may attend."""
        x = self.embed(idx)
        for block in self.blocks:
            x = block(x, attn_mask=attn_mask)
        return self.norm(x)


LLAMA = dict(norm="rmsnorm", pos_encoding="rope", mlp="swiglu")
"""The options of :class:`GPT` that give LLaMA's block: ``GPT(vocab_size, **LLAMA)``."""


class GPT(_SelfAttentionStack):
    """A decoder-only language model (GPT-2's architecture, Radford et al. 2019): the
    embeddings and blocks of :class:`TransformerEncoder` (not an encoder: every block
    attends causally, each position to itself and the past only), a final norm, then a
    linear layer to the vocabulary whose weight is the token embedding when
    ``tie_weights`` (Press & Wolf, arXiv:1608.05859). The feed-forward GELU uses the tanh
    approximation, as GPT-2.

    The modern block (LLaMA, Touvron et al. 2023, arXiv:2302.13971 §2.2; Mistral, Gemma)
    is a choice of options, :data:`LLAMA` (``GPT(vocab_size, **LLAMA, num_kv_heads=2)``):
    RMSNorm before attention and MLP (``norm="rmsnorm"``), rotary positions
    (``pos_encoding="rope"``), a SwiGLU feed-forward (``mlp="swiglu"``, of width
    :func:`swiglu_width` unless ``d_ff`` says otherwise), and no biases anywhere (RMSNorm
    has none, attention never has, SwiGLU has none); ``num_kv_heads < num_heads`` adds
    grouped-query attention (Ainslie et al., arXiv:2305.13245).

    Positions: ``pos_encoding="learned"`` (GPT-2, the default) adds a learned embedding
    per position, so a forward takes at most ``max_seq_len`` tokens. ``"rope"`` rotates
    queries and keys (RoFormer, arXiv:2104.09864) and attends through a sliding window of
    ``max_seq_len`` keys: each token sees itself and the ``max_seq_len - 1`` tokens before
    it, in a forward over any length (a banded causal mask) and in cached generation alike
    (the cache keeps the last window), so the two give the same logits at every step.

    What a checkpoint of another library may need (:meth:`from_pretrained`): ``bias=True``
    gives the attention projections biases (GPT-2's ``c_attn`` and ``c_proj``), ``norm_eps``
    sets every norm's epsilon (None: LayerNorm's 1e-5, RMSNorm's machine epsilon),
    ``tie_weights=False`` an output layer of its own, ``rope_base`` the rotary base.

    Shapes: ``idx (batch, seq_len)`` int64 -> logits ``(batch, seq_len, vocab_size)`` float32.

    ``config`` holds the constructor's arguments, so ``GPT(**model.config)`` rebuilds it
    (checkpoints store it).
    """

    def __init__(
        self,
        vocab_size: int,
        d_model: int = 128,
        num_heads: int = 4,
        d_ff: int | None = None,
        num_layers: int = 4,
        max_seq_len: int = 128,
        dropout: float = 0.0,
        tie_weights: bool = True,
        norm: str = "layernorm",
        num_kv_heads: int | None = None,
        fused_qkv: bool = True,
        attn_impl: str = "naive",
        pos_encoding: str = "learned",
        rope_base: float = 10000.0,
        mlp: str = "gelu",
        bias: bool = False,
        norm_eps: float | None = None,
    ) -> None:
        if mlp not in MLPS:
            raise ValueError(f"mlp must be one of {MLPS}, got {mlp!r}")
        if d_ff is None:
            d_ff = swiglu_width(d_model) if mlp == "swiglu" else 4 * d_model
        super().__init__(
            vocab_size,
            d_model,
            num_heads,
            d_ff,
            num_layers,
            max_seq_len,
            dropout,
            pos_encoding=pos_encoding,
            rope_base=rope_base,
            norm=norm,
            activation="tanh",
            mlp=mlp,
            num_kv_heads=num_kv_heads,
            fused_qkv=fused_qkv,
            attn_impl=attn_impl,
            bias=bias,
            norm_eps=norm_eps,
        )
        self.config = dict(
            vocab_size=vocab_size,
            d_model=d_model,
            num_heads=num_heads,
            d_ff=d_ff,
            num_layers=num_layers,
            max_seq_len=max_seq_len,
            dropout=dropout,
            tie_weights=tie_weights,
            norm=norm,
            num_kv_heads=num_kv_heads,
            fused_qkv=fused_qkv,
            attn_impl=attn_impl,
            pos_encoding=pos_encoding,
            rope_base=rope_base,
            mlp=mlp,
        )
        # the two options of imported checkpoints are recorded only when set, so the configs
        # of the training job (its checkpoints, torch_gpt's arguments) stay as they were
        if bias:
            self.config["bias"] = True
        if norm_eps is not None:
            self.config["norm_eps"] = norm_eps
        self.lm_head = Linear(d_model, vocab_size, bias=False)
        if tie_weights:
            self.lm_head.weight = self.token_embedding.weight
        else:
            self.lm_head.weight.data = _normal((vocab_size, d_model), 0.02, None, "float32").data

    def forward(
        self, idx: Tensor, cache: KVCache | None = None, need_weights: bool = False
    ) -> Tensor | tuple[Tensor, list[Tensor | None]]:
        """Next-token logits for every position.

        Args:
            idx: ``(batch, seq_len)`` token ids; at most ``max_seq_len`` positions with
                learned positions, any number with rotary ones (attention then slides).
            cache: a :class:`KVCache` from :meth:`new_cache`; ``idx`` then continues the
                cached sequence (positions start at ``cache.position``).
            need_weights: also return each layer's attention weights ``(batch, heads, T, T_k)``.
        Returns:
            logits ``(batch, seq_len, vocab_size)``, or ``(logits, [weights per layer])``.
        """
        x = self.embed(idx, offset=0 if cache is None else cache.position)
        length = idx.shape[1]
        keys = length + (0 if cache is None else cache.length)  # keys the new tokens attend over
        attn_mask = None  # plain causal attention, unless the sliding window cuts into the keys
        if self.pos_encoding == "rope" and keys > self.max_seq_len:  # each query sees its last max_seq_len keys
            # BEGIN SOLUTION 6.3
            attn_mask = causal_mask(length, keys, "bottom_right", device=idx.device, window=self.max_seq_len)
            # END SOLUTION
        all_weights = []
        for i, block in enumerate(self.blocks):
            x = block(
                x,
                attn_mask=attn_mask,
                is_causal=attn_mask is None,
                need_weights=need_weights,
                cache=cache,
                layer_index=i,
            )
            if need_weights:
                x, weights = x
                all_weights.append(weights)
        logits = self.lm_head(self.norm(x))
        return (logits, all_weights) if need_weights else logits

    @classmethod
    def from_pretrained(cls, folder: str | os.PathLike, device: str = "cpu", attn_impl: str = "naive") -> GPT:
        """A ``GPT2LMHeadModel`` or ``LlamaForCausalLM`` of Hugging Face ``transformers``,
        from a local folder of its ``save_pretrained`` layout (``config.json`` and
        ``model.safetensors``, or sharded with ``model.safetensors.index.json``), as our
        GPT with the same logits, in eval mode. No download: give the folder (a
        ``huggingface-cli download gpt2`` or a snapshot of the Hugging Face cache).
        How the names, shapes and rotary pairs map: :mod:`minitorch_attn.nn.pretrained`.

        Raises:
            ValueError: for an unsupported architecture or config feature (named), a
                folder without safetensors weights (a pickled ``.bin`` is never loaded;
                the message says how to convert it), and missing, left-over or mis-shaped
                weights (listed).
            ImportError: without the ``safetensors`` package (``pip install -e ".[hf]"``).
        """
        return load_pretrained(cls, folder, device=device, attn_impl=attn_impl)

    def new_cache(self) -> KVCache:
        """An empty :class:`KVCache` for incremental generation: with rotary positions it
        slides (keeps the last window), with learned ones it ends at ``max_seq_len``."""
        if self.pos_encoding == "rope":
            # BEGIN SOLUTION 6.3
            return KVCache(len(self.blocks), window=self.max_seq_len)
            # END SOLUTION
        return KVCache(len(self.blocks), max_positions=self.max_seq_len)

    def context(self, ids):
        """The ids that a forward without a cache needs to predict what follows ``ids`` (a
        list): the last ``max_seq_len`` with learned positions (the embeddings end there);
        all of them with rotary positions (the sliding window is inside attention)."""
        return list(ids) if self.pos_encoding == "rope" else list(ids)[-self.max_seq_len :]
