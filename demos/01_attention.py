"""Scaled dot-product attention, softmax(Q Kᵀ / sqrt(d_k)) V.

    python demos/01_attention.py [--device cpu|cuda] [--quick] [--seed N] [--out DIR]

Q, K, V of shape (batch 2, heads 1, seq_len 5, d_k 64): prints the shapes, the attention
weights of one head (5 queries x 5 keys), checks that every row of weights sums to 1 and
that the output is those weights applied to V; draws the weights as a heatmap.
Source: Vaswani et al., arXiv:1706.03762, eq. 1.
"""

import sys

import numpy

import minitorch_attn.functional as F
from minitorch_attn.demo_common import pyplot, randn, save, setup


def main(argv=None):
    args, out = setup(__doc__, "01_attention", argv)
    batch, heads, seq_len, d_k = 2, 1, 5, 64
    q, k, v = (randn(args.rng, batch, heads, seq_len, d_k, device=args.device) for _ in range(3))

    output = F.scaled_dot_product_attention(q, k, v)          # (2, 1, 5, 64)
    weights = F.attention_weights(q, k)                         # (2, 1, 5, 5), scale 1/sqrt(64)
    print(f"Q, K, V shape: {q.shape}")
    print(f"output shape: {output.shape}")
    print(f"attention weights shape: {weights.shape}")

    w = weights.numpy()
    numpy.set_printoptions(precision=4, suppress=True)
    print("attention weights of batch 0, head 0 (row = query, column = key):")
    print(w[0, 0])
    row_sums = w.sum(axis=-1)
    print(f"row sums: min {row_sums.min():.6f}, max {row_sums.max():.6f} "
          f"(every row sums to 1: {bool(numpy.allclose(row_sums, 1.0, atol=1e-6))})")
    rebuilt = w @ v.numpy()
    print(f"max |output - weights @ V|: {numpy.abs(output.numpy() - rebuilt).max():.2e}")

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(4.5, 4))
    image = ax.imshow(w[0, 0], cmap="viridis", vmin=0.0)
    ax.set_xlabel("key position")
    ax.set_ylabel("query position")
    ax.set_title("softmax(Q Kᵀ / √64), batch 0, head 0")
    fig.colorbar(image, ax=ax)
    fig.tight_layout()
    save(fig, out, "attention_weights.png")


if __name__ == "__main__":
    sys.exit(main())
