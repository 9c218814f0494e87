# %% [markdown]
# # Section 11: RMSNorm, checked, then timed like for like
#
# RMSNorm drops LayerNorm's mean: `y = x / sqrt(mean(x²) + eps) · γ`, no β. First we check
# our `F.rms_norm` and its hand-written backward against a float64 NumPy computation, the
# tutorial's version built from primitive operations, and PyTorch's when it is installed.
#
# Then the tutorial's speed claim, "7-15% faster". A fair race needs two runners of the same
# kind: we time pairs written the same way (plain NumPy against plain NumPy, PyTorch's fused
# kernel against PyTorch's fused kernel), alternating them after a warm-up, and print the
# time ratio. We also time the unfair pairs, to see what they would have claimed.

# %%
"""Section 11: RMSNorm against references, then its speed against LayerNorm, like for like.

    python demos/04_norm_speed.py [--device cpu|cuda] [--quick] [--seed N] [--out DIR] [--repeats N]

Checks F.rms_norm (forward and hand-written backward) against float64 NumPy, the tutorial's
RMSNorm from primitive ops and torch.nn.functional.rms_norm. Then times LayerNorm against
RMSNorm on x of shape (32, 512, 4096) float32 (--quick: (8, 64, 512)), alternating the two
after a warm-up, for pairs of the same kind: two NumPy functions written alike, PyTorch's two
fused kernels, our two Functions (forward, and forward + backward), and the tutorial's own pair
(PyTorch's fused LayerNorm against its RMSNorm of separate ops). Prints each time ratio and
draws them. Source: Zhang & Sennrich, arXiv:1910.07467, eq. 4.
"""

import numpy

import minitorch_attn as mt
import minitorch_attn.functional as F
from minitorch_attn.app.demo_common import pyplot, quick_caveat, randn, save, setup, timed_pair
from minitorch_attn.argtypes import positive_int


def add_flags(parser):
    parser.add_argument(
        "--repeats",
        type=positive_int,
        default=None,
        help="at least this many alternating rounds per pair (default 5, --quick 3)",
    )


args, out = setup(__doc__, "04_norm_speed", extra=add_flags)
eps = 1e-6
try:
    import torch
except ImportError:
    torch = None
use_torch = torch is not None and not args.quick and args.device == "cpu"

# %% [markdown]
# ## Is our RMSNorm right?
#
# The backward of `y = x̂ γ` with `x̂ = x · rstd`, `rstd = 1 / sqrt(mean(x²) + eps)` is
# `dx = rstd (g γ - x̂ mean(g γ x̂))`: one term less than LayerNorm's, since there is no mean
# to undo. The float64 reference below writes that formula in NumPy; the tutorial's version
# lets autograd chain the backwards of its primitive operations instead.


# %%
def rms_norm_from_primitives(x, gamma):
    """The tutorial's RMSNorm: the root mean square in primitive ops, then divide and scale."""
    rms = ((x * x).mean(dim=-1, keepdim=True) + eps).sqrt()
    return gamma * (x / rms)


def float64_reference(x, gamma, g):
    """Output and gradients of x and gamma of ``loss = sum(rms_norm(x) * g)``, in float64 NumPy."""
    x, gamma, g = (t.numpy().astype(numpy.float64) for t in (x, gamma, g))
    rstd = 1 / numpy.sqrt((x * x).mean(-1, keepdims=True) + eps)
    x_hat = x * rstd
    dx_hat = g * gamma
    return [
        gamma * x_hat,
        rstd * (dx_hat - x_hat * (dx_hat * x_hat).mean(-1, keepdims=True)),
        (g * x_hat).sum(axis=tuple(range(x.ndim - 1))),
    ]


def output_and_gradients(fn, x, gamma, upstream):
    x, gamma = x.detach().requires_grad_(), gamma.detach().requires_grad_()
    y = fn(x, gamma)
    (y * upstream).sum().backward()
    return [t.numpy() for t in (y, x.grad, gamma.grad)]


d = 512
x = randn(args.rng, 4, 10, d, device=args.device) * 3.0 + 1.0
gamma = 1.0 + 0.1 * randn(args.rng, d, device=args.device)
upstream = randn(args.rng, 4, 10, d, device=args.device)
results = {
    "F.rms_norm": output_and_gradients(lambda x, g: F.rms_norm(x, (d,), g, eps=eps), x, gamma, upstream),
    "from primitives": output_and_gradients(rms_norm_from_primitives, x, gamma, upstream),
}
if use_torch:
    tx, tg = torch.tensor(x.numpy(), requires_grad=True), torch.tensor(gamma.numpy(), requires_grad=True)
    ty = torch.nn.functional.rms_norm(tx, (d,), tg, eps=eps)
    (ty * torch.tensor(upstream.numpy())).sum().backward()
    results["PyTorch"] = [ty.detach().numpy(), tx.grad.numpy(), tg.grad.numpy()]
reference = float64_reference(x, gamma, upstream)
print(
    f"RMSNorm of x (4, 10, {d}) float32, eps {eps}: max |result - float64 NumPy reference| "
    "under a random upstream gradient"
)
print(f"  {'':<11} " + " ".join(f"{name:>16}" for name in results) + f" {'scale':>10}")
for i, name in enumerate(("output", "grad x", "grad gamma")):
    print(
        f"  {name:<11} "
        + " ".join(f"{numpy.abs(r[i] - reference[i]).max():16.2e}" for r in results.values())
        + f" {numpy.abs(reference[i]).max():10.2e}"
    )

# %% [markdown]
# ## The race
#
# Each pair runs alternately (LayerNorm, RMSNorm, then RMSNorm, LayerNorm, ...) after a
# warm-up call of each, and we report the median of the per-round time ratios RMSNorm /
# LayerNorm: below 1, RMSNorm is faster.

# %%
shape = (8, 64, 512) if args.quick else (32, 512, 4096)
d = shape[-1]
x = randn(args.rng, *shape, device=args.device, requires_grad=True)
upstream = randn(args.rng, *shape, device=args.device)
gamma = mt.ones(d, device=args.device, requires_grad=True)
beta = mt.zeros(d, device=args.device, requires_grad=True)
xa, ga, ba = x.numpy(), gamma.numpy(), beta.numpy()


def numpy_layer_norm():
    """Textbook LayerNorm in NumPy: 7 passes over the data (mean; centre; square; mean; scale
    by rstd; by γ; add β), each reading the whole array and most writing a new one."""
    xc = xa - xa.mean(axis=-1, keepdims=True)
    return xc * (1.0 / numpy.sqrt((xc * xc).mean(axis=-1, keepdims=True) + eps)) * ga + ba


def numpy_rms_norm():
    """Textbook RMSNorm in NumPy, written the same way: 4 passes (square; mean; scale by
    rstd; by γ)."""
    return xa * (1.0 / numpy.sqrt((xa * xa).mean(axis=-1, keepdims=True) + eps)) * ga


def forward(norm):
    def run():
        with mt.no_grad():
            norm()

    return run


def forward_backward(norm):
    def run():
        x.grad = gamma.grad = beta.grad = None
        norm().backward(upstream)

    return run


ours = {
    "LayerNorm": lambda: F.layer_norm(x, (d,), gamma, beta, eps=eps),
    "RMSNorm": lambda: F.rms_norm(x, (d,), gamma, eps=eps),
}
pairs = {  # name -> (LayerNorm, RMSNorm, what the pair is)
    "NumPy, written alike": (numpy_layer_norm, numpy_rms_norm, "like for like"),
    "ours, forward": (
        forward(ours["LayerNorm"]),
        forward(ours["RMSNorm"]),
        "not alike: our LayerNorm makes one more pass, for an exact mean",
    ),
    "ours, forward + backward": (
        forward_backward(ours["LayerNorm"]),
        forward_backward(ours["RMSNorm"]),
        "not alike, as above",
    ),
}
if use_torch:
    torch.set_grad_enabled(False)
    tx, tg, tb = torch.tensor(xa), torch.tensor(ga), torch.tensor(ba)

    def torch_layer_norm_from_ops():
        xc = tx - tx.mean(dim=-1, keepdim=True)
        return xc * torch.rsqrt(xc.pow(2).mean(dim=-1, keepdim=True) + eps) * tg + tb

    def torch_rms_norm_from_ops():
        return tx * torch.rsqrt(tx.pow(2).mean(dim=-1, keepdim=True) + eps) * tg

    def torch_fused_layer_norm():
        return torch.nn.functional.layer_norm(tx, (d,), tg, tb, eps)

    pairs["PyTorch ops, written alike"] = (torch_layer_norm_from_ops, torch_rms_norm_from_ops, "like for like")
    pairs["PyTorch's functions"] = (
        torch_fused_layer_norm,
        lambda: torch.nn.functional.rms_norm(tx, (d,), tg, eps),
        "not alike on the CPU: layer_norm is one kernel, rms_norm (PyTorch 2.13's "
        "profiler shows) runs pow, mean, add, rsqrt and mul apart",
    )
    pairs["the tutorial's pair"] = (
        torch_fused_layer_norm,
        lambda: tg * (tx / torch.sqrt(tx.pow(2).mean(dim=-1, keepdim=True) + eps)),
        "not alike: nn.LayerNorm's kernel against four separate ops",
    )
elif torch is None:
    print("PyTorch is not installed: skipped its functions and the tutorial's pair")

print(
    f"\nx {shape} float32 on {args.device}, alternating rounds after one warm-up call each"
    + (f", PyTorch {torch.__version__}" if use_torch else "")
)
ratios = {}
for name, (layer_norm, rms_norm, kind) in pairs.items():
    comparison = timed_pair(args, layer_norm, rms_norm, args.repeats)
    ratios[name] = (comparison.ratio, kind)
    print(f"  {name:<27} {comparison.describe('LayerNorm', 'RMSNorm')}  [{kind}]")
if use_torch:
    torch.set_grad_enabled(True)
print(
    "tutorial: 'RMSNorm ~7-15% faster than LayerNorm' (a time ratio of about 0.85-0.93); its own printed "
    f"run, 847.3 ms against 712.1 ms, is a ratio of {712.1 / 847.3:.3f}. Measured like for like: "
    + ", ".join(f"{name} {ratios[name][0]:.2f}" for name in ratios if ratios[name][1] == "like for like")
    + "; normalizing is bound by memory traffic, and written alike RMSNorm makes 4 passes over the data "
    f"where LayerNorm makes 7 ({4 / 7:.2f})"
)
quick_caveat(args, "the time of normalizing rows of 4096 (the tutorial's width): here rows of 512 are cheap")

# %% [markdown]
# ## The picture
#
# One bar per pair: the time ratio RMSNorm / LayerNorm. Like-for-like pairs are solid; the
# others are hatched. The grey band is the tutorial's claim.

# %%
plt = pyplot()
fig, ax = plt.subplots(figsize=(8, 0.55 * len(ratios) + 2.0), layout="constrained")
names = list(ratios)
values = [ratios[name][0] for name in names]
for alike, style in (
    (True, dict(color="tab:blue", label="written alike")),
    (False, dict(color="tab:gray", hatch="//", label="not alike (see the printed line)")),
):
    rows = [i for i, name in enumerate(names) if (ratios[name][1] == "like for like") == alike]
    if rows:
        ax.barh(rows, [values[i] for i in rows], **style)
ax.set_yticks(range(len(names)), names)
for i, value in enumerate(values):
    ax.text(value, i, f" {value:.2f}", va="center", fontsize=9)
ax.axvspan(0.85, 0.93, color="gold", alpha=0.4, label="the tutorial's claim: 7-15% faster")
ax.axvline(1.0, color="black", linewidth=1)
ax.invert_yaxis()
ax.set_xlim(0, max(values + [1.0]) * 1.2)
ax.set_xlabel("time ratio RMSNorm / LayerNorm (below 1: RMSNorm faster)")
ax.set_title(f"RMSNorm against LayerNorm, x {shape} float32, {args.device}")
fig.legend(fontsize=8, loc="outside lower center", ncols=3)
save(fig, out, "norm_speed.png")
