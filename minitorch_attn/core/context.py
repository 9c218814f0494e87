"""The Context: what one call of a Function keeps for its backward.

``forward(ctx, ...)`` saves arrays with ``ctx.save_for_backward`` and may set any other
attribute (a shape, a dim, a flag); ``backward(ctx, ...)`` reads them back. The engine
(:mod:`.autograd`) checks them for in-place writes before the backward runs
(:meth:`Context.kept`, :mod:`.inplace`) and frees them after it (:meth:`Context.release`)
unless ``retain_graph=True``.
"""

from __future__ import annotations


class Context:
    """What one call of a Function keeps for its backward.

    Attributes:
        xp: the array namespace of the inputs (NumPy, CuPy or array-api-strict).
        backend: the :class:`~minitorch_attn.backend.Backend` (for erf, index_add, random).
        needs_input_grad: a bool per positional argument of ``forward``.
        saved_tensors: the arrays given to :meth:`save_for_backward` (raises after release).
    Any other attribute (a shape, a dim, a flag) may be set freely in ``forward``.
    """

    def __init__(self, backend, needs_input_grad):
        self.backend = backend
        self.xp = backend.xp
        self.needs_input_grad = needs_input_grad
        self._saved = ()
        self._released = False
        self._versions = ()  # (tensor, its version counter, the version it had), see inplace.record_versions

    materialize_grads = True

    def set_materialize_grads(self, value):
        """Whether backward gets zeros (True, the default) or None (False) for an output
        that received no gradient, as ``torch.autograd.Function``'s ``ctx.set_materialize_grads``."""
        self.materialize_grads = bool(value)

    def save_for_backward(self, *arrays):
        """Keep arrays for the backward; they are freed after it unless ``retain_graph``."""
        self._saved = arrays

    @property
    def saved_tensors(self):
        if self._released:
            raise RuntimeError(
                "Trying to backward through the graph a second time (or to read saved arrays "
                "after they were freed). Pass retain_graph=True to the first backward() call "
                "if you need to backward through the graph twice."
            )
        return self._saved

    def kept(self):
        """Everything this call keeps for its backward: the saved arrays, then the value of
        every attribute its forward set (what the engine checks for in-place writes)."""
        if len(vars(self)) == len(_CONTEXT_OWN):  # speed: most forwards set nothing else
            return self._saved
        return (*self._saved, *(v for k, v in vars(self).items() if k not in _CONTEXT_OWN))

    def release(self):
        """Drop the saved arrays and any other array attributes kept for backward."""
        self._saved = ()
        self._versions = ()
        self._released = True
        attributes = vars(self)
        if len(attributes) > len(_CONTEXT_OWN):  # speed: most forwards set nothing else
            for key in [key for key in attributes if key not in _CONTEXT_OWN and _is_array(attributes[key])]:
                del attributes[key]


_CONTEXT_OWN = frozenset(("backend", "xp", "needs_input_grad", "_saved", "_released", "_versions"))
"""The attributes every Context has; any other one was set by a forward."""


def _is_array(value):
    """Whether ``value`` is an array of a backend (what :meth:`Context.release` drops)."""
    return hasattr(value, "__array_namespace__") or type(value).__module__.split(".")[0] in ("numpy", "cupy")
