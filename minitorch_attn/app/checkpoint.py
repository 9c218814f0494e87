"""Checkpoints: a model's weights, its configuration and its optimizer's state in one ``.npz``.

Layout of the file (a NumPy ``.npz``: a zip of ``.npy`` arrays, read with
``allow_pickle=False`` so that loading a file can never run code):

======================  ===========================================================
``meta``                UTF-8 JSON as a uint8 array: format version, the model
                        config, any extra fields (the vocabulary, the step, ...), and
                        the optimizer's hyperparameters and step counts
``model/<name>``        one array per parameter, named as in ``state_dict()``
``optim/<i>/<name>``    the optimizer's per-parameter arrays (Adam's moments, ...)
======================  ===========================================================

:func:`save` writes a temporary file in the same folder and renames it over the target
(:func:`~minitorch_attn.atomic.write_atomically`), so a crash or Ctrl-C while saving never
leaves a half-written checkpoint and never damages the previous one. :func:`load` turns a
missing, truncated or foreign file into a :class:`CheckpointError` that says which.
"""

from __future__ import annotations

import json
import os
import zipfile

import numpy

from ..atomic import write_atomically
from ..core.backend import backend_of
from ..nn import Module
from ..optim import Optimizer

FORMAT_VERSION = 1


class CheckpointError(ValueError):
    """A checkpoint file is missing, truncated, corrupt, does not fit the model, or cannot
    be written where it was asked to go."""


def _json_number(value):
    """JSON for the NumPy scalars a config or hyperparameter may hold (``lr=np.float32(1e-3)``,
    a size read from an array): their Python number. Anything else is a TypeError that says
    what could not be stored."""
    if isinstance(value, numpy.generic) and value.shape == ():
        return value.item()
    raise TypeError(
        f"a checkpoint stores numbers, strings, lists and dicts in its config, extra "
        f"and optimizer settings, not {type(value).__name__} ({value!r:.60})"
    )


def save(path, model, optimizer=None, config=None, **extra):
    """Write ``model``'s parameters (and ``optimizer``'s state) to ``path`` atomically.

    Args:
        path: the ``.npz`` file to write (its folder must exist).
        model: a :class:`~minitorch_attn.nn.Module`.
        optimizer: an :class:`~minitorch_attn.optim.Optimizer`, or None.
        config: a JSON-serializable dict that rebuilds the model (e.g. ``GPT(**config)``).
        **extra: more JSON-serializable fields (vocabulary, step, metrics).
    Raises:
        TypeError: if ``model`` is not a Module, ``optimizer`` not an Optimizer, or
            ``config`` or ``extra`` is not JSON-serializable (nothing is written).
        CheckpointError: if ``path`` is a folder, its folder does not exist, or writing fails
            (any file already at ``path`` is left as it was).
    """
    path = os.fspath(path)
    if not isinstance(model, Module):
        raise TypeError(f"save needs a Module to save, got {type(model).__name__}")
    if optimizer is not None and not isinstance(optimizer, Optimizer):
        raise TypeError(f"optimizer must be an Optimizer or None, got {type(optimizer).__name__}")
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise CheckpointError(f"cannot save a checkpoint to {path!r}: it is a folder; give a file name")
    if not os.path.isdir(folder):
        raise CheckpointError(f"cannot save a checkpoint to {path!r}: the folder {folder!r} does not exist")
    arrays = {f"model/{name}": value.numpy() for name, value in model.state_dict().items()}
    meta = {"format_version": FORMAT_VERSION, "config": config or {}, "extra": extra, "optimizer": None}
    if optimizer is not None:
        state = optimizer.state_dict()
        scalars = {}
        for index, entry in state["state"].items():
            for name, value in entry.items():
                if hasattr(value, "shape"):
                    arrays[f"optim/{index}/{name}"] = backend_of(value).to_numpy(value)
                else:
                    scalars.setdefault(str(index), {})[name] = value
        groups = [{k: list(v) if isinstance(v, tuple) else v for k, v in g.items()} for g in state["param_groups"]]
        meta["optimizer"] = {"type": type(optimizer).__name__, "param_groups": groups, "scalars": scalars}
    arrays["meta"] = numpy.frombuffer(json.dumps(meta, default=_json_number).encode("utf-8"), dtype=numpy.uint8)

    try:
        write_atomically(path, lambda f: numpy.savez(f, **arrays), suffix=".npz")
    except OSError as error:  # no permission, disk full, ...: name the user's path
        raise CheckpointError(f"cannot save a checkpoint to {path!r}: {error.strerror or error}") from None


def load(path):
    """Read a checkpoint written by :func:`save`.

    Returns:
        a dict with ``"model"`` (``{name: numpy array}``, ready for
        ``model.load_state_dict``), ``"config"``, ``"extra"`` and ``"optimizer"`` (a
        state dict for ``optimizer.load_state_dict``, or None).
    Raises:
        CheckpointError: if the file is missing, is not a complete ``.npz`` (truncated or
            corrupt, or another kind of file), or lacks or garbles the checkpoint's ``meta``
            record.
    """
    path = os.fspath(path)
    if not os.path.exists(path):
        raise CheckpointError(f"no checkpoint at {path!r}")
    if os.path.isdir(path):
        raise CheckpointError(f"{path!r} is a folder, not a checkpoint file")
    unreadable = f"{path!r} is not a readable checkpoint (truncated or corrupt?)"
    if not zipfile.is_zipfile(path):  # e.g. a .npy array, a text file, half a download
        raise CheckpointError(f"{unreadable}: not an .npz (zip) archive")
    try:
        with numpy.load(path, allow_pickle=False) as data:
            arrays = {name: data[name] for name in data.files}
    except (zipfile.BadZipFile, OSError, ValueError, EOFError, KeyError) as error:
        if "allow_pickle" in str(error):  # an array of Python objects: never part of a checkpoint
            error = "it holds pickled Python objects, which a checkpoint never does"
        raise CheckpointError(f"{unreadable}: {error}") from None
    if "meta" not in arrays:
        raise CheckpointError(f"{path!r} is an .npz file but not a minitorch-attn checkpoint (no 'meta' record)")
    try:
        meta = json.loads(arrays.pop("meta").tobytes().decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise CheckpointError(f"{path!r} has a corrupt 'meta' record: {error}") from None
    if not isinstance(meta, dict):
        raise CheckpointError(f"{path!r} has a corrupt 'meta' record: a JSON {type(meta).__name__}, not an object")
    if meta.get("format_version") != FORMAT_VERSION:
        raise CheckpointError(
            f"{path!r} has checkpoint format {meta.get('format_version')!r}, expected {FORMAT_VERSION}"
        )
    missing = [key for key in ("config", "extra", "optimizer") if key not in meta]
    if missing or not isinstance(meta["config"], dict) or not isinstance(meta["extra"], dict):
        raise CheckpointError(
            f"{path!r} has a corrupt 'meta' record: needs the objects 'config' and 'extra' "
            f"and an 'optimizer' entry (missing: {', '.join(missing) or 'none'})"
        )

    model = {k[len("model/") :]: v for k, v in arrays.items() if k.startswith("model/")}
    optimizer = None
    if meta["optimizer"] is not None:
        try:
            optimizer = _optimizer_state(meta["optimizer"], arrays)
        except (KeyError, TypeError, ValueError, AttributeError) as error:
            raise CheckpointError(f"{path!r} has a corrupt optimizer record: {error!r}") from None
    return {"model": model, "config": meta["config"], "extra": meta["extra"], "optimizer": optimizer}


def _optimizer_state(record, arrays):
    """The optimizer state dict from the ``meta`` record's optimizer entry and the
    ``optim/<i>/<name>`` arrays (raises KeyError, TypeError or ValueError when garbled)."""
    state = {}
    for key, value in arrays.items():
        if key.startswith("optim/"):
            _, index, name = key.split("/", 2)
            state.setdefault(int(index), {})[name] = value
    for index, scalars in record["scalars"].items():
        state.setdefault(int(index), {}).update(scalars)
    groups = [{k: tuple(v) if k == "betas" else v for k, v in g.items()} for g in record["param_groups"]]
    return {"type": record["type"], "param_groups": groups, "state": state}


def restore(checkpoint, model, optimizer=None):
    """Load a checkpoint returned by :func:`load` into ``model`` (and ``optimizer``).

    Raises:
        CheckpointError: if the parameters do not match the model (the message lists the
            missing, unexpected and mis-shaped names) or the optimizer is of another type.
    """
    try:
        model.load_state_dict(checkpoint["model"])
    except (KeyError, ValueError) as error:
        raise CheckpointError(f"checkpoint does not fit this model: {error.args[0]}") from None
    if optimizer is not None and checkpoint["optimizer"] is not None:
        if checkpoint["optimizer"]["type"] != type(optimizer).__name__:
            raise CheckpointError(
                f"checkpoint holds {checkpoint['optimizer']['type']} state, not {type(optimizer).__name__}"
            )
        try:
            optimizer.load_state_dict(checkpoint["optimizer"])
        except ValueError as error:
            raise CheckpointError(f"optimizer state does not fit: {error}") from None
