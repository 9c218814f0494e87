"""Module hooks: functions called around a module's forward and with its gradients, as PyTorch's.

``module(*args, **kwargs)`` runs, in this order (PyTorch's ``Module._call_impl``)::

    1. each forward pre-hook:  hook(module, args) -> None or new args
                               (with_kwargs=True: hook(module, args, kwargs) -> None or (args, kwargs))
    2. with backward hooks, the tensor inputs that require grad pass through an identity
       node (its backward sees dL/d(input), the ``grad_input``)
    3. output = module.forward(*args, **kwargs)
    4. each forward hook:      hook(module, args, output) -> None or a new output
                               (with_kwargs=True: hook(module, args, kwargs, output))
    5. with backward hooks, the tensor outputs pass through a second identity node (its
       backward sees dL/d(output), the ``grad_output``)

In backward, the node of 5 runs first (every consumer of the outputs has sent its part):
each backward pre-hook ``hook(module, grad_output)`` may replace ``grad_output``. Then
the node of 2: each full backward hook ``hook(module, grad_input, grad_output)`` may
return a new ``grad_input`` tuple, which is what flows on into the inputs' graph.
``grad_input`` has one entry per positional argument: the gradient for a tensor that
requires grad, zeros for a tensor that does not (PyTorch's), None for anything else;
``grad_output`` one per output (one for a single tensor): None for an output the loss
did not use. When no input requires grad, the backward hooks run at step 5 with
``grad_input`` all None and PyTorch's warning (the first layer of a model, fed data).
With ``retain_graph=True`` a second backward runs them again. Hooks run with grad mode
off. Every ``register_*`` returns a :class:`~minitorch_attn.core.hooks.RemovableHandle`;
``prepend=True`` puts the hook before the others.

Source: ``torch.nn.Module.register_forward_pre_hook``, ``register_forward_hook``,
``register_full_backward_pre_hook``, ``register_full_backward_hook`` and
``torch.utils.hooks.BackwardHook``.
"""

from __future__ import annotations

import warnings
from collections import OrderedDict

from ..core.autograd import Function
from ..core.factories import zeros_like
from ..core.grad_mode import is_grad_enabled, no_grad
from ..core.hooks import add_hook
from ..core.tensor import Tensor


class ModuleHookMethods:
    """The ``register_*hook`` methods of :class:`~minitorch_attn.nn.Module` (a base class of it)."""

    # set by _init_hooks: handle id -> hook
    _forward_pre_hooks: OrderedDict
    _forward_hooks: OrderedDict
    _backward_pre_hooks: OrderedDict
    _backward_hooks: OrderedDict

    def _init_hooks(self):
        for name in ("_forward_pre_hooks", "_forward_hooks", "_backward_pre_hooks", "_backward_hooks"):
            object.__setattr__(self, name, OrderedDict())
        object.__setattr__(self, "_hook_options", {})  # handle id -> (with_kwargs, always_call)

    def register_forward_pre_hook(self, hook, *, prepend=False, with_kwargs=False):
        """Call ``hook(module, args)`` before each forward; a returned value replaces ``args``
        (a non-tuple is wrapped in one). With ``with_kwargs=True`` it is
        ``hook(module, args, kwargs)`` returning None or ``(args, kwargs)``.
        Returns a RemovableHandle. Raises TypeError for a hook that is not callable."""
        handle = add_hook(self._forward_pre_hooks, hook, prepend)
        self._hook_options[handle.id] = (bool(with_kwargs), False)
        return handle

    def register_forward_hook(self, hook, *, prepend=False, with_kwargs=False, always_call=False):
        """Call ``hook(module, args, output)`` after each forward; a returned value replaces
        the output. ``with_kwargs=True``: ``hook(module, args, kwargs, output)``.
        ``always_call=True``: also called (with ``output=None``) when forward raises.
        Returns a RemovableHandle. Raises TypeError for a hook that is not callable."""
        handle = add_hook(self._forward_hooks, hook, prepend)
        self._hook_options[handle.id] = (bool(with_kwargs), bool(always_call))
        return handle

    def register_full_backward_pre_hook(self, hook, prepend=False):
        """Call ``hook(module, grad_output)`` when the gradients of the outputs are complete;
        a returned tuple (one entry per output) replaces them. Returns a RemovableHandle."""
        return add_hook(self._backward_pre_hooks, hook, prepend)

    def register_full_backward_hook(self, hook, prepend=False):
        """Call ``hook(module, grad_input, grad_output)`` when the gradients of the inputs are
        computed (see the module docstring for the tuples); a returned tuple (one entry per
        positional argument) replaces ``grad_input``. Returns a RemovableHandle.

        Raises (in backward): RuntimeError for a returned tuple of the wrong length, or for
        anything but None when no input requires grad (PyTorch's errors)."""
        return add_hook(self._backward_hooks, hook, prepend)


def call_with_hooks(module, args, kwargs):
    """``module(*args, **kwargs)`` with its hooks, steps 1-5 of the module docstring."""
    watch = _BackwardHook(module) if module._backward_hooks or module._backward_pre_hooks else None
    options = module._hook_options
    for key, hook in list(module._forward_pre_hooks.items()):  # 1
        if options[key][0]:
            result = hook(module, args, kwargs)
            if result is not None:
                if not (isinstance(result, tuple) and len(result) == 2):
                    raise RuntimeError(
                        f"forward pre-hook must return None or a tuple of (new_args, new_kwargs), but got {result!r}."
                    )
                args, kwargs = result
        else:
            result = hook(module, args)
            if result is not None:
                args = result if isinstance(result, tuple) else (result,)
    if watch is not None:
        args = watch.wrap_inputs(args)  # 2
    called = set()
    output = None
    try:
        output = module.forward(*args, **kwargs)  # 3
        for key, hook in list(module._forward_hooks.items()):  # 4
            called.add(key)
            with_kwargs = options[key][0]
            result = hook(module, args, kwargs, output) if with_kwargs else hook(module, args, output)
            if result is not None:
                output = result
    except BaseException:
        for key, hook in list(module._forward_hooks.items()):
            if options[key][1] and key not in called:  # always_call
                try:
                    hook(module, args, kwargs, output) if options[key][0] else hook(module, args, output)
                except Exception as error:
                    warnings.warn(
                        f"forward hook with always_call=True raised an exception that was ignored: {error!r}",
                        stacklevel=2,
                    )
        raise
    return output if watch is None else watch.wrap_outputs(output)  # 5


class _BackwardHook:
    """What one call of a module with backward hooks keeps between the two identity nodes."""

    def __init__(self, module):
        self.module = module
        self.args = ()
        self.input_index = None  # positions of the inputs that pass through the node of step 2
        self.n_outputs, self.output_index = 0, ()
        self.grad_outputs = None

    def wrap_inputs(self, args):
        self.args = args
        index = [i for i, a in enumerate(args) if isinstance(a, Tensor) and a.requires_grad]
        if not (index and is_grad_enabled()):
            return args
        self.input_index = index
        return _through_identity(args, index, self, "inputs")

    def wrap_outputs(self, output):
        single = not isinstance(output, tuple)
        items = (output,) if single else output
        index = [i for i, o in enumerate(items) if isinstance(o, Tensor) and o.requires_grad]
        if not (index and is_grad_enabled()):
            return output
        self.n_outputs, self.output_index = len(items), index
        items = _through_identity(items, index, self, "outputs")
        return items[0] if single else items

    def on_grad_outputs(self, grads):
        """Backward of step 5: keep ``grad_output``, run the pre-hooks (and the hooks, when no input
        requires grad); the gradients go on unchanged or as the pre-hooks replaced them."""
        module = self.module
        grad_output = [None] * self.n_outputs
        for i, g in zip(self.output_index, grads):
            grad_output[i] = None if g is None else Tensor(g)
        grad_output = tuple(grad_output)
        with no_grad():
            for hook in list(module._backward_pre_hooks.values()):
                result = hook(module, grad_output)
                if result is not None:
                    grad_output = _checked(result, len(grad_output), "grad_output")
            if self.input_index is None:
                warnings.warn(
                    "Full backward hook is firing when gradients are computed with respect to module "
                    "outputs since no inputs require gradients.",
                    UserWarning,
                    stacklevel=2,
                )
                for hook in list(module._backward_hooks.values()):
                    result = hook(module, (None,) * len(self.args), grad_output)
                    if result is not None and not (isinstance(result, tuple) and all(r is None for r in result)):
                        raise RuntimeError(
                            "Backward hook for Modules where no input requires gradient should "
                            "always return None or None for all gradients."
                        )
            else:
                self.grad_outputs = grad_output
        return tuple(None if grad_output[i] is None else grad_output[i].data for i in self.output_index)

    def on_grad_inputs(self, grads):
        """Backward of step 2: call the hooks with ``grad_input`` and ``grad_output``; what
        they return flows on into the inputs."""
        if self.grad_outputs is None:  # a gradient that did not come through the outputs
            return grads
        grad_input = [zeros_like(a) if isinstance(a, Tensor) else None for a in self.args]
        for i, g in zip(self.input_index, grads):
            grad_input[i] = Tensor(g)
        grad_input = tuple(grad_input)
        with no_grad():
            for hook in list(self.module._backward_hooks.values()):
                result = hook(self.module, grad_input, self.grad_outputs)
                if result is not None:
                    grad_input = _checked(result, len(grad_input), "grad_input")
        self.grad_outputs = None
        return tuple(None if grad_input[i] is None else grad_input[i].data for i in self.input_index)


def _checked(result, count, what):
    """A hook's replacement tuple: ``count`` entries, each a Tensor or None."""
    if not isinstance(result, (tuple, list)) or len(result) != count:
        got = len(result) if isinstance(result, (tuple, list)) else type(result).__name__
        raise RuntimeError(f"Backward hook returned an invalid number of {what}, got {got}, but expected {count}")
    for entry in result:
        if entry is not None and not isinstance(entry, Tensor):
            raise TypeError(f"a backward hook must return Tensors or None in {what}, got {type(entry).__name__}")
    return tuple(result)


def _through_identity(items, index, watch, side):
    """``items`` with the Tensors at ``index`` replaced by their pass through one :class:`_Identity`
    node (the same arrays and version counters: nothing is copied)."""
    passed = _Identity.apply(*[items[i] for i in index], watch=watch, side=side)
    items = list(items)
    for i, tensor in zip(index, passed):
        tensor._version_counter = items[i]._version_counter
        items[i] = tensor
    return tuple(items)


class _Identity(Function):
    """``y_i = x_i`` for each tensor: forward changes nothing; backward hands the gradients
    to the module's :class:`_BackwardHook` and sends on what it returns
    (PyTorch's ``BackwardHookFunction``)."""

    @staticmethod
    def forward(ctx, *arrays, watch, side):
        ctx.watch, ctx.side = watch, side
        if side == "outputs":
            ctx.set_materialize_grads(False)  # an output the loss did not use: None, as PyTorch's grad_output
        return arrays

    @staticmethod
    def backward(ctx, *grads):
        if ctx.side == "outputs":
            return ctx.watch.on_grad_outputs(grads)
        return ctx.watch.on_grad_inputs(grads)
