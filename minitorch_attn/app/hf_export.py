"""Our GPT as a Hugging Face folder, and sampling from a Hugging Face folder.

``minitorch-attn export --format transformers --checkpoint CKPT --out FOLDER`` writes

* ``config.json`` and ``model.safetensors``: a ``GPT2LMHeadModel`` for GPT-2's block
  (LayerNorm, GELU, learned positions) or a ``LlamaForCausalLM`` for LLaMA's
  (``GPT(**LLAMA)``: RMSNorm, SwiGLU, rotary positions), under transformers' names
  (the tables of :mod:`minitorch_attn.nn.pretrained`, read backwards), so
  ``transformers.AutoModelForCausalLM.from_pretrained(FOLDER)`` gives our logits;
* ``tokenizer.json`` and ``tokenizer_config.json``: our character vocabulary
  (:class:`~minitorch_attn.app.data.CharVocab`) as a ``tokenizers`` word-level model over
  single characters, so ``AutoTokenizer.from_pretrained(FOLDER)`` encodes text as we do
  (an unknown character becomes our fallback, a space when the vocabulary has one) and
  decodes by joining the characters.

What GPT-2 lacks is filled in exactly: its attention always has biases (ours, when it has
none, are written as zeros), and it has no grouped-query attention (each key/value head's
rows are repeated for the query heads it serves, which computes the same attention). A
block that is neither GPT-2's nor LLaMA's (LayerNorm with rotary positions, say) has no
transformers architecture and is refused. A rotary model of ours slides its attention
over the last ``max_seq_len`` keys where transformers' Llama does not: the logits agree up
to ``max_seq_len`` tokens (``max_position_embeddings``).

The folder is written atomically: into a temporary folder beside it, then renamed.

``minitorch-attn sample --pretrained FOLDER`` (:func:`run_sample_pretrained`) samples from a
Hugging Face folder with its own ``tokenizer.json`` (the ``tokenizers`` library; no network).
Needs the ``hf`` extra: ``pip install -e ".[hf]"``.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile

import numpy

from .. import nn
from ..core.backend import host_generator
from ..nn.pretrained import gpt2_names, llama_names
from .sampling import generate_ids, load_model


def architecture(model):
    """``"GPT2LMHeadModel"`` or ``"LlamaForCausalLM"``: the transformers class of ``model``'s
    block. Raises a ValueError for a mixture of the two (named)."""
    c = model.config
    block = (c["norm"], c["pos_encoding"], c["mlp"])
    if block == ("layernorm", "learned", "gelu"):
        return "GPT2LMHeadModel"
    if block == ("rmsnorm", "rope", "swiglu"):
        return "LlamaForCausalLM"
    raise ValueError(
        f"a block with norm={c['norm']!r}, pos_encoding={c['pos_encoding']!r}, mlp={c['mlp']!r} "
        f"is neither GPT-2's (layernorm, learned, gelu) nor LLaMA's (rmsnorm, rope, swiglu): "
        f"transformers has no class for it"
    )


def hf_config(model):
    """``config.json`` (a dict) for ``model`` (a :class:`~minitorch_attn.nn.GPT`)."""
    c, name = model.config, architecture(model)
    if name == "GPT2LMHeadModel":
        return dict(
            architectures=[name],
            model_type="gpt2",
            vocab_size=c["vocab_size"],
            n_embd=c["d_model"],
            n_head=c["num_heads"],
            n_layer=c["num_layers"],
            n_positions=c["max_seq_len"],
            n_inner=c["d_ff"],
            activation_function="gelu_new",
            layer_norm_epsilon=model.norm.eps,
            tie_word_embeddings=c["tie_weights"],
            resid_pdrop=c["dropout"],
            embd_pdrop=c["dropout"],
            attn_pdrop=c["dropout"],
            bos_token_id=None,
            eos_token_id=None,
            dtype="float32",
        )
    eps = model.norm.eps if model.norm.eps is not None else float(numpy.finfo(numpy.float32).eps)
    kv_heads = c["num_kv_heads"] or c["num_heads"]
    return dict(
        architectures=[name],
        model_type="llama",
        vocab_size=c["vocab_size"],
        hidden_size=c["d_model"],
        num_attention_heads=c["num_heads"],
        num_key_value_heads=kv_heads,
        head_dim=c["d_model"] // c["num_heads"],
        num_hidden_layers=c["num_layers"],
        intermediate_size=c["d_ff"],
        max_position_embeddings=c["max_seq_len"],
        rms_norm_eps=eps,
        hidden_act="silu",
        rope_theta=c["rope_base"],
        rope_parameters={"rope_type": "default", "rope_theta": c["rope_base"]},
        attention_bias=bool(c.get("bias", False)),
        mlp_bias=False,
        attention_dropout=c["dropout"],
        tie_word_embeddings=c["tie_weights"],
        bos_token_id=None,
        eos_token_id=None,
        dtype="float32",
    )


def _qkv(attn):
    """The query, key and value weights (and biases, or None) of ``attn``, fused or not:
    ``[(W_q, b_q), (W_k, b_k), (W_v, b_v)]``, NumPy, ``W (out, in)``."""
    if not attn.fused_qkv:
        layers = (attn.W_q, attn.W_k, attn.W_v)
        return [(l.weight.numpy(), None if l.bias is None else l.bias.numpy()) for l in layers]
    kv = attn.num_kv_heads * attn.d_k
    cuts = numpy.cumsum([attn.d_model, kv])
    w = numpy.split(attn.W_qkv.weight.numpy(), cuts)
    b = [None] * 3 if attn.W_qkv.bias is None else numpy.split(attn.W_qkv.bias.numpy(), cuts)
    return list(zip(w, b))


def _repeat_heads(array, attn):
    """Rows of key/value heads ``(h_kv d_k, ...)`` -> ``(h d_k, ...)``, each head's rows
    repeated for the ``h / h_kv`` query heads it serves (GPT-2 has no grouped-query attention)."""
    group = attn.num_heads // attn.num_kv_heads
    heads = array.reshape(attn.num_kv_heads, attn.d_k, *array.shape[1:])
    return numpy.repeat(heads, group, axis=0).reshape(attn.num_heads * attn.d_k, *array.shape[1:])


def hf_state(model):
    """``{transformers name: float32 NumPy array}``: the weights of ``model`` under the names of
    :func:`hf_config`'s architecture (GPT-2's ``Conv1D`` matrices transposed to ``(in, out)``;
    a fused ``W_qkv`` cut into ``q_proj, k_proj, v_proj`` for Llama)."""
    ours = {name: p.numpy() for name, p in model.named_parameters()}
    llama = architecture(model) == "LlamaForCausalLM"
    options = dict(
        num_layers=len(model.blocks),
        tie_weights=model.config["tie_weights"],
        bias=bool(model.config.get("bias", False)),
    )
    for i, block in enumerate(model.blocks):
        attn = block.attn
        (wq, bq), (wk, bk), (wv, bv) = _qkv(attn)
        zeros = numpy.zeros(wq.shape[0], dtype=numpy.float32)
        if llama:
            for letter, w, b in (("q", wq, bq), ("k", wk, bk), ("v", wv, bv)):
                ours[f"blocks.{i}.attn.W_{letter}.weight"] = w
                if b is not None:
                    ours[f"blocks.{i}.attn.W_{letter}.bias"] = b
        else:  # GPT-2: one c_attn with biases, every head with its own keys and values
            bk = zeros[: wk.shape[0]] if bk is None else bk
            bv = zeros[: wv.shape[0]] if bv is None else bv
            wk, wv, bk, bv = (_repeat_heads(x, attn) for x in (wk, wv, bk, bv))
            ours[f"blocks.{i}.attn.W_qkv.weight"] = numpy.concatenate([wq, wk, wv])
            ours[f"blocks.{i}.attn.W_qkv.bias"] = numpy.concatenate([zeros if bq is None else bq, bk, bv])
            ours.setdefault(f"blocks.{i}.attn.W_o.bias", numpy.zeros(attn.d_model, dtype=numpy.float32))
    table = llama_names(options) if llama else gpt2_names(options)
    return {
        hf: numpy.ascontiguousarray(ours[mine].T if transposed else ours[mine], dtype=numpy.float32)
        for hf, mine, transposed in table
    }


def tokenizer_json(vocab):
    """``tokenizer.json`` (a JSON string) for the character vocabulary ``vocab``: a
    ``tokenizers`` ``WordLevel`` model whose words are our characters, a pre-tokenizer that
    cuts the text into single characters, and a decoder that joins them again. The unknown
    token is our fallback character, so an unseen character encodes as :class:`~minitorch_attn.app.data.CharVocab`
    encodes it."""
    try:
        from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    except ImportError:
        raise ImportError('writing a tokenizer needs tokenizers: pip install -e ".[hf]"') from None
    words = {c: i for i, c in enumerate(vocab.chars)}
    tokenizer = Tokenizer(models.WordLevel(words, unk_token=vocab.chars[vocab.fallback]))
    tokenizer.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")  # every character
    tokenizer.decoder = decoders.Fuse()  # joined, no spaces
    return tokenizer.to_str(pretty=True)


def tokenizer_config(model):
    """``tokenizer_config.json`` (a dict): which class reads ``tokenizer.json`` and that
    decoding must not "clean up" spaces (each character is its own token)."""
    return dict(
        tokenizer_class="PreTrainedTokenizerFast",
        model_max_length=model.config["max_seq_len"],
        clean_up_tokenization_spaces=False,
    )


def write_folder(out, files, overwrite=False):
    """Write ``files`` (``{name: bytes}``) as the folder ``out``, atomically: into a new
    temporary folder beside it, then renamed to ``out`` (an earlier ``out``, with
    ``overwrite``, is moved aside first and removed after).

    Raises:
        ValueError: if ``out`` exists and ``overwrite`` is False, if it exists and is not a
            folder an export wrote (``overwrite`` replaces nothing else), or its parent folder
            does not exist.
    """
    out = os.path.abspath(os.fspath(out))
    parent = os.path.dirname(out)
    if not os.path.isdir(parent):
        raise ValueError(f"cannot export to {out!r}: the folder {parent!r} does not exist")
    if os.path.exists(out) and not overwrite:
        raise ValueError(f"{out} already exists; give another --out, or replace it with --overwrite")
    if os.path.exists(out):
        _check_an_earlier_export(out, files)
    temporary = tempfile.mkdtemp(prefix=f".{os.path.basename(out)}-", dir=parent)
    try:
        for name, content in files.items():
            with open(os.path.join(temporary, name), "wb") as f:
                f.write(content)
                f.flush()
                os.fsync(f.fileno())
        os.chmod(temporary, 0o777 & ~_umask())
        old = None
        if os.path.exists(out):
            old = tempfile.mkdtemp(prefix=f".{os.path.basename(out)}-old-", dir=parent)
            os.replace(out, os.path.join(old, "previous"))
        os.replace(temporary, out)
    except BaseException:
        shutil.rmtree(temporary, ignore_errors=True)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
    return out


def _check_an_earlier_export(out, files):
    """``--overwrite`` replaces an earlier export, never anything else: ``out`` must be a folder
    that holds a ``config.json`` and only files an export writes (``files``' names), so that a
    mistyped ``--out`` (``.``, ``..``, a project folder, a file) is refused instead of removed."""
    if not os.path.isdir(out) or os.path.islink(out):
        raise ValueError(f"{out} is not a folder that an export wrote: --overwrite replaces only an earlier export")
    held = set(os.listdir(out))
    others = sorted(held - set(files))
    if "config.json" not in held or others:
        what = f"it holds {', '.join(others[:3])}" if others else "it has no config.json"
        raise ValueError(
            f"{out} is not a folder that an export wrote ({what}): --overwrite replaces only an "
            f"earlier export; give another --out"
        )


def _umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


def export_transformers(checkpoint, out, overwrite=False):
    """Export the training checkpoint ``checkpoint`` as the Hugging Face folder ``out``
    (``config.json``, ``model.safetensors``, ``tokenizer.json``, ``tokenizer_config.json``);
    returns the folder's path.

    Raises:
        ImportError: without safetensors or tokenizers (names the extra).
        ValueError: for a block transformers has no class for, an existing ``out`` without
            ``overwrite``; CheckpointError (a ValueError) for a checkpoint not of the training job.
    """
    try:
        from safetensors.numpy import save
    except ImportError:
        raise ImportError('exporting writes safetensors: pip install -e ".[hf]"') from None
    model, vocab, _ = load_model(checkpoint)
    files = {
        "config.json": json.dumps(hf_config(model), indent=2).encode("utf-8"),
        "model.safetensors": save(hf_state(model), metadata={"format": "pt"}),
        "tokenizer.json": tokenizer_json(vocab).encode("utf-8"),
        "tokenizer_config.json": json.dumps(tokenizer_config(model), indent=2).encode("utf-8"),
    }
    return write_folder(out, files, overwrite=overwrite)


def load_tokenizer(folder):
    """The ``tokenizers.Tokenizer`` of ``folder``'s ``tokenizer.json``.

    Raises:
        ImportError: without the tokenizers package.
        ValueError: if the folder has no ``tokenizer.json``.
    """
    try:
        from tokenizers import Tokenizer
    except ImportError:
        raise ImportError('reading tokenizer.json needs tokenizers: pip install -e ".[hf]"') from None
    path = os.path.join(os.fspath(folder), "tokenizer.json")
    if not os.path.isfile(path):
        raise ValueError(f"{os.fspath(folder)!r} has no tokenizer.json (sampling needs the folder's own tokenizer)")
    return Tokenizer.from_file(path)


def run_sample_pretrained(args):
    """``minitorch-attn sample --pretrained FOLDER``: continue ``--prompt`` with a model of
    a Hugging Face folder (:meth:`GPT.from_pretrained <minitorch_attn.nn.GPT.from_pretrained>`)
    and its own tokenizer, printing each token's text as it is drawn."""
    model = nn.GPT.from_pretrained(args.pretrained, device=args.device)
    tokenizer = load_tokenizer(args.pretrained)
    ids = tokenizer.encode(args.prompt).ids
    if not ids:
        raise ValueError("--prompt encodes to no tokens: give some text to continue")
    rng = numpy.random.default_rng(args.seed) if args.seed is not None else host_generator()
    sys.stdout.write(args.prompt)
    sys.stdout.flush()
    new, printed = [], [0]

    def show(token):  # decode the whole continuation each time: a character may span tokens
        new.append(token)
        text = tokenizer.decode(new)
        if text.endswith("\ufffd"):  # a character's bytes not all drawn yet (byte-level BPE): wait
            return
        sys.stdout.write(text[printed[0] :])
        sys.stdout.flush()
        printed[0] = len(text)

    generate_ids(
        model,
        ids,
        args.max_new_tokens,
        args.temperature,
        args.top_k,
        args.top_p,
        rng,
        device=args.device,
        on_token=show,
    )
    print()
    return 0


def run_export_transformers(args):
    """``minitorch-attn export --format transformers``: the checkpoint as a Hugging Face folder."""
    out = export_transformers(args.checkpoint, args.out, overwrite=args.overwrite)
    print(
        f"wrote {out} (config.json, model.safetensors, tokenizer.json); in transformers:\n"
        f"    from transformers import AutoModelForCausalLM, AutoTokenizer\n"
        f"    model = AutoModelForCausalLM.from_pretrained({out!r})\n"
        f"    tokenizer = AutoTokenizer.from_pretrained({out!r})"
    )
    return 0
