"""The causal mask, and self-, causal and cross-attention.

    python demos/06_masks.py [--device cpu|cuda] [--quick] [--seed N] [--out DIR]

Prints the 5 x 5 causal mask (True = query i may attend to key j, i.e. j <= i), then runs
one MultiHeadAttention(256, 8) three ways:

* self-attention: an encoder sequence (2, 15, 256) attends to itself -> weights (2, 8, 15, 15);
* causal self-attention: a decoder sequence (2, 8, 256) attends to itself and its past ->
  weights (2, 8, 8, 8), zero above the diagonal;
* cross-attention: the decoder's queries attend to the encoder's keys and values ->
  output (2, 8, 256), weights (2, 8, 8, 15).

Draws the three weight matrices of head 0. Source: arXiv:1706.03762, §3.2.3.
"""

import sys

import numpy

import minitorch_attn as mt
import minitorch_attn.functional as F
from minitorch_attn import nn
from minitorch_attn.demo_common import pyplot, randn, save, setup


def main(argv=None):
    args, out = setup(__doc__, "06_masks", argv)
    mask = F.causal_mask(5, device=args.device)
    print("causal mask (5, 5), True = may attend:")
    print(mask.numpy().astype(int))

    mha = nn.MultiHeadAttention(256, 8, dropout=0.0).to(args.device)
    encoder = randn(args.rng, 2, 15, 256, device=args.device)   # (batch, source length, d_model)
    decoder = randn(args.rng, 2, 8, 256, device=args.device)    # (batch, target length, d_model)
    with mt.no_grad():
        runs = {
            "self-attention": mha(encoder, encoder, encoder),
            "causal self-attention": mha(decoder, decoder, decoder, is_causal=True),
            "cross-attention": mha(decoder, encoder, encoder),
        }
    for name, (output, weights) in runs.items():
        w = weights.numpy()
        print(f"{name}: output {output.shape}, attention map {weights.shape}, "
              f"rows sum to 1: {bool(numpy.allclose(w.sum(-1), 1.0, atol=1e-5))}")
    causal = runs["causal self-attention"][1].numpy()
    above = numpy.triu(numpy.ones(causal.shape[-2:], dtype=bool), k=1)
    print(f"causal weights above the diagonal (the future): max {causal[..., above].max():.1f}")

    plt = pyplot()
    fig, axes = plt.subplots(1, 4, figsize=(14, 3.8), gridspec_kw={"width_ratios": [5, 15, 8, 15]})
    axes[0].imshow(mask.numpy(), cmap="gray_r", vmin=0, vmax=1)
    axes[0].set_title("causal mask (5 x 5)\nblack = may attend")
    for ax, (name, (_, weights)) in zip(axes[1:], runs.items()):
        ax.imshow(weights.numpy()[0, 0], cmap="viridis", vmin=0.0)
        ax.set_title(f"{name}\n{weights.shape}, head 0")
    for ax in axes:
        ax.set_xlabel("key")
        ax.set_ylabel("query")
    fig.tight_layout()
    save(fig, out, "three_attentions.png")


if __name__ == "__main__":
    sys.exit(main())
