# %% [markdown]
# # Sections 8-9: LayerNorm against BatchNorm, and LayerNorm step by step
#
# Both normalizations compute `(x - mean) / sqrt(var + eps)`; they differ only in *which*
# numbers the mean and the variance are taken over. BatchNorm takes them over the batch (and
# the sequence, when there is one), separately for each feature; LayerNorm takes them over
# the features of each token on its own. Everything that separates the two follows from that
# choice, and we measure the tutorial's claims about it one by one.
#
# Then LayerNorm itself, as the tutorial writes it (four steps of primitive operations that
# autograd differentiates one by one) against our `F.layer_norm` (one operation whose
# backward is a closed form), a float64 NumPy computation, and PyTorch when it is installed.

# %%
"""Sections 8-9: LayerNorm against BatchNorm, measured; LayerNorm from scratch against the fused one.

    python demos/03_layernorm.py [--device cpu|cuda] [--quick] [--seed N] [--out DIR]

Section 8: BatchNorm (statistics over the batch) and LayerNorm (over the features) at batch
size 1 with and without a sequence axis, in training and in evaluation mode, with a changed
batchmate and with more padding: how much the output of one sample changes, and whether any
gradient reaches the input. Section 9: the tutorial's LayerNorm from primitive ops beside
``F.layer_norm`` (dx = rstd (g·γ - mean(g·γ) - x̂ mean(g·γ x̂))), a float64 NumPy reference and
PyTorch's: the output's mean and std per row and the largest differences of outputs and
gradients under a random upstream gradient. Draws the histograms of input and output.
Sources: Ioffe & Szegedy, arXiv:1502.03167 (BatchNorm); Ba et al., arXiv:1607.06450, eq. 4.
"""

import numpy

import minitorch_attn as mt
import minitorch_attn.functional as F
from minitorch_attn.app.demo_common import normalize_over, pyplot, randn, save, setup

args, out = setup(__doc__, "03_layernorm")
d = 512
batch_norm_dims, layer_norm_dims = (0, 1), (-1,)  # (batch, seq) per feature; the features per token


def change_of_sample_0(dims, first, second):
    """``max |y[0] - y'[0]|`` where ``y = normalize_over(first, dims)`` and ``y'`` the same of ``second``."""
    return float(numpy.abs(normalize_over(first, dims).numpy()[0] - normalize_over(second, dims).numpy()[0]).max())


# %% [markdown]
# ## Section 8: the tutorial's three problems of BatchNorm
#
# *Problem 1, batch size 1.* With one sample and no sequence axis, each feature's batch
# mean is the sample itself: `x - mean = 0`, the output is a constant and no gradient
# reaches the input (PyTorch refuses to run it). But in a Transformer the statistics are
# also taken over the sequence, and at inference BatchNorm uses the running statistics of
# training: both work at batch size 1.

# %%
print("section 8: BatchNorm normalizes each feature over (batch, seq); LayerNorm each token over its features")
for shape, dims, verdict in (
    ((1, d), (0,), "fails: a constant output, no gradient"),
    ((1, 10, d), batch_norm_dims, "works: 10 values per feature"),
):
    outputs, gradients = [], []
    for _ in range(2):  # two different inputs
        x = randn(args.rng, *shape, device=args.device, requires_grad=True)
        y = normalize_over(x, dims)
        (y * randn(args.rng, *shape, device=args.device)).sum().backward()
        outputs.append(y.numpy())
        gradients.append(float(numpy.linalg.norm(x.grad.numpy())))
    print(
        f"  batch 1, {'no sequence axis' if len(shape) == 2 else 'a sequence of 10'}, training mode: two inputs -> "
        f"max |y1 - y2| = {numpy.abs(outputs[0] - outputs[1]).max():.2f}, |grad x| = {gradients[0]:.2f}  ({verdict})"
    )
sequence = randn(args.rng, 1, 10, d, device=args.device)
training_batch = randn(args.rng, 32, 10, d, device=args.device) * 2.0 + 1.0
running_mean = training_batch.mean(dim=batch_norm_dims, keepdim=True)  # what training stored
running_var = training_batch.var(dim=batch_norm_dims, keepdim=True, correction=0)
eval_mode = ((sequence - running_mean) / (running_var + 1e-5).sqrt()).numpy()
train_mode = normalize_over(sequence, batch_norm_dims).numpy()
print(
    f"  batch 1, evaluation mode (running statistics of training): works, but differs from training mode "
    f"on the same input by max {numpy.abs(eval_mode - train_mode).max():.2f}  (problem 3, different "
    f"behaviour in training and testing: true)"
)
try:
    import torch
except ImportError:
    torch = None
if torch is not None and not args.quick:
    try:
        torch.nn.BatchNorm1d(d)(torch.zeros(1, d))
    except ValueError as error:
        print(f"  PyTorch's BatchNorm1d on (1, {d}) in training mode: ValueError: {error}")

# %% [markdown]
# *Problem 2, variable lengths*, and a fourth one the tutorial does not name: with
# BatchNorm, a sample's output depends on the *other* samples of its batch and on how much
# padding they bring. LayerNorm sees one token at a time.

# %%
batch = randn(args.rng, 4, 10, d, device=args.device)
other = batch.numpy().copy()
other[1] = args.rng.standard_normal((10, d))  # a different batchmate
other = mt.tensor(other, device=args.device)
print(
    f"  a different sample 1 changes the output of sample 0 by: BatchNorm "
    f"{change_of_sample_0(batch_norm_dims, batch, other):.3f}, "
    f"LayerNorm {change_of_sample_0(layer_norm_dims, batch, other):.1e}"
)
real = batch.numpy()[:, :6]  # 6 real tokens each
short, long = (
    mt.tensor(numpy.concatenate([real, numpy.zeros((4, pad, d), numpy.float32)], axis=1), device=args.device)
    for pad in (4, 14)
)  # padded to 10 and to 20
bn = [normalize_over(t, batch_norm_dims).numpy()[:, :6] for t in (short, long)]
ln = [normalize_over(t, layer_norm_dims).numpy()[:, :6] for t in (short, long)]
print(
    f"  padding to 20 tokens instead of 10 changes the real tokens' outputs by: BatchNorm "
    f"{numpy.abs(bn[0] - bn[1]).max():.3f}, LayerNorm {numpy.abs(ln[0] - ln[1]).max():.1e}"
)
print("tutorial: 'fails when batch size = 1': only in training mode and without a sequence axis (measured above)")

# %% [markdown]
# ## Section 9: LayerNorm step by step
#
# The tutorial's four steps, each a primitive operation (mean, variance, division, scale
# and shift), against `F.layer_norm`, whose backward is one closed-form line derived by hand.
# The check uses a random upstream gradient: with a plain sum, errors that cancel would hide.


# %%
def layer_norm_from_primitives(x, gamma, beta, eps=1e-5):
    """The tutorial's LayerNorm: steps 1-3 (mean, variance, normalize) in primitive ops, then
    step 4, scale and shift; autograd differentiates it step by step."""
    return gamma * normalize_over(x, layer_norm_dims, eps) + beta


def output_and_gradients(fn, x, gamma, beta, upstream):
    """The output and the gradients of x, gamma and beta for ``loss = sum(fn(...) * upstream)``."""
    x, gamma, beta = (t.detach().requires_grad_() for t in (x, gamma, beta))
    y = fn(x, gamma, beta)
    (y * upstream).sum().backward()
    return [t.numpy() for t in (y, x.grad, gamma.grad, beta.grad)]


def float64_reference(x, gamma, beta, upstream, eps=1e-5):
    """The same output and gradients in float64 NumPy, from the closed form (no autograd)."""
    x, gamma, beta, g = (t.numpy().astype(numpy.float64) for t in (x, gamma, beta, upstream))
    x_hat = (x - x.mean(-1, keepdims=True)) / numpy.sqrt(x.var(-1, keepdims=True) + eps)
    rstd = 1 / numpy.sqrt(x.var(-1, keepdims=True) + eps)
    dx_hat = g * gamma
    dx = rstd * (dx_hat - dx_hat.mean(-1, keepdims=True) - x_hat * (dx_hat * x_hat).mean(-1, keepdims=True))
    rows = tuple(range(x.ndim - 1))
    return [gamma * x_hat + beta, dx, (g * x_hat).sum(rows), g.sum(rows)]


shape = (4, 10, d)
x = randn(args.rng, *shape, device=args.device) * 5.0 + 3.0  # far from standard: mean 3, std 5
gamma = 1.0 + 0.1 * randn(args.rng, d, device=args.device)
beta = 0.1 * randn(args.rng, d, device=args.device)
upstream = randn(args.rng, *shape, device=args.device)
results = {
    "F.layer_norm": output_and_gradients(lambda x, g, b: F.layer_norm(x, (d,), g, b), x, gamma, beta, upstream),
    "from primitives": output_and_gradients(layer_norm_from_primitives, x, gamma, beta, upstream),
}
if torch is not None and not args.quick:
    tx, tg, tb = (torch.tensor(t.numpy(), requires_grad=True) for t in (x, gamma, beta))
    ty = torch.nn.functional.layer_norm(tx, (d,), tg, tb)
    (ty * torch.tensor(upstream.numpy())).sum().backward()
    results["PyTorch"] = [ty.detach().numpy(), tx.grad.numpy(), tg.grad.numpy(), tb.grad.numpy()]
elif args.quick:
    print("--quick: skipped the comparison with PyTorch (importing it takes seconds)")
else:
    print("PyTorch is not installed: skipped the comparison with torch.nn.functional.layer_norm")
reference = float64_reference(x, gamma, beta, upstream)

plain = F.layer_norm(x, (d,)).numpy()  # γ = 1, β = 0: the statistics the tutorial prints
print(f"\nsection 9: input  shape {x.shape}: mean {x.numpy().mean():+.4f}, std {x.numpy().std():.4f}")
print(f"output mean per row: max |mean| {numpy.abs(plain.mean(axis=-1)).max():.2e}  (≈ 0)")
print(f"output std per row: min {plain.std(axis=-1).min():.6f}, max {plain.std(axis=-1).max():.6f}  (≈ 1)")
names = ("output", "grad x", "grad gamma", "grad beta")
print("max |float32 result - float64 NumPy reference|:")
print(f"  {'':<11} " + " ".join(f"{name:>16}" for name in results) + f" {'scale':>10}")
for i, name in enumerate(names):
    print(
        f"  {name:<11} "
        + " ".join(f"{numpy.abs(r[i] - reference[i]).max():16.2e}" for r in results.values())
        + f" {numpy.abs(reference[i]).max():10.2e}"
    )
print("max |F.layer_norm - from primitives| (float32):")
for name, a, b in zip(names, results["F.layer_norm"], results["from primitives"]):
    print(f"  {name:<11} {numpy.abs(a - b).max():.2e}")

# %% [markdown]
# ## The picture
#
# The input (mean 3, std 5) and what LayerNorm makes of it: each row with mean 0 and std 1.

# %%
plt = pyplot()
fig, axes = plt.subplots(1, 2, figsize=(9, 3.6), layout="constrained")
axes[0].hist(x.numpy().ravel(), bins=80, color="tab:gray")
axes[0].set_title("input x: mean 3, std 5")
axes[1].hist(plain.ravel(), bins=80, color="tab:blue")
axes[1].set_title("layer_norm(x): each row mean 0, std 1")
for ax in axes:
    ax.set_xlabel("value")
    ax.set_ylabel("count")
save(fig, out, "layernorm_histogram.png")
