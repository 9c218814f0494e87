"""Data parallelism on the threads of one process: :class:`SplitBatch`.

A training step's loss is a mean over the rows of a batch, so its gradient is the
weighted sum of the gradients of the batch's parts:

    L = (1/n) Σ_rows ℓ = Σ_i (n_i / n) L_i,   L_i the mean over part i's n_i rows
    ∂L/∂θ = Σ_i (n_i / n) ∂L_i/∂θ

Each part's forward and backward needs only the weights θ, so the parts can run at the
same time, one per thread: this is the data parallelism of multi-GPU training
(``torch.nn.parallel.DistributedDataParallel`` sums the parts' gradients across devices),
here across the cores of one CPU. Each thread works on its own **replica** of the model:
a copy whose parameters are new leaf Tensors over the *same* weight arrays (nothing is
copied, the optimizer's in-place update reaches all of them), so that each part's
backward accumulates into its own ``.grad`` and no two threads write one gradient. The
replicas' gradients are added to the model's afterwards, in the order of the parts.

speed: on NumPy the matrix products and the large elementwise passes release the GIL,
so the parts of a step really run on different cores; each part's matrix products run
on one BLAS thread. Measured with the default GPT of ``minitorch-attn train`` on 2 cores
(``benchmarks/train_bench.py``): a step on two threads this way takes about 0.8 of the
time that two BLAS threads inside one batch take, because everything between the
products (the norms, softmax, the optimizer's bookkeeping ...) runs on both cores too,
and each thread has a whole part's work (tens of milliseconds) to do, so a thread that
another program delays does not hold the other up at every product.

The parts round differently from the whole batch (a sum over 1024 rows is not the sum
of two sums over 512), so a step on two threads is not bit for bit the step on one.
"""

from __future__ import annotations

import copy

from ..core.backend import backend_of
from ..core.tensor import Tensor
from ..functional._parallel import _run
from ..threads import get_num_threads
from .layers import Dropout
from .module import Module


def replicate(module):
    """A copy of ``module`` whose parameters are new leaf Tensors over the same arrays
    (and the same version counters) as ``module``'s; every other attribute is copied.
    Tied parameters stay tied in the copy.

    Raises:
        TypeError: if ``module`` is not a Module.
    """
    if not isinstance(module, Module):
        raise TypeError(f"replicate: expected a Module, got {type(module).__name__}")
    shared = {}
    for p in module.parameters():
        shared[id(p.data)] = p.data                          # deepcopy's memo: these are not copied
        shared[id(p._version_counter)] = p._version_counter
    return copy.deepcopy(module, shared)


class SplitBatch:
    """``loss_fn(model, x, y).backward()`` for a batch, computed in parts on threads.

    ``SplitBatch(model, loss_fn).backward(x, y)`` adds to each parameter's ``.grad`` the
    gradient of ``loss_fn(model, x, y)`` and returns that loss as a float, as
    ``loss.backward(); loss.item()`` would; the batch's rows (the first axis of ``x`` and
    ``y``) are split into one part per thread of :func:`minitorch_attn.get_num_threads`,
    each part's loss weighted by its share of the rows (see the module docstring).

    Args:
        model: the Module to train.
        loss_fn: ``loss_fn(model, x, y)`` -> a one-element Tensor, **a mean over the rows
            of x** (as ``cross_entropy`` with its default ``reduction="mean"``): the
            weights of the parts are only right for a mean.

    The batch runs whole, on the calling thread, where a split could not help or would
    change what is computed: one thread, fewer than two rows, a device other than the
    CPU (CuPy and array-api-strict run in the calling thread), or a model in training
    mode with a Dropout of p > 0 (the parts would draw their masks from the one
    generator in an order that depends on the threads' timing).

    Raises:
        TypeError: if ``model`` is not a Module or ``loss_fn`` is not callable; from
            :meth:`backward`, if ``x`` is not a Tensor with at least one axis.
    """

    def __init__(self, model, loss_fn):
        if not isinstance(model, Module):
            raise TypeError(f"SplitBatch: expected a Module, got {type(model).__name__}")
        if not callable(loss_fn):
            raise TypeError(f"SplitBatch: loss_fn must be callable, got {type(loss_fn).__name__}")
        self.model, self.loss_fn = model, loss_fn
        self.replicas = []     # made when first needed; part 0 runs on the model itself

    def parts(self, x):
        """The row bounds ``[(start, stop), ...]`` the next :meth:`backward` of ``x`` uses."""
        if not isinstance(x, Tensor) or x.ndim == 0:
            raise TypeError(f"SplitBatch: expected a batch Tensor with rows on its first axis, got {x!r:.80}")
        rows = x.shape[0]
        count = min(get_num_threads(), rows)
        if count < 2 or backend_of(x.data).name != "cpu" or self._draws_masks():
            return [(0, rows)]
        bounds = [rows * i // count for i in range(count + 1)]
        return list(zip(bounds, bounds[1:]))

    def backward(self, x, y):
        """Accumulate the gradient of ``loss_fn(model, x, y)`` into the parameters'
        ``.grad`` (as ``backward()`` does: zero them first if you do not want a sum);
        return the loss as a float."""
        parts = self.parts(x)
        if len(parts) == 1:
            loss = self.loss_fn(self.model, x, y)
            loss.backward()
            return loss.item()
        models = [self.model] + self._replicas(len(parts) - 1)
        rows = x.shape[0]

        def part(model, start, stop):
            loss = self.loss_fn(model, x[start:stop], y[start:stop])
            share = (stop - start) / rows
            (loss * share).backward()            # ∂(share · L_i)/∂θ into this replica's .grad
            return share * loss.item()

        losses = _run(len(parts), [lambda m=m, a=a, b=b: part(m, a, b) for m, (a, b) in zip(models, parts)])
        self._gather(models[1:])
        return sum(losses)

    def _draws_masks(self):
        return self.model.training and any(isinstance(m, Dropout) and m.p > 0 for m in self.model.modules())

    def _replicas(self, count):
        """``count`` replicas of the model, pointed again at its arrays (an assignment to
        a parameter's ``.data`` since the last step must reach them too) and its mode."""
        while len(self.replicas) < count:
            self.replicas.append(replicate(self.model))
        mine = self.model.parameters()
        for replica in self.replicas[:count]:
            for p, q in zip(mine, replica.parameters()):
                q.data, q._version_counter, q.grad = p.data, p._version_counter, None
            replica.train(self.model.training)
        return self.replicas[:count]

    def _gather(self, replicas):
        """Add the replicas' gradients to the model's, part by part (so the sum's order,
        and its rounding, is the same every step), out of place as the engine does."""
        for p, *copies in zip(self.model.parameters(), *(r.parameters() for r in replicas)):
            for q in copies:
                if q.grad is not None:
                    p.grad = q.grad if p.grad is None else Tensor(p.grad.data + q.grad.data)
                    q.grad = None
