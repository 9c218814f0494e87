"""The ``minitorch-attn`` command.

    minitorch-attn gradcheck [--device cpu] [--dtype float64]   run the gradient-check suite
    minitorch-attn train [--text PATH] [--time-budget 240] ...   train a character-level GPT
    minitorch-attn sample --checkpoint PATH --prompt TEXT        sample text from a trained GPT
    minitorch-attn export --checkpoint PATH --out M.safetensors  the GPT's weights for PyTorch
    minitorch-attn demo --list | NAME                             the tutorial's demos
    minitorch-attn homework make|grade|selftest|autograder|check  student versions, grading, Gradescope

Each subcommand is one ``add_<name>(subparsers)`` function below that registers its
arguments and the function that runs it. Bad arguments and unusable files end a command
with one line ``minitorch-attn <command>: error: <what was wrong>`` and a pointer to its
``--help`` on stderr, and exit status 2:
argparse checks each flag's value (and points to ``--help`` instead of printing the usage),
and :func:`main` turns the errors a command raises for bad input (ValueError, TypeError,
OSError, DeviceUnavailableError) into that line; other errors, such as a homework stub's
NotImplementedError, keep their traceback. Ctrl-C, closing the terminal (SIGHUP) and
``kill`` (SIGTERM) end any command with "interrupted" and status 130 (as shells expect),
after ``train`` has saved its checkpoint (:mod:`minitorch_attn.stopping`).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from .. import __version__
from ..argtypes import (
    CommandParser,
    device_help,
    folder,
    non_negative_float,
    non_negative_int,
    open_fraction,
    positive_float,
    positive_fraction,
    positive_int,
    print_error,
    unit_interval,
    usable_device,
)
from ..core.backend import DeviceUnavailableError, get_default_device
from ..gradcheck.command import main as gradcheck_main
from ..homework.command import add_homework
from ..speed import keep_freed_memory, set_num_threads
from ..stopping import stop_as_ctrl_c
from .demos_cli import add_demo
from .export import run_export
from .hf_export import run_export_transformers, run_sample_pretrained
from .sampling import run_sample
from .train import DEFAULT_BLOCK, run_training


def add_gradcheck(subparsers):
    p = subparsers.add_parser(
        "gradcheck", add_help=False, help="run the gradient-check suite; see minitorch-attn gradcheck -h"
    )
    p.set_defaults(run=_run_gradcheck, passes_extra=True)


def _run_gradcheck(args):
    return gradcheck_main(args.extra, prog="minitorch-attn gradcheck")


class _ShowDefaults(argparse.ArgumentDefaultsHelpFormatter):
    """Append "(default: X)" to a flag's help, except where there is nothing to show."""

    def _get_help_string(self, action):
        if action.default is None or action.default is False:  # (0.0 == False, yet 0.0 is worth showing)
            return action.help
        return super()._get_help_string(action)


def add_train(subparsers):
    p = subparsers.add_parser(
        "train",
        help="train a character-level GPT (default corpus: the Python language reference)",
        description="Train a character-level GPT on a text file (default: the Python language reference "
        "shipped with CPython), printing validation bits per character beside a bigram "
        "baseline; writes checkpoint.npz, loss.png, attention.png and metrics.json.",
        epilog="Threads: without --threads, training times one thread against one per core (the batch in "
        "one part per thread) every 100 steps and keeps the faster.",
        formatter_class=_ShowDefaults,
    )
    data = p.add_argument_group("data and outputs")
    data.add_argument("--text", metavar="PATH", help="UTF-8 text file to train on (default: pydoc_data.topics)")
    data.add_argument(
        "--val-fraction", type=open_fraction, default=0.1, help="share of the text (its end) kept for validation"
    )
    data.add_argument(
        "--out", metavar="DIR", type=folder, help="run folder, new or empty (default: a new runs/<date-time>)"
    )
    data.add_argument(
        "--overwrite",
        action="store_true",
        help="let --out be a folder that already holds files (its checkpoint, metrics and pictures are replaced)",
    )
    data.add_argument(
        "--resume",
        metavar="CHECKPOINT",
        help="continue from a checkpoint.npz of train: its weights, optimizer state, step count, model "
        "config and vocabulary (model flags given here are ignored, with a warning). The run is "
        "written to --out like any other: a new folder by default, or the checkpoint's own folder "
        "when --out names it",
    )
    run = p.add_argument_group("how long and where")
    run.add_argument(
        "--device", type=usable_device, default=None, help=f"{device_help()} (default: $MINITORCH_ATTN_DEVICE or cpu)"
    )
    run.add_argument(
        "--steps",
        type=positive_int,
        default=None,
        help="number of optimizer steps (default: as many as --time-budget allows); "
        "the run stops at whichever limit comes first",
    )
    run.add_argument(
        "--time-budget",
        type=non_negative_float,
        default=240.0,
        help="seconds of training, periodic validation included (0 = no limit; then give --steps); "
        "without --steps the progress bar counts these seconds",
    )
    run.add_argument(
        "--seed", type=non_negative_int, default=1337, help="seed for the weights, the batches and the sample"
    )
    run.add_argument("--eval-interval", type=positive_int, default=100, help="steps between validation estimates")
    run.add_argument(
        "--eval-windows",
        type=positive_int,
        default=64,
        help="validation windows per periodic estimate (the final one uses all)",
    )
    run.add_argument(
        "--threads",
        type=positive_int,
        default=None,
        help="CPU threads: with N >= 2 each training step's batch runs in N parts, one per "
        "thread (default: 1 or one per core, chosen by timing, see below)",
    )
    run.add_argument(
        "--quiet",
        action="store_true",
        help="no progress bar or log lines; the results (final validation, sample, outputs) are printed",
    )
    model = p.add_argument_group("model (a resumed run keeps its checkpoint's)")
    model.add_argument("--d-model", type=positive_int, default=128, action=_Given, help="width of the residual stream")
    model.add_argument("--num-layers", type=positive_int, default=3, action=_Given, help="Transformer blocks")
    model.add_argument("--num-heads", type=positive_int, default=4, action=_Given, help="attention heads per block")
    model.add_argument(
        "--block-size", type=positive_int, default=64, action=_Given, help="context length in characters"
    )
    model.add_argument("--dropout", type=unit_interval, default=0.0, action=_Given, help="dropout probability")
    model.add_argument(
        "--norm",
        choices=("layernorm", "rmsnorm"),
        default=DEFAULT_BLOCK["norm"],
        action=_Given,
        help="normalization layer",
    )
    model.add_argument(
        "--mlp",
        choices=("gelu", "swiglu"),
        default=DEFAULT_BLOCK["mlp"],
        action=_Given,
        help="feed-forward: GELU (GPT-2) or SwiGLU (LLaMA; with --norm rmsnorm --pos-encoding rope "
        "this is LLaMA's block)",
    )
    model.add_argument(
        "--d-ff",
        type=positive_int,
        default=None,
        action=_Given,
        help="hidden width of the feed-forward network (default: 4 x --d-model for GELU, "
        "8/3 x --d-model up to a multiple of 8 for SwiGLU, about the same parameters)",
    )
    model.add_argument(
        "--num-kv-heads",
        type=positive_int,
        default=None,
        action=_Given,
        help="key/value heads (fewer than --num-heads: grouped-query attention; default: as many)",
    )
    model.add_argument(
        "--attn-impl", choices=("naive", "flash"), default="naive", action=_Given, help="attention kernel"
    )
    model.add_argument(
        "--pos-encoding",
        choices=("learned", "rope"),
        default=DEFAULT_BLOCK["pos_encoding"],
        action=_Given,
        help="positions: a learned embedding per position (GPT-2) or rotary queries and keys "
        "(RoPE), whose attention slides over the last --block-size characters when sampling",
    )
    opt = p.add_argument_group("optimization")
    opt.add_argument("--batch-size", type=positive_int, default=16, help="windows per step")
    opt.add_argument("--lr", type=positive_float, default=4e-3, help="peak learning rate of AdamW")
    opt.add_argument("--warmup-steps", type=non_negative_int, default=50, help="linear warmup before the cosine decay")
    opt.add_argument(
        "--min-lr-ratio",
        type=unit_interval,
        default=0.0,
        help="where the cosine decay ends, as a share of --lr (0: at 0, as PyTorch's CosineAnnealingLR)",
    )
    opt.add_argument(
        "--weight-decay",
        type=non_negative_float,
        default=0.1,
        help="AdamW's decoupled weight decay, on every matrix (embeddings included), not on vectors",
    )
    opt.add_argument(
        "--grad-clip",
        type=non_negative_float,
        default=1.0,
        help="clip the global gradient norm to this (0 = no clipping)",
    )
    sample = p.add_argument_group("sample printed at the end")
    sample.add_argument("--sample-prompt", default="The ", help="prompt of the final sample")
    sample.add_argument("--sample-tokens", type=non_negative_int, default=300, help="characters to generate")
    sample.add_argument(
        "--top-p",
        type=positive_fraction,
        default=None,
        metavar="P",
        help="nucleus sampling: draw among the likeliest characters whose probabilities add up to P",
    )
    p.set_defaults(run=_run_train, given=frozenset())


class _Given(argparse.Action):
    """Store a flag's value and note that it was given (``args.given``): a resumed run warns
    about the model flags it ignores, but not about their defaults."""

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, values)
        namespace.given = namespace.given | {self.dest}


def _run_train(args):
    if args.steps is None and not args.time_budget:
        raise ValueError("--time-budget 0 means no time limit: give --steps too")
    args.device = args.device or get_default_device()
    set_num_threads(args.threads)
    args.out = _run_folder(args)
    try:
        metrics = run_training(args)
    except NotImplementedError as error:
        if not str(error).startswith("Task 6."):  # another task's stub: nothing but that task helps
            raise
        raise NotImplementedError(
            f"{error}\nThe default block (RMSNorm, SwiGLU, rotary positions) is assignment 6's; until it is "
            f"done, train GPT-2's block, which needs only assignments 1-5: "
            f"--norm layernorm --mlp gelu --pos-encoding learned"
        ) from error
    return 130 if metrics["interrupted"] else 0


def _run_folder(args):
    """``--out``, or a new ``runs/<date-time>``; a folder that holds files only with
    ``--overwrite`` or when ``--resume`` continues the checkpoint in it."""
    if args.out is None:
        base = os.path.join("runs", time.strftime("%Y%m%d-%H%M%S"))
        out, n = base, 1
        while os.path.exists(out):  # two runs started in the same second
            n += 1
            out = f"{base}-{n}"
        return out
    files = sorted(os.listdir(args.out)) if os.path.isdir(args.out) else []
    if files and not args.overwrite and not _holds(args.out, args.resume):
        shown = ", ".join(files[:4]) + (", ..." if len(files) > 4 else "")
        raise ValueError(
            f"--out {args.out} already holds files ({shown}); give a new folder, continue its run "
            f"with --resume {os.path.join(args.out, 'checkpoint.npz')} --out {args.out}, "
            f"or replace its outputs with --overwrite"
        )
    return args.out


def _holds(folder, path):
    """Whether the file ``path`` (or None) lies in ``folder``."""
    return (
        path is not None and os.path.exists(path) and os.path.samefile(os.path.dirname(os.path.abspath(path)), folder)
    )


def add_sample(subparsers):
    p = subparsers.add_parser(
        "sample", help="generate text from a checkpoint of the train command", formatter_class=_ShowDefaults
    )
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--checkpoint", metavar="PATH", help="checkpoint.npz written by train")
    source.add_argument(
        "--pretrained",
        metavar="FOLDER",
        help="a Hugging Face GPT-2 or Llama folder (config.json, "
        "model.safetensors, tokenizer.json), sampled with its own tokenizer (the hf extra)",
    )
    p.add_argument("--prompt", default="The ", help="text to continue (unknown characters become a space)")
    p.add_argument(
        "--temperature", type=non_negative_float, default=0.8, help="softmax temperature (0 = always the likeliest)"
    )
    p.add_argument("--top-k", type=positive_int, default=None, help="sample among the k likeliest characters only")
    p.add_argument(
        "--top-p",
        type=positive_fraction,
        default=None,
        metavar="P",
        help="nucleus sampling: draw among the likeliest characters whose probabilities add up to P "
        "(the one that crosses P included; after --top-k)",
    )
    p.add_argument("--max-new-tokens", type=non_negative_int, default=300, help="characters to generate")
    p.add_argument("--seed", type=non_negative_int, default=None, help="seed for reproducible samples")
    p.add_argument("--device", type=usable_device, default=None, help=device_help())
    p.set_defaults(run=_run_sample)


def _run_sample(args):
    args.device = args.device or get_default_device()
    try:
        return run_sample_pretrained(args) if args.pretrained else run_sample(args)
    except ImportError as error:  # the optional safetensors and tokenizers packages: one line, as bad input
        return print_error("minitorch-attn sample", error)


def add_export(subparsers):
    p = subparsers.add_parser(
        "export",
        help="write a trained GPT's weights for PyTorch (safetensors + JSON config)",
        description="Write the weights of a checkpoint of the train command as safetensors, under the "
        "parameter names of minitorch_attn.app.torch_gpt.GPT, and its config and vocabulary as "
        'JSON beside them (needs the export extra: pip install -e ".[export]").',
    )
    p.add_argument("--checkpoint", required=True, metavar="PATH", help="checkpoint.npz written by train")
    p.add_argument(
        "--out",
        required=True,
        metavar="FILE.safetensors",
        help="the weights to write (FILE.json beside); with --format transformers, the folder to write",
    )
    p.add_argument(
        "--format",
        choices=("safetensors", "transformers"),
        default="safetensors",
        help="safetensors: for minitorch_attn.app.torch_gpt (the default); transformers: a Hugging Face "
        "folder (config.json, model.safetensors, tokenizer.json) for AutoModelForCausalLM "
        "(the hf extra)",
    )
    p.add_argument("--overwrite", action="store_true", help="replace an earlier export at --out (refused otherwise)")
    p.set_defaults(run=_run_export)


def _run_export(args):
    try:
        return run_export_transformers(args) if args.format == "transformers" else run_export(args)
    except ImportError as error:  # the optional safetensors package: one line, as bad input
        return print_error("minitorch-attn export", error)


SUBCOMMANDS = [add_gradcheck, add_train, add_sample, add_export, add_homework, add_demo]


def main(argv=None):
    keep_freed_memory()  # speed: a whole program of ours, so the process-wide malloc setting is ours to make
    stop_as_ctrl_c()  # closing the terminal (SIGHUP) and kill (SIGTERM) stop as Ctrl-C does
    parser = CommandParser(prog="minitorch-attn", description="A readable autograd engine for attention.")
    parser.add_argument("--version", action="version", version=f"minitorch-attn {__version__}")
    subparsers = parser.add_subparsers(dest="command", required=True)
    for add in SUBCOMMANDS:
        add(subparsers)
    name = "minitorch-attn"  # and the command, once it is known
    try:
        args, extra = parser.parse_known_args(argv)
        name = " ".join(filter(None, [name, args.command, getattr(args, "action", None)]))
        if extra and not getattr(args, "passes_extra", False):
            subparsers.choices[args.command].error(f"unrecognized arguments: {' '.join(extra)}")
        args.extra = extra
        return args.run(args) or 0
    except (
        ValueError,
        TypeError,
        OSError,
        DeviceUnavailableError,
    ) as error:  # bad input (CheckpointError is a ValueError)
        return print_error(name, _describe(error))
    except KeyboardInterrupt:  # Ctrl-C: a clean stop (train saves its checkpoint itself before this)
        sys.stdout.flush()
        print(f"\n{name}: interrupted", file=sys.stderr)
        return 130


def _describe(error):
    """The error's message; an OSError's as "reason: 'path'" (without "[Errno 2]")."""
    if isinstance(error, OSError) and error.strerror:
        return f"{error.strerror}: {error.filename!r}" if error.filename else error.strerror
    return str(error) or type(error).__name__


if __name__ == "__main__":
    sys.exit(main())
