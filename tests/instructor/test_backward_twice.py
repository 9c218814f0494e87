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

The ops and their inputs are the gradient-check samples of the catalogue of operations, once
for each homework task its gradient counts for; the engine's own cases come first, on ops
whose backward no task writes (add, abs, einsum's product), so that they check the engine
(task 1.1) alone. Where the op's backward cannot run in the student's library without the code
of another task of its assignment (see ``ASKED`` in ``expect.py``), the graph is this
process's and each node of the op asks the student's backward, which must then leave the
upstream gradient and the arrays the forward saved as they were
(:func:`~tests.instructor.expect.student_backward`).
"""

import numpy as np
import pytest

import minitorch_attn as mt
from minitorch_attn import opinfo
from minitorch_attn.opinfo.record import Inputs
from tests.instructor.expect import ASKED, backward_of_task, expect_close, expect_unchanged, host, leaf, student_call


def saved_arrays(student, root):
    """``[(description, node, index)]`` of every array saved by a node of the graph below
    ``root`` (``node.ctx.saved_tensors[index]``), read again after each backward."""
    found, seen, stack = [], set(), [root.grad_fn]
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        name = student.describe(node)
        found += [
            (f"array {i} saved by {name}", node, i)
            for i, a in enumerate(node.ctx.saved_tensors)
            if isinstance(a, np.ndarray)
        ]
        stack += [t.grad_fn for t in node.inputs if hasattr(t, "grad_fn")]
    return found


def _reference_once(name, ours, arrays, rng):
    """The reference of the graph of the module docstring: ``ours`` on fresh leaves of
    ``arrays``, used once, backward with three times an upstream ``g`` drawn from ``rng``.
    Returns ``(what, leaves, g)``: the check's name and the leaves with their gradients."""
    shapes = ", ".join(str(np.shape(a)) for a in arrays)
    what = f"{name}, inputs {shapes} float64, graph (y1 + y2) + y1 with y1 = y2 = {name}(inputs)"
    fresh = [mt.tensor(np.asarray(a), dtype="float64", requires_grad=True) for a in arrays]
    y = ours(*fresh)
    g = rng.standard_normal(y.shape)
    y.backward(mt.tensor(3 * g))  # the reference: a graph used once
    return what, fresh, g


def check_backward_twice(student, name, theirs, ours, arrays, rng):
    """``theirs`` (the student's function of tensors) on the graph of the module docstring,
    against ``ours`` (the same function of this process's library) on a graph used once."""
    what, fresh, g = _reference_once(name, ours, arrays, rng)
    expected = [host(x.grad) for x in fresh]

    inputs = [leaf(student, a) for a in arrays]
    y1, y2 = theirs(*inputs), theirs(*inputs)
    z = (y1 + y2) + y1
    seed = student.send(mt.tensor(g))
    saved = [
        (description, node, i, np.array(node.ctx.saved_tensors[i], copy=True))
        for description, node, i in saved_arrays(student, z)
    ]

    def nothing_changed(call):
        expect_unchanged(g, seed, what=f"{what}: after the {call} backward, the upstream gradient")
        for description, node, i, before in saved:
            expect_unchanged(
                before, node.ctx.saved_tensors[i], what=f"{what}: after the {call} backward, the {description}"
            )

    z.backward(seed, retain_graph=True)
    nothing_changed("first")
    first = [x.grad for x in inputs]
    for i, (ours_grad, reference) in enumerate(zip(first, expected)):
        expect_close(ours_grad, reference, n_ops=16, what=f"{what}: gradient of input {i} after one backward")
    first_values = [host(x) for x in first]

    z.backward(seed, retain_graph=True)
    nothing_changed("second")
    for i, (x, tensor, values) in enumerate(zip(inputs, first, first_values)):
        expect_unchanged(values, tensor, what=f"{what}: the gradient Tensor of input {i} from the first backward")
        expect_close(x.grad, 2 * values, n_ops=16, what=f"{what}: gradient of input {i} after two backward calls")


@pytest.mark.task_1_1
def test_task_1_1_a_gradient_reaching_a_leaf_twice_is_not_added_in_place(student, rng):
    """The engine's case: ``r = a + (a + |a|)`` sends the upstream array to a leaf and to
    a node; adding into it in place doubles what the node then receives."""
    x, g = rng.standard_normal(5), rng.standard_normal(5)
    x = np.where(np.abs(x) < 0.1, 0.5, x)  # away from the kink of |x|
    a, seed = leaf(student, x), student.send(mt.tensor(g))
    (a + (a + a.abs())).backward(seed)
    expect_unchanged(g, seed, what="r = a + (a + |a|), input (5,) float64: the upstream gradient")
    expect_close(a.grad, g * (2 + np.sign(x)), what="r = a + (a + |a|) gradient, input (5,) float64")


def composed(library):
    """``(a b + a) b - |a|`` element by element, of ``library``'s einsum, add and abs (no task
    writes their backward)."""
    return lambda a, b: library.einsum("ij,ij->ij", library.einsum("ij,ij->ij", a, b) + a, b) - a.abs()


@pytest.mark.task_1_1
def test_task_1_1_engine_backward_twice(student, rng):
    a, b = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    check_backward_twice(
        student,
        "einsum(ab + a, b) - |a|",
        composed(student.module("minitorch_attn")),
        composed(mt),
        [np.where(np.abs(a) < 0.1, 0.5, a), b],
        rng,
    )


# Every gradient-check sample of the catalogue (minitorch_attn/opinfo/) that calls its op
# directly, once for each task its gradient counts for (unmarked where none); random ops
# (dropout) draw a new mask per call, so two calls are not one function, and are left out.
CASES = [
    pytest.param(
        task,
        record,
        sample,
        id=f"{task} {sample.name}" if task else sample.name,
        marks=[getattr(pytest.mark, f"task_{task.replace('.', '_')}")] if task else [],
    )
    for record in opinfo.op_db()
    for sample in record.samples
    if sample.gradcheck and sample.fn is None and record.ref is not None
    for task in (sample.tasks_of(record) or [None])
]


def _moving(inputs, op, moving):
    """``op`` as a function of the inputs at the indices ``moving`` (the others held at theirs)."""

    def fn(*tensors):
        args = list(inputs)
        for i, t in zip(moving, tensors):
            args[i] = t
        out = op(*args)
        return out[0] if isinstance(out, (tuple, list)) else out

    return fn


@pytest.mark.parametrize("task, record, sample", CASES)
def test_backward_twice(student, rng, task, record, sample):
    inputs = sample.make(Inputs(seed=int(rng.integers(2**32))))
    moving = [i for i, t in enumerate(inputs) if isinstance(t, mt.Tensor) and t.requires_grad]
    ours = _moving(inputs, sample.call(record.op), moving)
    arrays = [host(inputs[i]) for i in moving]
    if task in ASKED:
        check_task_backward_twice(student, task, sample.name, ours, arrays, rng)
        return
    theirs = _moving(student.send(inputs), student_call(student, record, sample), moving)
    check_backward_twice(student, sample.name, theirs, ours, arrays, rng)


def check_task_backward_twice(student, task, name, ours, arrays, rng):
    """The graph of :func:`check_backward_twice` in this process, each node of ``task``'s
    Functions asking the student's backward (which checks that the arrays it was given are
    unchanged), twice: the gradients of the first call, then twice them."""
    what, fresh, g = _reference_once(name, ours, arrays, rng)
    inputs = [mt.tensor(np.asarray(a), dtype="float64", requires_grad=True) for a in arrays]
    y1, y2 = ours(*inputs), ours(*inputs)
    z = (y1 + y2) + y1
    for call, factor in (("one backward", 1), ("two backward calls", 2)):
        backward_of_task(student, task, z, [g], retain_graph=True)
        for i, (x, reference) in enumerate(zip(inputs, fresh)):
            expect_close(
                x.grad, factor * host(reference.grad), n_ops=16, what=f"{what}: gradient of input {i} after {call}"
            )
