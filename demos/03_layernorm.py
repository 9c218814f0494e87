"""LayerNorm from scratch against the fused, hand-differentiated layer_norm.

    python demos/03_layernorm.py [--device cpu|cuda] [--quick] [--seed N] [--out DIR]

The tutorial's LayerNorm written with primitive ops (mean, var, sqrt: autograd chains their
backwards) beside ``F.layer_norm`` (one Function whose backward is the closed form
dx = rstd (g·γ - mean(g·γ) - x̂ mean(g·γ x̂))), and PyTorch's when it is installed. Prints
the output's mean (≈ 0) and standard deviation (≈ 1) per row, the largest differences of
outputs and of the gradients of x, γ and β under a random upstream gradient, and draws the
histogram of inputs and outputs. Source: Ba et al., arXiv:1607.06450, eq. 4.
"""

import sys

import numpy

import minitorch_attn.functional as F
from minitorch_attn.demo_common import layer_norm_from_primitives, pyplot, randn, save, setup


def gradients(fn, x, gamma, beta, upstream):
    """Output and the gradients of x, gamma and beta for ``loss = sum(fn(...) * upstream)``
    (a random upstream gradient: a plain sum would hide errors that cancel)."""
    x, gamma, beta = (t.detach().requires_grad_() for t in (x, gamma, beta))
    out = fn(x, gamma, beta)
    (out * upstream).sum().backward()
    return [t.numpy() for t in (out, x.grad, gamma.grad, beta.grad)]


def compare_with_torch(x, gamma, beta, upstream, ours, names):
    """Print the largest differences between ``ours`` and torch.nn.functional.layer_norm."""
    try:
        import torch
    except ImportError:
        print("PyTorch is not installed: skipped the comparison with torch.nn.functional.layer_norm")
        return
    tx, tg, tb = (torch.tensor(t.numpy(), requires_grad=True) for t in (x, gamma, beta))
    t_out = torch.nn.functional.layer_norm(tx, (x.shape[-1],), tg, tb)
    (t_out * torch.tensor(upstream.numpy())).sum().backward()
    theirs = [t_out.detach().numpy(), tx.grad.numpy(), tg.grad.numpy(), tb.grad.numpy()]
    print("max |fused layer_norm - PyTorch| (float32):")
    for name, a, b in zip(names, ours, theirs):
        print(f"  {name:<11} {numpy.abs(a - b).max():.2e}")


def main(argv=None):
    args, out = setup(__doc__, "03_layernorm", argv)
    shape = (4, 10, 512)
    d = shape[-1]
    # inputs far from standard: mean 3, std 5, so normalizing visibly does something
    x = randn(args.rng, *shape, device=args.device) * 5.0 + 3.0
    gamma = 1.0 + 0.1 * randn(args.rng, d, device=args.device)
    beta = 0.1 * randn(args.rng, d, device=args.device)
    upstream = randn(args.rng, *shape, device=args.device)

    ours = gradients(lambda x, g, b: F.layer_norm(x, (d,), g, b), x, gamma, beta, upstream)
    scratch = gradients(layer_norm_from_primitives, x, gamma, beta, upstream)

    plain = F.layer_norm(x, (d,)).numpy()   # γ = 1, β = 0: the statistics the tutorial prints
    print(f"input  shape {x.shape}: mean {x.numpy().mean():+.4f}, std {x.numpy().std():.4f}")
    print(f"output mean per row: max |mean| {numpy.abs(plain.mean(axis=-1)).max():.2e}  (≈ 0)")
    print(f"output std per row: min {plain.std(axis=-1).min():.6f}, max {plain.std(axis=-1).max():.6f}  (≈ 1)")
    names = ("output", "grad x", "grad gamma", "grad beta")
    print("max |fused layer_norm - from primitives| (float32):")
    for name, a, b in zip(names, ours, scratch):
        print(f"  {name:<11} {numpy.abs(a - b).max():.2e}   (scale {numpy.abs(a).max():.2e})")

    if args.quick:
        print("--quick: skipped the comparison with PyTorch (importing it takes seconds)")
    else:
        compare_with_torch(x, gamma, beta, upstream, ours, names)

    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.5))
    axes[0].hist(x.numpy().ravel(), bins=80, color="tab:gray")
    axes[0].set_title("input: mean 3, std 5")
    axes[1].hist(plain.ravel(), bins=80, color="tab:blue")
    axes[1].set_title("layer_norm(x): each row mean 0, std 1")
    fig.tight_layout()
    save(fig, out, "layernorm_histogram.png")


if __name__ == "__main__":
    sys.exit(main())
