# %% [markdown]
# # Watching backprop: hooks and `retain_grad` (section 4's attention, section 12's stack)
#
# `backward()` fills the `.grad` of the leaves only; what flows through the middle of the
# graph is gone once it has passed. PyTorch's tools to watch it work here with the same
# names: `t.register_hook(fn)` calls `fn(grad)` as the gradient of `t` passes (and may
# change it), `t.retain_grad()` keeps it in `t.grad`, and a module's
# `register_forward_hook` / `register_full_backward_hook` see its inputs, outputs and their
# gradients without touching its code. We use them to watch the gradient flow into the
# queries, keys and values of causal attention, and down the layers of a small GPT.

# %%
"""Hooks and retain_grad: the gradients flowing into Q, K, V and through each layer of a GPT.

    python demos/15_hooks.py [--device cpu|cuda] [--quick] [--seed N] [--out DIR]

1. One causal multi-head attention layer: forward hooks on its W_q, W_k, W_v register a
   tensor hook on each projection's output, which records ||dL/dQ||, ||dL/dK||, ||dL/dV||
   per position. Under the causal mask key and value j are read by the queries j, ..., T-1
   only, so the gradient reaching them shrinks towards the last position; query 0 reads
   key 0 alone (weight 1 whatever the score) and gets no gradient.
2. The same gradients read back with retain_grad(); a hook that returns zeros stops the
   gradient into V (W_v gets none), and removing its handle brings it back.
3. A small GPT: a full backward hook on each block records the norm of the gradient
   entering it from above (grad_output) and leaving it below (grad_input), layer by layer.

Writes ``hooks.png`` (the per-position norms of 1, the per-layer norms of 3). Sources:
``torch.Tensor.register_hook``, ``torch.nn.Module.register_full_backward_hook``.
"""

import sys

import numpy

import minitorch_attn as mt
from minitorch_attn import nn
from minitorch_attn.app.demo_common import pyplot, randn, save, setup


def norm(t):
    """The Euclidean norm of a tensor, as a Python float (in float64)."""
    a = t.numpy().astype(numpy.float64)
    return float(numpy.sqrt((a * a).sum()))


def per_position(t):
    """``||t[:, j, :]||`` for each position ``j`` of a ``(batch, T, d)`` tensor."""
    a = t.numpy().astype(numpy.float64)
    return numpy.sqrt((a * a).sum(axis=(0, 2)))


def main(argv=None):
    args, out = setup(__doc__, "15_hooks", argv)
    d_model, heads, T, batch = (16, 2, 8, 2) if args.quick else (64, 4, 32, 8)

    print("1. hooks on the projections of one causal attention layer")
    attention = nn.MultiHeadAttention(d_model, heads, dropout=0.0, fused_qkv=False).to(args.device)
    seen = {}

    def watch(name):
        """A forward hook that puts a tensor hook on the projection's output: called in backward."""

        def forward_hook(module, inputs, output):
            output.register_hook(lambda grad: seen.__setitem__(name, grad))

        return forward_hook

    handles = [getattr(attention, f"W_{n}").register_forward_hook(watch(n)) for n in "qkv"]
    x = randn(args.rng, batch, T, d_model, device=args.device, requires_grad=True)
    upstream = randn(args.rng, batch, T, d_model, device=args.device)
    y, _ = attention(x, x, x, is_causal=True)
    (y * upstream).sum().backward()
    for n in "qkv":
        row = per_position(seen[n])
        print(
            f"   ||dL/d{n.upper()}|| = {norm(seen[n]):7.3f}; position 0: {row[0]:.3f}, position {T - 1}: {row[-1]:.3f}"
        )
    profiles = {n: per_position(seen[n]) for n in "kv"}
    print(
        f"   under the causal mask key/value 0 is read by all {T} queries, key/value {T - 1} by one: "
        f"||dL/dV|| falls from {profiles['v'][0]:.3f} to {profiles['v'][-1]:.3f}"
    )
    print(
        f"   query 0 sees key 0 alone, whose weight is 1 whatever its score: ||dL/dQ|| at position 0 is "
        f"{per_position(seen['q'])[0]:.3f}"
    )
    for h in handles:
        h.remove()

    print("2. the same with retain_grad, and a hook that changes the gradient")
    q = attention.W_q(x)
    k, v = attention.W_k(x), attention.W_v(x)
    for t in (q, k, v):
        t.retain_grad()
    y = mt.functional.scaled_dot_product_attention(
        *(t.reshape(batch, T, heads, d_model // heads).transpose(1, 2) for t in (q, k, v)), is_causal=True
    )
    y = attention.W_o(y.transpose(1, 2).reshape(batch, T, d_model))
    attention.zero_grad()
    (y * upstream).sum().backward(retain_graph=True)
    same = all(numpy.allclose(t.grad.numpy(), seen[n].numpy(), rtol=1e-5, atol=1e-6) for n, t in zip("qkv", (q, k, v)))
    print(f"   q.grad, k.grad, v.grad (retain_grad) equal what the hooks saw: {same}")
    attention.zero_grad()
    stop = v.register_hook(lambda grad: grad * 0.0)
    (y * upstream).sum().backward(retain_graph=True)
    print(
        f"   with a hook returning zeros on V: ||W_v.grad|| = {norm(attention.W_v.weight.grad):.3f}, "
        f"||W_q.grad|| = {norm(attention.W_q.weight.grad):.3f}"
    )
    stop.remove()
    attention.zero_grad()
    (y * upstream).sum().backward()
    print(f"   hook removed: ||W_v.grad|| = {norm(attention.W_v.weight.grad):.3f}")

    print("3. full backward hooks on each block of a GPT")
    layers = 3 if args.quick else 6
    model = nn.GPT(vocab_size=50, d_model=d_model, num_heads=heads, num_layers=layers, max_seq_len=T).to(args.device)
    flow = {}
    for index, block in enumerate(model.blocks):
        block.register_full_backward_hook(
            lambda module, grad_input, grad_output, index=index: flow.__setitem__(
                index, (norm(grad_output[0]), norm(grad_input[0]))
            )
        )
    ids = mt.tensor(args.rng.integers(0, 50, size=(batch, T)), device=args.device)
    targets = mt.tensor(args.rng.integers(0, 50, size=(batch, T)), device=args.device)
    logits = model(ids)
    loss = mt.functional.cross_entropy(logits.reshape(batch * T, 50), targets.reshape(batch * T))
    loss.backward()
    print("   block   ||grad entering from above||   ||grad leaving below||")
    for index in reversed(range(layers)):
        above, below = flow[index]
        print(f"   {index:>5}   {above:28.4f}   {below:22.4f}")
    print(
        f"   the backward visits the blocks from the last to the first, and the gradient does not fade on its "
        f"way down: block 0 passes on {flow[0][1] / flow[layers - 1][0]:.2f}x what block {layers - 1} received "
        f"(each residual connection adds the block's own term to an identity path)"
    )

    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(10, 4.2), layout="constrained")
    for n, style in (("k", "o-"), ("v", "s--")):
        axes[0].plot(range(T), profiles[n], style, label=f"‖dL/d{n.upper()}‖ at position j")
    axes[0].set_xlabel("key / value position j")
    axes[0].set_ylabel("gradient norm (over batch and features)")
    axes[0].set_title("Causal attention: the last keys are read by few queries")
    axes[0].legend(fontsize=9)
    order = list(range(layers))
    width = 0.4
    axes[1].bar([i - width / 2 for i in order], [flow[i][0] for i in order], width, label="entering from above")
    axes[1].bar([i + width / 2 for i in order], [flow[i][1] for i in order], width, label="leaving below")
    axes[1].set_xlabel("block (0 = nearest the input)")
    axes[1].set_ylabel("gradient norm")
    axes[1].set_title("Each block's gradients, seen by a backward hook")
    axes[1].set_xticks(order)
    axes[1].set_ylim(0, 1.3 * max(max(pair) for pair in flow.values()))
    axes[1].legend(fontsize=9, loc="upper center", ncol=2)
    for ax in axes:
        ax.grid(alpha=0.3)
    save(fig, out, "hooks.png")
    return 0


# %% [markdown]
# ## Run it
#
# The flags are the command line's (or, in a notebook, `$MINITORCH_ATTN_DEMO_FLAGS`).

# %%
status = main()
if status:
    sys.exit(status)
