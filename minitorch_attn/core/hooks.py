"""Hooks: watching (and changing) a gradient as backward passes it, as PyTorch's tensor hooks.

Three tools a learner uses to *see* backpropagation, with PyTorch's names and rules:

- ``t.register_hook(fn)``: backward calls ``fn(grad)`` with ``dL/dt`` once it is complete
  (the sum over every consumer of ``t``), before the gradient goes on: into the node
  that made ``t``, or, for a leaf, into ``t.grad``. ``fn`` may return a Tensor of the same
  shape and dtype, which replaces the gradient from there on (the next hook gets it
  too), or None. Hooks run in the order they were registered, on every backward (also
  a second one through a graph kept by ``retain_graph=True``), with grad mode off, as
  PyTorch's. Returns a :class:`RemovableHandle`; ``handle.remove()`` takes the hook away.
- ``t.retain_grad()``: a computed (non-leaf) tensor keeps its gradient in ``t.grad``,
  summed over backward calls as a leaf's is; it is filled after every hook of ``t`` has
  run (PyTorch runs the retain hook last too), so it holds the replaced gradient.
  ``t.retains_grad`` says whether it was asked. On a leaf it does nothing (a leaf keeps
  its gradient anyway). After an in-place write to ``t`` it keeps the new value's
  gradient, while the hooks registered before the write get the old value's (PyTorch's rule).
- Reading ``t.grad`` of a computed tensor that does not retain it gives PyTorch's
  UserWarning (it is None: backward fills leaves only), pointing at ``retain_grad()``.

Where they live: a leaf's hooks on the tensor itself (``_backward_hooks``); a computed
tensor's on the graph node that made it (``node.hooks``, one :class:`OutputHooks` per
output index), as PyTorch keeps them on ``grad_fn``: the hook then runs even when the
Tensor object is gone, and the retained gradient is written through a weak reference, so
the graph does not keep the tensor alive. A leaf used by several operations gets its
hook called once with the sum (the engine adds the terms first), after the backward walk.

Source: ``torch.Tensor.register_hook``, ``torch.Tensor.retain_grad`` and
``torch.utils.hooks.RemovableHandle``.
"""

from __future__ import annotations

import itertools
import weakref
from collections import OrderedDict

from .backend import backend_of
from .grad_mode import no_grad

NON_LEAF_GRAD_WARNING = (
    "The .grad attribute of a Tensor that is not a leaf Tensor is being accessed. Its .grad attribute won't be "
    "populated during backward(). If you indeed want the .grad field to be populated for a non-leaf Tensor, "
    "use .retain_grad() on the non-leaf Tensor. If you access the non-leaf Tensor by mistake, make sure you "
    "access the leaf Tensor instead."
)
"""What reading ``.grad`` of a computed tensor that does not retain it warns (PyTorch's words)."""


class RemovableHandle:
    """What a ``register_*hook`` returns (as ``torch.utils.hooks.RemovableHandle``).

    ``handle.remove()`` takes the hook out of the table it was put in (a second call does
    nothing); ``with t.register_hook(fn): ...`` removes it at the end of the block.
    ``handle.id`` is the hook's key in that table, unique in the process.
    """

    _ids = itertools.count()

    def __init__(self, hooks_dict):
        self.hooks_dict_ref = weakref.ref(hooks_dict)  # the table may go with its tensor or module
        self.id = next(RemovableHandle._ids)

    def remove(self):
        hooks_dict = self.hooks_dict_ref()
        if hooks_dict is not None:
            hooks_dict.pop(self.id, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.remove()


def add_hook(hooks_dict, hook, prepend=False):
    """Put ``hook`` in ``hooks_dict`` (an OrderedDict, run in order), first if ``prepend``;
    return its handle."""
    if not callable(hook):
        raise TypeError(f"a hook must be callable, got {type(hook).__name__}")
    handle = RemovableHandle(hooks_dict)
    hooks_dict[handle.id] = hook
    if prepend:
        hooks_dict.move_to_end(handle.id, last=False)
    return handle


class OutputHooks:
    """The hooks of one output of a graph node, and the tensor that retains its gradient
    (a weak reference, or None)."""

    __slots__ = ("hooks", "retain")

    def __init__(self):
        self.hooks = OrderedDict()
        self.retain = None


class HookMethods:
    """``register_hook``, ``retain_grad`` and ``retains_grad`` of
    :class:`~minitorch_attn.core.tensor.Tensor` (a base class of it)."""

    _backward_hooks = None  # a leaf's hooks, an OrderedDict once one is registered
    _retains_grad = False

    def register_hook(self, hook):
        """Call ``hook(grad)`` with this tensor's gradient on every backward; see the module docstring.

        Args:
            hook: a callable taking a Tensor (the gradient, this tensor's shape and dtype)
                and returning None or a Tensor like it, which replaces the gradient.
        Returns:
            a :class:`RemovableHandle`.
        Raises:
            RuntimeError: for a tensor that does not require grad (PyTorch's error).
            TypeError: for a hook that is not callable.
        """
        if not self._requires_grad:
            raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
        if self.grad_fn is None:
            if self._backward_hooks is None:
                self._backward_hooks = OrderedDict()
            return add_hook(self._backward_hooks, hook)
        return add_hook(_output_hooks(self).hooks, hook)

    def retain_grad(self):
        """Keep this computed tensor's gradient in ``.grad`` on every backward (a no-op on a
        leaf). Raises RuntimeError for a tensor that does not require grad (PyTorch's error)."""
        if not self._requires_grad:
            raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
        if self.grad_fn is not None:
            _output_hooks(self).retain = weakref.ref(self)
            self._retains_grad = True

    @property
    def retains_grad(self):
        """Whether :meth:`retain_grad` was called on this computed tensor (False for a leaf)."""
        return self._retains_grad


def _output_hooks(tensor):
    """The :class:`OutputHooks` of ``tensor``'s output of its graph node (made on first use)."""
    node = tensor.grad_fn
    if node.hooks is None:
        node.hooks = {}
    return node.hooks.setdefault(tensor._output_nr, OutputHooks())


def run_hooks(hooks, grad, shape, dtype, wrap):
    """Call each hook of ``hooks`` (an OrderedDict) in turn with the gradient ``grad`` (an
    array, or None where nothing arrived: PyTorch passes None then too); a hook's returned
    Tensor replaces it. Returns the array that goes on (or None).

    Raises:
        TypeError: for a hook that returns something other than None or a Tensor.
        RuntimeError: for a returned Tensor of another shape or dtype (PyTorch's errors).
    """
    for hook in list(hooks.values()):  # a hook may remove itself
        with no_grad():
            result = hook(None if grad is None else wrap(grad))
        if result is None:
            continue
        if not isinstance(result, wrap):
            raise TypeError(f"expected Tensor, but hook returned '{type(result).__name__}'")
        name = getattr(hook, "__name__", type(hook).__name__)
        if result.shape != tuple(shape):
            raise RuntimeError(f"hook '{name}' has changed the size of value (was {tuple(shape)} got {result.shape})")
        if result.data.dtype != dtype:
            raise RuntimeError(f"hook '{name}' has changed the type of value (was {dtype} got {result.dtype})")
        grad = result.data
    return grad


def run_output_hooks(node, received, wrap):
    """Run the hooks of ``node``'s outputs on the gradients ``received`` for them (a dict
    ``{output index: array}``, or None), then fill the ``.grad`` of the outputs that retain
    theirs. Returns the gradients that go on into ``node``'s backward (None for none)."""
    received = dict(received or {})
    for index, output in node.hooks.items():
        shape, dtype = node.output_meta[index]
        grad = run_hooks(output.hooks, received.get(index), shape, dtype, wrap) if output.hooks else received.get(index)
        if grad is None:
            received.pop(index, None)
            continue
        received[index] = grad
        tensor = output.retain() if output.retain is not None else None
        if tensor is not None:  # summed over backward calls, out of place
            first = tensor._grad is None
            tensor._grad = wrap(node.ctx.xp.asarray(grad, copy=True) if first else tensor._grad.data + grad)
    return received or None


def hold(held, leaf, grad):
    """Add a term of the gradient of ``leaf``, a leaf with hooks, to what ``held`` keeps for
    it: its hooks run once, on the sum (as PyTorch's, which run when the sum is complete)."""
    held[leaf] = grad if leaf not in held else held[leaf] + grad


def release_held(held, accumulate, wrap):
    """After the walk: run each held leaf's hooks on its summed gradient, then ``accumulate``
    what they leave into its ``.grad``."""
    for leaf, grad in held.items():
        grad = run_hooks(leaf._backward_hooks, grad, leaf.data.shape, leaf.data.dtype, wrap)
        if grad is not None:
            accumulate(leaf, grad, backend_of(leaf.data).xp)
