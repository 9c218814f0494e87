# %% [markdown]
# # The graph that `backward()` walks (section 9, seen from the engine)
#
# Autograd records one node per operation. Written with primitive operations, LayerNorm is a
# chain of small steps, each with its own backward; the hand-written `F.layer_norm` is one
# node whose backward is the closed form. Both give the same gradients. The last picture is
# one Pre-LN block: attention and a feed-forward network, every parameter named.

# %%
"""The autograd graph: LayerNorm from primitives beside the hand-written one, and one attention block.

    python demos/12_graph.py [--device cpu|cuda] [--quick] [--seed N] [--out DIR]

Draws, with ``mt.draw_graph``, the graph that ``backward()`` walks (one box per tensor,
one ellipse per Function call, arrows in the direction of the forward):

1. the tutorial's LayerNorm written with primitive ops (mean, var, sqrt, ...): autograd
   chains one backward per call;
2. ``F.layer_norm``: a single call whose backward is the closed form, with the norm of
   each gradient after ``backward()``: the same numbers as 1;
3. one Pre-LN Transformer block (causal self-attention and a feed-forward network), every
   parameter named.

Prints how many tensors, calls and arrows each graph has. Writes ``layernorm_primitives.svg``,
``layernorm_fused.svg``, ``attention_block.svg`` and ``layernorm_graphs.png`` (1 beside 2);
without Graphviz's ``dot`` program (``apt-get install graphviz``) it writes the ``.dot``
files and says how to render them. Needs the ``graph`` extra (pip install
-e ".[graph]" from the project root).
"""

import os
import sys
import warnings

import numpy

import minitorch_attn as mt
import minitorch_attn.functional as F
from minitorch_attn import nn
from minitorch_attn.app.demo_common import layer_norm_from_primitives, pyplot, randn, save, setup


def size(graph):
    """``(tensors, calls, arrows)`` of a drawn graph, counted in its DOT body."""
    tensors = sum("shape=box" in line for line in graph.body)
    calls = sum("shape=ellipse" in line for line in graph.body)
    return tensors, calls, sum(" -> " in line for line in graph.body)


def draw(output, out, name, **options):
    """Draw ``output``'s graph into ``out/name.svg`` (or ``.dot``); print its size; return the file."""
    graph = mt.draw_graph(output, **options)
    tensors, calls, arrows = size(graph)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # no dot: said once, in main
        path = mt.draw_graph(output, os.path.join(out, f"{name}.svg"), **options)
    print(f"{name}: {tensors} tensors, {calls} Function call{'s' * (calls != 1)}, {arrows} arrows -> {path}")
    return path


def main(argv=None):
    try:
        import graphviz  # noqa: F401 (only to say how to install it)
    except ImportError:
        raise SystemExit('this demo draws with the graphviz package: pip install -e ".[graph]"') from None
    args, out = setup(__doc__, "12_graph", argv)
    d = 8 if args.quick else 16
    x = randn(args.rng, 2, d, device=args.device, requires_grad=True)
    gamma = (1.0 + 0.1 * randn(args.rng, d, device=args.device)).requires_grad_()
    beta = (0.1 * randn(args.rng, d, device=args.device)).requires_grad_()
    upstream = randn(args.rng, 2, d, device=args.device)
    names = {"gamma": gamma, "beta": beta}

    print("1. LayerNorm from primitive ops: one backward per call")
    scratch = layer_norm_from_primitives(x, gamma, beta)
    (scratch * upstream).sum().backward()
    scratch_grads = [t.grad.numpy() for t in (x, gamma, beta)]
    primitives = draw(scratch, out, "layernorm_primitives", params=names, show_grad=True)

    print("2. F.layer_norm: one Function, its closed-form backward")
    for t in (x, gamma, beta):
        t.grad = None
    fused_out = F.layer_norm(x, (d,), gamma, beta)
    (fused_out * upstream).sum().backward()
    draw(fused_out, out, "layernorm_fused", params=names, show_grad=True)
    difference = max(float(numpy.abs(t.grad.numpy() - g).max()) for t, g in zip((x, gamma, beta), scratch_grads))
    print(f"   max |gradient difference| between 1 and 2: {difference:.1e} (float32)")

    print("3. one Pre-LN block: causal self-attention and feed-forward")
    block = nn.TransformerEncoderBlock(d, 2, 2 * d, dropout=0.0).to(args.device)
    h = randn(args.rng, 1, 4, d, device=args.device, requires_grad=True)
    block_out = block(h, is_causal=True)
    draw(block_out, out, "attention_block", params=block)

    if not primitives.endswith(".svg"):
        print(
            f"Graphviz's dot program is not installed: wrote .dot files into {out}; render one with "
            "dot -Tsvg FILE.dot -o FILE.svg "
            "(apt-get install graphviz, brew install graphviz or conda install graphviz)"
        )
        return 0
    plt = pyplot()  # 1 beside 2 in one picture
    images = []
    for output, name in ((scratch, "layernorm_primitives"), (fused_out, "layernorm_fused")):
        path = mt.draw_graph(output, os.path.join(out, f"{name}.png"), params=names, show_grad=True)
        images.append(plt.imread(path))
    height = max(img.shape[0] for img in images)  # pad below to one height: the same scale in both panels
    images = [numpy.pad(img, ((0, height - img.shape[0]), (0, 0), (0, 0)), constant_values=1.0) for img in images]
    calls = size(mt.draw_graph(scratch))[1]
    fig, axes = plt.subplots(1, 2, figsize=(11, 9), gridspec_kw={"width_ratios": [img.shape[1] for img in images]})
    for ax, image, title in zip(
        axes,
        images,
        (f"from primitive ops: autograd chains {calls} backwards", "F.layer_norm: one hand-written backward"),
    ):
        ax.imshow(image)
        ax.set_title(title)
        ax.axis("off")
    fig.tight_layout()
    save(fig, out, "layernorm_graphs.png", dpi=110)
    path = mt.draw_graph(block_out, os.path.join(out, "attention_block.png"), params=block)
    print(f"picture: {path}")
    return 0


# %% [markdown]
# ## Run it
#
# The flags are the command line's (or, in a notebook, `$MINITORCH_ATTN_DEMO_FLAGS`).

# %%
status = main()
if status:
    sys.exit(status)
