"""Section 16: common mistakes, each shown by a measurement.

    python demos/11_mistakes.py [--device cpu|cuda] [--quick] [--seed N] [--out DIR]

1. Forgetting the 1/sqrt(d_k) scale: the share of softmax rows that are (almost) one-hot.
2. Splitting heads with d_model instead of d_k (every head as wide as the model): the
   parameter count and the measured time of one forward pass.
3. A causal mask in an encoder: how much the first position's output changes when the last
   token changes (with the mask: not at all, the encoder is blind to the right context).
4. LayerNorm with γ initialized to 0: which gradients vanish and which do not.
5. Normalizing over the batch (BatchNorm) at batch size 1: every input gives the same output.

Draws the gradient norms of mistake 4.
"""

import math
import sys

import numpy

import minitorch_attn as mt
import minitorch_attn.functional as F
from minitorch_attn import nn
from minitorch_attn.demo_common import pyplot, randn, save, setup
from minitorch_attn.measure import alternating_medians


def missing_scale(args):
    d_k, seq_len = (128, 32) if args.quick else (512, 128)
    q, k = randn(args.rng, 8, seq_len, d_k, device=args.device), randn(args.rng, 8, seq_len, d_k, device=args.device)
    print(f"\n1. missing 1/sqrt(d_k): q, k (8, {seq_len}, {d_k}) of N(0, 1)")
    for name, scale in (("scaled by 1/sqrt(d_k)", 1.0 / math.sqrt(d_k)), ("unscaled", 1.0)):
        weights = F.attention_weights(q, k, scale=scale).numpy()
        one_hot = (weights.max(-1) > 0.99).mean()
        print(f"   {name:<22} rows with a weight > 0.99: {100 * one_hot:5.1f}%   "
              f"mean largest weight {weights.max(-1).mean():.3f}")


class HeadsOfWidthDModel(nn.Module):
    """The mistake: every head gets all d_model dimensions (q, k, v of width h * d_model),
    instead of d_model / h each. Same output shape, h times the projections and the work."""

    def __init__(self, d_model, num_heads):
        super().__init__()
        self.d_model, self.num_heads = d_model, num_heads
        width = num_heads * d_model
        self.W_q, self.W_k, self.W_v = (nn.Linear(d_model, width, bias=False) for _ in range(3))
        self.W_o = nn.Linear(width, d_model, bias=False)

    def forward(self, x):
        batch, length, _ = x.shape

        def heads(t):  # (B, T, h d_model) -> (B, h, T, d_model)
            return t.reshape(batch, length, self.num_heads, self.d_model).transpose(1, 2)

        out = F.scaled_dot_product_attention(heads(self.W_q(x)), heads(self.W_k(x)), heads(self.W_v(x)))
        return self.W_o(out.transpose(1, 2).reshape(batch, length, self.num_heads * self.d_model))


def wide_heads(args):
    d_model, num_heads = 512, 8
    shape = (1, 16, d_model) if args.quick else (8, 128, d_model)
    right = nn.MultiHeadAttention(d_model, num_heads, dropout=0.0).to(args.device)
    wrong = HeadsOfWidthDModel(d_model, num_heads).to(args.device)
    x = randn(args.rng, *shape, device=args.device)
    repeats = 3 if args.quick else 5
    with mt.no_grad():
        times, _ = alternating_medians({"right": lambda: right(x, x, x, need_weights=False),
                                        "wrong": lambda: wrong(x)}, repeats, args.device)
    t_right, t_wrong = times["right"], times["wrong"]
    print(f"\n2. heads of width d_model instead of d_k = d_model / h (d_model {d_model}, h {num_heads}, x {shape}; "
          f"forward wall time, median of {repeats} alternating runs after a warm-up, each at its fastest "
          f"BLAS thread count)")
    print(f"   d_k = {d_model // num_heads:<4} parameters {right.num_parameters():>10,}   forward {t_right * 1e3:8.2f} ms")
    print(f"   d_k = {d_model:<4} parameters {wrong.num_parameters():>10,}   forward {t_wrong * 1e3:8.2f} ms")
    print(f"   {wrong.num_parameters() / right.num_parameters():.0f}x the parameters, "
          f"{t_wrong / t_right:.1f}x the measured time")


def causal_encoder(args):
    mha = nn.MultiHeadAttention(64, 4, dropout=0.0).to(args.device)
    x = randn(args.rng, 1, 6, 64, device=args.device)
    data = x.numpy().copy()
    data[0, -1] += 1.0                                           # change only the last token
    changed = mt.tensor(data, device=args.device)
    print("\n3. a causal mask in an encoder: change the last of 6 tokens, watch position 0's output")
    with mt.no_grad():
        for is_causal in (False, True):
            before = mha(x, x, x, is_causal=is_causal)[0].numpy()[0, 0]
            after = mha(changed, changed, changed, is_causal=is_causal)[0].numpy()[0, 0]
            print(f"   is_causal={is_causal!s:<5} |change of position 0| = {numpy.abs(after - before).max():.3e}")
    print("   with the mask the first word never sees the rest of the sentence: fine for a decoder, wrong for an encoder")


def zero_gamma(args):
    """Linear -> LayerNorm(γ = 0) -> GELU -> Linear: the norm's output is β whatever its input."""
    lin1, norm, lin2 = nn.Linear(16, 32), nn.LayerNorm(32), nn.Linear(32, 4)
    model = nn.Sequential(lin1, norm, nn.GELU(), lin2).to(args.device)
    norm.weight.data = mt.zeros(32, device=args.device).data     # the mistake
    x = randn(args.rng, 8, 16, device=args.device, requires_grad=True)
    upstream = randn(args.rng, 8, 4, device=args.device)
    names = {"0": "Linear before the norm", "1": "LayerNorm", "3": "Linear after the norm"}
    print("\n4. LayerNorm with gamma (its weight) initialized to 0: gradient norms after one backward")
    rows = []
    for step in range(2):
        model.zero_grad()
        x.grad = None
        (model(x) * upstream).sum().backward()
        grads = [("input x", x.grad)] + [(f"{names[n.split('.')[0]]}: {n.split('.')[1]}", p.grad)
                                          for n, p in model.named_parameters()]
        if step == 0:
            for name, g in grads:
                norm_value = float(numpy.linalg.norm(g.numpy()))
                rows.append((name, norm_value))
                verdict = "vanishes" if norm_value == 0.0 else "flows"
                print(f"   {name:<32} {norm_value:10.3e}  {verdict}")
            print("   everything upstream of the norm gets exactly 0 (its output, β, does not depend on its input);")
            print("   so does the next Linear's weight here (its input is GELU(β = 0) = 0); γ, β and the last bias do not.")
            for p in model.parameters():                         # one plain SGD step
                p.data = (p - 0.1 * p.grad).data
        else:
            g = float(numpy.linalg.norm(lin1.weight.grad.numpy()))
            print(f"   after one SGD step (lr 0.1) γ is no longer 0: gradient of the first Linear's weight = {g:.3e}")
    return rows


def batch_norm_at_batch_one(args):
    print("\n5. normalizing over the batch (BatchNorm) at batch size 1")
    for name, dim in (("over the batch (dim 0)", 0), ("over the features (LayerNorm)", -1)):
        outputs = []
        for _ in range(2):
            x = randn(args.rng, 1, 8, device=args.device, requires_grad=True)
            mean = x.mean(dim=dim, keepdim=True)
            var = x.var(dim=dim, keepdim=True, correction=0)
            y = (x - mean) / (var + 1e-5).sqrt()
            (y * randn(args.rng, 1, 8, device=args.device)).sum().backward()
            outputs.append((y.numpy(), float(numpy.linalg.norm(x.grad.numpy()))))
        (y1, g1), (y2, _) = outputs
        print(f"   {name:<30} two different inputs -> max |y1 - y2| = {numpy.abs(y1 - y2).max():.3e}, "
              f"|grad x| = {g1:.3e}")
    print("   with one sample x - mean(x over the batch) = 0: the output is constant and no gradient reaches x")


def main(argv=None):
    args, out = setup(__doc__, "11_mistakes", argv)
    missing_scale(args)
    wide_heads(args)
    causal_encoder(args)
    rows = zero_gamma(args)
    batch_norm_at_batch_one(args)

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 3.6))
    names, values = [r[0] for r in rows], [r[1] for r in rows]
    ax.barh(names, values, color=["tab:red" if v == 0 else "tab:green" for v in values])
    for i, v in enumerate(values):
        ax.text(v, i, " 0 (vanishes)" if v == 0 else f" {v:.2g}", va="center", fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("gradient norm")
    ax.set_title("LayerNorm with γ = 0: which gradients vanish", fontsize=10)
    ax.set_xlim(0, max(values) * 1.3)
    fig.tight_layout()
    save(fig, out, "zero_gamma_gradients.png")


if __name__ == "__main__":
    sys.exit(main())
