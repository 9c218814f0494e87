# %% [markdown]
# # Section 10: Pre-LN against Post-LN
#
# Where the LayerNorm sits decides how a deep stack trains. Post-LN (the original
# Transformer) normalizes after each residual addition, `x = norm(x + f(x))`; Pre-LN
# normalizes the input of each branch, `x = x + f(norm(x))`, so the residual stream is a plain
# sum that the gradient crosses untouched. Xiong et al. (arXiv:2002.04745) show that Post-LN
# needs a learning-rate warmup where Pre-LN trains without one.
#
# We train the same 12-block language model three times, with the same initial weights, the
# same batches and the same peak learning rate: Pre-LN, Post-LN, and Post-LN with a warmup.

# %%
"""Section 10: Pre-LN against Post-LN, the same deep stack trained both ways, and with a warmup.

    python demos/10_pre_post_ln.py [--device cpu|cuda] [--quick] [--seed N] [--out DIR]
                                   [--layers N] [--steps N] [--lr LR] [--warmup N] [--grad-clip C] [--context T]

Three character-level language models with the same 12-block stack (--quick: 4), the same
initialization, the same batches and the same peak learning rate (6e-3, AdamW, no gradient
clipping), trained on the Python language reference (the training job's corpus): Pre-LN from
the first step, Post-LN from the first step, and Post-LN with a linear warmup over the first
30 steps (--quick: 2). Prints each block's gradient norm at initialization and the losses,
and draws the three loss curves and the gradient norms. Try --lr 1e-3 to see how the gap
depends on the learning rate. Source: Xiong et al., arXiv:2002.04745.
"""

import numpy

import minitorch_attn as mt
from minitorch_attn import functional as F
from minitorch_attn import manual_seed, nn, optim
from minitorch_attn.app.data import CharVocab, get_batch, load_corpus, split_ids
from minitorch_attn.app.demo_common import log_ticks, pyplot, quick_caveat, save, setup
from minitorch_attn.app.train import make_optimizer


def add_flags(parser):
    parser.add_argument("--layers", type=int, default=None, help="blocks in the stack (default 12, --quick 4)")
    parser.add_argument("--steps", type=int, default=None, help="training steps of each model (default 100, --quick 8)")
    parser.add_argument("--lr", type=float, default=6e-3, help="the same peak learning rate for all three")
    parser.add_argument(
        "--warmup", type=int, default=None, help="warmup steps of the third run (default 30, --quick 2)"
    )
    parser.add_argument("--grad-clip", type=float, default=0.0, help="clip the gradient norm to this (0: no clipping)")
    parser.add_argument("--context", type=int, default=None, help="characters per window (default 32)")


args, out = setup(__doc__, "10_pre_post_ln", extra=add_flags)

# %% [markdown]
# ## The model
#
# Token and position embeddings, a stack of blocks that differ only in `norm_first`, a final
# norm and a linear layer to the vocabulary. The layers keep their own (PyTorch's)
# initialization, as in the tutorial: no depth-scaled residual projections to hide the
# difference.


# %%
class CharLM(nn.Module):
    """A causal character-level language model: token and position embeddings, a stack of
    :class:`~minitorch_attn.nn.TransformerEncoderBlock` s, Pre-LN (``norm_first=True``) or
    Post-LN (``False``), a final norm and a linear layer to the vocabulary.

    Shapes: ``idx (batch, T)`` int64 -> logits ``(batch, T, vocab_size)``.
    """

    def __init__(self, vocab_size, d_model, num_heads, num_layers, block_size, norm_first):
        super().__init__()
        self.token_embedding = nn.Embedding(vocab_size, d_model)
        self.position_embedding = nn.Embedding(block_size, d_model)
        self.blocks = nn.ModuleList(
            nn.TransformerEncoderBlock(d_model, num_heads, 4 * d_model, dropout=0.0, norm_first=norm_first)
            for _ in range(num_layers)
        )
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab_size)

    def forward(self, idx):
        positions = mt.arange(idx.shape[1], device=idx.device)
        x = self.token_embedding(idx) + self.position_embedding(positions)
        for block in self.blocks:
            x = block(x, is_causal=True)
        return self.head(self.norm(x))


def block_gradient_norms(model, x, y):
    """The gradient norm of each block's parameters for one batch, at the current weights."""
    model.zero_grad()
    logits = model(x)
    F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1)).backward()
    norms = []
    for block in model.blocks:
        total = sum(float(numpy.sum(p.grad.numpy().astype(numpy.float64) ** 2)) for p in block.parameters())
        norms.append(total**0.5)
    model.zero_grad()
    return norms


def train(norm_first, warmup):
    """Train one model from the seed's initial weights on ``batches``; returns its gradient
    norms per block at initialization and its loss at every step."""
    manual_seed(args.seed)  # the same initial weights' draws
    model = CharLM(len(vocab), d_model, num_heads, layers, block_size, norm_first).to(args.device)
    norms = block_gradient_norms(model, *batches[0])
    opt = make_optimizer(model, args.lr, weight_decay=0.0)
    schedule = optim.WarmupCosineLR(opt, warmup_steps=warmup, total_steps=steps, min_lr_ratio=1.0)  # then constant
    losses = []
    for x, y in batches:
        logits = model(x)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        if args.grad_clip:
            optim.clip_grad_norm_(model.parameters(), args.grad_clip)
        schedule.step()
        opt.step()
        losses.append(loss.item())
    return norms, losses


# %% [markdown]
# ## Three runs on the same batches

# %%
layers = args.layers or (4 if args.quick else 12)
steps = args.steps or (8 if args.quick else 100)
warmup = args.warmup if args.warmup is not None else (2 if args.quick else 30)
d_model, num_heads, batch_size = (32, 2, 8) if args.quick else (64, 4, 16)
block_size = args.context or 32
text = load_corpus()[:50_000] if args.quick else load_corpus()
vocab = CharVocab.from_text(text)
train_ids, _ = split_ids(vocab.encode(text))
batches = [get_batch(train_ids, batch_size, block_size, args.rng, args.device) for _ in range(steps)]
print(
    f"{layers} blocks, d_model {d_model}, {num_heads} heads, context {block_size}, batch {batch_size}, "
    f"AdamW peak lr {args.lr}, {steps} steps, the same batches for all three"
)

tail = max(1, steps // 10)  # the final loss is the mean of the last `tail` steps
runs = {"Pre-LN": (True, 0), "Post-LN": (False, 0), f"Post-LN, {warmup}-step warmup": (False, warmup)}
curves, grad_norms = {}, {}
for name, (norm_first, run_warmup) in runs.items():
    grad_norms[name], curves[name] = train(norm_first, run_warmup)
    losses = curves[name]
    print(
        f"{name:<28} gradient norm at init, first block {grad_norms[name][0]:.3e}, last block "
        f"{grad_norms[name][-1]:.3e}; loss {losses[0]:.3f} -> {numpy.mean(losses[-tail:]):.3f} "
        f"(mean of the last {tail} steps)"
    )
for name, losses in curves.items():
    print(f"{name} losses every {tail} steps: " + " ".join(f"{v:.2f}" for v in losses[::tail]))
final = {name: float(numpy.mean(losses[-tail:])) for name, losses in curves.items()}
warmed = f"Post-LN, {warmup}-step warmup"
gap, gap_warmed = final["Post-LN"] - final["Pre-LN"], final[warmed] - final["Pre-LN"]
print(f"final loss, Post-LN minus Pre-LN: {gap:+.3f} nats; with the warmup: {gap_warmed:+.3f} nats")
print("tutorial: Post-LN 'requires careful warm-up schedules'; Pre-LN 'trains stably without warmup'")
if gap > 0:
    closed = 1 - gap_warmed / gap
    if closed >= 0:
        print(f"measured: the warmup closes {closed:.1%} of Post-LN's gap to Pre-LN here")
    else:
        print(f"measured: the warmup widens Post-LN's gap to Pre-LN by {-closed:.1%} here")
else:
    print("measured: here Post-LN did not end behind Pre-LN, so there is no gap for the warmup to close")
quick_caveat(args, "Post-LN falling behind (it needs the 12 blocks and 100 steps of the full run)")

# %% [markdown]
# ## The picture
#
# Left: the training loss at every step. Right: each block's gradient norm at initialization
# (the warmup run starts from the same weights as Post-LN, so it has the same norms).

# %%
plt = pyplot()
fig, axes = plt.subplots(1, 2, figsize=(11, 4.4), layout="constrained")
for name, losses in curves.items():
    axes[0].plot(range(1, steps + 1), losses, label=name, linestyle=":" if "warmup" in name else "-")
for name in ("Pre-LN", "Post-LN"):
    axes[1].plot(range(1, layers + 1), grad_norms[name], "o-", label=name)
axes[0].set_xlabel("step")
axes[0].set_ylabel("training loss (nats / character)")
axes[0].set_title(f"{layers} blocks, peak lr {args.lr}")
axes[1].set_xticks(range(1, layers + 1))
axes[1].set_xlabel("block (1 = next to the input)")
axes[1].set_ylabel("gradient norm at initialization")
axes[1].set_yscale("log")
log_ticks(axes[1].yaxis)
axes[1].set_title("Gradient norm of each block at step 0")
for ax in axes:
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
save(fig, out, "pre_post_ln.png")
