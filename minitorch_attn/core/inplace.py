"""In-place writes of a Tensor: ``zero_``, ``fill_``, ``copy_``, ``add_``, ``sub_``, ``mul_``,
``div_``, ``clamp_`` and ``x[key] = value``, with PyTorch's rules.

Each one writes into the tensor's own array (views of it see the change) and adds 1 to
its version (:attr:`Tensor._version`), which backward checks for every tensor it saved,
so a tensor changed after a forward used it gives PyTorch's "modified by an inplace
operation" error instead of a wrong gradient.

The rules, as PyTorch's:

- in grad mode, a leaf that requires grad (a parameter) refuses in-place writes: the
  graph would lose the value its gradient is taken at. Inside ``no_grad()`` the write is
  allowed (how an optimizer or an initializer changes parameters);
- in grad mode, the result of a write that involves a tensor requiring grad is recorded:
  ``a.add_(b)`` becomes ``a = a + b`` in the graph (the tensor object stays the same and
  takes the new node as its ``grad_fn``; the node works on a copy of ``a``'s old values);
  a node recorded *before* the write that saved ``a`` still sees it changed and raises;
- in grad mode, a computed tensor overwritten with constants (``zero_``, ``fill_``, a
  ``copy_`` from a tensor that requires no grad) becomes a constant too: nothing flows
  back through it (PyTorch keeps ``requires_grad=True`` and sends zeros instead);
- the result must keep the tensor's shape and dtype: a float value written into an int
  tensor is a RuntimeError, a broadcast that would grow the tensor too.

``x[key] = value`` records no graph: with a graph involved it raises (build the tensor
with ``where`` or ``cat`` instead).

The other half of the bookkeeping is here too: when a call is recorded, the engine notes
the version of every tensor whose memory it kept for its backward
(:func:`record_versions`), and before that backward runs it checks that none has changed
(:func:`check_versions`).
"""

from __future__ import annotations

from . import grad_mode
from .backend import backend_of


class InPlaceMethods:
    """The in-place methods of :class:`~minitorch_attn.core.tensor.Tensor` (a base class of it)."""

    def _write(self, name, compute):
        """Write ``compute(self)`` (a Tensor, or an array of constants) into ``self``'s array;
        see the module docstring."""
        recording = grad_mode._mode.enabled
        if recording and self.requires_grad and self.grad_fn is None:
            raise RuntimeError(
                f"{name}: a leaf Variable that requires grad is being used in an in-place "
                f"operation (wrap the write in `with no_grad():`)."
            )
        source = self._stand_in() if recording else self
        result = compute(source)
        if not isinstance(result, InPlaceMethods):
            result = self._wrap(result)
        if result.shape != self.shape:
            raise RuntimeError(
                f"{name}: output with shape {list(self.shape)} doesn't match the broadcast shape {list(result.shape)}"
            )
        if result.dtype != self.dtype:
            if result.dtype in ("float32", "float64") and self.dtype not in ("float32", "float64"):
                raise RuntimeError(
                    f"{name}: result type {result.dtype} can't be cast to the desired output type {self.dtype}"
                )
            result = result.to(dtype=self.dtype)
        self.data[...] = result.data
        self._version_counter[0] += 1
        retained = self._retains_grad and (result.requires_grad or recording)
        if retained:  # retain_grad keeps the new value's gradient, as PyTorch
            self.grad_fn.hooks[self._output_nr].retain = None
            self._retains_grad = False
        if result.requires_grad:
            self.grad_fn, self._output_nr, self._requires_grad = result.grad_fn, result._output_nr, True
        elif recording and self.grad_fn is not None:  # overwritten by constants: no path back
            self.grad_fn, self._output_nr, self._requires_grad = None, 0, False
        if retained and self.grad_fn is not None:
            self.retain_grad()
        return self

    def _wrap(self, array):
        """``array`` as a Tensor that requires no grad."""
        out = self.detach()
        out.data = array
        out._version_counter = [0]
        return out

    def _stand_in(self):
        """A Tensor that is ``self`` before the write, for the graph: its ``grad_fn`` (the new
        node must not take ``self``, its own output, as input) and a copy of its values with
        a version of their own, so that what the new node saves is not overwritten by the
        write (PyTorch saves the original too: ``a.mul_(b)`` sends ``a``'s old values to b)."""
        old = object.__new__(type(self))
        old.__dict__.update(self.__dict__)
        old.data = backend_of(self.data).xp.asarray(self.data, copy=True)
        old._version_counter = [0]
        return old

    def zero_(self):
        """Fill with zeros in place; returns self."""
        return self.fill_(0)

    def fill_(self, value):
        """Fill with the number ``value`` in place; returns self."""
        xp = backend_of(self.data).xp
        return self._write("fill_", lambda t: xp.full_like(self.data, value))

    def copy_(self, src):
        """Copy ``src`` (broadcast to this shape, cast to this dtype) in place; returns self.
        In grad mode the gradient flows to ``src``, as PyTorch."""
        if not isinstance(src, InPlaceMethods):
            raise TypeError(f"copy_: src must be a Tensor, got {type(src).__name__}")
        return self._write("copy_", lambda t: src.expand(*self.shape).to(dtype=self.dtype))

    def add_(self, other):
        """``self += other`` in place; returns self."""
        return self._write("add_", lambda t: t + other)

    def sub_(self, other):
        """``self -= other`` in place; returns self."""
        return self._write("sub_", lambda t: t - other)

    def mul_(self, other):
        """``self *= other`` in place; returns self."""
        return self._write("mul_", lambda t: t * other)

    def div_(self, other):
        """``self /= other`` in place; returns self."""
        return self._write("div_", lambda t: t / other)

    def clamp_(self, min=None, max=None):
        """Clamp into ``[min, max]`` in place; returns self."""
        return self._write("clamp_", lambda t: t.clamp(min=min, max=max))

    def __setitem__(self, key, value):
        """``self[key] = value`` for the keys of indexing (ints, slices, ``...``, one integer
        tensor on the first axis); ``value`` a number or a Tensor broadcast to the place.

        Raises:
            RuntimeError: in grad mode, when ``self`` or ``value`` requires grad (no graph is
                recorded for it here; build the tensor with ``where`` or ``cat``).
        """
        value_requires_grad = getattr(value, "requires_grad", False)
        if grad_mode._mode.enabled and (self.requires_grad or value_requires_grad):
            raise RuntimeError(
                "x[key] = value on a tensor that requires grad, or with a value that does, "
                "records no graph here: inside `with no_grad():` it writes the values; to "
                "build a differentiable tensor use where() or cat()"
            )
        array = value.data if isinstance(value, InPlaceMethods) else value
        if isinstance(key, InPlaceMethods):
            key = key.data
        elif isinstance(key, tuple):
            key = tuple(k.data if isinstance(k, InPlaceMethods) else k for k in key)
        try:
            self.data[key] = array
        except (IndexError, TypeError, ValueError) as error:
            raise type(error)(
                f"cannot write a value of shape {getattr(value, 'shape', ())} into the "
                f"tensor of shape {self.shape} at {key!r}: {error}"
            ) from None
        self._version_counter[0] += 1


# ---- versions: what backward checks --------------------------------------------------------------
_NOT_MEMORY = frozenset((int, float, bool, str, tuple, type(None)))
"""speed: types of kept values that own no array memory (a shape, a flag, a number)."""


def _memory_root(array):
    """The array that owns ``array``'s memory (itself, or the base of a view)."""
    base = getattr(array, "base", None)
    while base is not None and base is not array and hasattr(base, "dtype"):
        array, base = base, getattr(base, "base", None)
    return array


def record_versions(kept, inputs, outputs):
    """The versions to remember for a recorded call: of every input or output Tensor whose
    memory the call ``kept`` for its backward (``Context.kept()``: its saved arrays and
    attributes), so that :func:`check_versions` can tell when an in-place write changed
    one since. Returns a tuple of ``(input index or None, the tensor or, for an output,
    its description, its version counter, the version it had)``.

    An in-place write (``add_``, ``zero_``, ``copy_``, ``x[i] = v``, an optimizer step)
    adds 1 to the version of the tensor it writes; views share one counter. Backward
    would otherwise read the new values and return a wrong gradient without a word.
    speed: about 3 µs per recorded call that saved something (see :func:`_owner`)."""
    if not kept:
        return ()  # speed: nothing kept (add, reshape, ...)
    versions, seen = [], set()  # seen: ids (a Tensor's == compares values)
    for value in kept:
        if type(value) in _NOT_MEMORY:  # speed: None, a shape, a flag, a number
            continue
        found = _owner(value, inputs, outputs)
        if found is None or id(found[1]) in seen:
            continue
        index, tensor = found
        seen.add(id(tensor))
        counter = tensor._version_counter
        # an input is kept by the node anyway; an output only by its description (no reference cycle)
        about = tensor if index is not None else (tensor._output_nr, tensor.dtype, tensor.shape)
        versions.append((index, about, counter, counter[0]))
    return tuple(versions)


def _owner(value, inputs, outputs):
    """``(index of the input, or None for an output; the Tensor)`` whose memory ``value``
    is or views, else None. speed: identity first (a saved input or output is that very
    array); the memory roots only for a saved view."""
    for tensor in outputs:
        if tensor.data is value:
            return None, tensor
    for index, tensor in enumerate(inputs):
        if isinstance(tensor, InPlaceMethods) and tensor.data is value:
            return index, tensor
    if getattr(value, "base", None) is None or not hasattr(value, "dtype"):
        return None  # memory of its own (or a number, a shape, a dtype)
    root = _memory_root(value)
    for index, tensor in enumerate(inputs):
        if isinstance(tensor, InPlaceMethods) and _memory_root(tensor.data) is root:
            return index, tensor
    for tensor in outputs:
        if _memory_root(tensor.data) is root:
            return None, tensor
    return None


def check_versions(node):
    """Raise if a tensor ``node`` saved for backward was written in place since its
    forward (PyTorch's error, with its wording, naming the operation and the tensor)."""
    for index, about, counter, version in node.ctx._versions:
        if counter[0] != version:
            if index is None:
                output_nr, dtype, shape = about
                what = f"{dtype} tensor of shape {shape}], which is output {output_nr} of {node!r},"
            else:
                made_by = "a leaf" if about.grad_fn is None else f"output {about._output_nr} of {about.grad_fn!r}"
                what = f"{about.dtype} tensor of shape {about.shape}], argument {index} of {node!r} ({made_by}),"
            raise RuntimeError(
                f"one of the variables needed for gradient computation has been modified by an inplace "
                f"operation: [{what} is at version {counter[0]}; expected version {version} instead. Hint: "
                f"an in-place write (an optimizer step, add_, zero_, copy_, x[i] = v) changed it after "
                f"the forward saved it; do the write after backward(), or write into a copy (.clone())"
            )
