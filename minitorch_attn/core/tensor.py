"""``Tensor``: one backend array plus what autograd needs (the factories are in :mod:`.factories`).

A Tensor wraps an array of its device's namespace (``tensor.data``). Arithmetic on Tensors calls
the differentiable operations of :mod:`.ops` and :mod:`.shape_ops`; comparisons give bool Tensors
that carry no gradient. Dtypes are named by strings (``"float32"``, ``"int64"``, ``"bool"``, ...), also exported as
``minitorch_attn.float32`` and so on; float32 is the default, as in PyTorch.
"""

from __future__ import annotations

import numbers
import re
import warnings
from typing import Any

import numpy

from . import autograd
from .backend import backend_of, get_backend
from .dtypes import (  # noqa: F401 (re-exported: the package imports them from here)
    DTYPES,
    FLOAT_DTYPES,
    Dims,
    Scalar,
    _is_int,
    _shape_args,
    _shape_args_allow_minus_one,
    bool_,
    dtype_name,
    float32,
    float64,
    float_result_dtype,
    get_default_dtype,
    int32,
    int64,
    result_dtype,
    set_default_dtype,
)
from .hooks import NON_LEAF_GRAD_WARNING, HookMethods
from .inplace import InPlaceMethods


class Tensor(InPlaceMethods, HookMethods):
    """An n-dimensional array with an optional gradient.

    Attributes:
        data: the backend array (NumPy, CuPy or array-api-strict).
        requires_grad: whether operations on it are recorded for :meth:`backward`.
        grad: a Tensor of the same shape and dtype, filled by backward (leaves, and computed
            tensors after :meth:`retain_grad`; see :mod:`~minitorch_attn.core.hooks` for ``register_hook``).
        grad_fn: the graph node that produced it (None for leaves).
        _version: the number of in-place writes so far (see :mod:`minitorch_attn.core.inplace`).

    Build tensors with :func:`tensor`, :func:`zeros`, :func:`randn` and friends: the constructor only wraps an array.

    Raises:
        TypeError: if ``data`` is not an array of a supported backend and dtype, if ``requires_grad``
            is not a bool or is asked of an integer or bool tensor, or if ``grad`` is set to anything
            but None or a Tensor like this one (a wrong shape is a ValueError).
    """

    __array_priority__ = 1000  # numpy_array * tensor -> Tensor.__rmul__
    __hash__ = object.__hash__  # comparisons return tensors, identity stays the hash

    def __init__(self, data: Any, requires_grad: bool = False) -> None:
        backend_of(data)  # raises TypeError for anything that is not a backend array
        name = dtype_name(data.dtype)  # ... and for a dtype outside DTYPES (uint8, float16, ...)
        self.data = data
        self._grad = None  # speed: not through the setter, which checks a gradient
        self.grad_fn = None
        self._output_nr = 0
        self._version_counter = [0]  # shared with views; see _version
        self._requires_grad = requires_grad is True and name in FLOAT_DTYPES  # speed: the usual case
        if requires_grad and not self._requires_grad:
            self.requires_grad_(requires_grad)  # raises the error that fits
        elif requires_grad is not False and requires_grad is not True:
            raise TypeError(f"requires_grad must be True or False, got {requires_grad!r}")

    # ---- description ------------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.data.shape)

    @property
    def ndim(self) -> int:
        return self.data.ndim

    @property
    def dtype(self) -> str:
        return dtype_name(self.data.dtype)

    @property
    def device(self) -> str:
        return backend_of(self.data).name

    @property
    def is_leaf(self) -> bool:
        return self.grad_fn is None

    def size(self, dim: int | None = None) -> tuple[int, ...] | int:
        return self.shape if dim is None else self.shape[dim]

    def numel(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n

    def dim(self) -> int:
        return self.ndim

    def __len__(self):
        if self.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def __iter__(self):
        """The sub-tensors along the first dim (each one a differentiable slice)."""
        if self.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(self.shape[0]))

    def __repr__(self):
        body = repr(self.numpy()).replace("array(", "tensor(", 1)
        body = re.split(r",\s*dtype=", body[: body.rfind(")")])[0]  # NumPy may put dtype= on its own line
        extras = [f"device='{self.device}'", f"dtype={self.dtype}"]
        if self.grad_fn is not None:
            extras.append(f"grad_fn={self.grad_fn!r}")
        elif self.requires_grad:
            extras.append("requires_grad=True")
        return f"{body}, {', '.join(extras)})"

    # ---- autograd ---------------------------------------------------------------------
    @property
    def grad(self) -> Tensor | None:
        """The gradient accumulated by :meth:`backward` (None until the first one). Read on a
        computed tensor that does not :meth:`retain_grad`, it warns as PyTorch does."""
        if self.grad_fn is not None and not self._retains_grad:
            warnings.warn(NON_LEAF_GRAD_WARNING, UserWarning, stacklevel=2)
        return self._grad

    @grad.setter
    def grad(self, value):
        """As in PyTorch, an assigned gradient is None or a Tensor of this tensor's shape,
        dtype and device, so that the next backward can add to it."""
        if value is not None:
            if not isinstance(value, Tensor):
                raise TypeError(f"grad must be None or a Tensor, got {type(value).__name__}")
            if value.shape != self.shape:
                raise ValueError(f"assigned grad has shape {value.shape}, but the tensor has shape {self.shape}")
            if value.dtype != self.dtype or value.device != self.device:
                raise TypeError(
                    f"assigned grad is {value.dtype} on '{value.device}', but the tensor is "
                    f"{self.dtype} on '{self.device}'"
                )
        self._grad = value

    @property
    def requires_grad(self) -> bool:
        """Whether operations on it are recorded (set with :meth:`requires_grad_`)."""
        return self._requires_grad

    @requires_grad.setter
    def requires_grad(self, value):
        self.requires_grad_(value)

    def requires_grad_(self, requires_grad: bool = True) -> Tensor:
        """Set ``requires_grad`` in place and return self, as PyTorch.

        Raises:
            TypeError: for a value that is not a bool, or True for an int or bool tensor.
            RuntimeError: for False on a computed (non-leaf) tensor: its gradient path
                cannot be dropped (PyTorch's error; use ``.detach()`` instead).
        """
        if not isinstance(requires_grad, bool):
            raise TypeError(f"requires_grad must be True or False, got {requires_grad!r}")
        if requires_grad and self.dtype not in FLOAT_DTYPES:
            raise TypeError(f"only floating-point tensors can require gradients, not {self.dtype}")
        if not requires_grad and self.grad_fn is not None:
            raise RuntimeError(
                "you can only change requires_grad flags of leaf variables. If you want to use "
                "a computed variable in a subgraph that doesn't require differentiation use "
                "var_no_grad = var.detach()."
            )
        self._requires_grad = requires_grad
        return self

    @property
    def _version(self):
        """How many in-place writes this tensor (or a view of its memory) has had, as
        PyTorch's ``Tensor._version``. Backward checks it for every tensor it saved."""
        return self._version_counter[0]

    def backward(self, grad: Tensor | None = None, retain_graph: bool = False) -> None:
        """Accumulate d(self)/d(leaf) into ``leaf.grad`` for every leaf that requires grad.

        Args:
            grad: the upstream gradient, shaped like ``self``; may be omitted only when
                ``self`` has a single element (then it is 1).
            retain_graph: keep saved arrays so that backward can run through the graph again.

        Raises:
            RuntimeError: if ``self`` does not require grad, or its graph was already freed.
            ValueError: if ``grad`` is missing for a tensor with more than one element, or
                its shape does not match.
        """
        autograd.run_backward([(self, self._seed_gradient(grad))], retain_graph=retain_graph)

    def _seed_gradient(self, grad):
        """Check an upstream gradient for ``backward`` and return it as an array."""
        if not self.requires_grad:
            raise RuntimeError("backward() on a tensor that does not require grad and has no grad_fn")
        xp = backend_of(self.data).xp
        if grad is None:
            if self.numel() != 1:
                raise ValueError(
                    f"backward() without a grad argument needs a single-element tensor (a loss), "
                    f"but this one has shape {self.shape}; pass grad= of that shape"
                )
            return xp.ones_like(self.data)
        if isinstance(grad, Tensor):
            if grad.device != self.device:
                raise ValueError(f"backward(): grad is on '{grad.device}' but the tensor is on '{self.device}'")
            grad_array = grad.data
        else:
            try:
                grad_array = get_backend(self.device).asarray(grad)
                dtype_name(grad_array.dtype)
            except (TypeError, ValueError):
                raise TypeError(
                    f"backward(): grad must be a Tensor or an array of numbers shaped like the "
                    f"tensor {self.shape}, got {type(grad).__name__}"
                ) from None
        if tuple(grad_array.shape) != self.shape:
            raise ValueError(f"backward(): grad has shape {tuple(grad_array.shape)}, expected {self.shape}")
        if grad_array.dtype != self.data.dtype:
            grad_array = xp.astype(grad_array, self.data.dtype)
        return grad_array

    def clone(self) -> Tensor:
        """A copy with its own memory and version counter; the gradient flows back to
        ``self`` (as ``torch.Tensor.clone``)."""
        return ops.Clone.apply(self)

    def detach(self) -> Tensor:
        """The same data, cut from the graph (no copy; the version counter is shared, as in
        PyTorch, so an in-place write to either is seen by a backward that saved the other)."""
        out = Tensor(self.data)
        out._version_counter = self._version_counter
        return out

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Forget this tensor's gradient (``grad = None``), or with ``set_to_none=False``
        fill it with zeros in place, as ``Module.zero_grad`` and ``Optimizer.zero_grad``
        do to each parameter (PyTorch's rule, used by both)."""
        if self.grad is not None and not set_to_none:
            self.grad = self.grad.detach().zero_()
        else:
            self.grad = None

    # ---- moving and converting --------------------------------------------------------
    def numpy(self) -> numpy.ndarray:
        """A NumPy array with this tensor's values (a copy off the device when needed)."""
        return backend_of(self.data).to_numpy(self.data)

    def tolist(self) -> Any:
        return self.numpy().tolist()

    def item(self) -> Scalar:
        """The value of a single-element tensor as a Python number."""
        if self.numel() != 1:
            raise ValueError(f"item() needs a single-element tensor, got shape {self.shape}")
        value = self.numpy().reshape(())
        return value.item()

    def to(self, device: str | None = None, dtype: str | None = None) -> Tensor:
        """Copy to another device (``"cpu"``, ``"cuda"``, ``"strict"``) and/or dtype.

        Moving between devices goes through host memory and is not differentiable;
        a dtype change on the same device is (see ``ops.Cast``)."""
        if isinstance(device, str) and device.split(":")[0] not in ("cpu", "cuda", "strict"):
            if device not in DTYPES:
                raise ValueError(f"to({device!r}): not a device (cpu, cuda, strict) nor a dtype ({', '.join(DTYPES)})")
            device, dtype = None, device  # .to("float64")
        out = self
        if device is not None and get_backend(device) is not backend_of(self.data):
            array = get_backend(device).asarray(self.numpy())
            out = Tensor(array, requires_grad=self.requires_grad and dtype is None)
        if dtype is not None and dtype_name(dtype) != out.dtype:
            out = ops.Cast.apply(out, dtype=dtype_name(dtype))
        return out

    def cpu(self) -> Tensor:
        return self.to("cpu")

    def cuda(self) -> Tensor:
        return self.to("cuda")

    def float(self) -> Tensor:
        return self.to(dtype=float32)

    def double(self) -> Tensor:
        return self.to(dtype=float64)

    def long(self) -> Tensor:
        return self.to(dtype=int64)

    def __float__(self):
        return float(self.item())

    def __int__(self):
        return int(self.item())

    def __bool__(self):
        return bool(self.item())

    # ---- operators (the differentiable ones live in ops.py) ----------------------------
    def __add__(self, other: Tensor | Scalar) -> Tensor:
        return _binary(ops.Add, self, other)

    def __radd__(self, other: Tensor | Scalar) -> Tensor:
        return _binary(ops.Add, other, self)

    def __sub__(self, other: Tensor | Scalar) -> Tensor:
        return _binary(ops.Sub, self, other)

    def __rsub__(self, other: Tensor | Scalar) -> Tensor:
        return _binary(ops.Sub, other, self)

    def __mul__(self, other: Tensor | Scalar) -> Tensor:
        return _binary(ops.Mul, self, other)

    def __rmul__(self, other: Tensor | Scalar) -> Tensor:
        return _binary(ops.Mul, other, self)

    def __truediv__(self, other: Tensor | Scalar) -> Tensor:
        return _binary(ops.Div, self, other)

    def __rtruediv__(self, other: Tensor | Scalar) -> Tensor:
        return _binary(ops.Div, other, self)

    def __neg__(self) -> Tensor:
        if self.dtype == "bool":
            raise TypeError("-x: negation of a bool tensor is not supported, as in PyTorch; use ~x (logical not)")
        return ops.Neg.apply(self)

    def __pow__(self, exponent: Tensor | Scalar) -> Tensor:
        return power.pow(self, exponent)

    def __rpow__(self, base: Scalar) -> Tensor:
        if not _is_operand(base):
            return NotImplemented
        return power.pow(base, self)

    def __matmul__(self, other: Tensor | Scalar) -> Tensor:
        return _binary(ops.MatMul, self, other)

    def __rmatmul__(self, other: Tensor | Scalar) -> Tensor:
        return _binary(ops.MatMul, other, self)

    def __getitem__(self, key: Any) -> Tensor:
        return shape_ops.getitem(self, key)

    def _compare(self, other, op):
        other = other.data if isinstance(other, Tensor) else other
        return Tensor(op(self.data, other))

    def __eq__(self, other):
        return self._compare(other, lambda a, b: a == b)

    def __ne__(self, other):
        return self._compare(other, lambda a, b: a != b)

    def __lt__(self, other):
        return self._compare(other, lambda a, b: a < b)

    def __le__(self, other):
        return self._compare(other, lambda a, b: a <= b)

    def __gt__(self, other):
        return self._compare(other, lambda a, b: a > b)

    def __ge__(self, other):
        return self._compare(other, lambda a, b: a >= b)

    def __invert__(self):
        if self.dtype != bool_:
            raise TypeError("~ is defined for bool tensors only")
        return Tensor(~self.data)

    def __and__(self, other):
        return self._compare(other, lambda a, b: a & b)

    def __or__(self, other):
        return self._compare(other, lambda a, b: a | b)

    # ---- methods that mirror torch.Tensor ---------------------------------------------
    def exp(self) -> Tensor:
        return ops.Exp.apply(self)

    def log(self) -> Tensor:
        return ops.Log.apply(self)

    def sqrt(self) -> Tensor:
        return ops.Sqrt.apply(self)

    def tanh(self) -> Tensor:
        return ops.Tanh.apply(self)

    def abs(self) -> Tensor:
        return ops.Abs.apply(self)

    def clamp(self, min: Tensor | Scalar | None = None, max: Tensor | Scalar | None = None) -> Tensor:
        return minmax.clamp(self, min=min, max=max)

    def sum(self, dim: Dims = None, keepdim: bool = False) -> Tensor:
        return reductions.Sum.apply(self, dim=dim, keepdim=keepdim)

    def mean(self, dim: Dims = None, keepdim: bool = False) -> Tensor:
        return reductions.mean(self, dim=dim, keepdim=keepdim)

    def max(self, dim: Dims = None, keepdim: bool = False) -> Tensor:
        """Largest values along ``dim`` (like ``torch.amax``: values only, no indices)."""
        return reductions.Max.apply(self, dim=dim, keepdim=keepdim)

    amax = max

    def var(
        self, dim: Dims = None, keepdim: bool = False, correction: Scalar = 1, unbiased: bool | None = None
    ) -> Tensor:
        return reductions.var(self, dim=dim, keepdim=keepdim, correction=correction, unbiased=unbiased)

    def min(self, dim: Dims = None, keepdim: bool = False) -> Tensor:
        """Smallest values along ``dim`` (like ``torch.amin``: values only, no indices)."""
        return reductions.min(self, dim=dim, keepdim=keepdim)

    amin = min

    def std(
        self, dim: Dims = None, keepdim: bool = False, correction: Scalar = 1, unbiased: bool | None = None
    ) -> Tensor:
        return reductions.std(self, dim=dim, keepdim=keepdim, correction=correction, unbiased=unbiased)

    def argmax(self, dim: Dims = None, keepdim: bool = False) -> Tensor:
        ops._check_keepdim(keepdim)
        xp = backend_of(self.data).xp
        return Tensor(xp.argmax(self.data, axis=dim, keepdims=keepdim))

    def argmin(self, dim: Dims = None, keepdim: bool = False) -> Tensor:
        ops._check_keepdim(keepdim)
        xp = backend_of(self.data).xp
        return Tensor(xp.argmin(self.data, axis=dim, keepdims=keepdim))

    def reshape(self, *shape: int | tuple[int, ...]) -> Tensor:
        return shape_ops.Reshape.apply(self, shape=_shape_args_allow_minus_one(shape))

    view = reshape

    def flatten(self, start_dim: int = 0, end_dim: int = -1) -> Tensor:
        return shape_ops.flatten(self, start_dim, end_dim)

    def transpose(self, dim0: int, dim1: int) -> Tensor:
        return shape_ops.Transpose.apply(self, dim0=dim0, dim1=dim1)

    @property
    def T(self) -> Tensor:
        return shape_ops.Permute.apply(self, dims=tuple(reversed(range(self.ndim))))

    def permute(self, *dims: int | tuple[int, ...]) -> Tensor:
        return shape_ops.Permute.apply(self, dims=_shape_args_allow_minus_one(dims))

    def unsqueeze(self, dim: int) -> Tensor:
        return shape_ops.unsqueeze(self, dim)

    def squeeze(self, dim: Dims = None) -> Tensor:
        return shape_ops.squeeze(self, dim)

    def expand(self, *sizes: int | tuple[int, ...]) -> Tensor:
        return shape_ops.expand(self, _shape_args_allow_minus_one(sizes))

    def masked_fill(self, mask: Tensor, value: Tensor | Scalar) -> Tensor:
        return shape_ops.masked_fill(self, mask, value)

    def split(self, split_size: int | list[int], dim: int = 0) -> tuple[Tensor, ...]:
        return shape_ops.split(self, split_size, dim)

    def chunk(self, chunks: int, dim: int = 0) -> tuple[Tensor, ...]:
        return shape_ops.chunk(self, chunks, dim)

    def gather(self, dim: int, index: Tensor) -> Tensor:
        return indexing.gather(self, dim, index)

    def contiguous(self) -> Tensor:
        return self


def _is_operand(value):
    """What arithmetic takes beside a Tensor: a real number or an array of a backend."""
    if isinstance(value, (Tensor, numbers.Real)):
        return True
    try:
        backend_of(value)
        return True
    except TypeError:
        return False


def _binary(function, a, b):
    """``function.apply(a, b)`` for an operator, or NotImplemented when an operand is not a
    number (a list, a string, None, a complex), so that Python raises its TypeError
    "unsupported operand type(s)", as PyTorch does."""
    if not (_is_operand(a) and _is_operand(b)):
        return NotImplemented
    return function.apply(a, b)


# The one import cycle of the package, and it stays inside core/: a Tensor's operators call
# the operations, and the operations make Tensors. The operations are imported last, once
# Tensor exists; core/__init__.py imports the modules in the order that makes this work.
from . import indexing, minmax, ops, power, reductions, shape_ops  # noqa: E402
