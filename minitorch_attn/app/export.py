"""Export a trained GPT to PyTorch: ``minitorch-attn export --checkpoint CKPT --out model.safetensors``.

Writes two files, each atomically (:func:`~minitorch_attn.atomic.write_atomically`):

* ``model.safetensors``: every parameter of :class:`minitorch_attn.app.torch_gpt.GPT`, by its
  name there (the names of ``minitorch_attn.nn.GPT``; a tied ``lm_head.weight`` is written
  too, as PyTorch's ``state_dict`` lists it), in the safetensors format: a JSON header and
  raw little-endian arrays, read without running any code (unlike a pickled ``.pt``);
* ``model.json`` beside it: ``{"config": ..., "vocab": ..., "step": ...}``, the arguments of
  ``torch_gpt.GPT`` (the checkpoint's config, less ``attn_impl``, plus the norms' ``eps``)
  and the characters of the vocabulary.

``torch_gpt.GPT.from_export("model.safetensors")`` reads both back. Needs the
``safetensors`` package (the ``export`` extra), but not PyTorch.
"""

from __future__ import annotations

import json
import os

from ..atomic import write_atomically
from .sampling import load_model


def torch_config(model):
    """The arguments of ``torch_gpt.GPT`` that rebuild ``model`` (a :class:`~minitorch_attn.nn.GPT`)."""
    if model.config.get("bias"):
        raise ValueError("torch_gpt.GPT has no biases on attention: export this model with --format transformers")
    config = {k: v for k, v in model.config.items() if k not in ("attn_impl", "bias")}
    config["norm_eps"] = model.norm.eps
    return config


def torch_state(model):
    """``{name: NumPy array}``: the parameters of ``model`` under the names of
    ``torch_gpt.GPT``'s ``state_dict`` (with ``lm_head.weight`` when it is tied)."""
    state = {name: value.numpy() for name, value in model.state_dict().items()}
    state.setdefault("lm_head.weight", state["token_embedding.weight"].copy())
    return state


def export(checkpoint, out):
    """Export the training checkpoint at ``checkpoint`` to ``out`` (``.safetensors``) and the
    ``.json`` file beside it; returns the two paths.

    Raises:
        ImportError: without the safetensors package (names the extra).
        ValueError: if ``out`` does not end in ``.safetensors`` or its folder does not exist;
            CheckpointError (a ValueError) for a checkpoint that is not the training job's.
    """
    try:
        from safetensors.numpy import save
    except ImportError:
        raise ImportError('exporting writes safetensors: pip install -e ".[export]"') from None
    out = os.fspath(out)
    stem, suffix = os.path.splitext(out)
    if suffix != ".safetensors":
        raise ValueError(f"--out must be a .safetensors file, got {out!r}")
    folder = os.path.dirname(os.path.abspath(out))
    if not os.path.isdir(folder):
        raise ValueError(f"cannot export to {out!r}: the folder {folder!r} does not exist")
    model, vocab, saved = load_model(checkpoint)
    config = torch_config(model)
    described = {"config": config, "vocab": vocab.chars, "step": saved["extra"].get("step")}
    write_atomically(
        out, save(torch_state(model), metadata={"format": "pt", "config": json.dumps(config)}), suffix=".safetensors"
    )
    write_atomically(stem + ".json", json.dumps(described, indent=2, ensure_ascii=False).encode("utf-8"))
    return out, stem + ".json"


def run_export(args):
    """The ``export`` command. An earlier export at ``--out`` (its weights or its JSON) is
    kept unless ``--overwrite``: a ValueError says so, as ``train`` does for its folder."""
    stem = os.path.splitext(os.fspath(args.out))[0]
    existing = [path for path in (os.fspath(args.out), stem + ".json") if os.path.exists(path)]
    if existing and not args.overwrite:
        raise ValueError(
            f"{' and '.join(existing)} already exist(s); give another --out, or replace them with --overwrite"
        )
    weights, config = export(args.checkpoint, args.out)
    print(
        f"wrote {weights} and {config}; in PyTorch:\n"
        f"    from minitorch_attn.app.torch_gpt import GPT\n"
        f"    model, vocab = GPT.from_export({weights!r})"
    )
    return 0
