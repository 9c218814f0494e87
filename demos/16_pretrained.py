# %% [markdown]
# # A real model, read with our code: does "it" look at "trophy"?
#
# The tutorial opens on "The trophy didn't fit in the bag because it was too big." and says
# that attention is how a model ties "it" to the trophy. That is a claim about trained
# weights, so we test it on a model that was trained on far more text than ours: GPT-2,
# loaded from a Hugging Face folder into our own `GPT` (`GPT.from_pretrained`), so every
# number below comes out of our hand-written attention. For each layer and head we read the
# row of the attention matrix that belongs to "it" and compare the weight it puts on
# "trophy" with the weight on "bag". Then we take a few fine-tuning steps through the
# imported model (our backward, all 124M parameters in the real case) and draw the autograd
# graph of one of its blocks.

# %%
"""Attention from "it" in every head of a pretrained GPT-2, fine-tuning it, and one block's graph.

    python demos/16_pretrained.py [--pretrained FOLDER] [--device cpu|cuda] [--quick] [--seed N] [--out DIR]

1. The model: with --pretrained FOLDER, a Hugging Face GPT-2 (or Llama) folder with its
   tokenizer.json (``huggingface-cli download gpt2 --include "*.json" model.safetensors
   --local-dir gpt2``, or a snapshot in
   ``~/.cache/huggingface/hub/models--gpt2/snapshots/<hash>/``), loaded by
   ``GPT.from_pretrained``. Without it, a GPT-2-shaped model (biases, LayerNorm, tanh GELU,
   learned positions) with random weights, and the words of the sentence as its tokens: the
   same code runs, but its numbers say nothing about the claim.
2. "The trophy didn't fit in the bag because it was too big.": for every layer and head,
   the attention weight from "it" to "trophy" and to "bag" (summed over the tokens of
   each word), how many heads prefer the trophy, and the head that looks at it most.
3. A few steps of AdamW on the sentence itself: the loss before and after, through our backward.
4. The autograd graph of the first block (needs the graph extra; without Graphviz's ``dot``
   the ``.dot`` file is written).

Writes ``it_attention.png`` (each head's weights from "it" to every earlier token, and the
share on "trophy" and "bag" per layer) and ``block.svg``.
"""

import os
import re
import sys
import warnings

import numpy

import minitorch_attn as mt
import minitorch_attn.functional as F
from minitorch_attn import nn
from minitorch_attn.app.demo_common import pyplot, save, setup
from minitorch_attn.optim import AdamW

SENTENCE = "The trophy didn't fit in the bag because it was too big."
WORDS = ("trophy", "bag")


def flags(parser):
    parser.add_argument(
        "--pretrained",
        metavar="FOLDER",
        help="a Hugging Face GPT-2 folder (config.json, model.safetensors, tokenizer.json)",
    )


class WordTokens:
    """Stand-in for a tokenizer when there is no folder: the sentence cut as GPT-2 cuts
    words (a word with the space before it, punctuation apart), one id per distinct piece."""

    def __init__(self, text):
        self.pieces = re.findall(r" ?[A-Za-z]+|'[a-z]+| ?[^\sA-Za-z]", text)
        self.vocab = {piece: i for i, piece in enumerate(dict.fromkeys(self.pieces))}

    def encode(self, text):
        """``(ids, [(start, end)] character spans)`` of ``text`` (which must be the sentence)."""
        spans, start = [], 0
        for piece in self.pieces:
            spans.append((start, start + len(piece)))
            start += len(piece)
        return [self.vocab[p] for p in self.pieces], spans


def load(args):
    """``(model, ids, spans, pretrained)``: the model, the sentence's token ids, each token's
    character span, and whether the weights are trained."""
    if args.pretrained:
        from minitorch_attn.app.hf_export import load_tokenizer

        model = nn.GPT.from_pretrained(args.pretrained, device=args.device)
        encoding = load_tokenizer(args.pretrained).encode(SENTENCE)
        if model.config["pos_encoding"] == "learned" and len(encoding.ids) > model.config["max_seq_len"]:
            raise SystemExit(
                f"the sentence is {len(encoding.ids)} tokens, more than this model's "
                f"{model.config['max_seq_len']} positions"
            )
        return model, encoding.ids, encoding.offsets, True
    tokens = WordTokens(SENTENCE)
    ids, spans = tokens.encode(SENTENCE)
    width, layers, heads = (32, 2, 2) if args.quick else (96, 4, 4)
    model = nn.GPT(
        len(tokens.vocab),
        d_model=width,
        num_heads=heads,
        num_layers=layers,
        max_seq_len=32,
        bias=True,
        tie_weights=True,
    ).to(args.device)  # GPT-2's options, randomly initialised
    return model, ids, spans, False


def positions_of(word, spans, start=0):
    """The tokens whose characters overlap the first ``word`` of the sentence after ``start``."""
    begin = SENTENCE.index(word, start)
    end = begin + len(word)
    return [t for t, (a, b) in enumerate(spans) if a < end and b > begin]


def main(argv=None):
    args, out = setup(__doc__, "16_pretrained", argv, extra=flags)
    model, ids, spans, pretrained = load(args)
    c = model.config
    print(
        f"1. model: {'GPT.from_pretrained(' + repr(args.pretrained) + ')' if pretrained else 'random weights'}: "
        f"{c['num_layers']} layers, {c['num_heads']} heads, d_model {c['d_model']}, "
        f"{model.num_parameters():,} parameters"
    )
    if not pretrained:
        print(
            "   no --pretrained folder: these weights are random, so the numbers below only show the code "
            "path. For the real test pass a GPT-2 folder: huggingface-cli download gpt2 --include "
            "'*.json' model.safetensors --local-dir gpt2, "
            "then --pretrained gpt2"
        )

    it = positions_of("it", spans, SENTENCE.index("because"))[-1]  # the last token of "it" asks
    trophy, bag = positions_of("trophy", spans), positions_of("bag", spans)
    print(f'2. "{SENTENCE}" as {len(ids)} tokens; "it" is token {it}, "trophy" {trophy}, "bag" {bag}')
    print('   (a causal model reads left to right: at "it" it has not yet seen "big")')
    with nn.in_eval_mode(model), mt.no_grad():
        _, weights = model(mt.tensor([ids], device=args.device), need_weights=True)
    rows = numpy.stack([w.numpy()[0, :, it, : it + 1] for w in weights])  # (layers, heads, keys up to "it")
    on_trophy, on_bag = rows[..., trophy].sum(-1), rows[..., bag].sum(-1)  # (layers, heads)
    print("   layer   share on 'trophy' per head            share on 'bag' per head")
    for layer in range(rows.shape[0]):
        t = " ".join(f"{v:.2f}" for v in on_trophy[layer])
        b = " ".join(f"{v:.2f}" for v in on_bag[layer])
        print(f"   {layer:>5}   {t:<36}  {b}")
    # a word of several tokens gets the sum of their weights; so that a longer word does not win by
    # length alone, a head "prefers" the word whose tokens get more weight each, on average
    prefer = int((on_trophy / len(trophy) > on_bag / len(bag)).sum())
    best = numpy.unravel_index(numpy.argmax(on_trophy), on_trophy.shape)
    print(
        f"   heads putting more weight on 'trophy' than on 'bag': {prefer} of {on_trophy.size}; "
        f"mean over heads: trophy {on_trophy.mean():.3f}, bag {on_bag.mean():.3f}; "
        f"the head looking most at 'trophy': layer {best[0]} head {best[1]} ({on_trophy[best]:.2f})"
    )
    first = rows[..., 0].mean()
    print(
        f"   the first token takes {first:.2f} of the weight from 'it' on average over the heads; "
        f"spread evenly over the {it + 1} tokens up to 'it', the weights would be trophy "
        f"{len(trophy) / (it + 1):.3f}, bag {len(bag) / (it + 1):.3f}"
    )
    verdict = "tutorial: attention links 'it' to 'trophy'; measured on these weights: " + (
        "most heads prefer 'trophy'" if prefer > on_trophy.size / 2 else "most heads do not prefer 'trophy'"
    )
    print(f"   {verdict}" + ("" if pretrained else " (random weights: no evidence either way)"))

    steps = 2 if args.quick else 5
    print(f"3. fine-tuning: {steps} steps of AdamW on the sentence, backward through the whole model")
    x = mt.tensor([ids[:-1]], device=args.device)
    y = mt.tensor([ids[1:]], device=args.device)
    optimizer = AdamW(model.parameters(), lr=1e-4 if pretrained else 1e-3, weight_decay=0.0)
    model.train()
    losses = []
    for _ in range(steps + 1):
        loss = F.cross_entropy(model(x).reshape(-1, c["vocab_size"]), y.reshape(-1))
        losses.append(float(loss.item()))
        if len(losses) > steps:
            break
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(
        "   loss per step: "
        + " -> ".join(f"{v:.3f}" for v in losses)
        + f" ({'falls' if losses[-1] < losses[0] else 'does not fall'})"
    )
    model.eval()

    print("4. the autograd graph of block 0")
    try:
        h = model.embed(mt.tensor([ids[:4]], device=args.device)).detach().requires_grad_()
        block = model.blocks[0]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # no dot program: the .dot file, said below
            path = mt.draw_graph(block(h, is_causal=True), os.path.join(out, "block.svg"), params=block)
        graph = mt.draw_graph(block(h, is_causal=True), params=block)
        calls = sum("shape=ellipse" in line for line in graph.body)
        print(f"   {calls} Function calls from the block's input to its output -> {path}")
    except ImportError as error:
        print(f"   skipped: {error}")

    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.8), layout="constrained", gridspec_kw={"width_ratios": [3, 2]})
    labels = [SENTENCE[a:b] for a, b in spans[: it + 1]]
    image = axes[0].imshow(rows.reshape(-1, it + 1), aspect="auto", cmap="viridis", vmin=0.0)
    shown = range(it + 1) if it < 20 else sorted({0, trophy[0], bag[0], it})  # many tokens: label the ones that matter
    axes[0].set_xticks(shown, [repr(labels[t])[1:-1] for t in shown], rotation=60, fontsize=9)
    num_layers, num_heads = on_trophy.shape
    step = max(1, num_layers // 12)  # at most a dozen labels
    axes[0].set_yticks(
        [l * num_heads for l in range(0, num_layers, step)],
        [f"layer {l}" for l in range(0, num_layers, step)],
        fontsize=9,
    )
    for l in range(1, num_layers):
        axes[0].axhline(l * num_heads - 0.5, color="white", linewidth=0.8)
    axes[0].set_ylabel(f"{num_heads} heads per layer")
    axes[0].set_title('Weight from "it" to each earlier token, every head')
    fig.colorbar(image, ax=axes[0])
    layers = range(rows.shape[0])
    axes[1].plot(layers, on_trophy.mean(1), "o-", label="'trophy' (mean over heads)")
    axes[1].plot(layers, on_bag.mean(1), "s--", label="'bag' (mean over heads)")
    axes[1].plot(layers, on_trophy.max(1), "^:", label="'trophy' (the head that looks most)")
    axes[1].set_xticks(list(layers)[::step])
    axes[1].set_xlabel("layer")
    axes[1].set_ylabel('attention weight from "it"')
    axes[1].set_title("trained weights" if pretrained else "random weights: no evidence")
    axes[1].legend(fontsize=9)
    axes[1].grid(alpha=0.3)
    save(fig, out, "it_attention.png")
    return 0


# %% [markdown]
# ## Run it
#
# The flags are the command line's (or, in a notebook, `$MINITORCH_ATTN_DEMO_FLAGS`).

# %%
status = main()
if status:
    sys.exit(status)
