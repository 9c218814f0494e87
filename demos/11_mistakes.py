# %% [markdown]
# # Section 16: common mistakes, each measured
#
# The tutorial lists five mistakes. For each we build the mistake, measure what it does, and
# print the measurement beside what the tutorial says; where the tutorial overstates, the
# numbers say by how much.

# %%
"""Section 16: common mistakes, each shown by a measurement (in the tutorial's order).

    python demos/11_mistakes.py [--device cpu|cuda] [--quick] [--seed N] [--out DIR]

1. Forgetting the 1/sqrt(d_k) scale: the share of softmax rows that are (almost) one-hot
   (demo 09_scaling measures it as d_k grows).
2. Heads of width d_model instead of d_k = d_model / h: the parameters, the multiply-adds
   (h times, not "quadruples") and the measured time of one forward pass, alternating.
3. A causal mask in an encoder: how much the first position's output changes when the last
   token changes (with the mask: not at all, the encoder is blind to the right context).
4. BatchNorm at batch size 1: in training mode (a constant output) and at inference with
   running statistics (works).
5. LayerNorm with γ initialized to 0: which gradients vanish at the first step, and whether
   training is "dead" (a short training run against γ = 1).

Draws the gradient norms of mistake 5 and its training curves.
"""

import math

import numpy

import minitorch_attn as mt
import minitorch_attn.functional as F
from minitorch_attn import nn, optim
from minitorch_attn.app.demo_common import normalize_over, pyplot, quick_caveat, randn, save, setup, timed_pair

args, out = setup(__doc__, "11_mistakes")

# %% [markdown]
# ## 1. Forgetting to scale the scores

# %%
d_k, seq_len = (128, 32) if args.quick else (512, 128)
q, k = randn(args.rng, 8, seq_len, d_k, device=args.device), randn(args.rng, 8, seq_len, d_k, device=args.device)
print(f"1. missing 1/sqrt(d_k): q, k (8, {seq_len}, {d_k}) of N(0, 1)")
for name, scale in (("scaled by 1/sqrt(d_k)", 1.0 / math.sqrt(d_k)), ("unscaled", 1.0)):
    weights = F.attention_weights(q, k, scale=scale).numpy()
    print(
        f"   {name:<22} rows with a weight > 0.99: {100 * (weights.max(-1) > 0.99).mean():5.1f}%   "
        f"mean largest weight {weights.max(-1).mean():.3f}"
    )

# %% [markdown]
# ## 2. Heads as wide as the model
#
# If every head gets all `d_model` dimensions instead of `d_model / h`, the projections
# become `h` times wider: `h` times the parameters and `h` times the multiply-adds. The
# tutorial says the cost "quadruples"; with 8 heads it is 8 times the work.


# %%
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


d_model, num_heads = 512, 8
batch, length = (1, 16) if args.quick else (8, 128)
right = nn.MultiHeadAttention(d_model, num_heads, dropout=0.0).to(args.device)
wrong = HeadsOfWidthDModel(d_model, num_heads).to(args.device)
x = randn(args.rng, batch, length, d_model, device=args.device)
with mt.no_grad():
    timing = timed_pair(args, lambda: right(x, x, x, need_weights=False), lambda: wrong(x))


def multiply_adds(width):
    """Of one forward pass with heads of total width ``width``: the four projections, then
    Q Kᵀ and weights @ V over all heads."""
    return batch * length * (4 * d_model * width + 2 * length * width)


print(
    f"\n2. heads of width d_model instead of d_k = d_model / h (d_model {d_model}, h {num_heads}, "
    f"x ({batch}, {length}, {d_model}))"
)
print(
    f"   d_k = {d_model // num_heads:<4} parameters {right.num_parameters():>10,}   multiply-adds "
    f"{multiply_adds(d_model):>14,}"
)
print(
    f"   d_k = {d_model:<4} parameters {wrong.num_parameters():>10,}   multiply-adds "
    f"{multiply_adds(num_heads * d_model):>14,}"
)
print(
    f"   {wrong.num_parameters() / right.num_parameters():.0f}x the parameters, "
    f"{multiply_adds(num_heads * d_model) / multiply_adds(d_model):.0f}x the multiply-adds; "
    f"measured: {timing.describe('d_k = 64', 'd_k = 512')}"
)
print(
    f"   tutorial: 'computational cost quadruples'; the work grows h-fold ({num_heads}x here), and the time "
    f"{timing.ratio:.1f}-fold"
)
quick_caveat(args, "the time growing with the work (one short sequence is mostly fixed costs)")

# %% [markdown]
# ## 3. A causal mask in an encoder
#
# Change only the last of six tokens and look at the output of the first one.

# %%
mha = nn.MultiHeadAttention(64, 4, dropout=0.0).to(args.device)
x = randn(args.rng, 1, 6, 64, device=args.device)
data = x.numpy().copy()
data[0, -1] += 1.0  # change only the last token
changed = mt.tensor(data, device=args.device)
print("\n3. a causal mask in an encoder: change the last of 6 tokens, watch position 0's output")
with mt.no_grad():
    for is_causal in (False, True):
        before = mha(x, x, x, is_causal=is_causal)[0].numpy()[0, 0]
        after = mha(changed, changed, changed, is_causal=is_causal)[0].numpy()[0, 0]
        print(f"   is_causal={is_causal!s:<5} |change of position 0| = {numpy.abs(after - before).max():.3e}")
print("   with the mask the first word never sees the rest of the sentence: fine for a decoder, wrong for an encoder")

# %% [markdown]
# ## 4. BatchNorm at batch size 1
#
# The tutorial's reason: "inference may run with batch_size=1". At inference BatchNorm uses
# the running statistics of training, and those work for one sample; what fails is
# *training* on one sample without a sequence axis (demo 03 measures more cases).

# %%
print("\n4. BatchNorm (statistics over the batch) at batch size 1, no sequence axis")
outputs = []
for _ in range(2):
    x = randn(args.rng, 1, 8, device=args.device)
    outputs.append(normalize_over(x, (0,)).numpy())
print(
    f"   training mode: two different inputs -> max |y1 - y2| = {numpy.abs(outputs[0] - outputs[1]).max():.3e} "
    "(a constant output)"
)
training = randn(args.rng, 64, 8, device=args.device)
mean, var = training.mean(dim=0, keepdim=True), training.var(dim=0, keepdim=True, correction=0)
inference = [((randn(args.rng, 1, 8, device=args.device) - mean) / (var + 1e-5).sqrt()).numpy() for _ in range(2)]
print(
    f"   inference with running statistics: two different inputs -> max |y1 - y2| = "
    f"{numpy.abs(inference[0] - inference[1]).max():.3e} (works)"
)
print(
    "   the reasons that stand against BatchNorm in a Transformer are the others of demo 03: batchmates and "
    "padding change a token's output"
)

# %% [markdown]
# ## 5. LayerNorm with γ = 0
#
# With γ = 0 the norm's output is β whatever its input, so at the first step no gradient
# reaches anything before it. But γ's own gradient is not 0: one step makes γ non-zero, and
# the gradient flows again. The tutorial says "training is dead"; we train with Adam, as
# Transformers are trained, to see.


# %%
def small_model(gamma):
    """Linear -> LayerNorm(γ = ``gamma``) -> GELU -> Linear, from the seed's initial weights."""
    mt.manual_seed(args.seed)
    model = nn.Sequential(nn.Linear(16, 32), nn.LayerNorm(32), nn.GELU(), nn.Linear(32, 4)).to(args.device)
    model[1].weight.data = mt.full((32,), gamma, device=args.device).data
    return model


x = randn(args.rng, 64, 16, device=args.device, requires_grad=True)
target = randn(args.rng, 64, 4, device=args.device)
names = {"0": "Linear before the norm", "1": "LayerNorm", "3": "Linear after the norm"}
model = small_model(0.0)
(model(x) * target).sum().backward()
rows = [("input x", float(numpy.linalg.norm(x.grad.numpy())))]
rows += [
    (f"{names[n.split('.')[0]]}: {n.split('.')[1]}", float(numpy.linalg.norm(p.grad.numpy())))
    for n, p in model.named_parameters()
]
print("\n5. LayerNorm with gamma (its weight) initialized to 0: gradient norms after one backward")
for name, value in rows:
    print(f"   {name:<32} {value:10.3e}  {'vanishes' if value == 0.0 else 'flows'}")
print("   everything upstream of the norm gets exactly 0 (its output, β, does not depend on its input);")
print("   so does the next Linear's weight here (its input is GELU(β = 0) = 0); γ, β and the last bias do not.")

steps = 30 if args.quick else 100
curves = {}
for gamma in (0.0, 1.0):
    model = small_model(gamma)
    optimizer = optim.Adam(model.parameters(), lr=0.01)
    losses = []
    for _ in range(steps):
        loss = ((model(x.detach()) - target) ** 2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    curves[gamma] = losses
    print(
        f"   γ = {gamma:g} at init: mean squared error {losses[0]:.3f} -> {losses[-1]:.3f} after {steps} Adam steps "
        f"(lr 0.01); |γ| at the end {float(numpy.abs(model[1].weight.numpy()).mean()):.3f}"
    )
print(
    f"   tutorial: 'no gradient flows, training is dead'. Measured: γ's gradient is {rows[3][1]:.2e} at the first "
    f"step, and the loss falls from {curves[0.0][0]:.3f} to {curves[0.0][-1]:.3f} "
    f"(with γ = 1: to {curves[1.0][-1]:.3f})"
    + (
        "; a slower start, not a dead network"
        if curves[0.0][-1] < 0.99 * curves[0.0][0]
        else "; in these few steps it barely moved"
    )
)

# %% [markdown]
# ## The picture

# %%
plt = pyplot()
fig, axes = plt.subplots(1, 2, figsize=(11, 4), layout="constrained", gridspec_kw={"width_ratios": [1.3, 1]})
labels, values = [r[0] for r in rows], [r[1] for r in rows]
axes[0].barh(labels, values, color=["tab:red" if v == 0 else "tab:green" for v in values])
for i, v in enumerate(values):
    axes[0].text(v, i, " 0 (vanishes)" if v == 0 else f" {v:.2g}", va="center", fontsize=8)
axes[0].invert_yaxis()
axes[0].set_xlabel("gradient norm at the first step")
axes[0].set_title("γ = 0: which gradients vanish", fontsize=10)
axes[0].set_xlim(0, max(values) * 1.3)
for gamma, losses in curves.items():
    axes[1].plot(range(1, steps + 1), losses, label=f"γ = {gamma:g} at init")
axes[1].set_xlabel("Adam step (lr 0.01)")
axes[1].set_ylabel("mean squared error")
axes[1].set_title("Training loss, γ = 0 against γ = 1 at init", fontsize=10)
axes[1].grid(alpha=0.3)
axes[1].legend(fontsize=8)
save(fig, out, "zero_gamma_gradients.png")
