"""Hooks and intermediate gradients, as PyTorch's: ``Tensor.register_hook``, ``retain_grad``,
the warning on reading a computed tensor's ``.grad``, and the forward and backward hooks of
modules. Each rule is stated with its values (no torch needed) and replayed against
PyTorch side by side (skipped without it)."""

import warnings

import numpy as np
import pytest

import minitorch_attn as mt
import minitorch_attn.functional as F
from minitorch_attn import nn


def _scenario(lib):
    """Hooks on a computed tensor (three, the second replacing the gradient), retain_grad,
    a leaf hook, and a second backward after one hook is removed. Returns what was seen."""
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    z = y * y
    seen = []
    y.register_hook(lambda g: seen.append(("h1", g.tolist())))
    h2 = y.register_hook(lambda g: (seen.append(("h2", g.tolist())), g * 10)[1])
    y.register_hook(lambda g: seen.append(("h3", g.tolist())))
    y.retain_grad()
    x.register_hook(lambda g: seen.append(("hx", g.tolist(), None if x.grad is None else x.grad.tolist())))
    z.sum().backward(retain_graph=True)
    first = (list(seen), y.grad.tolist(), x.grad.tolist(), y.retains_grad, x.retains_grad)
    seen.clear()
    h2.remove()
    h2.remove()  # a second remove does nothing
    z.sum().backward()
    return first, (list(seen), y.grad.tolist(), x.grad.tolist())


SCENARIO = (
    (
        [("h1", [4.0, 8.0]), ("h2", [4.0, 8.0]), ("h3", [40.0, 80.0]), ("hx", [80.0, 160.0], None)],
        [40.0, 80.0],
        [80.0, 160.0],
        True,
        False,
    ),
    ([("h1", [4.0, 8.0]), ("h3", [4.0, 8.0]), ("hx", [8.0, 16.0], [80.0, 160.0])], [44.0, 88.0], [88.0, 176.0]),
)


def test_hooks_order_replacement_retain_and_removal():
    """In registration order; a returned tensor replaces the gradient for the next hooks, the
    retained ``.grad`` and the graph below; a leaf's hook runs before ``.grad`` is added to;
    ``retain_grad`` sums over backward calls; a removed hook is not called again."""
    assert _scenario(mt) == SCENARIO


def test_hooks_scenario_as_pytorch(torch):
    assert _scenario(torch) == SCENARIO


def test_a_leaf_used_twice_has_its_hook_called_once_with_the_sum():
    a = mt.tensor([1.0], requires_grad=True)
    calls = []
    a.register_hook(lambda g: calls.append(g.item()))
    (a * 3 + a * 4).sum().backward()
    assert calls == [7.0] and a.grad.item() == 7.0
    calls.clear()
    a.grad = None
    a.backward(mt.tensor([5.0]))  # a leaf as the root: its hooks run too
    assert calls == [5.0] and a.grad.item() == 5.0


def test_a_leaf_hook_replaces_what_is_accumulated():
    w = mt.tensor([1.0, -2.0], requires_grad=True)
    w.register_hook(lambda g: g.clamp(min=0.0))
    (w * mt.tensor([3.0, -4.0])).sum().backward()
    assert w.grad.tolist() == [3.0, 0.0]


def test_the_root_and_an_output_that_received_nothing():
    c = mt.tensor([1.0, 2.0], requires_grad=True)
    d = (c * 2).sum()
    seen = []
    d.register_hook(lambda g: seen.append(g.item()))
    d.backward()
    assert seen == [1.0]
    u0, u1 = mt.split(c, 1)
    u1.register_hook(lambda g: seen.append(g))
    u1.retain_grad()
    u0.retain_grad()
    (u0 * 3).sum().backward()
    assert seen[-1] is None and u1.grad is None and u0.grad.tolist() == [3.0]


class _NoGradient(mt.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, grad_output):
        return None


def test_a_hook_on_a_tensor_whose_consumers_send_nothing_gets_none():
    x = mt.tensor([1.0, 2.0], requires_grad=True)
    y = x * 3
    seen = []
    y.register_hook(seen.append)
    _NoGradient.apply(y).sum().backward()
    assert seen == [None] and x.grad is None


def test_hooks_run_with_grad_mode_off_and_get_a_plain_tensor():
    x = mt.tensor([1.0, 2.0], requires_grad=True)
    seen = []
    (x * 2).register_hook(lambda g: seen.append((mt.is_grad_enabled(), g.requires_grad)))
    y = x * 2
    y.register_hook(lambda g: seen.append((mt.is_grad_enabled(), g.requires_grad)))
    y.sum().backward()
    assert seen == [(False, False)]


def test_a_handle_as_a_context_manager_removes_its_hook():
    x = mt.tensor([1.0], requires_grad=True)
    y = x * 2
    seen = []
    with y.register_hook(seen.append) as handle:
        assert isinstance(handle.id, int)
    y.sum().backward()
    assert seen == []


def test_errors_as_pytorch():
    with pytest.raises(RuntimeError, match="doesn't require gradient"):
        mt.tensor([1.0]).register_hook(lambda g: None)
    with pytest.raises(RuntimeError, match="requires_grad=False"):
        mt.tensor([1.0]).retain_grad()
    for hook, error, match in [
        (lambda g: g[:1], RuntimeError, "changed the size"),
        (lambda g: 3, TypeError, "hook returned 'int'"),
        (lambda g: g.double(), RuntimeError, "changed the type"),
    ]:
        c = mt.tensor([1.0, 2.0], requires_grad=True)
        d = c * 2
        d.register_hook(hook)
        with pytest.raises(error, match=match):
            d.sum().backward()
    with pytest.raises(TypeError, match="callable"):
        mt.tensor([1.0], requires_grad=True).register_hook(3)


def test_reading_grad_of_a_computed_tensor_warns_unless_retained():
    x = mt.tensor([1.0], requires_grad=True)
    y = x * 2
    with pytest.warns(UserWarning, match=r"not a leaf Tensor.*retain_grad\(\)"):
        assert y.grad is None
    y.retain_grad()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert y.grad is None and x.grad is None  # retained, and a leaf: no warning
    assert x.retains_grad is False
    x.retain_grad()  # a no-op on a leaf
    assert x.retains_grad is False


def test_the_warning_as_pytorch(torch):
    for lib in (mt, torch):
        y = lib.tensor([1.0], requires_grad=True) * 2
        with pytest.warns(UserWarning, match="is not a leaf Tensor is being accessed"):
            y.grad  # noqa: B018 (reading it warns)


def test_retain_grad_does_not_keep_the_tensor_alive():
    """The graph node refers to the tensor that retains its gradient weakly (no cycle)."""
    import gc
    import weakref

    x = mt.tensor([1.0], requires_grad=True)
    y = x * 2
    y.retain_grad()
    node, ref = y.grad_fn, weakref.ref(y)
    del y
    gc.collect()
    assert ref() is None and node.hooks[0].retain() is None


def test_a_hook_on_a_dropped_intermediate_still_runs():
    """The hook lives on the graph node, as PyTorch's does on ``grad_fn``."""
    x = mt.tensor([1.0], requires_grad=True)
    seen = []
    y = x * 2
    y.register_hook(lambda g: seen.append(g.item()))
    z = y * 5
    del y
    z.sum().backward()
    assert seen == [5.0]


def test_hooks_watch_the_gradients_reaching_q_k_v(torch):
    """The demo's use: the norms of the gradients flowing into Q, K and V of attention."""
    rng = np.random.default_rng(0)
    q, k, v, upstream = (rng.standard_normal((1, 2, 4, 3)) for _ in range(4))
    norms = {}
    for lib in (mt, torch):
        seen = norms[lib.__name__] = {}
        leaves = [lib.tensor(a, requires_grad=True) for a in (q, k, v)]
        projected = [t * 1.5 for t in leaves]
        for name, t in zip("qkv", projected):
            t.register_hook(lambda g, name=name: seen.update({name: float((g * g).sum()) ** 0.5}))  # noqa: B023
        attention = F.scaled_dot_product_attention if lib is mt else lib.nn.functional.scaled_dot_product_attention
        attention(*projected, is_causal=True).backward(lib.tensor(upstream))
    assert norms["minitorch_attn"].keys() == {"q", "k", "v"}
    for name in "qkv":
        assert norms["minitorch_attn"][name] == pytest.approx(norms["torch"][name], rel=1e-12)


# ---- module hooks ---------------------------------------------------------------------------------
def _module_scenario(lib, nn_lib):
    """Forward pre-hooks (one replacing the input), forward hooks, full backward hooks on a
    Linear fed data that requires no grad and then data that does (backward run twice),
    a hook replacing grad_input, and a module of two inputs and two outputs."""
    seen = []

    def values(grads):
        return [None if g is None else g.tolist() for g in grads]

    lin = nn_lib.Linear(2, 2)
    with mt.no_grad() if lib is mt else lib.no_grad():
        lin.weight.copy_(lib.tensor([[1.0, 2.0], [3.0, 4.0]]))
        lin.bias.copy_(lib.tensor([0.5, -0.5]))
    lin.register_forward_pre_hook(lambda m, args: seen.append(("pre", type(args).__name__, len(args))))
    lin.register_forward_pre_hook(lambda m, args: args[0] * 2)
    lin.register_forward_hook(lambda m, args, out: seen.append(("forward", args[0].tolist(), tuple(out.shape))))
    lin.register_full_backward_hook(lambda m, gi, go: seen.append(("backward", values(gi), values(go))))
    with pytest.warns(UserWarning, match="no inputs require gradients"):
        lin(lib.tensor([[1.0, 2.0]])).sum().backward()
    x = lib.tensor([[1.0, 2.0]], requires_grad=True)
    out = lin(x).sum()
    out.backward(retain_graph=True)
    out.backward()
    seen.append(("x.grad", x.grad.tolist()))

    zeroing = nn_lib.Linear(2, 2)
    zeroing.register_full_backward_hook(lambda m, gi, go: (gi[0] * 0,))
    x = lib.tensor([[1.0, 2.0]], requires_grad=True)
    zeroing(x).sum().backward()
    seen.append(("replaced", x.grad.abs().tolist(), zeroing.weight.grad.tolist()))

    class Two(nn_lib.Module):
        def forward(self, a, b, k=3):
            return a * b * k, a + 1

    two = Two()
    two.register_full_backward_hook(lambda m, gi, go: seen.append(("two", values(gi), values(go))))
    two.register_full_backward_pre_hook(lambda m, go: seen.append(("two pre", values(go))))
    a = lib.tensor([1.0], requires_grad=True)
    first, _ = two(a, lib.tensor([2.0]))  # b requires no grad: zeros; the 2nd output unused: None
    first.sum().backward()
    first, second = two(a, 3.0, k=1)  # a number: None
    (first + second).sum().backward()
    two.register_forward_pre_hook(lambda m, args, kwargs: seen.append(("kwargs", len(args), kwargs)), with_kwargs=True)
    handle = two.register_forward_hook(lambda m, args, kwargs, out: (out[0] * 0, out[1]), with_kwargs=True)
    seen.append(("zeroed by a forward hook", two(a, 1.0, k=4)[0].tolist()))
    handle.remove()
    seen.append(("after remove", two(a, 1.0, k=4)[0].tolist()))
    return seen


MODULE_SCENARIO = [
    ("pre", "tuple", 1),
    ("forward", [[2.0, 4.0]], (1, 2)),
    ("backward", [None], [[[1.0, 1.0]]]),
    ("pre", "tuple", 1),
    ("forward", [[2.0, 4.0]], (1, 2)),
    ("backward", [[[4.0, 6.0]]], [[[1.0, 1.0]]]),
    ("backward", [[[4.0, 6.0]]], [[[1.0, 1.0]]]),
    ("x.grad", [[16.0, 24.0]]),
    ("replaced", [[0.0, 0.0]], [[1.0, 2.0], [1.0, 2.0]]),
    ("two pre", [[1.0], None]),
    ("two", [[6.0], [0.0]], [[1.0], None]),
    ("two pre", [[1.0], [1.0]]),
    ("two", [[4.0], None], [[1.0], [1.0]]),
    ("kwargs", 2, {"k": 4}),
    ("zeroed by a forward hook", [0.0]),
    ("kwargs", 2, {"k": 4}),
    ("after remove", [4.0]),
]


def test_module_hooks():
    assert _module_scenario(mt, nn) == MODULE_SCENARIO


def test_module_hooks_as_pytorch(torch):
    assert _module_scenario(torch, torch.nn) == MODULE_SCENARIO


def test_module_hook_errors_and_order():
    lin = nn.Linear(2, 2)
    order = []
    lin.register_forward_hook(lambda m, args, out: order.append("second"))
    lin.register_forward_hook(lambda m, args, out: order.append("first"), prepend=True)
    lin(mt.ones(1, 2))
    assert order == ["first", "second"]
    with pytest.raises(TypeError, match="callable"):
        lin.register_forward_hook(None)
    bad = nn.Linear(2, 2)
    bad.register_full_backward_hook(lambda m, gi, go: (gi[0], gi[0]))
    with pytest.raises(RuntimeError, match="invalid number of grad_input, got 2, but expected 1"):
        bad(mt.ones(1, 2, requires_grad=True)).sum().backward()
    pre = nn.Linear(2, 2)
    pre.register_forward_pre_hook(lambda m, args, kwargs: args, with_kwargs=True)
    with pytest.raises(RuntimeError, match=r"tuple of \(new_args, new_kwargs\)"):
        pre(mt.ones(1, 2))


def test_always_call_runs_a_forward_hook_when_forward_raises():
    lin = nn.Linear(2, 2)
    seen = []
    lin.register_forward_hook(lambda m, args, out: seen.append(out), always_call=True)
    with pytest.raises(ValueError):
        lin(mt.ones(1, 3))
    assert seen == [None]


def test_no_hooks_in_no_grad_and_gradients_unchanged_by_watching():
    """A backward hook that returns nothing changes no gradient; under no_grad nothing is wrapped."""
    mt.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.GELU(), nn.Linear(4, 2))
    x = mt.randn(5, 3, requires_grad=True)
    model(x).sum().backward()
    plain = [p.grad.numpy().copy() for p in model.parameters()] + [x.grad.numpy().copy()]
    model.zero_grad()
    x.grad = None
    norms = []
    for layer in model:
        layer.register_full_backward_hook(lambda m, gi, go: norms.append(float((go[0] * go[0]).sum())))
    model(x).sum().backward()
    watched = [p.grad.numpy() for p in model.parameters()] + [x.grad.numpy()]
    for a, b in zip(plain, watched, strict=True):
        np.testing.assert_array_equal(a, b)
    assert len(norms) == 3
    with mt.no_grad():
        assert model(x).grad_fn is None and len(norms) == 3


class _TwoOutputs(mt.Function):
    @staticmethod
    def forward(ctx, x, materialize=True):
        ctx.set_materialize_grads(materialize)
        return x * 2, x * 3

    @staticmethod
    def backward(ctx, grad_a, grad_b):
        _TwoOutputs.seen = (grad_a, grad_b)
        return grad_a * 2 + (0 if grad_b is None else grad_b * 3)


@pytest.mark.parametrize("materialize", [True, False])
def test_set_materialize_grads(materialize):
    """As ``torch.autograd.Function``'s: an output that received nothing is zeros, or None."""
    x = mt.tensor([1.0, 2.0], requires_grad=True)
    a, _ = _TwoOutputs.apply(x, materialize=materialize)
    a.sum().backward()
    grad_b = _TwoOutputs.seen[1]
    assert (grad_b is None) is (not materialize)
    if materialize:
        assert grad_b.tolist() == [0.0, 0.0]
    assert x.grad.tolist() == [2.0, 2.0]


def _in_place_after_hooks(lib):
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    y.retain_grad()
    seen = []
    y.register_hook(lambda g: seen.append(g.tolist()))
    y.mul_(3)
    (y * y).sum().backward()
    return y.grad.tolist(), seen, y.retains_grad


def test_an_in_place_write_after_retain_grad_and_a_hook():
    """The retained gradient is the new value's; a hook registered before the write gets
    the old value's (PyTorch's rule)."""
    assert _in_place_after_hooks(mt) == ([12.0, 24.0], [[36.0, 72.0]], True)


def test_an_in_place_write_after_retain_grad_and_a_hook_as_pytorch(torch):
    assert _in_place_after_hooks(torch) == _in_place_after_hooks(mt)
