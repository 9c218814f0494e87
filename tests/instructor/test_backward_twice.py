"""Every backward, run twice with retain_graph=True on a graph that uses a node twice.

For an op ``f`` and its inputs, the graph is ``z = (y1 + y2) + y1`` with ``y1 = f(x)`` and
``y2 = f(x)``: the node y1 is used twice, every input is used by two nodes, and the
same upstream array reaches several nodes (an ``Add`` sends its gradient to both of its
inputs). A backward that writes into an array it did not create (the upstream gradient,
an array the forward saved, an earlier gradient) goes unnoticed on a graph used once,
and breaks this one. So, after each of the two backward calls:

* the upstream gradient passed to backward() and every array saved by every node are
  unchanged;
* the inputs' gradients after the first call equal those of a fresh graph ``f(x)`` used
  once with the upstream gradient ``3 g``, and the second call doubles them;
* the gradient Tensors returned by the first call keep their values (accumulation
  makes new arrays: another tensor may hold the old one).
"""

import numpy as np
import pytest

import minitorch_attn as mt
import minitorch_attn.functional as F
from tests.instructor.expect import expect_close, expect_unchanged, host, leaf


def saved_arrays(root):
    """``[(description, array)]`` of every array saved by a node of the graph below ``root``."""
    found, seen, stack = [], set(), [root.grad_fn]
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        found += [(f"array {i} saved by {node!r}", a) for i, a in enumerate(node.ctx.saved_tensors)
                  if hasattr(a, "shape")]
        stack += [t.grad_fn for t in node.inputs if isinstance(t, mt.Tensor)]
    return found


def check_backward_twice(name, fn, arrays, rng):
    shapes = ", ".join(str(np.shape(a)) for a in arrays)
    what = f"{name}, inputs {shapes} float64, graph (y1 + y2) + y1 with y1 = y2 = {name}(inputs)"
    fresh = [leaf(a) for a in arrays]
    y = fn(*fresh)
    g = rng.standard_normal(y.shape)
    y.backward(mt.tensor(3 * g))                     # the reference: a graph used once

    inputs = [leaf(a) for a in arrays]
    y1, y2 = fn(*inputs), fn(*inputs)
    z = (y1 + y2) + y1
    seed = mt.tensor(g)
    saved = [(description, array, np.array(array, copy=True)) for description, array in saved_arrays(z)]

    def nothing_changed(call):
        expect_unchanged(g, seed, what=f"{what}: after the {call} backward, the upstream gradient")
        for description, array, before in saved:
            expect_unchanged(before, array, what=f"{what}: after the {call} backward, the {description}")

    z.backward(seed, retain_graph=True)
    nothing_changed("first")
    first = [x.grad for x in inputs]
    first_values = [host(x) for x in first]
    for i, (ours, reference) in enumerate(zip(first_values, fresh)):
        expect_close(ours, reference.grad, n_ops=16, what=f"{what}: gradient of input {i} after one backward")

    z.backward(seed, retain_graph=True)
    nothing_changed("second")
    for i, (x, tensor, values) in enumerate(zip(inputs, first, first_values)):
        expect_unchanged(values, tensor, what=f"{what}: the gradient Tensor of input {i} from the first backward")
        expect_close(x.grad, 2 * values, n_ops=16, what=f"{what}: gradient of input {i} after two backward calls")


def positive(rng, *shape):
    return rng.uniform(0.5, 2.0, shape)


def cases(*entries):
    """``pytest.param``s named by their first element."""
    return [pytest.param(*entry, id=entry[0]) for entry in entries]


@pytest.mark.task_1_1
def test_task_1_1_a_gradient_reaching_a_leaf_twice_is_not_added_in_place(rng):
    """The engine's case: ``r = a + (a + tanh(a))`` sends the upstream array to a leaf and to
    a node; adding into it in place doubles what the node then receives."""
    x, g = rng.standard_normal(5), rng.standard_normal(5)
    a, seed = leaf(x), mt.tensor(g)
    (a + (a + a.tanh())).backward(seed)
    expect_unchanged(g, seed, what="r = a + (a + tanh(a)), input (5,) float64: the upstream gradient")
    expect_close(a.grad, g * (3 - np.tanh(x) ** 2), what="r = a + (a + tanh(a)) gradient, input (5,) float64")


@pytest.mark.task_1_1
def test_task_1_1_engine_backward_twice(rng):
    check_backward_twice("(a * b + a).tanh() * b", lambda a, b: (a * b + a).tanh() * b,
                         [rng.standard_normal((3, 4)), rng.standard_normal((3, 4))], rng)


@pytest.mark.task_1_2
@pytest.mark.parametrize("name, fn, shapes", cases(
    ("mul", lambda a, b: a * b, 2), ("div", lambda a, b: a / b, 2), ("pow 3", lambda a: a ** 3, 1),
    ("exp", lambda a: a.exp(), 1), ("log", lambda a: a.log(), 1), ("sqrt", lambda a: a.sqrt(), 1),
    ("tanh", lambda a: a.tanh(), 1)))
def test_task_1_2_elementwise_backward_twice(rng, name, fn, shapes):
    check_backward_twice(name, fn, [positive(rng, 3, 4) for _ in range(shapes)], rng)


@pytest.mark.task_1_3
@pytest.mark.parametrize("name, fn", cases(
    ("add", lambda a, b: a + b), ("sub", lambda a, b: a - b), ("mul", lambda a, b: a * b), ("div", lambda a, b: a / b)))
def test_task_1_3_broadcasting_backward_twice(rng, name, fn):
    check_backward_twice(f"{name} (broadcast)", fn, [positive(rng, 2, 1, 4), positive(rng, 3, 1)], rng)


@pytest.mark.task_1_4
@pytest.mark.parametrize("name, fn", cases(
    ("sum(dim=1)", lambda a: a.sum(dim=1)), ("mean(dim=0, keepdim)", lambda a: a.mean(dim=0, keepdim=True)),
    ("max(dim=2)", lambda a: a.max(dim=2)), ("var(dim=(0, 2))", lambda a: a.var(dim=(0, 2))),
    ("sum()", lambda a: a.sum())))
def test_task_1_4_reduction_backward_twice(rng, name, fn):
    x = rng.permutation(np.arange(24) * 0.1).reshape(2, 3, 4)   # no ties for max
    check_backward_twice(name, fn, [x], rng)


@pytest.mark.task_1_5
@pytest.mark.parametrize("name, a, b", cases(
    ("matmul (2, 3, 4) @ (4, 5)", (2, 3, 4), (4, 5)), ("matmul (4,) @ (4, 5)", (4,), (4, 5)),
    ("matmul (2, 3, 4) @ (4,)", (2, 3, 4), (4,)), ("matmul (2, 1, 3, 4) @ (5, 4, 2)", (2, 1, 3, 4), (5, 4, 2))))
def test_task_1_5_matmul_backward_twice(rng, name, a, b):
    check_backward_twice(name, lambda x, y: x @ y, [rng.standard_normal(a), rng.standard_normal(b)], rng)


@pytest.mark.task_2_1
@pytest.mark.parametrize("dim", [-1, 0])
def test_task_2_1_softmax_backward_twice(rng, dim):
    check_backward_twice(f"softmax(dim={dim})", lambda x: F.softmax(x, dim=dim), [rng.standard_normal((3, 5))], rng)


@pytest.mark.task_2_2
@pytest.mark.parametrize("dim", [-1, 0])
def test_task_2_2_log_softmax_backward_twice(rng, dim):
    check_backward_twice(f"log_softmax(dim={dim})", lambda x: F.log_softmax(x, dim=dim),
                         [rng.standard_normal((3, 5))], rng)


@pytest.mark.task_2_3
@pytest.mark.parametrize("options", [{}, {"reduction": "sum", "label_smoothing": 0.2}, {"reduction": "none"}],
                         ids=["mean", "sum, smoothing", "none"])
def test_task_2_3_cross_entropy_backward_twice(rng, options):
    target = mt.tensor([2, -100, 0, 4])
    check_backward_twice(f"cross_entropy({options})", lambda x: F.cross_entropy(x, target, **options),
                         [rng.standard_normal((4, 5))], rng)


@pytest.mark.task_3_1
@pytest.mark.parametrize("affine", [True, False])
def test_task_3_1_layer_norm_backward_twice(rng, affine):
    arrays = [rng.standard_normal((3, 6))] + ([rng.standard_normal(6), rng.standard_normal(6)] if affine else [])
    check_backward_twice(f"layer_norm(affine={affine})", lambda x, *wb: F.layer_norm(x, (6,), *wb), arrays, rng)


@pytest.mark.task_3_2
@pytest.mark.parametrize("weight", [True, False])
def test_task_3_2_rms_norm_backward_twice(rng, weight):
    arrays = [rng.standard_normal((3, 6))] + ([rng.standard_normal(6)] if weight else [])
    check_backward_twice(f"rms_norm(weight={weight})", lambda x, *w: F.rms_norm(x, (6,), *w), arrays, rng)


def attention_cases(name, attention):
    empty_row = np.ones((5, 6), dtype=bool)
    empty_row[1] = False     # query 1 sees no key
    keep = mt.tensor(empty_row)
    return cases(
        (name, lambda q, k, v: attention(q, k, v), None),
        (f"{name}(is_causal=True)", lambda q, k, v: attention(q, k, v, is_causal=True), None),
        (f"{name}(bool mask, empty row)", lambda q, k, v: attention(q, k, v, attn_mask=keep), None),
        (f"{name}(float mask with grad)", lambda q, k, v, m: attention(q, k, v, attn_mask=m), (5, 6)),
        (f"{name}(GQA)", lambda q, k, v: attention(q, k, v, enable_gqa=True), "gqa"))


def sdpa(*args, **options):
    return F.scaled_dot_product_attention(*args, **options)


def flash(*args, **options):
    return F.flash_attention(*args, block_size_q=2, block_size_k=4, **options)


def check_attention_twice(rng, name, fn, extra):
    heads_kv = 1 if extra == "gqa" else 2
    arrays = [rng.standard_normal((2, 2, 5, 4)), rng.standard_normal((2, heads_kv, 6, 4)),
              rng.standard_normal((2, heads_kv, 6, 3))]
    if isinstance(extra, tuple):
        arrays.append(rng.standard_normal(extra))
    check_backward_twice(name, fn, arrays, rng)


@pytest.mark.task_4_2
@pytest.mark.parametrize("name, fn, extra", attention_cases("sdpa", sdpa))
def test_task_4_2_attention_backward_twice(rng, name, fn, extra):
    check_attention_twice(rng, name, fn, extra)


@pytest.mark.task_5_2
@pytest.mark.parametrize("name, fn, extra", attention_cases("flash", flash))
def test_task_5_2_flash_backward_twice(rng, name, fn, extra):
    check_attention_twice(rng, name, fn, extra)
