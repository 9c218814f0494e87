"""What the instructor tests share: the student's library reached through the ``student``
fixture (``conftest.py``), comparisons whose failure message names the op, the input
shape and dtype, forward or gradient, and the worst element, so that a student's feedback
says what to fix without a debugger, and a task's backward checked on its own
(:func:`backward_of_task`).

``minitorch_attn`` as imported here is the library of this process: the instructor's when
the grader runs these tests, a reference the student's values are compared with.
"""

import contextlib
import dataclasses

import numpy as np

import minitorch_attn as mt
from minitorch_attn.core import autograd, context
from minitorch_attn.core.ops import Div, Exp, Log, MatMul, Mul, Pow, Sqrt, Tanh
from minitorch_attn.core.reductions import Max, Mean, Sum, Var
from minitorch_attn.functional.attention import AttentionWeights, ScaledDotProductAttention
from minitorch_attn.functional.flash import FlashAttention
from minitorch_attn.homework.remote import StudentError
from tests.conftest import expect_close as shared_expect_close

REFERENCE_RTOL = 1e-7  # a student's values against the reference library's, relative to max(1, |value|)


def leaf(student, array, dtype="float64"):
    """A tensor of ``array``'s values in the student's library, requiring grad."""
    return student.send(mt.tensor(np.asarray(array), dtype=dtype, requires_grad=True))


def our_leaf(array, dtype="float64"):
    """A tensor of ``array``'s values in this process's library, requiring grad (for a graph
    of :func:`backward_of_task`)."""
    return mt.tensor(np.asarray(array), dtype=dtype, requires_grad=True)


@contextlib.contextmanager
def swapped(student, module, name, stand_in):
    """The attribute ``name`` of the student's module ``module`` set to ``stand_in`` (an object
    of theirs) while it lasts, then put back: where a task's code calls another task's (SwiGLU
    calls silu, the model builds SwiGLU), a stand-in whose code is no task's of the assignment
    takes its place, so that the check needs the task's own code only."""
    target = student.module(module)
    before = getattr(target, name)
    assign = student.module("builtins").setattr
    assign(target, name, stand_in)
    try:
        yield
    finally:
        try:
            assign(target, name, before)
        except StudentError:  # their process was stopped: the next check starts a new one, as it was
            pass


def host(x):
    """A float64 NumPy copy of a Tensor (this process's or the student's) or an array."""
    if isinstance(x, np.ndarray) or np.isscalar(x):
        return np.array(x, dtype=np.float64)
    return np.array(x.numpy(), dtype=np.float64)


def student_call(student, record, sample):
    """The student's ``sample.call(record.op)``: the same record and sample of their copy of
    the catalogue of operations (which is the instructor's: it holds no solution region)."""
    theirs = student.module("minitorch_attn.opinfo").find(record.name)
    for candidate in theirs.samples:
        if candidate.name == sample.name:
            return candidate.call(theirs.op)
    raise AssertionError(f"the catalogue of the graded copy has no sample {sample.name!r} of {record.name!r}")


def expect_close(ours, expected, *, what, n_ops=8, dtype="float64", rtol=None):
    """Assert ``ours`` (a tensor of either process, or an array) equals the float64 reference
    ``expected`` (:func:`tests.conftest.expect_close`: the message names ``what``, e.g.
    "softmax forward, input (4, 7) float32", the worst element and the tolerance)."""
    shared_expect_close(None if ours is None else host(ours), expected, what=what, n_ops=n_ops, dtype=dtype, rtol=rtol)


def expect_unchanged(before, after, *, what):
    """Assert an array kept its shape and exact values (NaNs in the same places)."""
    before, after = np.asarray(before), host(after)
    if before.shape == after.shape and np.array_equal(before, after, equal_nan=True):
        return
    changed = (
        "its shape"
        if before.shape != after.shape
        else f"{int(np.sum(~((before == after) | (np.isnan(before) & np.isnan(after)))))} of {before.size} elements"
    )
    raise AssertionError(
        f"{what} was changed ({changed}): a backward must not write into arrays that the "
        f"forward saved or that another node holds"
    )


def softmax(x, axis=-1):
    """The float64 reference softmax, shifted by the maximum."""
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def log_softmax(x, axis=-1):
    """The float64 reference log-softmax, shifted by the maximum."""
    z = x - x.max(axis=axis, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=axis, keepdims=True))


def attention_reference(q, k, v, dO, causal=False):
    """``(O, dQ, dK, dV)`` of ``softmax(q kᵀ / sqrt(E)) v`` under the upstream gradient
    ``dO``, in float64, with FlashAttention-2's row term ``D = rowsum(dO ∘ O)``."""
    scale = 1 / np.sqrt(q.shape[-1])
    s = scale * q @ np.swapaxes(k, -1, -2)
    if causal:
        s = np.where(np.tril(np.ones(s.shape[-2:], dtype=bool)), s, -np.inf)
    p = softmax(s)
    o = p @ v
    dp = dO @ np.swapaxes(v, -1, -2)
    ds = p * (dp - (dO * o).sum(-1, keepdims=True))
    return o, scale * ds @ k, scale * np.swapaxes(ds, -1, -2) @ q, np.swapaxes(p, -1, -2) @ dO


# ---- a task's backward on its own ----------------------------------------------------------------------
# A task's points depend on its own code only. Some backward passes cannot run in the student's
# library without the code of another task of their assignment: every backward of assignment 1
# runs through the engine of task 1.1 (which walks the graph) and task 1.3's sum over broadcast
# dims, and the attention backward passes read what the forward of task 4.1 or 5.1 saved. Their
# checks run the graph here instead, this process's forward and engine, and ask the student's
# process for the task's code only: the backward of each node of the task's Functions (on a copy
# of the node's Context), and for task 1.3 the sum over broadcast dims.
ASKED = {
    "1.2": (Mul, Div, Pow, Exp, Log, Sqrt, Tanh),
    "1.3": (),
    "1.4": (Sum, Mean, Max, Var),
    "1.5": (MatMul,),
    "4.2": (ScaledDotProductAttention, AttentionWeights),
    "5.2": (FlashAttention,),
}


def student_class(student, cls):
    """The student's class (or function) of the same module and name as this process's ``cls``."""
    found = student.module(cls.__module__)
    for name in cls.__qualname__.split("."):
        found = getattr(found, name)
    return found


def student_context(student, ctx):
    """A Context in the student's process holding what this process's ``ctx`` holds: the
    arrays its forward saved, ``needs_input_grad`` and the attributes the forward set
    (numbers, shapes, arrays, and dataclasses of them such as flash attention's plan)."""
    theirs = student.module("minitorch_attn.core.autograd").Context(
        student.module("minitorch_attn.core.backend").get_backend(ctx.backend.name), tuple(ctx.needs_input_grad)
    )
    theirs.save_for_backward(*(_as_array(a) for a in ctx.saved_tensors))
    assign = student.module("builtins").setattr
    for name, value in vars(ctx).items():
        if name not in context._CONTEXT_OWN:
            assign(theirs, name, _rebuilt(student, value, f"{name} of the Context"))
    return theirs


def _rebuilt(student, value, what):
    """``value`` as the student's process should hold it: data as it is, a dataclass made there."""
    if value is None or isinstance(value, (bool, int, float, str, np.generic, np.ndarray)):
        return value
    if isinstance(value, (tuple, list)):
        return type(value)(_rebuilt(student, v, what) for v in value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {f.name: _rebuilt(student, getattr(value, f.name), what) for f in dataclasses.fields(value)}
        return student_class(student, type(value))(**fields)
    raise TypeError(
        f"{what}: a {type(value).__name__} is not rebuilt in the student's process "
        f"(numbers, shapes, arrays and dataclasses of them are)"
    )


def student_backward(student, function, ctx, grad_outputs):
    """``function.backward(ctx, *grad_outputs)`` computed by the student's code (their class
    of that name, on a copy of ``ctx``): the gradients, a tuple of arrays or None. Their
    backward must leave the arrays it is given as they were (the upstream gradients and what
    the forward saved: the engine hands one array to several nodes), else AssertionError."""
    theirs = student_context(student, ctx)
    grad_outputs = [_as_array(g) for g in grad_outputs]
    upstream = [student.keep(g) for g in grad_outputs]
    grads = student_class(student, function).backward(theirs, *upstream)
    name = f"{function.__name__}.backward"
    for i, (kept, sent) in enumerate(zip(upstream, grad_outputs)):
        _expect_same(sent, student.read(kept), f"{name}: the upstream gradient {i} (grad_output)")
    for i, (saved, now) in enumerate(zip(ctx.saved_tensors, theirs.saved_tensors)):
        if saved is not None:
            _expect_same(_as_array(saved), now, f"{name}: array {i} saved by the forward")
    grads = tuple(_as_array(g) for g in (grads if isinstance(grads, tuple) else (grads,)))
    for i, g in enumerate(grads):
        if g is not None and not isinstance(g, np.ndarray):
            raise AssertionError(f"{name} returned {student.describe(g)} as gradient {i}: an array or None, please")
    return grads


def _as_array(value):
    """A number as a 0-d array: NumPy makes a scalar of a 0-d result, which crosses between
    the processes as a Python number."""
    if isinstance(value, (np.generic, int, float)) and not isinstance(value, (bool, np.bool_)):
        return np.asarray(value)
    return value


def _expect_same(before, after, what):
    if not (
        isinstance(after, np.ndarray)
        and after.shape == before.shape
        and np.array_equal(before, after, equal_nan=before.dtype.kind in "fc")
    ):
        raise AssertionError(
            f"{what} was changed: a backward must not write into arrays that the forward "
            f"saved or that another node holds"
        )


def _asked(student, function):
    """A stand-in for ``function`` on this process's graph: its backward is the student's
    (run as the engine runs ``function``'s: chunk by chunk if its forward ran in chunks of
    rows, ``row_wise``)."""

    def backward(ctx, *grad_outputs):
        return student_backward(student, function, ctx, grad_outputs)

    return type(function.__name__, (), {"backward": staticmethod(backward), "row_wise": function.row_wise})


def _checked_sum(student, summed, grad, shape):
    """The student's ``sum_to_shape`` (task 1.3) of ``grad``, checked for its shape."""
    summed = _as_array(summed)
    if not isinstance(summed, np.ndarray) or tuple(summed.shape) != tuple(shape):
        got = summed.shape if isinstance(summed, np.ndarray) else student.describe(summed)
        raise AssertionError(f"sum_to_shape of a gradient of shape {tuple(grad.shape)} to {tuple(shape)} gave {got}")
    return summed


def graph_nodes(outputs):
    """Every node of this process's graph below the tensors ``outputs``."""
    found, seen, stack = [], set(), [t.grad_fn for t in outputs]
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        found.append(node)
        stack += [t.grad_fn for t in node.inputs if isinstance(t, mt.Tensor)]
    return found


def backward_of_task(student, task, outputs, upstream, retain_graph=False):
    """Backpropagate the arrays ``upstream`` from ``outputs`` (this process's tensors, made by
    its forward) with this process's engine, the student's code doing the part of ``task``
    (one of :data:`ASKED`) and nothing else; the leaves' ``.grad`` then hold the result."""
    outputs = list(outputs) if isinstance(outputs, (tuple, list)) else [outputs]
    for node in graph_nodes(outputs):
        if node.function in ASKED[task]:
            node.function = _asked(student, node.function)
    own = autograd.sum_to_shape
    if task == "1.3":
        theirs, xp = student.module("minitorch_attn.core.autograd").sum_to_shape, student.module("numpy")
        autograd.sum_to_shape = lambda _, grad, shape: _checked_sum(
            student, theirs(xp, grad, tuple(shape)), grad, shape
        )
    try:
        mt.backward(
            outputs,
            [mt.tensor(np.asarray(u), dtype=o.dtype) for o, u in zip(outputs, upstream)],
            retain_graph=retain_graph,
        )
    finally:
        autograd.sum_to_shape = own


def copied(values):
    """New leaves with the values, dtypes and ``requires_grad`` of the tensors among ``values``."""
    return [
        mt.tensor(np.array(v.numpy()), dtype=v.dtype, requires_grad=v.requires_grad) if isinstance(v, mt.Tensor) else v
        for v in values
    ]
