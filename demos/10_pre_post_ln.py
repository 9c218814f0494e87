"""Pre-LN vs Post-LN, the same deep stack trained both ways.

    python demos/10_pre_post_ln.py [--device cpu|cuda] [--quick] [--seed N] [--out DIR]
                                   [--layers N] [--steps N] [--lr LR] [--grad-clip C] [--context T]

Post-LN (the original Transformer) normalizes after each residual addition,
``x = norm(x + f(x))``; Pre-LN normalizes the input of each branch, ``x = x + f(norm(x))``,
so the residual stream is an untouched sum. Xiong et al. (arXiv:2002.04745) show that
Post-LN needs a learning-rate warmup while Pre-LN trains without one. Here two
character-level language models with the same 12-block stack, the same initialization, the
same batches and the same learning rate (6e-3, AdamW, from the first step, no gradient
clipping) are trained side by side on the Python language reference (the training job's
corpus). Prints each block's gradient norm at initialization and the losses, and draws the
two loss curves on one plot. At lower learning rates (try --lr 1e-3) the two curves meet:
the gap is one of stability at a given learning rate, which warmup closes."""

import sys

import numpy

import minitorch_attn as mt
from minitorch_attn import functional as F
from minitorch_attn import nn, optim
from minitorch_attn import manual_seed
from minitorch_attn.data import CharVocab, get_batch, load_corpus, split_ids
from minitorch_attn.train import make_optimizer
from minitorch_attn.demo_common import pyplot, save, setup


class CharLM(nn.Module):
    """A causal character-level language model: token and position embeddings, a stack of
    :class:`~minitorch_attn.nn.TransformerEncoderBlock` s, Pre-LN (``norm_first=True``) or
    Post-LN (``False``), a final norm and a linear layer to the vocabulary. The weights keep
    the layers' own (PyTorch's) initialization, as in the tutorial: no depth-scaled residual
    projections that would hide the difference.

    Shapes: ``idx (batch, T)`` int64 -> logits ``(batch, T, vocab_size)``.
    """

    def __init__(self, vocab_size, d_model, num_heads, num_layers, block_size, norm_first):
        super().__init__()
        self.token_embedding = nn.Embedding(vocab_size, d_model)
        self.position_embedding = nn.Embedding(block_size, d_model)
        self.blocks = nn.ModuleList(nn.TransformerEncoderBlock(d_model, num_heads, 4 * d_model, dropout=0.0,
                                                               norm_first=norm_first)
                                    for _ in range(num_layers))
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab_size)

    def forward(self, idx):
        positions = mt.arange(idx.shape[1], device=idx.device)
        x = self.token_embedding(idx) + self.position_embedding(positions)
        for block in self.blocks:
            x = block(x, is_causal=True)
        return self.head(self.norm(x))


def add_flags(parser):
    parser.add_argument("--layers", type=int, default=None, help="blocks in the stack (default 12, --quick 4)")
    parser.add_argument("--steps", type=int, default=None, help="training steps of each model (default 100, --quick 8)")
    parser.add_argument("--lr", type=float, default=6e-3, help="the same learning rate for both, no warmup")
    parser.add_argument("--grad-clip", type=float, default=0.0, help="clip the gradient norm to this (0: no clipping)")
    parser.add_argument("--context", type=int, default=None, help="characters per window (default 32)")


def block_gradient_norms(model, x, y):
    """The gradient norm of each block's parameters for one batch, at the current weights."""
    model.zero_grad()
    logits = model(x)
    F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1)).backward()
    norms = []
    for block in model.blocks:
        total = sum(float(numpy.sum(p.grad.numpy().astype(numpy.float64) ** 2)) for p in block.parameters())
        norms.append(total ** 0.5)
    model.zero_grad()
    return norms


def main(argv=None):
    args, out = setup(__doc__, "10_pre_post_ln", argv, extra=add_flags)
    layers = args.layers or (4 if args.quick else 12)
    steps = args.steps or (8 if args.quick else 100)
    d_model, num_heads, batch_size = (32, 2, 8) if args.quick else (64, 4, 16)
    block_size = args.context or 32

    text = load_corpus()[:50_000] if args.quick else load_corpus()
    vocab = CharVocab.from_text(text)
    train_ids, _ = split_ids(vocab.encode(text))
    batches = [get_batch(train_ids, batch_size, block_size, args.rng, args.device) for _ in range(steps)]
    print(f"{layers} blocks, d_model {d_model}, {num_heads} heads, context {block_size}, batch {batch_size}, "
          f"AdamW lr {args.lr} from step 1 (no warmup), {steps} steps, the same batches for both")

    tail = max(1, steps // 10)  # the final loss is the mean of the last `tail` steps
    curves, grad_norms = {}, {}
    for name, norm_first in (("Pre-LN", True), ("Post-LN", False)):
        manual_seed(args.seed)                                  # the same initial weights' draws
        model = CharLM(len(vocab), d_model, num_heads, layers, block_size, norm_first).to(args.device)
        grad_norms[name] = block_gradient_norms(model, *batches[0])
        opt = make_optimizer(model, args.lr, weight_decay=0.0)
        losses = []
        for x, y in batches:
            logits = model(x)
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
            opt.zero_grad()
            loss.backward()
            if args.grad_clip:
                optim.clip_grad_norm_(model.parameters(), args.grad_clip)
            opt.step()
            losses.append(loss.item())
        curves[name] = losses
        print(f"{name:<8} gradient norm at init, first block {grad_norms[name][0]:.3e}, last block "
              f"{grad_norms[name][-1]:.3e}; loss {losses[0]:.3f} -> {numpy.mean(losses[-tail:]):.3f} "
              f"(mean of the last {tail} steps)")
    for name, losses in curves.items():
        print(f"{name} losses every {tail} steps: " + " ".join(f"{v:.2f}" for v in losses[::tail]))
    gap = numpy.mean(curves["Post-LN"][-tail:]) - numpy.mean(curves["Pre-LN"][-tail:])
    print(f"final loss, Post-LN minus Pre-LN: {gap:+.3f} nats")

    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for name, losses in curves.items():
        axes[0].plot(range(1, steps + 1), losses, label=name)
        axes[1].plot(range(1, layers + 1), grad_norms[name], "o-", label=name)
    axes[0].set_xlabel("step")
    axes[0].set_ylabel("training loss (nats / character)")
    axes[0].set_title(f"{layers} blocks, lr {args.lr}, no warmup")
    axes[1].set_xlabel("block (1 = next to the input)")
    axes[1].set_ylabel("gradient norm at initialization")
    axes[1].set_yscale("log")
    axes[1].set_title("gradient norm of each block at step 0")
    for ax in axes:
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    save(fig, out, "pre_post_ln.png")


if __name__ == "__main__":
    sys.exit(main())
