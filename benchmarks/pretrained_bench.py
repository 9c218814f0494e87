"""Loading and running GPT-2 small's shape from a Hugging Face folder: ours against transformers.

    python benchmarks/pretrained_bench.py                        # GPT-2 small, random weights, 256 tokens
    python benchmarks/pretrained_bench.py --seq-len 1024 --threads 2
    python benchmarks/pretrained_bench.py --folder path/to/gpt2  # a folder of your own (real weights)

Without ``--folder`` the script first makes one: ``GPT2LMHeadModel(GPT2Config())`` of
transformers (124M parameters, 12 layers of width 768, 50,257 tokens, random weights, seed 0)
saved with ``save_pretrained`` into a temporary folder. Then each side runs in a process of
its own, so neither's memory counts against the other:

* **ours**: ``minitorch_attn.nn.GPT.from_pretrained(folder)`` (safetensors read tensor by
  tensor, GPT-2's ``Conv1D`` matrices transposed), then forwards of ``(batch, seq_len)``
  random token ids under ``no_grad``;
* **transformers**: ``AutoModelForCausalLM.from_pretrained(folder)`` in float32, eval mode,
  the same forwards under ``torch.no_grad``.

Printed per side: the load's wall time, the forward's median time over ``--repeats`` runs
after one warm-up, and the process's peak resident memory above what it held after its
imports (``VmHWM``: everything the process touched, the array library's and Python's),
once after loading and once after the forwards; and the largest difference between the two
sides' logits. Needs the ``hf`` extra and PyTorch.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy


def resident_mb():
    """The resident memory of this process now, in MiB (Linux ``/proc/self/statm``)."""
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def peak_mb():
    """The peak resident memory of this process so far, in MiB: ``VmHWM`` of
    ``/proc/self/status`` (Linux). Not ``ru_maxrss``, which a process started by another
    inherits from it across ``exec`` (the parent that made the folder holds ~900 MiB)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    raise OSError("no VmHWM in /proc/self/status")


def child(side, folder, batch, seq_len, repeats, threads, logits_path):
    """Load ``folder`` with ``side``, run the forwards, print one JSON line of figures."""
    if side == "ours":
        import minitorch_attn as mt
        from minitorch_attn import nn

        mt.set_num_threads(threads)
        base = resident_mb()
        start = time.perf_counter()
        model = nn.GPT.from_pretrained(folder)
        load_s, load_peak = time.perf_counter() - start, peak_mb() - base
        ids = mt.tensor(numpy.random.default_rng(0).integers(0, model.config["vocab_size"], (batch, seq_len)))

        def forward():
            with mt.no_grad():
                return model(ids).numpy()
    else:
        import torch
        import transformers

        if threads:
            torch.set_num_threads(threads)
        base = resident_mb()
        start = time.perf_counter()
        model = transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
        load_s, load_peak = time.perf_counter() - start, peak_mb() - base
        ids = torch.tensor(numpy.random.default_rng(0).integers(0, model.config.vocab_size, (batch, seq_len)))

        def forward():
            with torch.no_grad():
                return model(ids).logits.numpy()

    logits = forward()  # warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        logits = forward()
        times.append(time.perf_counter() - start)
    numpy.save(logits_path, logits[:, -8:])
    params = sum(int(numpy.prod(p.shape)) for p in model.parameters())
    print(
        json.dumps(
            dict(
                load_s=load_s,
                load_peak_mb=load_peak,
                forward_s=float(numpy.median(times)),
                total_peak_mb=peak_mb() - base,
                params=params,
            )
        )
    )


def make_folder(root):
    """``GPT2LMHeadModel(GPT2Config())`` with random weights (seed 0), saved in ``root/gpt2-small``."""
    import torch
    import transformers

    torch.manual_seed(0)
    folder = os.path.join(root, "gpt2-small")
    transformers.GPT2LMHeadModel(transformers.GPT2Config()).save_pretrained(folder)
    return folder


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--folder", help="a Hugging Face GPT-2 or Llama folder (default: GPT-2 small, random)")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--seq-len", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=None, help="threads of both libraries (default: theirs)")
    parser.add_argument("--child", choices=("ours", "transformers"), help=argparse.SUPPRESS)
    parser.add_argument("--logits", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args.child, args.folder, args.batch, args.seq_len, args.repeats, args.threads, args.logits)
        return 0
    with tempfile.TemporaryDirectory() as root:
        folder = args.folder or make_folder(root)
        results = {}
        for side in ("ours", "transformers"):
            command = [
                sys.executable,
                os.path.abspath(__file__),
                "--child",
                side,
                "--folder",
                folder,
                "--batch",
                str(args.batch),
                "--seq-len",
                str(args.seq_len),
                "--repeats",
                str(args.repeats),
                "--logits",
                os.path.join(root, f"{side}.npy"),
            ]
            if args.threads:
                command += ["--threads", str(args.threads)]
            done = subprocess.run(command, capture_output=True, text=True, check=True)
            results[side] = json.loads(done.stdout.strip().splitlines()[-1])
        difference = float(
            numpy.abs(
                numpy.load(os.path.join(root, "ours.npy")) - numpy.load(os.path.join(root, "transformers.npy"))
            ).max()
        )
    print(
        f"{folder if args.folder else 'GPT2LMHeadModel(GPT2Config()), random weights'}: "
        f"{results['ours']['params']:,} parameters; forward of ({args.batch}, {args.seq_len}) token ids, "
        f"median of {args.repeats}; threads: {args.threads or 'each library its default'}"
    )
    print(f"{'':14}{'load s':>9}{'peak MiB after load':>22}{'forward s':>12}{'peak MiB after forward':>25}")
    for side, r in results.items():
        print(f"{side:14}{r['load_s']:9.2f}{r['load_peak_mb']:22.0f}{r['forward_s']:12.3f}{r['total_peak_mb']:25.0f}")
    ratio = results["ours"]["forward_s"] / results["transformers"]["forward_s"]
    print(
        f"forward time ours / transformers: {ratio:.2f}x; "
        f"max |logits difference| on the last 8 positions: {difference:.1e}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
