"""Multi-head attention, eight heads of width d_k = d_model / 8 side by side.

    python demos/02_multihead.py [--device cpu|cuda] [--quick] [--seed N] [--out DIR]

Input (batch 4, seq_len 10, d_model 512), 8 heads of d_k = 64: prints the shapes of the
output and of the attention weights, the row-sum check, and the parameter count of the four
projections W_Q, W_K, W_V, W_O without bias: 4 x 512 x 512 = 1,048,576. Draws the eight
heads' weights for the first sequence. Source: arXiv:1706.03762, §3.2.2.
"""

import sys

import numpy

import minitorch_attn as mt
from minitorch_attn import nn
from minitorch_attn.demo_common import pyplot, randn, save, setup


def main(argv=None):
    args, out = setup(__doc__, "02_multihead", argv)
    batch, seq_len, d_model, num_heads = 4, 10, 512, 8
    mha = nn.MultiHeadAttention(d_model, num_heads, dropout=0.0).to(args.device)
    x = randn(args.rng, batch, seq_len, d_model, device=args.device)

    with mt.no_grad():
        output, weights = mha(x, x, x)                          # self-attention
    print(f"input shape: {x.shape}")
    print(f"output shape: {output.shape}")
    print(f"attention weights shape: {weights.shape}  (batch, heads, queries, keys); d_k = {mha.d_k}")
    row_sums = weights.numpy().sum(axis=-1)
    print(f"row sums: min {row_sums.min():.6f}, max {row_sums.max():.6f} "
          f"(every row sums to 1: {bool(numpy.allclose(row_sums, 1.0, atol=1e-5))})")
    for name, p in mha.named_parameters():
        print(f"  {name:<10} {str(p.shape):<12} {p.numel():>9,}")
    print(f"parameters: {mha.num_parameters():,} (4 x {d_model} x {d_model}, no bias)")

    plt = pyplot()
    fig, axes = plt.subplots(2, 4, figsize=(10, 5.2))
    for h, ax in enumerate(axes.flat):
        ax.imshow(weights.numpy()[0, h], cmap="viridis", vmin=0.0)
        ax.set_title(f"head {h}")
        ax.set_xticks([])
        ax.set_yticks([])
    fig.suptitle("Eight heads, one input: each head attends differently (random weights)")
    fig.tight_layout()
    save(fig, out, "heads.png")


if __name__ == "__main__":
    sys.exit(main())
