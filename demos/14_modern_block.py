# %% [markdown]
# # Section 11 and after: the LLaMA-style block, measured
#
# Section 11 of the tutorial introduces RMSNorm as the normalization of LLaMA, Mistral and
# Gemma: it keeps LayerNorm's division by a root mean square and drops the subtraction of
# the mean and the shift β. It promises a norm 7-15% faster, fewer parameters, and quality
# as good as LayerNorm's or better. The models it names changed more than the norm: their
# feed-forward network is gated (SwiGLU), positions rotate the queries and keys instead of
# being added to the embeddings (RoPE), and several query heads may share one key/value
# head (grouped-query attention, GQA).
#
# Here each promise is measured on this engine: what β costs in parameters; what RMSNorm
# saves in time, alone and inside a whole training step; what each change does to the
# validation loss after a fixed number of steps, every model with the same parameter
# budget, text, batches and seed; and what GQA saves in the key/value cache.

# %%
"""Section 11 and the block around it: RMSNorm, SwiGLU, rotary positions and GQA, each measured.

    python demos/14_modern_block.py [--steps N] [--device cpu|cuda] [--quick] [--seed N] [--out DIR]

Five character-level GPTs of the training job's size (3 blocks, d_model 128, 4 heads, context
64; --quick: 1 block of width 32) trained for the same number of steps (default 1,000; --quick
12) on the same batches of the Python language reference, from the same seed, each with as
many parameters as GPT-2's block at that size to within 0.2% (the feed-forward width is set to match):
GPT-2's block; GPT-2's with RMSNorm (section 11's change alone); GPT-2's with a SwiGLU
feed-forward; LLaMA's (RMSNorm, rotary positions, SwiGLU, no biases); and LLaMA's with two
key/value heads for the four query heads. Prints the parameters, the validation bits per
character on the whole validation split, and the speed; times LayerNorm against RMSNorm
(forward and backward) at the model's activation shape and a whole training step with each;
counts the bytes of the key/value cache for 4, 2 and 1 key/value heads; draws the training
curves. Sources: Zhang & Sennrich, arXiv:1910.07467 (RMSNorm); Shazeer, arXiv:2002.05202
(SwiGLU); Su et al., arXiv:2104.09864 (RoPE); Ainslie et al., arXiv:2305.13245 (GQA);
Touvron et al., arXiv:2302.13971 (LLaMA).
"""

import time

import numpy

import minitorch_attn as mt
from minitorch_attn import functional as F
from minitorch_attn import manual_seed, nn, optim
from minitorch_attn.app.data import CharVocab, bigram_bpc, get_batch, load_corpus, split_ids
from minitorch_attn.app.demo_common import pyplot, quick_caveat, save, setup, timed_pair
from minitorch_attn.app.train import LN2, evaluate_bpc, make_optimizer
from minitorch_attn.argtypes import positive_int
from minitorch_attn.speed import FastestThreads, blas_threads, chosen_by_user, get_num_threads


def add_flags(parser):
    parser.add_argument(
        "--steps", type=positive_int, default=None, help="optimizer steps of each model (default 1000; --quick 12)"
    )


args, out = setup(__doc__, "14_modern_block", extra=add_flags)
steps = args.steps or (12 if args.quick else 1000)
if args.quick:
    size = dict(d_model=32, num_heads=2, num_layers=1, max_seq_len=32)
    batch_size, warmup, text = 8, 5, load_corpus()[:20_000]
else:
    size = dict(d_model=128, num_heads=4, num_layers=3, max_seq_len=64)  # the training job's defaults
    batch_size, warmup, text = 16, 50, load_corpus()
vocab = CharVocab.from_text(text)
train_ids, val_ids = split_ids(vocab.encode(text))
block_size, d_model = size["max_seq_len"], size["d_model"]

# %% [markdown]
# ## Five blocks with one parameter budget
#
# A fair race gives every model the same number of parameters, or a model could win by
# being bigger. GPT-2's block (`nn.GPT`'s defaults: LayerNorm with γ and β, a GELU network of
# width 4·d_model, learned positions) sets the budget; the main job trains LLaMA's by default
# since these runs and the four-minute ones of `docs/main-job.md` measured it ahead. A SwiGLU network has three matrices
# instead of two, so at width 8/3·d_model it holds what GELU's holds at 4·d_model; rotary
# positions need no table, and two key/value heads instead of four shrink the attention
# projections. Each model below gets the feed-forward width that brings it back to the
# budget (a model's parameter count grows by the same amount for each unit of width, so
# two counts give the width).

# %%
KV_HEADS = 1 if args.quick else 2  # GQA: query heads per key/value head = num_heads / KV_HEADS
MODELS = {
    "GPT-2 (LayerNorm, GELU, learned)": dict(),
    "GPT-2 + RMSNorm": dict(norm="rmsnorm"),
    "GPT-2 + SwiGLU": dict(mlp="swiglu"),
    "LLaMA (RMSNorm, RoPE, SwiGLU)": dict(nn.LLAMA),
    f"LLaMA + GQA ({KV_HEADS} of {size['num_heads']} kv heads)": dict(nn.LLAMA, num_kv_heads=KV_HEADS),
}


def build(options, d_ff=None):
    """The GPT of this demo's size with ``options`` (and feed-forward width ``d_ff``)."""
    return nn.GPT(len(vocab), **size, d_ff=d_ff, dropout=0.0, **options)


def width_for(options, budget):
    """The feed-forward width at which the model with ``options`` has ``budget`` parameters
    (as near as a whole width allows): the count is linear in the width."""
    if options.get("mlp", "gelu") == "gelu":
        return 4 * d_model  # GPT-2's width, the budget's own
    at_8, at_9 = build(options, 8).num_parameters(), build(options, 9).num_parameters()
    return 8 + round((budget - at_8) / (at_9 - at_8))


budget = build({}).num_parameters()
widths = {name: width_for(options, budget) for name, options in MODELS.items()}
print(f"corpus: {len(text):,} characters, vocabulary {len(vocab)}; model {size}")
print(f"{'model':<36} {'d_ff':>5} {'parameters':>11} {'vs GPT-2':>9}")
for name, options in MODELS.items():
    count = build(options, widths[name]).num_parameters()
    print(f"{name:<36} {widths[name]:>5} {count:>11,} {100 * (count / budget - 1):>+8.2f}%")
norm_count = 2 * size["num_layers"] + 1
print(
    f"β, the parameters RMSNorm drops: {norm_count} norms x d_model {d_model} = {norm_count * d_model:,}, "
    f"{100 * norm_count * d_model / budget:.2f}% of the budget (tutorial: 'fewer params')"
)

# %% [markdown]
# ## What RMSNorm saves in time
#
# `04_norm_speed` races the two norms alone on the tutorial's large input. Here they run at
# the shape a training step of this model feeds them, (batch · context, d_model), forward
# and backward; then two whole training steps, identical but for the norm, race each other:
# a norm that is faster saves only its share of the step.


# %%
def norm_step(kind):
    """One forward and backward of ``"layernorm"`` or ``"rmsnorm"`` at a training step's shape."""
    x = mt.tensor(
        args.rng.standard_normal((batch_size * block_size, d_model)).astype("float32"),
        device=args.device,
        requires_grad=True,
    )
    w = mt.ones(d_model, device=args.device, requires_grad=True)
    b = mt.zeros(d_model, device=args.device, requires_grad=True)
    g = mt.tensor(args.rng.standard_normal(x.shape).astype("float32"), device=args.device)

    def step():
        y = F.layer_norm(x, (d_model,), w, b) if kind == "layernorm" else F.rms_norm(x, (d_model,), w)
        y.backward(g)

    return step


def training_step(options):
    """One forward and backward of the whole model with ``options``, on one fixed batch."""
    manual_seed(args.seed)
    model = build(options).to(args.device)
    x, y = get_batch(train_ids, batch_size, block_size, numpy.random.default_rng(args.seed), args.device)

    def step():
        logits = model(x)
        model.zero_grad()
        F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1)).backward()

    return step


timing_threads = get_num_threads() if chosen_by_user() else 1  # one BLAS thread, unless --threads says
with blas_threads(timing_threads):
    norms = timed_pair(args, norm_step("layernorm"), norm_step("rmsnorm"))
    whole = timed_pair(args, training_step({}), training_step(dict(norm="rmsnorm")), repeats=None if args.quick else 15)
share = norm_count * norms.first / whole.first
print(f"\ntimed with {timing_threads} BLAS thread(s) (--threads N to choose)")
print(
    f"norm alone at ({batch_size * block_size}, {d_model}) float32, forward + backward: "
    + norms.describe("LayerNorm", "RMSNorm")
)
print("training step (forward + backward) of the whole model: " + whole.describe("LayerNorm", "RMSNorm"))
print(
    f"the {norm_count} LayerNorms take about {100 * share:.1f}% of a step (from the medians): RMSNorm's speed-up "
    f"can save {100 * share * (1 - norms.ratio):.1f}% of it; tutorial: 'RMSNorm ~7-15% faster'"
)
quick_caveat(args, "the norms' share of a training step at the training job's size")

# %% [markdown]
# ## The same steps, the same batches
#
# Each model trains with the training job's recipe (AdamW with weight decay on the matrices,
# a warmup then a cosine decay to zero, gradients clipped at norm 1) on the very same
# sequence of batches, drawn from one seed. A fixed number of steps makes the comparison
# independent of the machine and of whatever else runs on it; the speed is printed beside
# it. The score is the validation bits per character on the whole validation split (the
# last 10% of the text), each character predicted from at least half a context.


# %%
def train(options, d_ff):
    """Train one model for ``steps`` steps; returns its training curve (bits/char per
    step), validation bits/char on the whole split, tokens per second and parameters."""
    manual_seed(args.seed)
    model = build(options, d_ff).to(args.device)
    opt = make_optimizer(model, 4e-3, weight_decay=0.1)
    schedule = optim.WarmupCosineLR(opt, warmup_steps=warmup, total_steps=steps, min_lr_ratio=0.0)
    batches = numpy.random.default_rng(args.seed)  # the same batches for every model
    threads, curve, seconds = FastestThreads(), [], 0.0
    for _ in range(steps):
        start = time.perf_counter()
        with threads:
            x, y = get_batch(train_ids, batch_size, block_size, batches, args.device)
            logits = model(x)
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
            opt.zero_grad()
            loss.backward()
            optim.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
        schedule.step()
        seconds += time.perf_counter() - start
        curve.append(loss.item() / LN2)
    with threads.best():
        val = evaluate_bpc(model, val_ids, block_size, batch_size, device=args.device)
    return dict(
        curve=curve, val=val, tokens_per_s=steps * batch_size * block_size / seconds, parameters=model.num_parameters()
    )


baseline = bigram_bpc(train_ids, val_ids, len(vocab))
results = {name: train(options, widths[name]) for name, options in MODELS.items()}
print(
    f"\n{steps} steps each, batch {batch_size}, context {block_size}, seed {args.seed}, on {args.device}; "
    f"bigram baseline {baseline:.3f} bits/char"
)
print(f"{'model':<36} {'parameters':>11} {'val bits/char':>14} {'tokens/s':>9}")
for name, r in results.items():
    print(f"{name:<36} {r['parameters']:>11,} {r['val']:>14.3f} {r['tokens_per_s']:>9,.0f}")
reference = results["GPT-2 (LayerNorm, GELU, learned)"]["val"]
for name, r in list(results.items())[1:]:
    print(f"{name} minus GPT-2: {r['val'] - reference:+.3f} bits/char")
print("tutorial: RMSNorm performs 'equal or better in practice'")
quick_caveat(args, "the differences between the blocks (a few steps of a tiny model are noise)")

# %% [markdown]
# ## What grouped-query attention saves
#
# Generation keeps every layer's keys and values of the tokens seen so far. Its size per
# token is 2 (a key and a value) × layers × key/value heads × d_k × 4 bytes (float32): it
# shrinks with the number of key/value heads, while the number of query heads stays. The
# cache below is filled by a real prompt, and its arrays are counted.


# %%
def cache_bytes(kv_heads, prompt):
    """``(bytes, positions)`` that the LLaMA-style model's cache holds after ``prompt``."""
    manual_seed(args.seed)
    model = build(dict(nn.LLAMA, num_kv_heads=kv_heads)).to(args.device).eval()
    cache = model.new_cache()
    with mt.no_grad():
        model(prompt, cache=cache)
    stored = sum(k.numpy().nbytes + v.numpy().nbytes for k, v in cache.layers)
    return stored, cache.length


prompt = mt.tensor(numpy.asarray([vocab.encode(text[:block_size])]), device=args.device)
d_k, heads = d_model // size["num_heads"], size["num_heads"]
kv_sizes = {}
print(
    f"\nkey/value cache after a prompt of {block_size} characters ({size['num_layers']} layer(s), "
    f"{heads} query heads of d_k {d_k}, float32):"
)
for kv_heads in sorted({heads, KV_HEADS, 1}, reverse=True):
    stored, length = cache_bytes(kv_heads, prompt)
    formula = 2 * size["num_layers"] * kv_heads * d_k * 4
    kv_sizes[kv_heads] = stored / length
    print(
        f"  {kv_heads} kv heads: {stored:>8,} bytes for {length} positions = {stored // length:,} bytes per token "
        f"(2 x {size['num_layers']} x {kv_heads} x {d_k} x 4 = {formula:,})"
    )
print(
    f"(the rotary model's cache keeps the last {block_size - 1} positions: with the next token they fill its "
    f"window of {block_size} keys)"
)

# %% [markdown]
# ## The training curves


# %%
def draw():
    """The training curves (a moving average) beside the cache's bytes per token."""
    plt = pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.5), gridspec_kw=dict(width_ratios=[2.2, 1]))
    span = max(1, steps // 50)  # a moving average over this many steps
    for name, r in results.items():
        smooth = numpy.convolve(r["curve"], numpy.ones(span) / span, mode="valid")
        left.plot(numpy.arange(span, steps + 1), smooth, label=f"{name}: {r['val']:.3f}")
    left.axhline(baseline, color="gray", linestyle="--", label=f"bigram baseline ({baseline:.2f})")
    left.set(
        xlabel="step",
        ylabel="training bits per character",
        title=f"Equal parameters, same batches ({budget:,} parameters)",
    )
    left.legend(title="validation bits/char after the last step", fontsize=8, title_fontsize=8)
    left.grid(alpha=0.3)
    names = [f"{n} kv" for n in kv_sizes]
    right.bar(names, [v / 1024 for v in kv_sizes.values()], color="tab:purple")
    right.set(ylabel="KiB per cached token", title=f"KV cache, {heads} query heads")
    right.grid(alpha=0.3, axis="y")
    fig.tight_layout()
    save(fig, out, "modern_block.png", dpi=110)


draw()
