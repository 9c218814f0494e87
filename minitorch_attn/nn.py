"""Modules: parameters held together, and the layers of the Transformer built from them.

A :class:`Module` owns :class:`Parameter` s and sub-modules, found by assigning them as
attributes (``self.weight = Parameter(...)``, ``self.attn = MultiHeadAttention(...)``),
exactly as in ``torch.nn``. Every layer's ``forward`` only calls the hand-written,
gradient-checked operations of :mod:`minitorch_attn.functional` and of the core, so
autograd differentiates a whole Transformer through them.

Contents, in reading order:

1. :class:`Parameter`, :class:`Module`, :class:`Sequential`, :class:`ModuleList`
2. :class:`Linear`, :class:`Embedding`, :class:`Dropout`, :class:`GELU`,
   :class:`LayerNorm`, :class:`RMSNorm`
3. :class:`MultiHeadAttention` (self-, cross-, causal, grouped-query, fused QKV, a
   key/value cache for generation)
4. :class:`TransformerEncoderBlock`, :class:`TransformerEncoder`,
   :class:`TransformerDecoderBlock`, :class:`GPT`

Sources: Vaswani et al., "Attention Is All You Need", arXiv:1706.03762 (§3.2 attention,
§3.3 feed-forward, §3.4 embeddings); Xiong et al., arXiv:2002.04745 (Pre-LN);
Radford et al. 2019, "Language Models are Unsupervised Multitask Learners" (GPT-2:
decoder-only, learned positions, N(0, 0.02) initialization, tied embeddings);
Ainslie et al., arXiv:2305.13245 (grouped-query attention).
"""

from __future__ import annotations

import math
import numbers
from collections import OrderedDict

from . import functional as F
from . import ops
from .backend import backend_of, get_backend
from .tensor import Tensor, arange, ones, randn, tensor, zeros


# ==== 1. parameters and containers ==========================================================
class Parameter(Tensor):
    """A Tensor that is a learnable weight of a Module: it requires a gradient and is
    listed by :meth:`Module.parameters`.

    ``Parameter(t)`` shares ``t``'s array (no copy).
    Raises:
        TypeError: if ``data`` is not a floating-point Tensor.
    """

    def __init__(self, data, requires_grad=True):
        if not isinstance(data, Tensor):
            raise TypeError(f"Parameter needs a Tensor, got {type(data).__name__}")
        super().__init__(data.data, requires_grad=requires_grad)

    def __repr__(self):
        return "Parameter containing:\n" + super().__repr__()


class Module:
    """Base class of every layer (as ``torch.nn.Module``).

    Subclasses call ``super().__init__()`` first, assign Parameters and Modules as
    attributes, and define ``forward``; ``module(x)`` calls ``forward(x)``.

    Attributes:
        training: True after :meth:`train` (the default), False after :meth:`eval`;
            Dropout reads it.
    """

    def __init__(self):
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_modules", OrderedDict())
        object.__setattr__(self, "training", True)

    def __setattr__(self, name, value):
        if "_parameters" not in self.__dict__:
            raise RuntimeError(f"{type(self).__name__}.__init__ must call super().__init__() before assigning attributes")
        self._parameters.pop(name, None)
        self._modules.pop(name, None)
        if isinstance(value, Parameter):
            self._parameters[name] = value
        elif isinstance(value, Module):
            self._modules[name] = value
        object.__setattr__(self, name, value)

    def __delattr__(self, name):
        self._parameters.pop(name, None)
        self._modules.pop(name, None)
        object.__delattr__(self, name)

    def forward(self, *args, **kwargs):
        raise NotImplementedError(f"{type(self).__name__} has no forward()")

    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)

    # ---- walking the tree ---------------------------------------------------------------
    def named_modules(self, prefix=""):
        """Yield ``(dotted name, module)`` for this module and every module below it."""
        yield prefix, self
        for name, child in self._modules.items():
            yield from child.named_modules(f"{prefix}.{name}" if prefix else name)

    def modules(self):
        return [m for _, m in self.named_modules()]

    def children(self):
        return list(self._modules.values())

    def named_parameters(self):
        """Yield ``(dotted name, Parameter)``, each shared parameter once (the first name
        wins: with tied weights ``lm_head.weight`` is ``token_embedding.weight``)."""
        seen = set()
        for prefix, module in self.named_modules():
            for name, p in module._parameters.items():
                if id(p) not in seen:
                    seen.add(id(p))
                    yield (f"{prefix}.{name}" if prefix else name), p

    def parameters(self):
        return [p for _, p in self.named_parameters()]

    def num_parameters(self):
        """The number of learnable scalars (shared parameters counted once)."""
        return sum(p.numel() for p in self.parameters())

    # ---- modes and gradients ------------------------------------------------------------
    def train(self, mode=True):
        for module in self.modules():
            object.__setattr__(module, "training", bool(mode))
        return self

    def eval(self):
        return self.train(False)

    def zero_grad(self):
        for p in self.parameters():
            p.grad = None

    def to(self, device):
        """Move every parameter to ``device`` in place (the Parameter objects stay the
        same, so an optimizer made before still holds them); returns self."""
        backend = get_backend(device)
        for p in self.parameters():
            if backend_of(p.data) is not backend:
                p.data = backend.asarray(p.numpy())
                p.grad = None
        return self

    # ---- saving and loading -------------------------------------------------------------
    def state_dict(self):
        """An ordered ``{dotted name: Tensor}`` of every parameter (detached, sharing memory)."""
        return OrderedDict((name, p.detach()) for name, p in self.named_parameters())

    def load_state_dict(self, state_dict, strict=True):
        """Copy values into the parameters, on their device and in their dtype.

        Args:
            state_dict: ``{name: Tensor or array}`` as made by :meth:`state_dict`.
            strict: if True, missing and unexpected keys are errors.
        Raises:
            KeyError: listing every missing and unexpected key (strict mode).
            ValueError: listing every key whose shape differs, with both shapes.
        """
        own = dict(self.named_parameters())
        missing = [k for k in own if k not in state_dict]
        unexpected = [k for k in state_dict if k not in own]
        wrong_shape = [
            f"{k}: checkpoint {tuple(state_dict[k].shape)}, model {own[k].shape}"
            for k in own if k in state_dict and tuple(state_dict[k].shape) != own[k].shape
        ]
        if wrong_shape:
            raise ValueError(f"load_state_dict: mis-shaped parameters: {'; '.join(wrong_shape)}")
        if strict and (missing or unexpected):
            raise KeyError(
                f"load_state_dict: missing keys {missing or 'none'}; unexpected keys {unexpected or 'none'}"
            )
        for name, p in own.items():
            if name in state_dict:
                value = state_dict[name]
                host = value.numpy() if isinstance(value, Tensor) else backend_of(value).to_numpy(value)
                p.data = tensor(host, dtype=p.dtype, device=p.device).data  # a copy: never shared
        return self

    # ---- printing -------------------------------------------------------------------------
    def extra_repr(self):
        return ""

    def __repr__(self):
        """``Name(extra)`` for a leaf; otherwise the extra line and one line per child, indented."""
        children = [f"({name}): " + repr(child).replace("\n", "\n  ") for name, child in self._modules.items()]
        if not children:
            return f"{type(self).__name__}({self.extra_repr()})"
        lines = ([self.extra_repr()] if self.extra_repr() else []) + children
        return f"{type(self).__name__}(\n  " + "\n  ".join(lines) + "\n)"


class ModuleList(Module):
    """A list of modules whose parameters are registered (a plain list would hide them)."""

    def __init__(self, modules=()):
        super().__init__()
        for m in modules:
            self.append(m)

    def append(self, module):
        setattr(self, str(len(self._modules)), module)
        return self

    def __iter__(self):
        return iter(self._modules.values())

    def __len__(self):
        return len(self._modules)

    def __getitem__(self, i):
        return list(self._modules.values())[i]


class Sequential(ModuleList):
    """Modules applied one after another: ``Sequential(a, b)(x) == b(a(x))``."""

    def __init__(self, *modules):
        super().__init__(modules)

    def forward(self, x):
        for m in self:
            x = m(x)
        return x


# ==== 2. layers ===============================================================================
def _normal(shape, std, device, dtype):
    return randn(*shape, device=device, dtype=dtype) * std


def _check_positive_int(name, value):
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise ValueError(f"{name} must be a positive int, got {value!r}")


def _check_tensor(name, value):
    """The check at a module's entry: ``value`` must be a Tensor (not a list, an array or None)."""
    if not isinstance(value, Tensor):
        raise TypeError(f"{name}: expected a Tensor, got {type(value).__name__}")


def _norm_arguments(normalized_shape, eps):
    """``normalized_shape`` as a tuple of positive ints, after checking it and ``eps``."""
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    for size in shape:
        _check_positive_int("normalized_shape", size)
    if not isinstance(eps, numbers.Real) or isinstance(eps, bool) or not 0.0 <= eps < math.inf:
        raise ValueError(f"eps must be a finite number >= 0, got {eps!r}")
    return shape


class Linear(Module):
    """``y = x Wᵀ + b`` with ``W (out_features, in_features)``, as ``torch.nn.Linear``.

    Shapes: ``(..., in_features) -> (..., out_features)``. Initialization is PyTorch's:
    ``W, b ~ U(-1/sqrt(in), 1/sqrt(in))`` (the Transformer models re-initialize, see
    :func:`init_gpt2`).
    """

    def __init__(self, in_features, out_features, bias=True, device=None, dtype="float32"):
        super().__init__()
        _check_positive_int("in_features", in_features)
        _check_positive_int("out_features", out_features)
        self.in_features, self.out_features = in_features, out_features
        bound = 1.0 / math.sqrt(in_features)
        self.weight = Parameter(_uniform((out_features, in_features), bound, device, dtype))
        self.bias = Parameter(_uniform((out_features,), bound, device, dtype)) if bias else None

    def forward(self, x):
        _check_tensor("Linear", x)
        if x.ndim <= 2:
            return F.linear(x, self.weight, self.bias)
        # (batch, T, in) as one (batch T, in) matrix: one large matrix product is faster
        # than a batch of small ones (the result is the same)
        lead = x.shape[:-1]
        y = F.linear(x.reshape(-1, self.in_features), self.weight, self.bias)
        return y.reshape(*lead, self.out_features)

    def extra_repr(self):
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


def _uniform(shape, bound, device, dtype):
    from .tensor import rand

    return (rand(*shape, device=device, dtype=dtype) * 2.0 - 1.0) * bound


class Embedding(Module):
    """A lookup table: ``weight[idx]``, as ``torch.nn.Embedding``.

    Shapes: ``idx (...)`` int64 -> ``(..., embedding_dim)``. The backward scatter-adds
    into the rows that were looked up, so a token id used several times receives the sum
    of its gradients. Initialization: ``N(0, 1)`` as PyTorch.
    """

    def __init__(self, num_embeddings, embedding_dim, device=None, dtype="float32"):
        super().__init__()
        _check_positive_int("num_embeddings", num_embeddings)
        _check_positive_int("embedding_dim", embedding_dim)
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.weight = Parameter(randn(num_embeddings, embedding_dim, device=device, dtype=dtype))

    def forward(self, idx):
        return F.embedding(idx, self.weight)

    def extra_repr(self):
        return f"{self.num_embeddings}, {self.embedding_dim}"


class Dropout(Module):
    """Zero each element with probability ``p`` and scale the rest by ``1/(1-p)`` while
    training; the identity in eval mode (Srivastava et al., JMLR 2014; inverted dropout)."""

    def __init__(self, p=0.5):
        super().__init__()
        if not 0.0 <= p < 1.0:
            raise ValueError(f"dropout probability must be in [0, 1), got {p!r}")
        self.p = p

    def forward(self, x):
        if not self.training or self.p == 0.0:
            return x
        return F.dropout(x, p=self.p, training=True)

    def extra_repr(self):
        return f"p={self.p}"


class GELU(Module):
    """``x Φ(x)`` (Hendrycks & Gimpel, arXiv:1606.08415), exact (``approximate="none"``)
    or with the tanh approximation (``"tanh"``), as ``torch.nn.GELU``."""

    def __init__(self, approximate="none"):
        super().__init__()
        if approximate not in ("none", "tanh"):
            raise ValueError(f"approximate must be 'none' or 'tanh', got {approximate!r}")
        self.approximate = approximate

    def forward(self, x):
        return F.gelu(x, approximate=self.approximate)

    def extra_repr(self):
        return f"approximate={self.approximate!r}"


class LayerNorm(Module):
    """Normalize the last dimension to zero mean and unit variance, then scale and shift
    (Ba et al., arXiv:1607.06450, eq. 4), as ``torch.nn.LayerNorm(normalized_shape)``.
    ``weight`` starts at ones, ``bias`` at zeros."""

    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, device=None, dtype="float32"):
        super().__init__()
        self.normalized_shape = _norm_arguments(normalized_shape, eps)
        self.eps = eps
        if elementwise_affine:
            self.weight = Parameter(ones(self.normalized_shape, device=device, dtype=dtype))
            self.bias = Parameter(zeros(self.normalized_shape, device=device, dtype=dtype))
        else:
            self.weight = self.bias = None

    def forward(self, x):
        _check_tensor("LayerNorm", x)
        return F.layer_norm(x, self.normalized_shape, self.weight, self.bias, eps=self.eps)

    def extra_repr(self):
        return f"{self.normalized_shape}, eps={self.eps}"


class RMSNorm(Module):
    """Scale the last dimension by the inverse of its root mean square, then by a learned
    gain (Zhang & Sennrich, arXiv:1910.07467, eq. 4), as ``torch.nn.RMSNorm``."""

    def __init__(self, normalized_shape, eps=1e-6, device=None, dtype="float32"):
        super().__init__()
        self.normalized_shape = _norm_arguments(normalized_shape, eps)
        self.eps = eps
        self.weight = Parameter(ones(self.normalized_shape, device=device, dtype=dtype))

    def forward(self, x):
        _check_tensor("RMSNorm", x)
        return F.rms_norm(x, self.normalized_shape, self.weight, eps=self.eps)

    def extra_repr(self):
        return f"{self.normalized_shape}, eps={self.eps}"


def _make_norm(norm, d_model):
    if norm == "layernorm":
        return LayerNorm(d_model)
    if norm == "rmsnorm":
        return RMSNorm(d_model)
    raise ValueError(f"norm must be 'layernorm' or 'rmsnorm', got {norm!r}")


# ==== 3. multi-head attention =================================================================
class KVCache:
    """The keys and values of every token seen so far, one slot per attention layer, so
    that generating token ``t+1`` attends to cached ``K, V`` instead of recomputing the
    whole prefix (the "incremental decoding" of Transformer inference).

    ``layers[i]`` is ``None`` or a pair ``(K, V)`` of shape ``(batch, kv_heads, length, d_k)``.
    """

    def __init__(self, num_layers):
        self.layers = [None] * num_layers

    @property
    def length(self):
        """How many positions are cached (0 when empty)."""
        return 0 if self.layers[0] is None else self.layers[0][0].shape[2]

    def append(self, layer, k, v):
        """Add this step's ``k, v`` (``(batch, kv_heads, new, d_k)``) to layer ``layer``'s
        cache and return the full keys and values."""
        if self.layers[layer] is not None:
            old_k, old_v = self.layers[layer]
            k, v = ops.concat([old_k, k], dim=2), ops.concat([old_v, v], dim=2)
        self.layers[layer] = (k, v)
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

    def __init__(self, d_model, num_heads, dropout=0.1, bias=False, num_kv_heads=None,
                 fused_qkv=False, attn_impl="naive"):
        super().__init__()
        _check_positive_int("d_model", d_model)
        _check_positive_int("num_heads", num_heads)
        if d_model % num_heads != 0:
            raise ValueError(f"d_model ({d_model}) must be divisible by num_heads ({num_heads})")
        num_kv_heads = num_heads if num_kv_heads is None else num_kv_heads
        _check_positive_int("num_kv_heads", num_kv_heads)
        if num_heads % num_kv_heads != 0:
            raise ValueError(f"num_heads ({num_heads}) must be a multiple of num_kv_heads ({num_kv_heads})")
        if attn_impl not in ("naive", "flash"):
            raise ValueError(f"attn_impl must be 'naive' or 'flash', got {attn_impl!r}")
        self.d_model, self.num_heads, self.num_kv_heads = d_model, num_heads, num_kv_heads
        self.d_k = d_model // num_heads
        self.fused_qkv, self.attn_impl = fused_qkv, attn_impl
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
            return tuple(ops.split(self.W_qkv(query), widths, dim=-1))
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

    def forward(self, query, key, value, mask=None, is_causal=False, need_weights=True,
                cache=None, layer_index=0):
        """Attend from ``query`` to ``key``/``value``.

        Args:
            query: ``(batch, T_q, d_model)``; key, value: ``(batch, T_k, d_model)`` (the
                same tensor for self-attention, an encoder output for cross-attention).
            mask: bool, broadcastable to ``(batch, heads, T_q, T_k)``; True where a query
                may attend to a key (as ``torch.nn.functional.scaled_dot_product_attention``).
            is_causal: query ``i`` sees keys ``j <= i`` only (with a cache: ``j <= offset + i``).
            need_weights: also return the attention weights. They are formed by the naive
                path whatever ``attn_impl`` is (the flash kernel never forms them), so
                pass False for speed when they are not needed, as the blocks do.
            cache: a :class:`KVCache`; this call's keys and values are appended to slot
                ``layer_index`` and the query attends to all cached positions.
        Returns:
            ``(output (batch, T_q, d_model), weights (batch, heads, T_q, T_k) or None)``.
        Raises:
            TypeError: if an input is not a Tensor.
            ValueError: if the inputs are not 3-D with last dimension ``d_model``.
        """
        for name, x in (("query", query), ("key", key), ("value", value)):
            _check_tensor(f"MultiHeadAttention {name}", x)
            if x.ndim != 3 or x.shape[-1] != self.d_model:
                raise ValueError(f"{name} must have shape (batch, seq_len, {self.d_model}), got {x.shape}")
        batch, length, _ = query.shape
        q, k, v = self._project(query, key, value)
        q = self._split_heads(q, self.num_heads)                        # (B, h, T_q, d_k)
        k, v = self._split_heads(k, self.num_kv_heads), self._split_heads(v, self.num_kv_heads)
        alignment = "top_left"
        if cache is not None:
            k, v = cache.append(layer_index, k, v)                     # (B, h_kv, offset + T_q, d_k)
            alignment = "bottom_right"  # the queries are the last T_q of the cached positions
        dropout_p = self.dropout.p if self.training else 0.0

        weights = None
        if need_weights:  # as in PyTorch, asking for the weights takes the path that forms them
            weights = F.attention_weights(q, k, attn_mask=mask, is_causal=is_causal, enable_gqa=True,
                                          causal_alignment=alignment)  # (B, h, T_q, T_k)
            out = self.dropout(weights) @ self._repeat_kv(v)            # (B, h, T_q, d_k)
        elif self.attn_impl == "naive":
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p,
                                                 is_causal=is_causal, enable_gqa=True,
                                                 causal_alignment=alignment)
        else:
            out = F.flash_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p, is_causal=is_causal,
                                    enable_gqa=True, causal_alignment=alignment)
        # BEGIN SOLUTION 4.3
        out = out.transpose(1, 2).reshape(batch, length, self.d_model)  # concat the heads
        # END SOLUTION
        return self.W_o(out), weights

    def extra_repr(self):
        kv = f", num_kv_heads={self.num_kv_heads}" if self.num_kv_heads != self.num_heads else ""
        return f"d_model={self.d_model}, num_heads={self.num_heads}{kv}, attn_impl={self.attn_impl!r}"


# ==== 4. Transformer blocks and models ==========================================================
class FeedForward(Sequential):
    """The position-wise feed-forward network (arXiv:1706.03762, §3.3): ``Linear(d_model, d_ff)``,
    GELU, ``Linear(d_ff, d_model)``."""

    def __init__(self, d_model, d_ff, approximate="none"):
        super().__init__(Linear(d_model, d_ff), GELU(approximate), Linear(d_ff, d_model))


class TransformerEncoderBlock(Module):
    """Self-attention and a feed-forward network, each in a residual branch with a norm.

    Pre-LN (``norm_first=True``, the default; Xiong et al., arXiv:2002.04745)::

        x = x + dropout(attn(norm1(x)));   x = x + dropout(ffn(norm2(x)))

    Post-LN (``norm_first=False``, the original Transformer)::

        x = norm1(x + dropout(attn(x)));   x = norm2(x + dropout(ffn(x)))

    With ``is_causal=True`` this is the block of a decoder-only model (:class:`GPT`).
    Shapes: ``(batch, seq_len, d_model) -> (batch, seq_len, d_model)``.
    Extra keyword arguments (``num_kv_heads``, ``fused_qkv``, ``attn_impl``, ``bias``) go
    to :class:`MultiHeadAttention`.
    """

    def __init__(self, d_model, num_heads, d_ff, dropout=0.1, norm_first=True, norm="layernorm",
                 activation="none", **attention_options):
        super().__init__()
        self.norm_first = norm_first
        self.attn = MultiHeadAttention(d_model, num_heads, dropout=dropout, **attention_options)
        self.norm1, self.norm2 = _make_norm(norm, d_model), _make_norm(norm, d_model)
        self.ffn = FeedForward(d_model, d_ff, approximate=activation)
        self.dropout1, self.dropout2 = Dropout(dropout), Dropout(dropout)

    def forward(self, x, mask=None, is_causal=False, need_weights=False, cache=None, layer_index=0):
        """Returns ``x`` or, with ``need_weights=True``, ``(x, attention weights)``."""
        h = self.norm1(x) if self.norm_first else x
        a, weights = self.attn(h, h, h, mask=mask, is_causal=is_causal, need_weights=need_weights,
                               cache=cache, layer_index=layer_index)
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

    def __init__(self, d_model, num_heads, d_ff, dropout=0.1, norm_first=True, norm="layernorm",
                 activation="none", **attention_options):
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

    def forward(self, x, memory, memory_mask=None, is_causal=True):
        """``memory_mask``: bool, broadcastable to ``(batch, heads, T, S)``, True where a
        target position may attend to a source position (e.g. not padding)."""
        x = self._residual(x, self.norm1, self.dropout1,
                           lambda h: self.self_attn(h, h, h, is_causal=is_causal, need_weights=False)[0])
        x = self._residual(x, self.norm2, self.dropout2,
                           lambda h: self.cross_attn(h, memory, memory, mask=memory_mask, need_weights=False)[0])
        return self._residual(x, self.norm3, self.dropout3, self.ffn)


def init_gpt2(model, num_layers):
    """GPT-2's initialization (Radford et al. 2019; as in nanoGPT): every Linear and
    Embedding weight ``~ N(0, 0.02)``, biases 0, norms 1 and 0, and the projections that
    end a residual branch (``W_o`` and the second feed-forward Linear) ``~ N(0, 0.02 /
    sqrt(2 num_layers))``, so the residual stream's variance does not grow with depth."""
    for name, p in model.named_parameters():
        leaf = name.rsplit(".", 1)[-1]
        if leaf == "bias":
            p.data = zeros(p.shape, device=p.device, dtype=p.dtype).data
        elif p.ndim >= 2:
            std = 0.02 / math.sqrt(2 * num_layers) if (".W_o." in name or name.endswith("ffn.2.weight")) else 0.02
            p.data = _normal(p.shape, std, p.device, p.dtype).data


class TransformerEncoder(Module):
    """Token embedding + learned positional embedding, ``num_layers`` Pre-LN encoder blocks
    and a final norm. Initialized as :func:`init_gpt2`.

    Shapes: ``idx (batch, seq_len)`` int64 -> ``(batch, seq_len, d_model)``.
    Raises:
        TypeError: if ``idx`` is not a Tensor.
        ValueError: if ``idx`` is not 2-D integer ids, ``seq_len > max_seq_len``, or a token id is outside ``[0, vocab_size)``.
    """

    def __init__(self, vocab_size, d_model, num_heads, d_ff, num_layers, max_seq_len, dropout=0.1, **block_options):
        super().__init__()
        _check_positive_int("num_layers", num_layers)
        self.max_seq_len = max_seq_len
        self.token_embedding = Embedding(vocab_size, d_model)
        self.position_embedding = Embedding(max_seq_len, d_model)
        self.dropout = Dropout(dropout)
        self.blocks = ModuleList(TransformerEncoderBlock(d_model, num_heads, d_ff, dropout, **block_options)
                                 for _ in range(num_layers))
        self.norm = _make_norm(block_options.get("norm", "layernorm"), d_model)
        init_gpt2(self, num_layers)

    def embed(self, idx, offset=0):
        """Token plus position embeddings for positions ``offset ... offset + seq_len - 1``."""
        _check_tensor(type(self).__name__, idx)
        if idx.ndim != 2 or idx.dtype not in ("int64", "int32"):
            raise ValueError(f"expected token ids of shape (batch, seq_len) and an integer dtype, got {idx.shape} {idx.dtype}")
        length = idx.shape[1]
        if offset + length > self.max_seq_len:
            raise ValueError(f"sequence of {offset + length} positions exceeds max_seq_len={self.max_seq_len}")
        positions = arange(offset, offset + length, device=idx.device)
        return self.dropout(self.token_embedding(idx) + self.position_embedding(positions))

    def forward(self, idx, mask=None):
        """``mask``: bool, broadcastable to ``(batch, heads, seq_len, seq_len)``, True = may attend."""
        x = self.embed(idx)
        for block in self.blocks:
            x = block(x, mask=mask)
        return self.norm(x)


class GPT(TransformerEncoder):
    """A decoder-only language model (GPT-2's architecture, Radford et al. 2019): the
    :class:`TransformerEncoder` stack with causal self-attention, then a linear layer to
    the vocabulary whose weight is the token embedding when ``tie_weights`` (Press &
    Wolf, arXiv:1608.05859). The feed-forward GELU uses the tanh approximation, as GPT-2.

    Shapes: ``idx (batch, seq_len)`` int64 -> logits ``(batch, seq_len, vocab_size)`` float32.

    ``config`` holds the constructor's arguments, so ``GPT(**model.config)`` rebuilds it
    (checkpoints store it).
    """

    def __init__(self, vocab_size, d_model=128, num_heads=4, d_ff=None, num_layers=4, max_seq_len=128,
                 dropout=0.0, tie_weights=True, norm="layernorm", num_kv_heads=None, fused_qkv=True,
                 attn_impl="naive"):
        d_ff = 4 * d_model if d_ff is None else d_ff
        super().__init__(vocab_size, d_model, num_heads, d_ff, num_layers, max_seq_len, dropout,
                         norm=norm, activation="tanh", num_kv_heads=num_kv_heads, fused_qkv=fused_qkv,
                         attn_impl=attn_impl)
        self.config = dict(vocab_size=vocab_size, d_model=d_model, num_heads=num_heads, d_ff=d_ff,
                           num_layers=num_layers, max_seq_len=max_seq_len, dropout=dropout,
                           tie_weights=tie_weights, norm=norm, num_kv_heads=num_kv_heads,
                           fused_qkv=fused_qkv, attn_impl=attn_impl)
        self.lm_head = Linear(d_model, vocab_size, bias=False)
        if tie_weights:
            self.lm_head.weight = self.token_embedding.weight
        else:
            self.lm_head.weight.data = _normal((vocab_size, d_model), 0.02, None, "float32").data

    def forward(self, idx, cache=None, need_weights=False):
        """Next-token logits for every position.

        Args:
            idx: ``(batch, seq_len)`` token ids.
            cache: a :class:`KVCache` from :meth:`new_cache`; ``idx`` then continues the
                cached sequence (positions start at ``cache.length``).
            need_weights: also return each layer's attention weights ``(batch, heads, T, T_k)``.
        Returns:
            logits ``(batch, seq_len, vocab_size)``, or ``(logits, [weights per layer])``.
        """
        x = self.embed(idx, offset=0 if cache is None else cache.length)
        all_weights = []
        for i, block in enumerate(self.blocks):
            x = block(x, is_causal=True, need_weights=need_weights, cache=cache, layer_index=i)
            if need_weights:
                x, weights = x
                all_weights.append(weights)
        logits = self.lm_head(self.norm(x))
        return (logits, all_weights) if need_weights else logits

    def new_cache(self):
        """An empty :class:`KVCache` for incremental generation."""
        return KVCache(len(self.blocks))
