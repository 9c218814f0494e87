"""Checkpoints of Hugging Face ``transformers`` in our modules: :meth:`GPT.from_pretrained`.

A folder in the layout ``save_pretrained`` writes (``config.json``, and ``model.safetensors``
or a ``model.safetensors.index.json`` naming its shards) of a ``GPT2LMHeadModel`` or a
``LlamaForCausalLM`` becomes a :class:`~minitorch_attn.nn.GPT` whose logits are theirs (to
float32 rounding). Nothing runs but our own layers: the point is to step through a model that
exists with code one can read.

How the two architectures map onto ours (one table per architecture, :func:`gpt2_names` and
:func:`llama_names`, read in both directions: importing here, exporting in
:mod:`minitorch_attn.app.hf_export`):

* **GPT-2** (Radford et al. 2019) is our default block: LayerNorm before attention and MLP,
  GELU with the tanh approximation (``"gelu_new"``), learned positions, tied embeddings.
  Its attention projections have biases (``GPT(bias=True)``), and it stores every linear
  map as a ``Conv1D``, ``y = x W + b`` with ``W (in, out)``: ours is ``y = x Wᵀ + b`` with
  ``W (out, in)``, so each of its matrices is transposed on the way in. Its ``c_attn`` is
  our fused ``W_qkv`` (queries, keys, values side by side, in that order).
* **Llama** (Touvron et al. 2023, arXiv:2302.13971) is ``GPT(**LLAMA)``: RMSNorm with
  ``rms_norm_eps`` (``GPT(norm_eps=...)``), SwiGLU (``gate_proj, up_proj, down_proj`` are
  our ``w1, w3, w2``), rotary positions with base ``rope_theta``, grouped-query attention
  with ``num_key_value_heads``, usually an output layer of its own (``tie_weights=False``).
  Rotary pairs: transformers rotates ``q * cos + rotate_half(q) * sin`` with
  ``rotate_half([a, b]) = [-b, a]``, which pairs coordinate ``i`` with ``i + d/2`` (the
  two halves of a head), as our :func:`~minitorch_attn.functional.rotary_embedding` does by
  default (``interleaved=False``), with the same angles ``θ_i = base^(-2i/d)``. So the
  ``q_proj``/``k_proj`` weights load as they are: the permutation of rows that converts
  Meta's original (interleaved-pair) checkpoints was done by transformers' conversion
  script before the folder was written. Grouped-query heads are shared the same way:
  key/value head ``j`` serves query heads ``j g ... j g + g - 1`` (``repeat_interleave``).
  One difference remains: our rotary model attends through a sliding window of
  ``max_seq_len`` keys (set to ``max_position_embeddings``), where transformers attends
  to every key; the logits agree for sequences up to that length.

Loading never unpickles: tensors are read with the ``safetensors`` library (float16 and
float32 as NumPy arrays, widened to float32; bfloat16, which NumPy lacks, through PyTorch
when it is installed). A folder with only ``pytorch_model.bin`` is refused, with the
command that converts it. Features we do not have are refused by name (:func:`check_config`).
"""

from __future__ import annotations

import json
import math
import os

import numpy

from .layers import skip_init

SUPPORTED = ("GPT2LMHeadModel", "LlamaForCausalLM")

UNSUPPORTED = {
    "MistralForCausalLM": "sliding-window attention over a window shorter than the context",
    "MixtralForCausalLM": "a mixture of experts in every block",
    "Qwen2ForCausalLM": "biases on the query, key and value projections but not the output one",
    "GPTNeoXForCausalLM": "parallel attention and MLP branches and rotary positions on part of each head",
    "GemmaForCausalLM": "a (1 + weight) RMSNorm gain, scaled embeddings and GeGLU",
    "GPTJForCausalLM": "parallel branches and interleaved rotary pairs on part of each head",
    "OPTForCausalLM": "ReLU, a learned position offset of 2 and post-LN variants",
}
"""Architectures met often enough to say why they are refused."""

_BUFFERS = (".attn.bias", ".attn.masked_bias", ".rotary_emb.inv_freq")
"""Tensors that older checkpoints store but that are not weights (GPT-2's causal mask,
Llama's rotary frequencies): skipped."""

_CONVERT = (
    'python -c "from transformers import AutoModelForCausalLM as M; '
    "M.from_pretrained('{folder}').save_pretrained('{folder}-safetensors')\""
)


def read_config(folder):
    """``config.json`` of ``folder`` as a dict, with its one architecture checked.

    Raises:
        ValueError: if ``folder`` is not a folder, has no ``config.json``, the file is not a
            JSON object, or it names no architecture or one other than :data:`SUPPORTED`
            (with the reason for those in :data:`UNSUPPORTED`).
    """
    folder = os.fspath(folder)
    if not os.path.isdir(folder):
        raise ValueError(
            f"{folder!r} is not a folder: give a folder in the Hugging Face layout (config.json and model.safetensors)"
        )
    path = os.path.join(folder, "config.json")
    if not os.path.isfile(path):
        raise ValueError(f"{folder!r} has no config.json: not a Hugging Face model folder")
    try:
        with open(path, encoding="utf-8") as f:
            config = json.load(f)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f"{path!r} is not JSON: {error}") from None
    if not isinstance(config, dict):
        raise ValueError(f"{path!r} must hold a JSON object, got {type(config).__name__}")
    architectures = config.get("architectures") or []
    if not isinstance(architectures, list) or len(architectures) != 1:
        raise ValueError(f"{path!r} must name one architecture in 'architectures', got {architectures!r}")
    name = architectures[0]
    if name in UNSUPPORTED:
        raise ValueError(f"{name} is not supported ({UNSUPPORTED[name]}); supported: {', '.join(SUPPORTED)}")
    if name not in SUPPORTED:
        raise ValueError(f"architecture {name!r} is not supported; supported: {', '.join(SUPPORTED)}")
    return config


def check_config(config):
    """Raise a ValueError naming the first feature of ``config`` that our GPT lacks: sliding
    windows, experts, rope scaling, partial rotary, cross-attention, other activations, ..."""
    if config.get("sliding_window") is not None and config.get("use_sliding_window", True):
        raise ValueError(f"sliding-window attention (sliding_window={config['sliding_window']}) is not supported")
    for key in ("num_local_experts", "num_experts", "n_routed_experts"):
        if config.get(key):
            raise ValueError(f"a mixture of experts ({key}={config[key]}) is not supported")
    if config["architectures"][0] == "GPT2LMHeadModel":
        if config.get("activation_function", "gelu_new") not in ("gelu_new", "gelu_pytorch_tanh"):
            raise ValueError(
                f"GPT-2 with activation_function={config['activation_function']!r} is not supported "
                f"(only the tanh GELU: 'gelu_new')"
            )
        for key, allowed in (
            ("scale_attn_weights", True),
            ("scale_attn_by_inverse_layer_idx", False),
            ("add_cross_attention", False),
        ):
            if config.get(key, allowed) != allowed:
                raise ValueError(f"GPT-2 with {key}={config[key]!r} is not supported")
        return
    rope = config.get("rope_parameters") or {}
    scaling = config.get("rope_scaling") or {}
    rope_type = scaling.get("rope_type", scaling.get("type")) or rope.get("rope_type", "default")
    if rope_type != "default":
        raise ValueError(f"rope scaling ({rope_type!r}) is not supported: only plain rotary positions")
    if config.get("partial_rotary_factor", 1.0) != 1.0:
        raise ValueError(
            f"rotary positions on part of a head (partial_rotary_factor="
            f"{config['partial_rotary_factor']}) are not supported"
        )
    if config.get("hidden_act", "silu") != "silu":
        raise ValueError(f"Llama with hidden_act={config['hidden_act']!r} is not supported (only 'silu')")
    if config.get("mlp_bias"):
        raise ValueError("Llama with mlp_bias=true is not supported (our SwiGLU has no biases)")
    width, heads = config.get("hidden_size"), config.get("num_attention_heads")
    if (
        isinstance(width, int)
        and isinstance(heads, int)
        and heads > 0
        and config.get("head_dim") not in (None, width // heads)
    ):
        raise ValueError(
            f"head_dim={config['head_dim']} other than hidden_size / num_attention_heads "
            f"= {width // heads} is not supported"
        )


def gpt_options(config):
    """The arguments of :class:`~minitorch_attn.nn.GPT` that build the model of ``config``
    (after :func:`check_config`). Raises a ValueError naming a missing or bad entry."""
    check_config(config)
    try:
        if config["architectures"][0] == "GPT2LMHeadModel":
            d_model = config["n_embd"]
            return dict(
                vocab_size=config["vocab_size"],
                d_model=d_model,
                num_heads=config["n_head"],
                d_ff=config.get("n_inner") or 4 * d_model,
                num_layers=config["n_layer"],
                max_seq_len=config["n_positions"],
                tie_weights=config.get("tie_word_embeddings", True),
                norm="layernorm",
                norm_eps=float(config.get("layer_norm_epsilon", 1e-5)),
                pos_encoding="learned",
                mlp="gelu",
                bias=True,
                fused_qkv=True,
                dropout=0.0,
            )
        rope = config.get("rope_parameters") or {}
        return dict(
            vocab_size=config["vocab_size"],
            d_model=config["hidden_size"],
            num_heads=config["num_attention_heads"],
            num_kv_heads=config.get("num_key_value_heads") or config["num_attention_heads"],
            d_ff=config["intermediate_size"],
            num_layers=config["num_hidden_layers"],
            max_seq_len=config.get("max_position_embeddings", 2048),
            tie_weights=config.get("tie_word_embeddings", False),
            norm="rmsnorm",
            norm_eps=float(config.get("rms_norm_eps", 1e-6)),
            pos_encoding="rope",
            mlp="swiglu",
            rope_base=float(rope.get("rope_theta", config.get("rope_theta", 10000.0))),
            bias=bool(config.get("attention_bias", False)),
            fused_qkv=False,
            dropout=0.0,
        )
    except KeyError as error:
        raise ValueError(f"config.json has no {error.args[0]!r}, which a {config['architectures'][0]} needs") from None


def gpt2_names(options):
    """``[(their name, our name, transposed)]`` for a GPT-2 of ``options`` (``transposed``:
    a ``Conv1D`` weight, ``(in, out)`` there and ``(out, in)`` here)."""
    names = [
        ("transformer.wte.weight", "token_embedding.weight", False),
        ("transformer.wpe.weight", "position_embedding.weight", False),
    ]
    for i in range(options["num_layers"]):
        theirs, ours = f"transformer.h.{i}.", f"blocks.{i}."
        for hf, mine in (("ln_1", "norm1"), ("ln_2", "norm2")):
            names += [
                (f"{theirs}{hf}.weight", f"{ours}{mine}.weight", False),
                (f"{theirs}{hf}.bias", f"{ours}{mine}.bias", False),
            ]
        for hf, mine in (
            ("attn.c_attn", "attn.W_qkv"),
            ("attn.c_proj", "attn.W_o"),
            ("mlp.c_fc", "ffn.0"),
            ("mlp.c_proj", "ffn.2"),
        ):
            names += [
                (f"{theirs}{hf}.weight", f"{ours}{mine}.weight", True),
                (f"{theirs}{hf}.bias", f"{ours}{mine}.bias", False),
            ]
    names += [("transformer.ln_f.weight", "norm.weight", False), ("transformer.ln_f.bias", "norm.bias", False)]
    if not options["tie_weights"]:
        names.append(("lm_head.weight", "lm_head.weight", False))
    return names


def llama_names(options):
    """``[(their name, our name, transposed)]`` for a Llama of ``options`` (never transposed:
    transformers' ``nn.Linear`` stores ``(out, in)`` as ours)."""
    names = [("model.embed_tokens.weight", "token_embedding.weight", False)]
    layers = [
        ("input_layernorm", "norm1"),
        ("post_attention_layernorm", "norm2"),
        ("self_attn.q_proj", "attn.W_q"),
        ("self_attn.k_proj", "attn.W_k"),
        ("self_attn.v_proj", "attn.W_v"),
        ("self_attn.o_proj", "attn.W_o"),
        ("mlp.gate_proj", "ffn.w1"),
        ("mlp.up_proj", "ffn.w3"),
        ("mlp.down_proj", "ffn.w2"),
    ]
    for i in range(options["num_layers"]):
        for hf, mine in layers:
            names.append((f"model.layers.{i}.{hf}.weight", f"blocks.{i}.{mine}.weight", False))
            if options["bias"] and hf.startswith("self_attn"):
                names.append((f"model.layers.{i}.{hf}.bias", f"blocks.{i}.{mine}.bias", False))
    names.append(("model.norm.weight", "norm.weight", False))
    if not options["tie_weights"]:
        names.append(("lm_head.weight", "lm_head.weight", False))
    return names


def weight_names(options):
    """The table of :func:`gpt2_names` or :func:`llama_names` that fits ``options``."""
    return gpt2_names(options) if options["pos_encoding"] == "learned" else llama_names(options)


def _safe_open():
    """The safetensors library's ``safe_open`` (it reads without unpickling), or an ImportError
    that says how to install it."""
    try:
        from safetensors import safe_open
    except ImportError:
        raise ImportError('reading Hugging Face folders needs safetensors: pip install -e ".[hf]"') from None
    return safe_open


class _Weights:
    """The tensors of a folder's safetensors file(s), by name, read one at a time (so a
    model's weights are in memory once, not twice, while it loads)."""

    def __init__(self, folder):
        self.safe_open = _safe_open()
        self.files = _weight_files(folder)  # {name: file}
        self.names = set(self.files)

    def numbers(self):
        """How many numbers the tensors hold in all, read from the files' headers."""
        total = 0
        for path in set(self.files.values()):
            with self.safe_open(path, framework="numpy") as f:
                total += sum(math.prod(f.get_slice(name).get_shape()) for name in f.keys())
        return total

    def get(self, name):
        """Tensor ``name`` as a float32 NumPy array."""
        with self.safe_open(self.files[name], framework="numpy") as f:
            dtype = f.get_slice(name).get_dtype()
            if dtype == "BF16":
                return self._widen_bfloat16(name)
            array = f.get_tensor(name)
        if array.dtype.kind != "f":
            raise ValueError(f"{name} holds {array.dtype} numbers, not floating-point weights")
        return numpy.ascontiguousarray(array, dtype=numpy.float32)

    def _widen_bfloat16(self, name):
        try:
            import torch
        except ImportError:
            raise ValueError(
                f"{name} is bfloat16, which NumPy cannot hold: install PyTorch to widen it to "
                f"float32 while loading, or save the model in float32"
            ) from None
        with self.safe_open(self.files[name], framework="pt") as f:
            return f.get_tensor(name).to(torch.float32).numpy()


def _weight_files(folder):
    """``{tensor name: safetensors file}`` for ``folder``: one ``model.safetensors``, or the
    shards of ``model.safetensors.index.json``. Raises a ValueError for a folder with
    neither (saying how to convert a pickled ``.bin``), a missing shard, or an index that
    names tensors its shards lack."""
    single = os.path.join(folder, "model.safetensors")
    index = os.path.join(folder, "model.safetensors.index.json")
    if os.path.isfile(single):
        return {name: single for name in _names_in(single)}
    if not os.path.isfile(index):
        pickled = sorted(n for n in os.listdir(folder) if n.endswith((".bin", ".pt", ".pth", ".ckpt")))
        if pickled:
            raise ValueError(
                f"{folder!r} holds {', '.join(pickled)}, PyTorch pickles, which are never loaded here "
                f"(unpickling can run any code). Convert the folder once where you trust it: "
                + _CONVERT.format(folder=folder)
            )
        raise ValueError(f"{folder!r} has neither model.safetensors nor model.safetensors.index.json")
    try:
        with open(index, encoding="utf-8") as f:
            weight_map = json.load(f)["weight_map"]
    except (UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError):
        weight_map = None
    if not isinstance(weight_map, dict):
        raise ValueError(f"{index!r} has no 'weight_map' object")
    shards = set(weight_map.values())
    odd = [s for s in shards if not isinstance(s, str) or os.path.basename(s) != s or s in ("", ".", "..")]
    if odd:  # a shard is a file of the folder itself: no path, nothing outside it
        raise ValueError(f"{index!r} names shards that are not file names in the folder: {odd[:3]!r}")
    files = {}
    for shard in sorted(shards):
        path = os.path.join(folder, shard)
        if not os.path.isfile(path):
            raise ValueError(f"{index!r} names the shard {shard!r}, which is not in the folder")
        files.update((name, path) for name in _names_in(path))
    absent = sorted(set(weight_map) - set(files))
    if absent:
        raise ValueError(f"{index!r} names tensors its shards do not hold: {', '.join(absent[:5])}")
    return files


def _names_in(path):
    """The tensor names of the safetensors file ``path``; a ValueError if it is not one."""
    try:
        with _safe_open()(path, framework="numpy") as f:
            return list(f.keys())
    except Exception as error:  # the library's SafetensorError (a header it cannot read), OSError
        raise ValueError(f"{path!r} is not a readable safetensors file: {error}") from None


def _their_name(name, present):
    """GPT-2 checkpoints written without the ``transformer.`` prefix (as the original
    ``gpt2`` on the Hub) name ``wte.weight`` where ours says ``transformer.wte.weight``."""
    if name in present or not name.startswith("transformer."):
        return name
    return name[len("transformer.") :]


def _check_sizes_against_the_weights(folder, options, weights):
    """Refuse a config.json whose sizes ask for more numbers than the folder's weights hold,
    before anything is built (a mistyped ``vocab_size`` of 1e12 would allocate terabytes, an
    ``n_layer`` of 1e9 would list a billion layers). The count is a lower bound of the
    parameters: the embedding, the learned positions, and per block two d x d projections
    and two d x d_ff maps."""
    sizes = [options[k] for k in ("vocab_size", "d_model", "num_layers", "d_ff", "max_seq_len")]
    if not all(isinstance(n, int) and not isinstance(n, bool) and n > 0 for n in sizes):
        return  # the model's own checks name the bad entry
    vocab, d, layers, d_ff, positions = sizes
    at_least = vocab * d + (positions * d if options["pos_encoding"] == "learned" else 0)
    at_least += layers * (2 * d * d + 2 * d * d_ff)
    held = weights.numbers()
    if at_least > held:
        raise ValueError(
            f"{os.path.join(folder, 'config.json')!r} describes a model of at least {at_least:,} "
            f"parameters, but the folder's weights hold {held:,} numbers: check its sizes "
            f"(vocab_size, hidden size, layers, positions)"
        )


def load_pretrained(cls, folder, device="cpu", attn_impl="naive"):
    """``cls(**options)`` with the weights of the Hugging Face folder ``folder``; the body
    of :meth:`GPT.from_pretrained <minitorch_attn.nn.GPT.from_pretrained>`.

    Raises:
        ValueError: for an unsupported architecture or config feature, a folder without
            safetensors weights (a ``.bin`` is refused with the command that converts it),
            or weights that are missing, left over or of the wrong shape (each listed).
        ImportError: without the ``safetensors`` package.
    """
    folder = os.fspath(folder)
    config = read_config(folder)
    options = gpt_options(config)
    weights = _Weights(folder)
    _check_sizes_against_the_weights(folder, options, weights)
    table = [(_their_name(hf, weights.names), ours, transposed) for hf, ours, transposed in weight_names(options)]
    wanted = {hf for hf, _, _ in table}
    ignored = {n for n in weights.names if n.endswith(_BUFFERS)}
    if options["tie_weights"]:
        ignored.add("lm_head.weight")  # some tied checkpoints store it too; tied, it is the embedding
    missing = sorted(wanted - weights.names)
    extra = sorted(weights.names - wanted - ignored)
    if missing or extra:
        raise ValueError(
            f"{folder!r} does not hold the weights of its config.json: missing "
            f"{', '.join(missing[:6]) or 'none'}{' ...' if len(missing) > 6 else ''}; left over "
            f"{', '.join(extra[:6]) or 'none'}{' ...' if len(extra) > 6 else ''}"
        )
    model = skip_init(cls, **options, attn_impl=attn_impl)  # zeros, not random draws: replaced just below
    own = dict(model.named_parameters())
    wrong = []
    for hf, ours, transposed in table:
        array = weights.get(hf)
        array = numpy.ascontiguousarray(array.T) if transposed else array
        if array.shape != own[ours].shape:
            wrong.append(f"{hf} {array.shape} (expected {own[ours].shape})")
            continue
        own[ours].data = array  # float32, C-contiguous and our own copy: no second copy (to(device) moves it)
    if wrong:
        raise ValueError(f"{folder!r} has weights of the wrong shape for its config.json: {'; '.join(wrong[:6])}")
    return model.to(device).eval()
