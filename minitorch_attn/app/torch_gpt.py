"""The GPT of :mod:`minitorch_attn.nn` written in PyTorch, to continue in PyTorch what was
trained here.

``minitorch-attn export --checkpoint CKPT --out model.safetensors`` writes a trained GPT's
weights under the parameter names of :class:`GPT` below (the same names as
``minitorch_attn.nn.GPT``: ``token_embedding.weight``, ``blocks.0.attn.W_qkv.weight``, ...)
and ``model.json`` beside them (the constructor's arguments and the vocabulary). Then::

    from minitorch_attn.app.torch_gpt import GPT
    model, vocab = GPT.from_export("model.safetensors")
    print(vocab.decode(model.generate(vocab.encode("The "), 200)))   # or train it: model.parameters()

The layers are PyTorch's own (``nn.Embedding``, ``nn.Linear``, ``nn.LayerNorm``,
``nn.RMSNorm``, ``F.scaled_dot_product_attention``), composed as ours: Pre-LN blocks,
fused or separate Q/K/V projections without bias, grouped-query attention, a tanh GELU
or a SwiGLU feed-forward (``mlp``), tied embeddings, and positions learned or rotary (split-half pairs, sliding-window
attention over ``max_seq_len`` keys). The tests check that its logits equal ours.

Needs PyTorch 2.4 or newer (``nn.RMSNorm``; ``pip install torch``, or the ``ref`` extra) and,
to read the export, the ``safetensors`` package (the ``export`` extra).
"""

from __future__ import annotations

import json
import math
import os

try:
    import torch
    from torch import nn
    from torch.nn import functional as F
except ImportError:
    raise ImportError(
        'minitorch_attn.app.torch_gpt is PyTorch code: pip install torch (or pip install -e ".[ref]")'
    ) from None

from .train import CharVocab


def rotary(x, positions, base):
    """RoPE with split-half pairs ``(x_i, x_{i+d/2})``, angles in float64 (as
    ``minitorch_attn.functional.rotary_embedding``). ``x (B, H, T, d)``, ``positions (T,)``."""
    half = x.shape[-1] // 2
    theta = torch.exp(torch.arange(half, dtype=torch.float64, device=x.device) * (-2.0 * math.log(base) / x.shape[-1]))
    angles = positions.to(torch.float64)[:, None] * theta  # (T, d/2)
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
    a, b = x[..., :half], x[..., half:]
    return torch.cat([a * cos - b * sin, a * sin + b * cos], dim=-1)


class Attention(nn.Module):
    def __init__(self, d_model, num_heads, num_kv_heads, fused_qkv, dropout, rope_base):
        super().__init__()
        self.num_heads, self.num_kv_heads = num_heads, num_kv_heads
        self.d_k = d_model // num_heads
        self.fused_qkv, self.dropout, self.rope_base = fused_qkv, dropout, rope_base
        kv_width = num_kv_heads * self.d_k
        if fused_qkv:
            self.W_qkv = nn.Linear(d_model, d_model + 2 * kv_width, bias=False)
        else:
            self.W_q = nn.Linear(d_model, d_model, bias=False)
            self.W_k = nn.Linear(d_model, kv_width, bias=False)
            self.W_v = nn.Linear(d_model, kv_width, bias=False)
        self.W_o = nn.Linear(d_model, d_model, bias=False)

    def forward(self, x, attn_mask):
        B, T, d_model = x.shape
        kv_width = self.num_kv_heads * self.d_k
        if self.fused_qkv:
            q, k, v = self.W_qkv(x).split([d_model, kv_width, kv_width], dim=-1)
        else:
            q, k, v = self.W_q(x), self.W_k(x), self.W_v(x)
        q = q.view(B, T, self.num_heads, self.d_k).transpose(1, 2)  # (B, h, T, d_k)
        k = k.view(B, T, self.num_kv_heads, self.d_k).transpose(1, 2)  # (B, h_kv, T, d_k)
        v = v.view(B, T, self.num_kv_heads, self.d_k).transpose(1, 2)
        if self.rope_base is not None:
            positions = torch.arange(T, device=x.device)
            q, k = rotary(q, positions, self.rope_base), rotary(k, positions, self.rope_base)
        group = self.num_heads // self.num_kv_heads  # grouped-query attention
        k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
        out = F.scaled_dot_product_attention(
            q, k, v, attn_mask=attn_mask, is_causal=attn_mask is None, dropout_p=self.dropout if self.training else 0.0
        )
        return self.W_o(out.transpose(1, 2).reshape(B, T, d_model))


class SwiGLU(nn.Module):
    """LLaMA's feed-forward, ``w2(silu(w1 x) * w3 x)``, no biases."""

    def __init__(self, d_model, d_ff):
        super().__init__()
        self.w1 = nn.Linear(d_model, d_ff, bias=False)
        self.w3 = nn.Linear(d_model, d_ff, bias=False)
        self.w2 = nn.Linear(d_ff, d_model, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class Block(nn.Module):
    """Pre-LN: ``x + attn(norm1(x))``, then ``x + ffn(norm2(x))``."""

    def __init__(self, d_model, num_heads, d_ff, dropout, make_norm, mlp="gelu", **attention):
        super().__init__()
        self.attn = Attention(d_model, num_heads, dropout=dropout, **attention)
        self.norm1, self.norm2 = make_norm(), make_norm()
        if mlp == "swiglu":
            self.ffn = SwiGLU(d_model, d_ff)
        else:
            self.ffn = nn.Sequential(nn.Linear(d_model, d_ff), nn.GELU(approximate="tanh"), nn.Linear(d_ff, d_model))
        self.dropout1, self.dropout2 = nn.Dropout(dropout), nn.Dropout(dropout)

    def forward(self, x, attn_mask):
        x = x + self.dropout1(self.attn(self.norm1(x), attn_mask))
        return x + self.dropout2(self.ffn(self.norm2(x)))


class GPT(nn.Module):
    """``minitorch_attn.nn.GPT`` in PyTorch, with the same constructor arguments (``attn_impl``
    aside) and parameter names. ``idx (B, T)`` int64 -> logits ``(B, T, vocab_size)``.

    ``norm_eps``: the epsilon of every norm (the export writes the one of the trained model).
    """

    def __init__(
        self,
        vocab_size,
        d_model=128,
        num_heads=4,
        d_ff=None,
        num_layers=4,
        max_seq_len=128,
        dropout=0.0,
        tie_weights=True,
        norm="layernorm",
        num_kv_heads=None,
        fused_qkv=True,
        pos_encoding="learned",
        rope_base=10000.0,
        norm_eps=1e-5,
        mlp="gelu",
    ):
        super().__init__()
        if d_ff is None:  # as minitorch_attn.nn.swiglu_width: 8/3 d_model up to a multiple of 8
            d_ff = -(-(8 * d_model) // 24) * 8 if mlp == "swiglu" else 4 * d_model
        num_kv_heads = num_heads if num_kv_heads is None else num_kv_heads
        self.max_seq_len, self.pos_encoding = max_seq_len, pos_encoding
        norm_class = {"layernorm": nn.LayerNorm, "rmsnorm": nn.RMSNorm}[norm]
        make_norm = lambda: norm_class(d_model, eps=norm_eps)  # noqa: E731
        self.token_embedding = nn.Embedding(vocab_size, d_model)
        if pos_encoding == "learned":
            self.position_embedding = nn.Embedding(max_seq_len, d_model)
        self.dropout = nn.Dropout(dropout)
        rope_base = rope_base if pos_encoding == "rope" else None
        self.blocks = nn.ModuleList(
            Block(
                d_model,
                num_heads,
                d_ff,
                dropout,
                make_norm,
                mlp,
                num_kv_heads=num_kv_heads,
                fused_qkv=fused_qkv,
                rope_base=rope_base,
            )
            for _ in range(num_layers)
        )
        self.norm = make_norm()
        self.lm_head = nn.Linear(d_model, vocab_size, bias=False)
        for name, p in self.named_parameters():  # GPT-2's initialization, as minitorch_attn.nn.init_gpt2
            if name.endswith("bias"):
                nn.init.zeros_(p)
            elif p.dim() >= 2:
                residual = ".W_o." in name or name.endswith(("ffn.2.weight", "ffn.w2.weight"))
                nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * num_layers) if residual else 0.02)
        if tie_weights:
            self.lm_head.weight = self.token_embedding.weight

    def forward(self, idx):
        T = idx.shape[1]
        x = self.token_embedding(idx)
        attn_mask = None  # causal (is_causal=True)
        if self.pos_encoding == "learned":
            if T > self.max_seq_len:
                raise ValueError(f"sequence of {T} positions exceeds max_seq_len={self.max_seq_len}")
            x = x + self.position_embedding(torch.arange(T, device=idx.device))
        elif T > self.max_seq_len:  # rotary: a sliding window of max_seq_len keys
            i, j = torch.arange(T, device=idx.device)[:, None], torch.arange(T, device=idx.device)[None, :]
            attn_mask = (j <= i) & (j > i - self.max_seq_len)
        x = self.dropout(x)
        for block in self.blocks:
            x = block(x, attn_mask)
        return self.lm_head(self.norm(x))

    @torch.no_grad()
    def generate(self, ids, max_new_tokens, temperature=1.0, top_k=None):
        """Continue the list of ids by ``max_new_tokens`` sampled ones (temperature 0: greedy),
        each step a forward over the context (the last ``max_seq_len`` ids with learned
        positions, all of them with rotary ones); returns the new ids."""
        ids, new = list(ids), []
        for _ in range(max_new_tokens):
            context = ids if self.pos_encoding == "rope" else ids[-self.max_seq_len :]
            logits = self(torch.tensor([context], device=self.lm_head.weight.device))[0, -1].double()
            if temperature <= 0:
                next_id = int(logits.argmax())
            else:
                logits = logits / temperature
                if top_k is not None and top_k < len(logits):
                    logits[logits < torch.topk(logits, top_k).values[-1]] = -math.inf
                next_id = int(torch.multinomial(torch.softmax(logits, dim=-1), 1))
            ids.append(next_id)
            new.append(next_id)
        return new

    @classmethod
    def from_export(cls, path, device="cpu"):
        """``(model, vocab)`` from the files ``minitorch-attn export`` wrote: the weights at
        ``path`` (``.safetensors``) and the ``.json`` file of the same name beside them.
        ``vocab`` is the training job's :class:`~minitorch_attn.app.train.CharVocab`
        (``encode(text) -> ids``, ``decode(ids) -> text``)."""
        try:
            from safetensors.torch import load_file
        except ImportError:
            raise ImportError('reading an export needs safetensors: pip install -e ".[export]"') from None
        with open(os.path.splitext(path)[0] + ".json", encoding="utf-8") as f:
            exported = json.load(f)
        model = cls(**exported["config"])
        model.load_state_dict(load_file(path, device=device))
        return model.to(device).eval(), CharVocab(exported["vocab"])
