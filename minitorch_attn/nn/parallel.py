"""Data parallelism on the threads of one process: :class:`SplitBatch`.

A training step's loss is a mean over the rows of a batch, so its gradient is the
weighted sum of the gradients of the batch's parts:

    L = (1/n) Σ_rows ℓ = Σ_i (n_i / n) L_i,   L_i the mean over part i's n_i rows
    ∂L/∂θ = Σ_i (n_i / n) ∂L_i/∂θ

Each part's forward and backward needs only the weights θ, so the parts can run at the
same time, one per thread: this is the data parallelism of multi-GPU training (Li et al.,
"PyTorch Distributed: Experiences on Accelerating Data Parallel Training",
arXiv:2006.15704, §2-3: each device computes the gradient of its share of the batch and
the gradients are summed), here across the cores of one CPU. The first part runs on the
model itself, each other part on its own **replica** of the model, made afresh for every
step: the same modules with the same attributes (the modes, the settings, any buffer),
whose Parameters are new leaf Tensors over the *same* arrays (nothing is copied; the
optimizer's in-place update reaches them all). So each part's backward accumulates into
its own ``.grad``, no two threads write one gradient, and once every part is done the
replicas' gradients are added to the model's in the order of the parts, with the
engine's own ``_accumulate``. If a part fails, the model's gradients are put back as
they were before the call, and the error is raised.

speed: on NumPy the matrix products and the large elementwise passes release the GIL,
so the parts of a step really run on different cores, each with one BLAS thread, and
everything between the products (the norms, softmax, the optimizer's bookkeeping ...)
runs on both cores too, where two BLAS threads inside one batch share the products
only. Each thread has a whole part's work (tens of milliseconds) to do, so a thread that
another program delays does not hold the other up at every product. The figures, for the
default GPT of ``minitorch-attn train``: ``benchmarks/README.md`` ("Training").

The parts round differently from the whole batch (a sum over 1024 rows is not the sum
of two sums over 512), so a step on two threads is not bit for bit the step on one; it is
the same on every run.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable

from ..core import autograd
from ..core.autograd import is_grad_enabled
from ..core.backend import backend_of
from ..core.tensor import Tensor
from ..speed import get_num_threads, run_on_threads
from .layers import Dropout, Embedding
from .module import Module, Parameter


class SplitBatch:
    """``loss_fn(model, x, y).backward()`` for a batch, computed in parts on threads.

    ``SplitBatch(model, loss_fn).backward(x, y)`` adds to each parameter's ``.grad`` the
    gradient of ``loss_fn(model, x, y)`` and returns that loss as a float, as
    ``loss.backward(); loss.item()`` would. The rows of the batch (the first axis of
    ``x`` and ``y``) are split into one part per thread of
    :func:`minitorch_attn.get_num_threads`, each part's loss weighted by its share of the
    rows (the module docstring has the derivation and its source).

    Args:
        model: the Module to train.
        loss_fn: ``loss_fn(model, x, y)`` -> a one-element float Tensor that is **a mean
            over the rows of x** (as ``cross_entropy`` with its default
            ``reduction="mean"``; the parts' weights are right for a mean only: not
            ``reduction="sum"``, and not ``cross_entropy`` with ``ignore_index`` or class
            ``weight``, a mean over the kept or weighted targets, whose share differs from
            part to part), that differentiates nothing but ``model``'s parameters, calls
            no ``backward`` itself and draws no random numbers (``F.dropout``); the
            model's forward must not change the model (a running statistic, a counter,
            a parameter made on first use): each part runs it once.

    Shapes: ``x (batch, ...)``, any dtype (token ids for a GPT); ``y (batch, ...)`` or None.

    The batch runs whole, on the calling thread, where a split could not help or would
    change what is computed: one thread, fewer than two rows, grad mode off, a device
    other than the CPU (CuPy and array-api-strict run in the calling thread), a Dropout
    of ``p > 0`` in training mode (the parts would draw their masks from the one
    generator in an order that depends on the threads' timing), an Embedding with
    ``max_norm`` (its forward rescales the shared weight in place), or hooks on a module
    or a parameter (each hook sees the whole batch once, as with ``loss.backward()``;
    a replica's parameters are new tensors, without the hooks).

    Raises:
        TypeError: if ``model`` is not a Module or ``loss_fn`` is not callable; from
            :meth:`backward`, if ``x`` is not a Tensor with a first axis or ``y`` is not
            a Tensor (or None).
        ValueError: from :meth:`backward`, if ``y`` has another number of rows than
            ``x``, or (on threads) if a part's loss depends on a Tensor that requires a
            gradient but is not one of the model's parameters (an input with
            ``requires_grad=True``, a weight held outside the model): the parts would
            write its ``.grad`` at once. Call ``loss.backward()`` on the whole batch then.
    """

    def __init__(self, model: Module, loss_fn: Callable[..., Tensor]) -> None:
        if not isinstance(model, Module):
            raise TypeError(f"SplitBatch: expected a Module, got {type(model).__name__}")
        if not callable(loss_fn):
            raise TypeError(f"SplitBatch: loss_fn must be callable, got {type(loss_fn).__name__}")
        self.model, self.loss_fn = model, loss_fn

    def parts(self, x: Tensor) -> list[tuple[int, int]]:
        """The row bounds ``[(start, stop), ...]`` that :meth:`backward` of ``x`` uses now."""
        if not isinstance(x, Tensor) or x.ndim == 0:
            raise TypeError(f"SplitBatch: expected a batch Tensor with rows on its first axis, got {x!r:.80}")
        rows = x.shape[0]
        count = min(get_num_threads(), rows)
        if count < 2 or backend_of(x.data).name != "cpu" or not is_grad_enabled() or self._runs_whole():
            return [(0, rows)]
        bounds = [rows * i // count for i in range(count + 1)]
        return list(zip(bounds, bounds[1:]))

    def backward(self, x: Tensor, y: Tensor | None = None) -> float:
        """Accumulate the gradient of ``loss_fn(model, x, y)`` into the parameters'
        ``.grad`` (as ``backward()`` does: zero them first if you do not want a sum);
        return the loss as a float."""
        parts = self.parts(x)
        if y is not None and (not isinstance(y, Tensor) or y.ndim == 0):
            raise TypeError(
                f"SplitBatch: expected targets y as a Tensor with rows on its first axis, or None, got {y!r:.80}"
            )
        if y is not None and y.shape[0] != x.shape[0]:
            raise ValueError(
                f"SplitBatch: x has {x.shape[0]} rows but y has {y.shape[0]}; expected one target row per input row"
            )
        if len(parts) == 1:
            loss = self.loss_fn(self.model, x, y)
            loss.backward()
            return loss.item()
        models = [self.model] + [_replica(self.model, {}) for _ in parts[1:]]  # part 0 on the model itself
        params = self.model.parameters()
        before = [p.grad for p in params]
        rows = x.shape[0]

        def part(model, start, stop):
            loss = self.loss_fn(model, x[start:stop], None if y is None else y[start:stop])
            _refuse_foreign_leaves(loss, model)
            share = (stop - start) / rows
            (loss * share).backward()  # ∂(share · L_i)/∂θ into this model's own .grad
            return share * loss.item()

        try:
            losses = run_on_threads(
                len(parts), [lambda m=m, a=a, b=b: part(m, a, b) for m, (a, b) in zip(models, parts)]
            )
        except BaseException:
            for p, grad in zip(params, before):
                p.grad = grad  # what part 0 added goes (the engine adds out of place)
            raise
        for p, *copies in zip(params, *(r.parameters() for r in models[1:]), strict=True):
            for q in copies:  # part by part: the same order, and rounding, every step
                if q.grad is not None:
                    autograd._accumulate(p, q.grad.data, backend_of(q.grad.data).xp)
        return sum(losses)

    def _runs_whole(self):
        return any(
            (isinstance(m, Dropout) and m.training and m.p > 0)
            or (isinstance(m, Embedding) and m.max_norm is not None)
            or m._forward_pre_hooks
            or m._forward_hooks
            or m._backward_pre_hooks
            or m._backward_hooks
            for m in self.model.modules()
        ) or any(p._backward_hooks for p in self.model.parameters())


def _replica(module, memo):
    """A copy of ``module`` for one part of a batch: each Parameter a new leaf over the
    same array and version counter (and the same ``requires_grad``), each sub-module a
    copy made the same way, every other attribute the module's own object. ``memo`` maps
    ids to the copies made so far, so that what appears twice (tied weights) is copied
    once."""
    if id(module) in memo:
        return memo[id(module)]
    twin = object.__new__(type(module))
    memo[id(module)] = twin
    state = dict(module.__dict__, _parameters=OrderedDict(), _modules=OrderedDict())
    for name, p in module._parameters.items():
        if id(p) not in memo:
            memo[id(p)] = Parameter(p, requires_grad=p.requires_grad)
        state["_parameters"][name] = state[name] = memo[id(p)]
    for name, child in module._modules.items():
        state["_modules"][name] = state[name] = _replica(child, memo)
    twin.__dict__.update(state)
    return twin


def _refuse_foreign_leaves(loss, model):
    """Raise if ``loss``'s graph reaches a leaf that requires a gradient but is not one of
    ``model``'s parameters (the parts would accumulate into its ``.grad`` at once)."""
    own = {id(p) for p in model.parameters()}
    stack, seen = [loss.grad_fn], set()
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        for t in node.inputs:
            if isinstance(t, Tensor) and t._requires_grad:
                if t.grad_fn is not None:
                    stack.append(t.grad_fn)
                elif id(t) not in own:
                    raise ValueError(
                        f"SplitBatch: the loss depends on a tensor of shape {tuple(t.shape)} that requires a gradient "
                        "but is not a parameter of the model; the parts of the batch would write its .grad at "
                        "once. Make it a Parameter of the model, or call loss.backward() on the whole batch."
                    )
