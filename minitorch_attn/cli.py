"""The ``minitorch-attn`` command.

    minitorch-attn gradcheck [--device cpu] [--dtype float64]   run the gradient-check suite
    minitorch-attn train [--text PATH] [--time-budget 240] ...   train a character-level GPT
    minitorch-attn sample --checkpoint PATH --prompt TEXT        sample text from a trained GPT
    minitorch-attn demo --list | NAME                             the tutorial's demos
    minitorch-attn homework make|grade|check                      student versions and grading

Each subcommand is one ``add_<name>(subparsers)`` function below that registers its
arguments and the function that runs it. Bad arguments and unusable files end a command
with one line ``minitorch-attn <command>: <what was wrong>`` on stderr and exit status 2:
argparse checks each flag's value, and :func:`main` turns the errors a command raises for
bad input (ValueError, TypeError, OSError, DeviceUnavailableError) into that line; other
errors, such as a homework stub's NotImplementedError, keep their traceback.
"""

from __future__ import annotations

import argparse
import os
import sys

from .argtypes import (
    folder, non_negative_float, non_negative_int, open_fraction, positive_float, positive_int, probability,
    usable_device,
)
from .core.backend import DeviceUnavailableError, get_default_device
from .demos_cli import add_demo
from .gradcheck.command import main as gradcheck_main
from .homework.command import add_homework
from .threads import set_num_threads
from .train import run_sample, run_training


def add_gradcheck(subparsers):
    p = subparsers.add_parser("gradcheck", add_help=False,
                              help="run the gradient-check suite; see minitorch-attn gradcheck -h")
    p.set_defaults(run=_run_gradcheck, passes_extra=True)


def _run_gradcheck(args):
    return gradcheck_main(args.extra, prog="minitorch-attn gradcheck")


class _ShowDefaults(argparse.ArgumentDefaultsHelpFormatter):
    """Append "(default: X)" to a flag's help, except where there is nothing to show."""

    def _get_help_string(self, action):
        if action.default in (None, False):
            return action.help
        return super()._get_help_string(action)


def add_train(subparsers):
    p = subparsers.add_parser(
        "train", help="train a character-level GPT (default corpus: the Python language reference)",
        description="Train a character-level GPT on a text file (default: the Python language reference "
                    "shipped with CPython), printing validation bits per character beside a bigram "
                    "baseline; writes checkpoint.npz, loss.png, attention.png and metrics.json.",
        epilog="Threads: without --threads, training times one BLAS thread against one per core every "
               "100 steps and keeps the faster (one wins when other programs keep a core busy).",
        formatter_class=_ShowDefaults)
    data = p.add_argument_group("data and outputs")
    data.add_argument("--text", metavar="PATH", help="UTF-8 text file to train on (default: pydoc_data.topics)")
    data.add_argument("--val-fraction", type=open_fraction, default=0.1, help="share of the text (its end) kept for validation")
    data.add_argument("--out", metavar="DIR", type=folder, help="run folder (default: runs/<date-time>)")
    data.add_argument("--resume", metavar="CHECKPOINT", help="continue from a checkpoint.npz (its model config and vocabulary win)")
    run = p.add_argument_group("how long and where")
    run.add_argument("--device", type=usable_device, default=None,
                     help="cpu, cuda or strict (default: $MINITORCH_ATTN_DEVICE or cpu)")
    run.add_argument("--steps", type=positive_int, default=None, help="number of optimizer steps (default: as many as --time-budget allows); "
                     "the run stops at whichever limit comes first")
    run.add_argument("--time-budget", type=non_negative_float, default=240.0, help="seconds of training, periodic validation included (0 = no limit; then give --steps)")
    run.add_argument("--seed", type=non_negative_int, default=1337, help="seed for the weights, the batches and the sample")
    run.add_argument("--eval-interval", type=positive_int, default=100, help="steps between validation estimates")
    run.add_argument("--eval-windows", type=positive_int, default=64, help="validation windows per periodic estimate (the final one uses all)")
    run.add_argument("--threads", type=positive_int, default=None,
                     help="CPU threads for BLAS and flash attention's pool (default: chosen by timing, "
                          "see below)")
    run.add_argument("--quiet", action="store_true", help="no progress bar or log lines")
    model = p.add_argument_group("model")
    model.add_argument("--d-model", type=positive_int, default=128, help="width of the residual stream")
    model.add_argument("--num-layers", type=positive_int, default=4, help="Transformer blocks")
    model.add_argument("--num-heads", type=positive_int, default=4, help="attention heads per block")
    model.add_argument("--block-size", type=positive_int, default=64, help="context length in characters")
    model.add_argument("--dropout", type=probability, default=0.0, help="dropout probability")
    model.add_argument("--norm", choices=("layernorm", "rmsnorm"), default="layernorm", help="normalization layer")
    model.add_argument("--attn-impl", choices=("naive", "flash"), default="naive", help="attention kernel")
    opt = p.add_argument_group("optimization")
    opt.add_argument("--batch-size", type=positive_int, default=16, help="windows per step")
    opt.add_argument("--lr", type=positive_float, default=3e-3, help="peak learning rate of AdamW")
    opt.add_argument("--warmup-steps", type=non_negative_int, default=50, help="linear warmup before the cosine decay")
    opt.add_argument("--weight-decay", type=non_negative_float, default=0.1, help="AdamW's decoupled weight decay (matrices only)")
    opt.add_argument("--grad-clip", type=positive_float, default=1.0, help="clip the global gradient norm to this")
    sample = p.add_argument_group("sample printed at the end")
    sample.add_argument("--sample-prompt", default="The ", help="prompt of the final sample")
    sample.add_argument("--sample-tokens", type=non_negative_int, default=300, help="characters to generate")
    p.set_defaults(run=_run_train)


def _run_train(args):
    if args.steps is None and not args.time_budget:
        raise ValueError("--time-budget 0 means no time limit: give --steps too")
    args.device = args.device or get_default_device()
    set_num_threads(args.threads)
    if args.out is None:
        import time

        args.out = os.path.join("runs", time.strftime("%Y%m%d-%H%M%S"))
    run_training(args)


def add_sample(subparsers):
    p = subparsers.add_parser("sample", help="generate text from a checkpoint of the train command",
                              formatter_class=_ShowDefaults)
    p.add_argument("--checkpoint", required=True, metavar="PATH", help="checkpoint.npz written by train")
    p.add_argument("--prompt", default="The ", help="text to continue (unknown characters become a space)")
    p.add_argument("--temperature", type=non_negative_float, default=0.8, help="softmax temperature (0 = always the likeliest)")
    p.add_argument("--top-k", type=positive_int, default=None, help="sample among the k likeliest characters only")
    p.add_argument("--max-new-tokens", type=non_negative_int, default=300, help="characters to generate")
    p.add_argument("--seed", type=non_negative_int, default=None, help="seed for reproducible samples")
    p.add_argument("--device", type=usable_device, default=None, help="cpu, cuda or strict")
    p.set_defaults(run=_run_sample)


def _run_sample(args):
    args.device = args.device or get_default_device()
    return run_sample(args)


SUBCOMMANDS = [add_gradcheck, add_train, add_sample, add_homework, add_demo]


def main(argv=None):
    parser = argparse.ArgumentParser(prog="minitorch-attn", description="A readable autograd engine for attention.")
    subparsers = parser.add_subparsers(dest="command", required=True)
    for add in SUBCOMMANDS:
        add(subparsers)
    args, extra = parser.parse_known_args(argv)
    if extra and not getattr(args, "passes_extra", False):
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    args.extra = extra
    try:
        return args.run(args) or 0
    except (ValueError, TypeError, OSError, DeviceUnavailableError) as error:  # bad input (CheckpointError is a ValueError)
        command = " ".join(filter(None, [args.command, getattr(args, "action", None)]))
        print(f"minitorch-attn {command}: {_describe(error)}", file=sys.stderr)
        return 2


def _describe(error):
    """The error's message; an OSError's as "reason: 'path'" (without "[Errno 2]")."""
    if isinstance(error, OSError) and error.strerror:
        return f"{error.strerror}: {error.filename!r}" if error.filename else error.strerror
    return str(error) or type(error).__name__


if __name__ == "__main__":
    sys.exit(main())
