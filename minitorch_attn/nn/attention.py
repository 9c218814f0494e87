"""Multi-head attention, and the key/value cache that makes generation incremental."""

from __future__ import annotations

import math  # noqa: F401 (for the tasks' code, as handed out: math.sqrt, -math.inf)

from .. import functional as F
from ..core.factories import arange
from ..core.shape_ops import concat, split
from ..core.tensor import Tensor
from .layers import Dropout, Linear
from .module import Module, _check_positive_int, _check_tensor


class KVCache:
    """The keys and values of the tokens seen so far, one slot per attention layer, so
    that generating token ``t+1`` attends to cached ``K, V`` instead of recomputing the
    whole prefix (the "incremental decoding" of Transformer inference).

    ``layers[i]`` is ``None`` or a pair ``(K, V)`` of shape ``(batch, kv_heads, length, d_k)``;
    ``seen[i]`` counts the positions layer ``i`` has been given, so the next token's
    position is ``seen[i]`` (keys are stored as computed there: with rotary positions,
    already rotated at their absolute positions).

    Args:
        num_layers: attention layers (slots).
        window: sliding-window attention: keep only the last ``window - 1`` positions, so
            that with the next token they make one window of ``window`` keys. None (the
            default): keep everything.
        max_positions: the positions the model can embed (learned positions); past them
            the cache cannot continue (:meth:`fits` says so). None: no limit.

    Raises:
        ValueError: unless ``num_layers`` is an int >= 1 and ``window`` and
            ``max_positions`` are None or ints >= 1.
    """

    def __init__(self, num_layers: int, window: int | None = None, max_positions: int | None = None) -> None:
        num_layers = _check_positive_int("num_layers", num_layers)
        if window is not None:
            window = _check_positive_int("window", window)
        if max_positions is not None:
            max_positions = _check_positive_int("max_positions", max_positions)
        self.layers = [None] * num_layers
        self.seen = [0] * num_layers
        self.window, self.max_positions = window, max_positions

    @property
    def length(self):
        """How many positions are stored (0 when empty)."""
        return 0 if self.layers[0] is None else self.layers[0][0].shape[2]

    @property
    def position(self):
        """The position of the next token: how many the cache has been given in all."""
        return self.seen[0]

    def fits(self, new):
        """Whether ``new`` more tokens still have positions (always, without ``max_positions``)."""
        return self.max_positions is None or self.position + new <= self.max_positions

    def append(self, layer, k, v):
        """Add this step's ``k, v`` (``(batch, kv_heads, new, d_k)``) to layer ``layer``'s
        cache and return the keys and values this step attends to: the stored ones, then
        the new ones. With a ``window``, only the last ``window - 1`` are kept afterwards."""
        self.seen[layer] += k.shape[2]
        if self.layers[layer] is not None:
            old_k, old_v = self.layers[layer]
            k, v = concat([old_k, k], dim=2), concat([old_v, v], dim=2)
        keep = k.shape[2] if self.window is None else min(k.shape[2], self.window - 1)
        self.layers[layer] = (k[:, :, k.shape[2] - keep :], v[:, :, v.shape[2] - keep :])
        return k, v


class MultiHeadAttention(Module):
    """Multi-head attention (Vaswani et al., arXiv:1706.03762, §3.2.2)::

        head_i = softmax(Q W_Qi (K W_Ki)ᵀ / sqrt(d_k) + mask) V W_Vi
        MultiHead(Q, K, V) = concat(head_1, ..., head_h) W_O

    Args:
        d_model: model width; ``d_k = d_model // num_heads``.
        num_heads: query heads ``h``.
        dropout: probability of dropping attention weights while training.
        bias: whether the projections have biases (no by default, so
            ``MultiHeadAttention(512, 8)`` has ``4 * 512 * 512 = 1,048,576`` parameters).
        num_kv_heads: key/value heads; fewer than ``num_heads`` gives grouped-query
            attention (Ainslie et al., arXiv:2305.13245): each key/value head serves
            ``num_heads // num_kv_heads`` query heads. Default: ``num_heads``.
        fused_qkv: one projection ``W_qkv`` of width ``(h + 2 h_kv) d_k`` instead of
            ``W_q, W_k, W_v`` (one matrix product for self-attention; the same function).
        rope_base: None (default) for no positions inside attention, or the base of rotary
            position embeddings (:func:`~minitorch_attn.functional.rotary_embedding`,
            arXiv:2104.09864): queries and keys (never values) are rotated at their
            positions after the head split, before the keys are cached (self-attention
            only); with a cache the positions continue it, from ``cache.seen[layer_index]``.
        attn_impl: how attention runs when ``need_weights=False``: ``"naive"`` (scores,
            softmax, weights @ V in one op,
            :func:`~minitorch_attn.functional.scaled_dot_product_attention`) or
            ``"flash"`` (blockwise, never forms the weights,
            :func:`~minitorch_attn.flash.flash_attention`). With ``need_weights=True``
            the weights come from :func:`~minitorch_attn.functional.attention_weights`.
    Raises:
        ValueError: if ``d_model % num_heads != 0``, ``num_heads % num_kv_heads != 0``, or
            ``attn_impl`` is unknown.
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        dropout: float = 0.1,
        bias: bool = False,
        num_kv_heads: int | None = None,
        fused_qkv: bool = False,
        attn_impl: str = "naive",
        rope_base: float | None = None,
    ) -> None:
        super().__init__()
        d_model = _check_positive_int("d_model", d_model)
        num_heads = _check_positive_int("num_heads", num_heads)
        if d_model % num_heads != 0:
            raise ValueError(f"d_model ({d_model}) must be divisible by num_heads ({num_heads})")
        num_kv_heads = num_heads if num_kv_heads is None else num_kv_heads
        num_kv_heads = _check_positive_int("num_kv_heads", num_kv_heads)
        if num_heads % num_kv_heads != 0:
            raise ValueError(f"num_heads ({num_heads}) must be a multiple of num_kv_heads ({num_kv_heads})")
        if attn_impl not in ("naive", "flash"):
            raise ValueError(f"attn_impl must be 'naive' or 'flash', got {attn_impl!r}")
        self.d_model, self.num_heads, self.num_kv_heads = d_model, num_heads, num_kv_heads
        self.d_k = d_model // num_heads
        self.fused_qkv, self.attn_impl, self.rope_base = fused_qkv, attn_impl, rope_base
        kv_width = num_kv_heads * self.d_k
        if fused_qkv:
            self.W_qkv = Linear(d_model, d_model + 2 * kv_width, bias=bias)
        else:
            self.W_q = Linear(d_model, d_model, bias=bias)
            self.W_k = Linear(d_model, kv_width, bias=bias)
            self.W_v = Linear(d_model, kv_width, bias=bias)
        self.W_o = Linear(d_model, d_model, bias=bias)
        self.dropout = Dropout(dropout)

    def _project(self, query, key, value):
        """Q, K, V projections: ``(batch, T, d_model) -> (batch, T, width)``."""
        if not self.fused_qkv:
            return self.W_q(query), self.W_k(key), self.W_v(value)
        widths = [self.d_model, self.num_kv_heads * self.d_k, self.num_kv_heads * self.d_k]
        if query is key and key is value:  # self-attention: one product, then split the columns
            return tuple(split(self.W_qkv(query), widths, dim=-1))
        # cross-attention: the same weights, row blocks applied to their own inputs
        w, b = self.W_qkv.weight, self.W_qkv.bias
        out, start = [], 0
        for x, width in zip((query, key, value), widths):
            rows = slice(start, start + width)
            out.append(F.linear(x, w[rows], None if b is None else b[rows]))
            start += width
        return tuple(out)

    def _split_heads(self, x, heads):
        """``(batch, T, heads d_k) -> (batch, heads, T, d_k)``."""
        # BEGIN SOLUTION 4.3
        batch, length, _ = x.shape
        return x.reshape(batch, length, heads, self.d_k).transpose(1, 2)
        # END SOLUTION

    def _repeat_kv(self, x):
        """Grouped-query attention: ``(batch, h_kv, T, d_k) -> (batch, h, T, d_k)``, each
        key/value head repeated for its ``h / h_kv`` query heads (``repeat_interleave``)."""
        # BEGIN SOLUTION 4.3
        group = self.num_heads // self.num_kv_heads
        if group == 1:
            return x
        batch, kv_heads, length, d_k = x.shape
        x = x.reshape(batch, kv_heads, 1, length, d_k).expand(batch, kv_heads, group, length, d_k)
        return x.reshape(batch, kv_heads * group, length, d_k)
        # END SOLUTION

    def _merge_heads(self, x):
        """``(batch, h, T, d_k) -> (batch, T, h d_k)``: the heads side by side again (concat)."""
        # BEGIN SOLUTION 4.3
        batch, _, length, _ = x.shape
        return x.transpose(1, 2).reshape(batch, length, self.d_model)
        # END SOLUTION

    def forward(
        self,
        query: Tensor,
        key: Tensor,
        value: Tensor,
        attn_mask: Tensor | None = None,
        is_causal: bool = False,
        need_weights: bool = True,
        cache: KVCache | None = None,
        layer_index: int = 0,
    ) -> tuple[Tensor, Tensor | None]:
        """Attend from ``query`` to ``key``/``value``.

        Args:
            query: ``(batch, T_q, d_model)``; key, value: ``(batch, T_k, d_model)`` (the
                same tensor for self-attention, an encoder output for cross-attention).
            attn_mask: bool, broadcastable to ``(batch, heads, T_q, T_k)``; True where a query
                may attend to a key (as ``torch.nn.functional.scaled_dot_product_attention``).
            is_causal: query ``i`` sees keys ``j <= i`` only (with a cache: ``j <= offset + i``).
            need_weights: also return the attention weights. They are formed by the naive
                path whatever ``attn_impl`` is (the flash kernel never forms them), so
                pass False for speed when they are not needed, as the blocks do.
            cache: a :class:`KVCache`; this call's keys and values are appended to slot
                ``layer_index`` and the query attends to the cached positions (a sliding
                cache keeps only the last window: pass the matching ``attn_mask``).
        Returns:
            ``(output (batch, T_q, d_model), weights (batch, heads, T_q, T_k) or None)``.
        Raises:
            TypeError: if an input is not a Tensor.
            ValueError: if the inputs are not 3-D with last dimension ``d_model``, or
                rotary positions are asked of keys of another length than the queries.
        """
        for name, x in (("query", query), ("key", key), ("value", value)):
            _check_tensor(f"MultiHeadAttention {name}", x)
            if x.ndim != 3 or x.shape[-1] != self.d_model:
                raise ValueError(f"{name} must have shape (batch, seq_len, {self.d_model}), got {x.shape}")
        length = query.shape[1]
        q, k, v = self._project(query, key, value)
        q = self._split_heads(q, self.num_heads)  # (B, h, T_q, d_k)
        k, v = self._split_heads(k, self.num_kv_heads), self._split_heads(v, self.num_kv_heads)
        if self.rope_base is not None:  # rotary positions, continuing the cached ones
            if key.shape[1] != length:
                raise ValueError(f"rotary positions need self-attention: {length} queries but {key.shape[1]} keys")
            # BEGIN SOLUTION 6.3
            start = 0 if cache is None else cache.seen[layer_index]
            positions = arange(start, start + length, device=query.device)
            q = F.rotary_embedding(q, positions, base=self.rope_base)
            k = F.rotary_embedding(k, positions, base=self.rope_base)
            # END SOLUTION
        alignment = "top_left"
        if cache is not None:
            k, v = cache.append(layer_index, k, v)  # (B, h_kv, offset + T_q, d_k)
            alignment = "bottom_right"  # the queries are the last T_q of the cached positions
        dropout_p = self.dropout.p if self.training else 0.0

        weights = None
        if need_weights:  # as in PyTorch, asking for the weights takes the path that forms them
            weights = F.attention_weights(
                q, k, attn_mask=attn_mask, is_causal=is_causal, enable_gqa=True, causal_alignment=alignment
            )  # (B, h, T_q, T_k)
            out = self.dropout(weights) @ self._repeat_kv(v)  # (B, h, T_q, d_k)
        elif self.attn_impl == "naive":
            out = F.scaled_dot_product_attention(
                q,
                k,
                v,
                attn_mask=attn_mask,
                dropout_p=dropout_p,
                is_causal=is_causal,
                enable_gqa=True,
                causal_alignment=alignment,
            )
        else:
            out = F.flash_attention(
                q,
                k,
                v,
                attn_mask=attn_mask,
                dropout_p=dropout_p,
                is_causal=is_causal,
                enable_gqa=True,
                causal_alignment=alignment,
            )
        return self.W_o(self._merge_heads(out)), weights

    def extra_repr(self) -> str:
        kv = f", num_kv_heads={self.num_kv_heads}" if self.num_kv_heads != self.num_heads else ""
        rope = "" if self.rope_base is None else f", rope_base={self.rope_base}"
        return f"d_model={self.d_model}, num_heads={self.num_heads}{kv}, attn_impl={self.attn_impl!r}{rope}"
