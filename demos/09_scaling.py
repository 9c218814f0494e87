"""Why divide the scores by sqrt(d_k)?

    python demos/09_scaling.py [--device cpu|cuda] [--quick] [--seed N] [--out DIR]

With q and k of independent N(0, 1) entries, q·k has variance d_k, so the unscaled scores
grow like sqrt(d_k) and the softmax saturates: it puts almost all weight on one key, its
entropy collapses towards 0 and the gradient that flows back through it vanishes. Dividing
by sqrt(d_k) keeps the scores' variance at 1 for every d_k. For growing d_k this demo
measures, with and without the factor, the scores' standard deviation, the softmax entropy
(in nats; log S for uniform weights) and the median norm of a row of the gradient of the scores under a
random upstream gradient, and plots the last two. Source: arXiv:1706.03762, §3.2.1, note 4.
"""

import math
import sys

import numpy

import minitorch_attn.functional as F
from minitorch_attn.demo_common import pyplot, randn, save, setup


def softmax_statistics(q, k, scale, upstream):
    """Score std, mean softmax entropy (nats) and median per-row norm of d(loss)/d(scores) for
    ``softmax(scale q kᵀ)`` with ``loss = sum(weights * upstream)``."""
    scores = (q @ k.transpose(-2, -1)) * scale
    scores = scores.detach().requires_grad_()
    weights = F.softmax(scores, dim=-1)
    (weights * upstream).sum().backward()
    p = weights.numpy().astype(numpy.float64)
    entropy = -(p * numpy.log(numpy.maximum(p, 1e-30))).sum(-1).mean()
    grad_norm = numpy.median(numpy.linalg.norm(scores.grad.numpy().astype(numpy.float64), axis=-1))
    return float(scores.numpy().std()), float(entropy), float(grad_norm)


def main(argv=None):
    args, out = setup(__doc__, "09_scaling", argv)
    dims = [4, 16, 64, 256] if args.quick else [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024]
    batch, seq_len = (4, 32) if args.quick else (16, 64)
    upstream = randn(args.rng, batch, seq_len, seq_len, device=args.device)
    print(f"q, k: ({batch}, {seq_len}, d_k) of N(0, 1); uniform weights would have entropy "
          f"log {seq_len} = {math.log(seq_len):.3f} nats")
    print(f"{'d_k':>5} | {'score std':>9} {'entropy':>8} {'grad norm':>10} (÷√d_k) | "
          f"{'score std':>9} {'entropy':>8} {'grad norm':>10} (unscaled)")
    table = {"scaled": [], "unscaled": []}
    for d_k in dims:
        q = randn(args.rng, batch, seq_len, d_k, device=args.device)
        k = randn(args.rng, batch, seq_len, d_k, device=args.device)
        table["scaled"].append(softmax_statistics(q, k, 1.0 / math.sqrt(d_k), upstream))
        table["unscaled"].append(softmax_statistics(q, k, 1.0, upstream))
        s, u = table["scaled"][-1], table["unscaled"][-1]
        print(f"{d_k:>5} | {s[0]:9.3f} {s[1]:8.3f} {s[2]:10.2e}          | {u[0]:9.3f} {u[1]:8.3f} {u[2]:10.2e}")
    ratio = table["scaled"][-1][2] / max(table["unscaled"][-1][2], 1e-300)
    print(f"at d_k = {dims[-1]} the gradient through the softmax is {ratio:,.0f}x larger with the 1/sqrt(d_k) factor")

    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    for label, style in (("scaled", "o-"), ("unscaled", "s--")):
        name = "softmax(q·k / √d_k)" if label == "scaled" else "softmax(q·k)"
        axes[0].plot(dims, [row[1] for row in table[label]], style, label=name)
        axes[1].plot(dims, [row[2] for row in table[label]], style, label=name)
    axes[0].axhline(math.log(seq_len), color="gray", linestyle=":", label=f"uniform (log {seq_len})")
    axes[0].set_ylabel("mean softmax entropy (nats)")
    axes[1].set_ylabel("median ‖∂loss/∂scores‖ of a row")
    axes[1].set_yscale("log")
    for ax in axes:
        ax.set_xscale("log", base=2)
        ax.set_xlabel("d_k")
        ax.grid(alpha=0.3)
        ax.legend()
    fig.suptitle("Without 1/√d_k the softmax saturates and its gradient vanishes as d_k grows")
    fig.tight_layout()
    save(fig, out, "scaling.png")


if __name__ == "__main__":
    sys.exit(main())
