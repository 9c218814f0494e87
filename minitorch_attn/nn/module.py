"""Parameters and containers: :class:`Parameter`, :class:`Module`, :class:`ModuleList`, :class:`Sequential`.

A :class:`Module` finds its parameters and sub-modules by attribute assignment, exactly as
``torch.nn.Module`` does; ``state_dict`` / ``load_state_dict`` name them by dotted path.
"""

from __future__ import annotations

import contextlib
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, NamedTuple

from ..core.backend import backend_of, get_backend
from ..core.factories import tensor
from ..core.tensor import Tensor, _is_int
from .hooks import ModuleHookMethods, call_with_hooks


class IncompatibleKeys(NamedTuple):
    """What :meth:`Module.load_state_dict` returns, as PyTorch's ``_IncompatibleKeys``."""

    missing_keys: list
    unexpected_keys: list


class Parameter(Tensor):
    """A Tensor that is a learnable weight of a Module: it requires a gradient and is
    listed by :meth:`Module.parameters`.

    ``Parameter(t)`` shares ``t``'s array (no copy).
    Raises:
        TypeError: if ``data`` is not a floating-point Tensor.
    """

    def __init__(self, data: Tensor, requires_grad: bool = True) -> None:
        if not isinstance(data, Tensor):
            raise TypeError(f"Parameter needs a Tensor, got {type(data).__name__}")
        super().__init__(data.data, requires_grad=requires_grad)
        self._version_counter = data._version_counter  # one array, one counter

    def __repr__(self):
        return "Parameter containing:\n" + super().__repr__()


class Module(ModuleHookMethods):
    """Base class of every layer (as ``torch.nn.Module``).

    Subclasses call ``super().__init__()`` first, assign Parameters and Modules as
    attributes, and define ``forward``; ``module(x)`` calls ``forward(x)``, with the
    module's forward and backward hooks around it when it has some
    (``register_forward_hook``, ``register_full_backward_hook``, ...: see :mod:`~minitorch_attn.nn.hooks`).

    Attributes:
        training: True after :meth:`train` (the default), False after :meth:`eval`;
            Dropout reads it.
    """

    training: bool
    _parameters: OrderedDict[str, Parameter]
    _modules: OrderedDict[str, Module]

    def __init__(self) -> None:
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_modules", OrderedDict())
        object.__setattr__(self, "training", True)
        self._init_hooks()

    def __setattr__(self, name, value):
        if "_parameters" not in self.__dict__:
            raise RuntimeError(
                f"{type(self).__name__}.__init__ must call super().__init__() before assigning attributes"
            )
        self._parameters.pop(name, None)
        self._modules.pop(name, None)
        if isinstance(value, Parameter):
            self._parameters[name] = value
        elif isinstance(value, Module):
            self._modules[name] = value
        object.__setattr__(self, name, value)

    def __delattr__(self, name):
        self._parameters.pop(name, None)
        self._modules.pop(name, None)
        object.__delattr__(self, name)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} has no forward()")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self._forward_pre_hooks or self._forward_hooks or self._backward_hooks or self._backward_pre_hooks:
            return call_with_hooks(self, args, kwargs)
        return self.forward(*args, **kwargs)

    # ---- walking the tree ---------------------------------------------------------------
    def named_modules(self, prefix: str = "") -> Iterator[tuple[str, Module]]:
        """Yield ``(dotted name, module)`` for this module and every module below it."""
        yield prefix, self
        for name, child in self._modules.items():
            yield from child.named_modules(f"{prefix}.{name}" if prefix else name)

    def modules(self) -> list[Module]:
        return [m for _, m in self.named_modules()]

    def children(self) -> list[Module]:
        return list(self._modules.values())

    def named_parameters(self) -> Iterator[tuple[str, Parameter]]:
        """Yield ``(dotted name, Parameter)``, each shared parameter once (the first name
        wins: with tied weights ``lm_head.weight`` is ``token_embedding.weight``)."""
        seen = set()
        for prefix, module in self.named_modules():
            for name, p in module._parameters.items():
                if id(p) not in seen:
                    seen.add(id(p))
                    yield (f"{prefix}.{name}" if prefix else name), p

    def _every_parameter_name(self):
        """Yield ``(dotted name, Parameter)`` under every name, a shared parameter under each
        of its names (what :meth:`state_dict` lists, as PyTorch's)."""
        for prefix, module in self.named_modules():
            for name, p in module._parameters.items():
                yield (f"{prefix}.{name}" if prefix else name), p

    def parameters(self) -> list[Parameter]:
        return [p for _, p in self.named_parameters()]

    def num_parameters(self) -> int:
        """The number of learnable scalars (shared parameters counted once)."""
        return sum(p.numel() for p in self.parameters())

    # ---- modes and gradients ------------------------------------------------------------
    def train(self, mode: bool = True) -> Module:
        """Set ``training`` to ``mode`` in this module and every module below it; returns self.

        Raises:
            ValueError: for a ``mode`` that is not True or False (PyTorch's check and error:
                ``train("eval")`` would otherwise read as True).
        """
        if not isinstance(mode, bool):
            raise ValueError(f"training mode is expected to be boolean, got {mode!r}")
        for module in self.modules():
            object.__setattr__(module, "training", mode)
        return self

    def eval(self) -> Module:
        return self.train(False)

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Forget every parameter's gradient (``grad = None``, PyTorch's default), or with
        ``set_to_none=False`` fill each with zeros in place."""
        for p in self.parameters():
            p.zero_grad(set_to_none)

    def to(self, device: str) -> Module:
        """Move every parameter to ``device`` in place (the Parameter objects stay the
        same, so an optimizer made before still holds them); returns self."""
        backend = get_backend(device)
        for p in self.parameters():
            if backend_of(p.data) is not backend:
                p.data = backend.asarray(p.numpy())
                p.grad = None
        return self

    # ---- saving and loading -------------------------------------------------------------
    def state_dict(self) -> OrderedDict[str, Tensor]:
        """An ordered ``{dotted name: Tensor}`` of every parameter (detached, sharing memory).
        A shared parameter is listed under each of its names, as PyTorch lists it (a GPT
        with tied weights has ``token_embedding.weight`` and ``lm_head.weight``, one array)."""
        return OrderedDict((name, p.detach()) for name, p in self._every_parameter_name())

    def load_state_dict(self, state_dict: Mapping[str, Tensor], strict: bool = True) -> IncompatibleKeys:
        """Copy values into the parameters, on their device and in their dtype.

        Args:
            state_dict: ``{name: Tensor or array}`` as made by :meth:`state_dict` (or by
                PyTorch's). A shared parameter is loaded from any of its names (a later one
                wins, as PyTorch); it is missing only when none is given (PyTorch asks for
                every name: a state dict listing it once, as this package wrote before,
                still loads).
            strict: if True, missing and unexpected keys are errors.
        Returns:
            ``IncompatibleKeys(missing_keys, unexpected_keys)``, two lists of names, as
            PyTorch (empty in strict mode, which raises otherwise).
        Raises:
            KeyError: listing every missing and unexpected key (strict mode).
            ValueError: listing every key whose shape differs, with both shapes.
            TypeError: for a value that is neither a Tensor nor an array.
        """
        own = dict(self._every_parameter_name())
        for name, value in state_dict.items():
            if not (isinstance(value, Tensor) or hasattr(value, "shape") and hasattr(value, "dtype")):
                raise TypeError(f"load_state_dict: {name} must be a Tensor or an array, got {type(value).__name__}")
        given = {id(p) for k, p in own.items() if k in state_dict}
        missing = [k for k, p in own.items() if id(p) not in given]  # a shared one: under any of its names
        unexpected = [k for k in state_dict if k not in own]
        wrong_shape = [
            f"{k}: checkpoint {tuple(state_dict[k].shape)}, model {own[k].shape}"
            for k in own
            if k in state_dict and tuple(state_dict[k].shape) != own[k].shape
        ]
        if wrong_shape:
            raise ValueError(f"load_state_dict: mis-shaped parameters: {'; '.join(wrong_shape)}")
        if strict and (missing or unexpected):
            raise KeyError(f"load_state_dict: missing keys {missing or 'none'}; unexpected keys {unexpected or 'none'}")
        for name, p in own.items():
            if name in state_dict:
                value = state_dict[name]
                host = value.numpy() if isinstance(value, Tensor) else backend_of(value).to_numpy(value)
                p.data = tensor(host, dtype=p.dtype, device=p.device).data  # a copy: never shared
        return IncompatibleKeys(missing, unexpected)

    # ---- printing -------------------------------------------------------------------------
    def extra_repr(self) -> str:
        return ""

    def __repr__(self):
        """``Name(extra)`` for a leaf; otherwise the extra line and one line per child, indented."""
        children = [f"({name}): " + repr(child).replace("\n", "\n  ") for name, child in self._modules.items()]
        if not children:
            return f"{type(self).__name__}({self.extra_repr()})"
        lines = ([self.extra_repr()] if self.extra_repr() else []) + children
        return f"{type(self).__name__}(\n  " + "\n  ".join(lines) + "\n)"


@contextlib.contextmanager
def in_eval_mode(module: Module) -> Iterator[Module]:
    """``with in_eval_mode(model): ...`` runs the block with ``model.eval()`` (no dropout) and
    then puts back the mode the model had, ``model.train(previous)``, also when the block
    raises (an error, or Ctrl-C while sampling): a model left in eval mode would go on
    training without its dropout, and nothing would say so.

    Raises:
        TypeError: if ``module`` is not a :class:`Module`.
    """
    if not isinstance(module, Module):
        raise TypeError(f"in_eval_mode needs a Module, got {type(module).__name__}")
    was_training = module.training
    module.eval()
    try:
        yield module
    finally:
        module.train(was_training)


class ModuleList(Module):
    """A list of modules whose parameters are registered (a plain list would hide them)."""

    def __init__(self, modules: Iterable[Module] = ()) -> None:
        super().__init__()
        for m in modules:
            self.append(m)

    def append(self, module: Module) -> ModuleList:
        setattr(self, str(len(self._modules)), module)
        return self

    def __iter__(self):
        return iter(self._modules.values())

    def __len__(self):
        return len(self._modules)

    def __getitem__(self, i):
        return list(self._modules.values())[i]


class Sequential(ModuleList):
    """Modules applied one after another: ``Sequential(a, b)(x) == b(a(x))``."""

    def __init__(self, *modules: Module) -> None:
        super().__init__(modules)

    def forward(self, x: Tensor) -> Tensor:
        for m in self:
            x = m(x)
        return x


def _check_positive_int(name, value, allow_zero=False):
    """A size (features, heads, layers, ...): an int > 0 (>= 0 with ``allow_zero``, for the
    feature sizes PyTorch lets be empty), Python's or NumPy's; returned as a Python int."""
    if not _is_int(value) or value < (0 if allow_zero else 1):
        raise ValueError(f"{name} must be a {'non-negative' if allow_zero else 'positive'} int, got {value!r}")
    return int(value)


def _check_tensor(name, value):
    """The check at a module's entry: ``value`` must be a Tensor (not a list, an array or None)."""
    if not isinstance(value, Tensor):
        raise TypeError(f"{name}: expected a Tensor, got {type(value).__name__}")
