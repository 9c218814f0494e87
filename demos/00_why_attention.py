# %% [markdown]
# # Section 1: why attention replaced recurrence
#
# A recurrent network (RNN) reads a sequence one token at a time and carries everything it
# has read in one hidden vector. Whatever the first token contributes to the last state has
# passed through every step in between, so its gradient is a product of one Jacobian per step:
# it shrinks or grows exponentially with the distance. Attention connects the last token to
# every earlier one in a single step, whatever the distance.
#
# Below we measure both claims of the tutorial's first section on one small RNN and one
# attention layer: how much gradient reaches each earlier token, and how long a forward pass
# takes when the RNN must wait for each step while attention does all positions at once.

# %%
"""Section 1: why attention replaced recurrence, measured on one RNN and one attention layer.

    python demos/00_why_attention.py [--device cpu|cuda] [--quick] [--seed N] [--out DIR]

Prints the gradient norm that reaches each earlier token from the last output of an Elman
RNN (three scales of its recurrent weights) and of one causal self-attention layer, and the
forward time of both as the sequence grows (alternating, warmed-up runs), with the
multiply-adds each does. Draws both. Sources: Bengio et al. 1994 (vanishing gradients in
RNNs); arXiv:1706.03762, §4 (path length and parallel steps).
"""

import numpy

import minitorch_attn as mt
from minitorch_attn import nn
from minitorch_attn.app.demo_common import log_ticks, pyplot, quick_caveat, randn, save, setup, timed_pair

args, out = setup(__doc__, "00_why_attention")
d_model, num_heads = 64, 4
length = 30 if args.quick else 100  # "when an RNN reaches word 100 ..."


class ElmanRNN(nn.Module):
    """``h_t = tanh(W_x x_t + b + W_h h_(t-1))``, ``h_0 = 0``: the recurrence of the tutorial's
    section 1. Weights start as PyTorch's ``nn.RNN`` (uniform in ±1/sqrt(hidden)). Shapes:
    ``(batch, T, d_model) -> (batch, d_model)``, the last hidden state."""

    def __init__(self, d_model):
        super().__init__()
        self.W_x = nn.Linear(d_model, d_model)
        self.W_h = nn.Linear(d_model, d_model, bias=False)

    def forward(self, x):
        inputs = self.W_x(x)  # every position at once: (B, T, d)
        h = mt.zeros(x.shape[0], x.shape[2], device=x.device)
        for t in range(x.shape[1]):  # step t must wait for step t - 1
            h = mt.tanh(inputs[:, t] + self.W_h(h))  # (B, d)
        return h


def gradient_per_token(last_output, x, upstream):
    """``‖∂(last_output · upstream)/∂x_t‖`` for every position t of ``x (1, T, d)``: how much
    of the last output's gradient reaches each token."""
    x.grad = None
    (last_output * upstream).sum().backward()
    return numpy.linalg.norm(x.grad.numpy()[0].astype(numpy.float64), axis=-1)


# %% [markdown]
# ## How much gradient reaches the first token?
#
# The RNN's recurrent matrix `W_h` decides the fate of old tokens: its largest eigenvalue
# (in absolute value, the spectral radius) below 1 makes their gradient shrink step after
# step, above 1 it can make it grow. We try PyTorch's initialization and the same matrix
# scaled by 3 and by 6. The attention layer is causal, so the last token sees all the others.

# %%
x = randn(args.rng, 1, length, d_model, device=args.device, requires_grad=True)
upstream = randn(args.rng, 1, d_model, device=args.device)
curves = {}
print(f"x (1, {length}, {d_model}); gradient norm reaching token t from the output at the last token {length}")
print(
    f"{'model':<34} {'spectral radius':>15} {'token 1':>10} {'token ' + str(length // 2):>10} "
    f"{'token ' + str(length - 1):>10}"
)
rnn = ElmanRNN(d_model).to(args.device)
W_h = rnn.W_h.weight.data
for scale in (1.0, 3.0, 6.0):
    rnn.W_h.weight.data = W_h * scale  # the same matrix, scaled
    radius = float(numpy.abs(numpy.linalg.eigvals(rnn.W_h.weight.numpy().astype(numpy.float64))).max())
    name = "RNN, PyTorch's init" if scale == 1.0 else f"RNN, W_h x {scale:g}"
    curves[name] = g = gradient_per_token(rnn(x), x, upstream)
    print(f"{name:<34} {radius:15.2f} {g[0]:10.2e} {g[length // 2 - 1]:10.2e} {g[-2]:10.2e}")
attention = nn.MultiHeadAttention(d_model, num_heads, dropout=0.0).to(args.device)
output, _ = attention(x, x, x, is_causal=True, need_weights=False)  # (1, T, d)
curves["attention (causal, one layer)"] = g = gradient_per_token(output[:, -1], x, upstream)
print(f"{'attention (causal, one layer)':<34} {'':>15} {g[0]:10.2e} {g[length // 2 - 1]:10.2e} {g[-2]:10.2e}")
rnn_default = curves["RNN, PyTorch's init"]
first_zero = int(numpy.flatnonzero(rnn_default == 0)[-1]) + 1 if (rnn_default == 0).any() else None
print(
    f"tutorial: 'when an RNN reaches word 100, it barely remembers word 1'. Measured at PyTorch's init: "
    f"the gradient reaching token 1 has norm {rnn_default[0]:.1e}, the one reaching token {length - 1} "
    f"{rnn_default[-2]:.1e}"
    + (f"; tokens 1-{first_zero} get exactly 0 (below float32's smallest number)" if first_zero else "")
)
attention_curve = curves["attention (causal, one layer)"]
print(
    f"attention: token 1 gets {attention_curve[0] / attention_curve[-2]:.2f}x "
    f"what token {length - 1} gets: one step away, whatever the distance"
)
grown, exploded = curves["RNN, W_h x 3"], curves["RNN, W_h x 6"]
print(
    f"the RNN's decay is a product over the steps: scaled by 3, the same W_h sends token 1 "
    f"{grown[0] / grown[-2]:.0f}x the gradient of token {length - 1} "
    f"(at PyTorch's init: {rnn_default[0] / rnn_default[-2]:.0e}x); "
    f"scaled by 6 it explodes: token 1 gets {exploded[0] / exploded[-2]:.0e}x the gradient of token {length - 1} "
    f"in this float32 run, but the recurrence is chaotic: rounding alone moves that figure by orders of "
    f"magnitude, so only 'far above 1' is reproducible"
)

# %% [markdown]
# ## Waiting for each step, or all positions at once
#
# Attention does *more* arithmetic than the RNN as the sequence grows (its scores are
# `T x T`), but in a few large matrix products that run in parallel; the RNN's `T` steps must
# run one after another. We time one forward pass of each, alternating the two and after a
# warm-up run, and count the multiply-adds.

# %%
lengths = [16, 64] if args.quick else [32, 128, 512, 1024]
batch = 8
rnn = ElmanRNN(d_model).to(args.device)
timings = []
print(f"\nforward pass, batch {batch}, d_model {d_model}; RNN: T sequential steps, attention: one step")
print(f"{'T':>6} {'RNN multiply-adds':>18} {'attention multiply-adds':>24}  measured")
for n in lengths:
    xs = randn(args.rng, batch, n, d_model, device=args.device)
    with mt.no_grad():
        comparison = timed_pair(  # both lambdas run in this iteration, with its xs
            args,
            lambda: rnn(xs),  # noqa: B023
            lambda: attention(xs, xs, xs, is_causal=True, need_weights=False),  # noqa: B023
        )
    rnn_work = batch * n * 2 * d_model * d_model  # W_x x_t and W_h h per step
    attention_work = batch * (4 * n * d_model * d_model + 2 * n * n * d_model)  # 4 projections, QKᵀ and weights @ V
    timings.append((n, comparison.first, comparison.second))
    print(f"{n:>6} {rnn_work:>18,} {attention_work:>24,}  {comparison.describe('RNN', 'attention')}")
print(
    "tutorial: 'they process all positions simultaneously ... the secret behind their incredible speed'. Measured: "
    f"at T = {lengths[-1]} attention does {attention_work / rnn_work:.1f}x the RNN's multiply-adds and takes "
    f"{comparison.ratio:.2f}x its time"
)
quick_caveat(args, "how far back an RNN's gradient reaches at the tutorial's 100 words")

# %% [markdown]
# ## The picture
#
# Left: the gradient each token receives (log scale; the RNN at PyTorch's initialization
# drops to exactly 0 in float32, which a log scale cannot draw). Right: forward time against
# sequence length.

# %%
plt = pyplot()
fig, axes = plt.subplots(1, 2, figsize=(10, 4), layout="constrained")
positions = numpy.arange(1, length + 1)
for (name, g), style in zip(curves.items(), ("o-", "s-", "^-", "D-")):
    shown = g > 0
    axes[0].plot(positions[shown], g[shown], style, markersize=3, label=name)
axes[0].set_yscale("log")
axes[0].set_xlabel(f"token position t (the output is read at token {length})")
axes[0].set_ylabel("‖∂ output / ∂ x_t‖")
axes[0].set_title("Gradient reaching each token")
axes[0].legend(fontsize=8, loc="lower right")
n, t_rnn, t_attention = (numpy.array(column) for column in zip(*timings))
axes[1].plot(n, t_rnn * 1e3, "o-", label="RNN (T steps in a row)")
axes[1].plot(n, t_attention * 1e3, "s-", label="attention (one step)")
axes[1].set_xscale("log", base=2)
axes[1].set_yscale("log")
log_ticks(axes[1].xaxis, at=n)
log_ticks(axes[1].yaxis)
axes[1].set_xlabel("sequence length T")
axes[1].set_ylabel("forward time (ms, median)")
axes[1].set_title(f"Forward pass, batch {batch}, {args.device}")
axes[1].legend(fontsize=8)
for ax in axes:
    ax.grid(alpha=0.3)
save(fig, out, "why_attention.png")
