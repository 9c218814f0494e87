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

The ops and their inputs are the gradient-check samples of the catalogue of operations, each
marked with the homework tasks its gradient counts for; the engine's own cases come first.
"""

import numpy as np
import pytest

import minitorch_attn as mt
from minitorch_attn import opinfo
from minitorch_attn.opinfo.record import Inputs
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


def _marks(record, sample):
    return [getattr(pytest.mark, f"task_{task.replace('.', '_')}") for task in sample.tasks_of(record)]


# Every gradient-check sample of the catalogue (minitorch_attn/opinfo/) that calls its op
# directly, marked with the tasks its gradient counts for; random ops (dropout) draw a new
# mask per call, so two calls are not one function, and are left out.
CASES = [pytest.param(record, sample, marks=_marks(record, sample), id=sample.name)
         for record in opinfo.op_db() for sample in record.samples
         if sample.gradcheck and sample.fn is None and record.ref is not None]


@pytest.mark.parametrize("record, sample", CASES)
def test_backward_twice(rng, record, sample):
    inputs = sample.make(Inputs())
    moving = [i for i, t in enumerate(inputs) if isinstance(t, mt.Tensor) and t.requires_grad]

    def fn(*tensors):
        args = list(inputs)
        for i, t in zip(moving, tensors):
            args[i] = t
        out = record.op(*args, **sample.kwargs)
        return out[0] if isinstance(out, tuple) else out

    check_backward_twice(sample.name, fn, [host(inputs[i]) for i in moving], rng)
