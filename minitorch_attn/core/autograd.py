"""Reverse-mode automatic differentiation: ``Function`` and the engine.

An operation is a subclass of :class:`Function` with two static methods on raw arrays::

    class Exp(Function):
        @staticmethod
        def forward(ctx, x):
            y = ctx.xp.exp(x)
            ctx.save_for_backward(y)          # what backward will need
            return y

        @staticmethod
        def backward(ctx, grad_output):       # dL/dy -> dL/dx
            (y,) = ctx.saved_tensors
            return grad_output * y            # d exp(x)/dx = exp(x)

    y = Exp.apply(x)                          # x, y are Tensors

Every backward in the package calls the upstream gradient ``grad_output`` (``dL/dy`` for
the output ``y``; ``dO`` inside the attention kernels, where the papers' names rule) and
returns ``dL/dx`` for each input ``x``.

What the engine computes, derived. A loss ``L`` depends on a tensor ``x`` only through the
operations that consumed it, ``y_1 = f_1(x, ...)``, ..., ``y_k = f_k(x, ...)``. The chain
rule, one term per consumer::

    dL/dx = Σ_k  J_k(x)ᵀ · dL/dy_k          (J_k = ∂y_k/∂x, the local Jacobian)

Each ``Function.backward`` computes one term ``J_kᵀ · grad_output`` without forming
``J_k``. So the engine must (a) hand ``x``'s producer the *complete* sum before that
producer's own backward runs, and (b) do it once per node. Hence ``run_backward``

1. finds every node the output depends on and counts, for each node, how many edges
   lead into it from later nodes (an iterative walk: no recursion limit);
2. visits the nodes from the output back to the leaves, each one only after all of its
   consumers (a topological order), so every term of the sum above has arrived before
   its backward runs (``b = a + a`` gives ``a`` the sum of two gradients: one node that
   takes the same tensor twice counts as two edges, one per argument);
3. undoes broadcasting in one place, :func:`sum_to_shape`: ``y = broadcast(x)`` copies
   ``x`` along some axes, so ``J`` is a stack of identities and ``Jᵀ · grad_output`` sums
   ``grad_output`` over those axes. A backward may return a gradient of the broadcast
   shape; the engine sums it back to the input's shape and casts it to the input's dtype;
4. treats ``None`` from a backward as a zero gradient (the term ``J_kᵀ · 0`` adds
   nothing): nothing is sent, and a node that receives nothing from any consumer is
   skipped, since all its terms would be zero (a leaf reached only that way keeps
   ``grad = None``, as in PyTorch);
5. hands a node with several outputs (flash attention's ``out`` and ``lse``) one
   gradient per output, kept apart by the output's index; an output that received
   nothing (unused by the loss) gets zeros of its shape, the gradient of a term that
   does not appear in ``L``;
6. accumulates the result into ``leaf.grad`` (summed across backward calls, as in
   PyTorch, until ``zero_grad()`` or ``grad = None``), and releases each node's saved
   arrays unless ``retain_graph=True``.

Hooks (:mod:`~minitorch_attn.core.hooks`): a node's complete gradients pass through the
hooks of its outputs (``t.register_hook``, ``t.retain_grad``) before its backward runs; a
leaf with hooks has its terms summed and its hooks run on the sum, before it is added to
``leaf.grad``.

Before a node's backward reads what its forward saved, the engine checks that none of
those tensors was written in place since (their versions, :mod:`~minitorch_attn.core.inplace`): a
changed one would give a wrong gradient without a word, so it is PyTorch's
"modified by an inplace operation" error instead. Whether a call is recorded at all is
the grad mode of the calling thread (:mod:`.grad_mode`).

Source: the Function/ctx design of torch.autograd.Function and minitorch; the chain rule
in reverse mode as in Baydin et al., arXiv:1502.05767, section 3.2.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from typing import Any

from ..speed import RowWise, backward_in_rows, forward_in_rows
from . import grad_mode
from .backend import backend_of
from .context import Context
from .grad_mode import enable_grad, is_grad_enabled, no_grad, set_grad_enabled  # noqa: F401 (re-exported)
from .hooks import hold, release_held, run_output_hooks
from .inplace import check_versions, record_versions


class Node:
    """One recorded call of a Function: the graph edge from its outputs back to its inputs."""

    __slots__ = ("function", "ctx", "inputs", "output_meta", "hooks")

    def __init__(self, function, ctx, inputs, output_meta):
        self.function = function  # the Function subclass
        self.ctx = ctx  # its Context
        self.inputs = inputs  # positional arguments (Tensors or plain values)
        self.output_meta = output_meta  # (shape, dtype) of each output, to make zero gradients
        self.hooks = None  # {output index: its hooks.OutputHooks}, once one is registered

    def __repr__(self):
        return f"<{self.function.__name__}Backward>"


class Function:
    """Base class of every differentiable operation (as ``torch.autograd.Function``).

    Subclasses define ``forward(ctx, *args, **options)`` returning an array (or a tuple of
    arrays) and ``backward(ctx, *grad_outputs)`` returning one gradient per positional
    argument of ``forward``. ``None`` stands for a zero gradient: return it for arguments
    that are not tensors, and may return it for any other (the engine then sends
    nothing; see step 4 of the module docstring). Both methods work on raw arrays of the
    backend in ``ctx.xp``. A gradient may have the broadcast shape of the output: the
    engine sums it back to the input's shape.

    Call an operation with ``MyOp.apply(*args, **options)``; Tensors may be mixed with
    Python numbers and other plain values, and keyword options are passed to ``forward``
    unchanged. A NumPy scalar (``numpy.float64(0.1)``) is passed on as the Python number
    it holds, so that it promotes as Python's do (float32 stays float32, PyTorch's rule;
    NumPy would make a float32 array plus a float64 scalar float64).

    A Function whose output is a view of its first input (reshape, permute, slicing)
    sets ``is_view = True``: the output shares the input's version counter, so an
    in-place write to either is seen through both (see :mod:`~minitorch_attn.core.inplace`).

    A Function whose output for each row of its inputs depends on that row alone (GELU,
    LayerNorm, attention over a batch) sets ``row_wise = RowWise(...)``
    (:class:`minitorch_attn.speed.RowWise`): its forward and backward may then run on
    chunks of rows on the pool's threads, with the same numbers, and the graph still
    records one node of the Function itself.

    Raises:
        ValueError: if the tensor arguments live on different devices.
    """

    is_view = False
    row_wise: RowWise | None = None

    @staticmethod
    def forward(ctx, *args, **options):
        raise NotImplementedError

    @staticmethod
    def backward(ctx, *grad_outputs):
        raise NotImplementedError

    @classmethod
    def apply(cls, *args: Any, **options: Any) -> Any:
        backend = None
        raw = []
        needs_input_grad = []
        for arg in args:
            if isinstance(arg, Tensor):
                arg_backend = backend_of(arg.data)
                if backend is None:
                    backend = arg_backend
                elif arg_backend is not backend:
                    raise ValueError(
                        f"{cls.__name__}: expected all tensors on the same device, but found "
                        f"tensors on '{backend.name}' and on '{arg_backend.name}'; move them "
                        f"with .to(device) first"
                    )
                raw.append(arg.data)
                needs_input_grad.append(arg._requires_grad)
                continue
            if type(arg) not in _PLAIN and isinstance(arg, numbers.Number) and hasattr(arg, "item"):
                arg = arg.item()  # a NumPy scalar: its Python number
            raw.append(arg)
            needs_input_grad.append(False)
        if backend is None:
            raise TypeError(f"{cls.__name__}.apply needs at least one Tensor argument")

        record = grad_mode._mode.enabled and True in needs_input_grad
        ctx = Context(backend, tuple(needs_input_grad))
        if cls.row_wise is None:
            result = cls.forward(ctx, *raw, **options)
        else:
            result = forward_in_rows(cls, ctx, raw, options)  # the same, maybe in chunks of rows

        outputs = result if isinstance(result, tuple) else (result,)
        node = Node(cls, ctx, args, tuple((o.shape, o.dtype) for o in outputs)) if record else None
        wrapped = []
        for index, array in enumerate(outputs):
            tensor = Tensor(array, requires_grad=record)
            if cls.is_view:
                tensor._version_counter = args[0]._version_counter
            if record:
                tensor.grad_fn = node
                tensor._output_nr = index
            wrapped.append(tensor)
        if record:
            ctx._versions = record_versions(ctx.kept(), args, wrapped)
        return tuple(wrapped) if isinstance(result, tuple) else wrapped[0]


_PLAIN = frozenset((int, float, bool, str, tuple, type(None)))
"""speed: argument types that are passed to ``forward`` as they are, without the slower
check for a NumPy scalar (``isinstance(arg, numbers.Number)`` goes through an ABC)."""


def sum_to_shape(xp, grad, shape):
    """Undo broadcasting: sum ``grad`` over the axes that broadcasting added or stretched.

    Forward ``y = broadcast(x)`` copies ``x`` along those axes.

    .. derivation 1.3 begin
    .. hint 1.3: an entry of x copied to several entries of y gets the gradient of each copy.
    So ``dL/dx`` is the sum of ``dL/dy`` over them.
    .. derivation end

    This is the only place in the engine that does it.
    """
    # BEGIN SOLUTION 1.3
    if tuple(grad.shape) == tuple(shape):
        return grad
    extra = grad.ndim - len(shape)
    if extra > 0:
        grad = xp.sum(grad, axis=tuple(range(extra)))
    stretched = tuple(i for i, (g, s) in enumerate(zip(grad.shape, shape)) if s == 1 and g != 1)
    if stretched:
        grad = xp.sum(grad, axis=stretched, keepdims=True)
    return grad
    # END SOLUTION


def _gradient_for(node, tensor, grad):
    """Bring a gradient returned by ``node``'s backward to ``tensor``'s shape and dtype."""
    xp, data = node.ctx.xp, tensor.data
    if not hasattr(grad, "shape"):
        raise TypeError(f"{node.function.__name__}.backward returned {type(grad).__name__}, expected an array")
    if grad.shape != data.shape:  # speed: the usual gradient has the shape already
        returned_shape = tuple(grad.shape)
        grad = sum_to_shape(xp, grad, tensor.shape)
        if tuple(grad.shape) != tuple(tensor.shape):
            raise RuntimeError(
                f"{node.function.__name__}.backward returned a gradient of shape {returned_shape} "
                f"for an input of shape {tuple(tensor.shape)}"
            )
    if grad.dtype != data.dtype:
        grad = xp.astype(grad, data.dtype)
    return grad


def backward(
    tensors: Tensor | Sequence[Tensor],
    grad_tensors: Tensor | Sequence[Tensor | None] | None = None,
    retain_graph: bool = False,
) -> None:
    """Backpropagate from several outputs at once (as ``torch.autograd.backward``).

    Args:
        tensors: a Tensor or a sequence of Tensors.
        grad_tensors: matching upstream gradients (Tensors or arrays); None for a
            single-element output means 1.

    Raises:
        TypeError: for something that is not a Tensor among ``tensors``, or a gradient
            that is not numbers. ValueError: for a count or shape that does not match.
    """
    tensors = [tensors] if isinstance(tensors, Tensor) else list(tensors)
    if not all(isinstance(t, Tensor) for t in tensors):
        raise TypeError(f"backward: expected Tensors, got {[type(t).__name__ for t in tensors]}")
    if grad_tensors is None:
        grad_tensors = [None] * len(tensors)
    elif isinstance(grad_tensors, Tensor):
        grad_tensors = [grad_tensors]
    if len(grad_tensors) != len(tensors):
        raise ValueError(f"backward: {len(tensors)} tensors but {len(grad_tensors)} gradients")
    seeds = [(t, t._seed_gradient(g)) for t, g in zip(tensors, grad_tensors)]
    run_backward(seeds, retain_graph=retain_graph)


def run_backward(seeds, retain_graph=False):
    """Backpropagate from ``seeds``, a list of (output Tensor, gradient array shaped like it).

    See the module docstring for the order of work. Called by :meth:`Tensor.backward`.
    """
    # 0. seeds that are leaves receive their gradient directly
    grads = {}
    held = {}  # leaves with hooks: the sum of their terms, for the hooks (see hooks.hold)
    for root, grad in seeds:
        if root.grad_fn is None and root._backward_hooks is not None:
            hold(held, root, grad)
        elif root.grad_fn is None:
            _accumulate(root, grad, backend_of(root.data).xp)
        else:
            _send(grads, root, grad)
    if not grads:
        return release_held(held, _accumulate, Tensor)

    # 1. count, for each node, the edges arriving from nodes that depend on it
    pending = dict.fromkeys(grads, 0)
    parents = {}  # speed: each node's parents, found once for steps 1 and 2
    stack = list(grads)
    while stack:
        node = stack.pop()
        parents[node] = _parents(node)
        for parent in parents[node]:
            # BEGIN SOLUTION 1.1
            if parent not in pending:
                pending[parent] = 0
                stack.append(parent)
            pending[parent] += 1
            # END SOLUTION

    # 2. walk from the outputs back, a node only once all its consumers have run
    ready = [node for node in grads if pending[node] == 0]
    while ready:
        node = ready.pop()
        ctx = node.ctx
        if ctx._released:
            raise RuntimeError(
                "Trying to backward through the graph a second time: its saved arrays were "
                "freed by the first backward(). Pass retain_graph=True to the first call "
                "if you need to backward through it twice."
            )
        received = grads.pop(node, None)
        if node.hooks is not None:  # its outputs' hooks and retained gradients
            received = run_output_hooks(node, received, Tensor)
        if received is None:  # every consumer returned None for it: all its terms are zero
            _finish(node, parents.pop(node), pending, ready, retain_graph)
            continue
        check_versions(node)
        grad_outputs = [
            received[i]
            if i in received
            else (ctx.xp.zeros(shape, dtype=dtype, device=ctx.backend.device) if ctx.materialize_grads else None)
            for i, (shape, dtype) in enumerate(node.output_meta)
        ]
        function = node.function
        if function.row_wise is None:
            input_grads = function.backward(ctx, *grad_outputs)
        else:
            input_grads = backward_in_rows(function, ctx, grad_outputs)  # as its forward ran
        if not isinstance(input_grads, tuple):
            input_grads = (input_grads,)
        if len(input_grads) != len(node.inputs):
            raise RuntimeError(
                f"{node.function.__name__}.backward returned {len(input_grads)} gradients, "
                f"expected {len(node.inputs)} (one per argument of forward, None where there is none)"
            )
        for tensor, g in zip(node.inputs, input_grads):
            if g is None or not (isinstance(tensor, Tensor) and tensor._requires_grad):
                continue
            g = _gradient_for(node, tensor, g)
            if tensor._backward_hooks is not None and tensor.grad_fn is None:
                hold(held, tensor, g)
                continue
            # BEGIN SOLUTION 1.1
            if tensor.grad_fn is None:
                _accumulate(tensor, g, ctx.xp)
            else:
                _send(grads, tensor, g)
            # END SOLUTION
        _finish(node, parents.pop(node), pending, ready, retain_graph)
    release_held(held, _accumulate, Tensor)


def _finish(node, parents, pending, ready, retain_graph):
    """After ``node``'s backward: each of its ``parents`` has one consumer fewer to wait for."""
    for parent in parents:
        # BEGIN SOLUTION 1.1
        pending[parent] -= 1
        if pending[parent] == 0:
            ready.append(parent)
        # END SOLUTION
    if not retain_graph:
        node.ctx.release()


def _parents(node):
    return [t.grad_fn for t in node.inputs if isinstance(t, Tensor) and t._requires_grad and t.grad_fn is not None]


def _accumulate(leaf, grad, xp):
    """``leaf.grad += grad``, out of place; the first gradient is copied so that no two
    leaves (nor the caller's seed array) ever share one buffer. ``grad`` already has the
    leaf's dtype (:func:`_gradient_for`, ``Tensor._seed_gradient``)."""
    # BEGIN SOLUTION 1.1
    if leaf.grad is None:
        leaf.grad = Tensor(xp.asarray(grad, copy=True))
    else:
        leaf.grad = Tensor(leaf.grad.data + grad)
    # END SOLUTION


def _send(grads, tensor, grad):
    """Add ``grad`` to what the node that produced ``tensor`` has received for that output.
    Never in place: the same array may have been sent to another input too."""
    # BEGIN SOLUTION 1.1
    slot = grads.setdefault(tensor.grad_fn, {})
    n = tensor._output_nr
    slot[n] = grad if n not in slot else slot[n] + grad
    # END SOLUTION


# The one import cycle of the package, inside core/: the engine wraps results in Tensors
# and Tensor.backward calls the engine. Imported last, when everything above is defined.
from .tensor import Tensor  # noqa: E402
