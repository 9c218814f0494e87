# %% [markdown]
# # Why divide the scores by √d_k? (section 4, step 2, and mistake 1 of section 16)
#
# For query and key entries drawn independently with mean 0 and variance 1, the dot product
# `q·k` is a sum of `d_k` such products: its variance is `d_k`. Wider heads give larger
# scores, and a softmax of large scores puts nearly all the weight on one key; its gradient
# then nearly vanishes. Dividing by `√d_k` brings the variance back to 1 for every `d_k`.
#
# We measure, for growing `d_k`, the spread of the scores, the entropy of the softmax (how
# spread the weights are: `log S` when uniform over `S` keys, 0 when one-hot) and the size of
# the gradient that flows back through it.

# %%
"""Section 4 (step 2) and section 16 (mistake 1): why divide the scores by sqrt(d_k)?

    python demos/09_scaling.py [--device cpu|cuda] [--quick] [--seed N] [--out DIR]

With q and k of independent N(0, 1) entries, q·k has variance d_k, so the unscaled scores
grow like sqrt(d_k) and the softmax saturates: it puts almost all weight on one key, its
entropy collapses towards 0 and the gradient that flows back through it vanishes. Dividing
by sqrt(d_k) keeps the scores' variance at 1 for every d_k. For growing d_k this demo
measures, with and without the factor, the scores' standard deviation, the softmax entropy
(in nats; log S for uniform weights) and the median norm of a row of the gradient of the
scores under a random upstream gradient, and plots the last two; then checks what the factor
does not fix (entries of larger variance). Source: arXiv:1706.03762, §3.2.1, note 4.
"""

import math

import numpy

import minitorch_attn.functional as F
from minitorch_attn.app.demo_common import log_ticks, pyplot, randn, save, setup

args, out = setup(__doc__, "09_scaling")


def softmax_statistics(q, k, scale, upstream):
    """Score std, mean softmax entropy (nats), median per-row norm of d(loss)/d(scores) and
    mean largest weight for ``softmax(scale q kᵀ)`` with ``loss = sum(weights * upstream)``."""
    scores = (q @ k.transpose(-2, -1)) * scale
    scores = scores.detach().requires_grad_()
    weights = F.softmax(scores, dim=-1)
    (weights * upstream).sum().backward()
    p = weights.numpy().astype(numpy.float64)
    entropy = -(p * numpy.log(numpy.maximum(p, 1e-30))).sum(-1).mean()
    grad_norm = numpy.median(numpy.linalg.norm(scores.grad.numpy().astype(numpy.float64), axis=-1))
    return float(scores.numpy().std()), float(entropy), float(grad_norm), float(p.max(-1).mean())


# %% [markdown]
# ## With and without the factor, as `d_k` grows

# %%
dims = [4, 16, 64, 256] if args.quick else [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024]
batch, seq_len = (4, 32) if args.quick else (16, 64)
upstream = randn(args.rng, batch, seq_len, seq_len, device=args.device)
print(
    f"q, k: ({batch}, {seq_len}, d_k) of N(0, 1); uniform weights would have entropy "
    f"log {seq_len} = {math.log(seq_len):.3f} nats"
)
print(
    f"{'d_k':>5} | {'score std':>9} {'entropy':>8} {'grad norm':>10} (÷√d_k) | "
    f"{'score std':>9} {'entropy':>8} {'grad norm':>10} (unscaled)"
)
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
print(
    f"tutorial: without scaling the softmax becomes 'nearly one-hot (0.0001, 0.0001, 0.9998)'; measured at "
    f"d_k = {dims[-1]}: the largest weight of a row is {table['unscaled'][-1][3]:.4f} on average "
    f"(with the factor: {table['scaled'][-1][3]:.4f})"
)

# %% [markdown]
# ## What the factor does not fix
#
# The tutorial says the factor "prevents this completely". It normalizes for the *width*;
# if the entries of `q` and `k` themselves grow (as activations can during training), the
# scores grow with them, and the softmax saturates all the same.

# %%
d_k = 64
for std in (1.0, 2.0, 4.0):
    q = randn(args.rng, batch, seq_len, d_k, device=args.device) * std
    k = randn(args.rng, batch, seq_len, d_k, device=args.device) * std
    score_std, entropy, grad_norm, largest = softmax_statistics(q, k, 1.0 / math.sqrt(d_k), upstream)
    print(
        f"  q, k entries of std {std:g}, divided by sqrt({d_k}): score std {score_std:6.2f}, entropy {entropy:.3f} "
        f"nats, largest weight {largest:.3f} on average, grad norm {grad_norm:.2e}"
    )
print(
    "  the factor corrects for the width d_k, not for the size of the entries: 'completely' holds for entries "
    "of std 1 only"
)

# %% [markdown]
# ## The picture

# %%
plt = pyplot()
fig, axes = plt.subplots(1, 2, figsize=(10, 4.2), layout="constrained")
for label, style in (("scaled", "o-"), ("unscaled", "s--")):
    name = "softmax(q·k / √d_k)" if label == "scaled" else "softmax(q·k)"
    axes[0].plot(dims, [row[1] for row in table[label]], style, label=name)
    axes[1].plot(dims, [row[2] for row in table[label]], style, label=name)
axes[0].axhline(math.log(seq_len), color="gray", linestyle=":", label=f"uniform (log {seq_len})")
axes[0].set_ylabel("mean softmax entropy (nats)")
axes[0].set_title("How spread the weights are")
axes[1].set_ylabel("median ‖∂loss/∂scores‖ of a row")
axes[1].set_yscale("log")
axes[1].set_title("How much gradient flows back")
for ax in axes:
    ax.set_xscale("log", base=2)
    log_ticks(ax.xaxis, at=dims)
    ax.set_xlabel("d_k")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
fig.suptitle("Without 1/√d_k the softmax saturates and its gradient vanishes as d_k grows")
save(fig, out, "scaling.png")
