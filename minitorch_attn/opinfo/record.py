"""What a record of the catalogue holds: :class:`OpInfo` (one per operation), :class:`Sample`
(one set of inputs for it) and :class:`Inputs` (the reproducible draws a sample is made of).

A sample is a recipe, not a value: ``sample.make(Inputs(device, dtype, seed))`` draws its
positional inputs on any device and in any float dtype, from one NumPy generator, so every
device and dtype sees the same numbers. The checks of ``tests/test_opinfo.py`` and the
gradient-check suite call ``record.op(*inputs, **sample.kwargs)`` and compare it with
``record.ref`` (a float64 NumPy formula, on the host copies of the same inputs), with
PyTorch (``record.torch_ref``) where it is installed, with finite differences, and in
float32 with the float64 result.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np

import minitorch_attn as mt

from ..core.factories import tensor
from .gradients import BY_LINEARITY, _ByLinearity, by_linearity

# The edge cases the engine promises, as tags a sample carries. An ordinary sample has none.
EDGES = {
    "empty": "a dimension of size 0: empty results, or the value PyTorch gives (a bias, zeros)",
    "0-d": "a 0-d tensor",
    "one-element": "a row (or reduced dim) of one element",
    "nonfinite": "±inf or NaN among the inputs",
    "extreme": "logits or scores so large that exp overflows unless the maximum is subtracted first",
    "broadcast": "inputs of different shapes that broadcast",
    "dim": "a dim other than the default one",
}


class Inputs:
    """Draws the inputs of one sample on a chosen device and dtype, reproducibly.

    All draws come from one NumPy generator (host side) and are then placed on the
    device, so every device sees the same numbers for the same seed. Float tensors get
    ``dtype`` and require grad unless told otherwise; index and mask tensors never do.
    """

    EXTREME = {"float64": 1000.0, "float32": 80.0}  # logits at which exp overflows unless shifted

    def __init__(self, device="cpu", dtype="float64", seed=0):
        self.device, self.dtype = device, dtype
        self.rng = np.random.default_rng(seed)

    def _tensor(self, values, requires_grad=True, dtype=None):
        return tensor(np.asarray(values), dtype=dtype or self.dtype, device=self.device, requires_grad=requires_grad)

    def values(self, values, requires_grad=True):
        """Given values (``-inf``, ``nan``, an empty list, a 0-d number) as a float tensor."""
        return self._tensor(np.asarray(values, dtype=np.float64), requires_grad)

    def randn(self, *shape, requires_grad=True, scale=1.0):
        """Standard normal values times ``scale``."""
        return self._tensor(scale * self.rng.standard_normal(shape), requires_grad)

    def uniform(self, *shape, low=0.0, high=1.0, requires_grad=True):
        """Uniform values in ``[low, high)`` (e.g. positive inputs for log and sqrt)."""
        return self._tensor(self.rng.uniform(low, high, shape), requires_grad)

    def distinct(self, *shape, gap=0.1, requires_grad=True):
        """Values at least ``gap`` apart from each other in random order: no ties, so max,
        maximum and clamp are differentiable at every element (gap >> eps)."""
        n = int(np.prod(shape))
        values = (np.arange(n) - n / 2) * gap + self.rng.uniform(0, gap / 4, n)
        return self._tensor(self.rng.permutation(values).reshape(shape), requires_grad)

    def away_from(self, *shape, points=(0.0,), margin=0.05, requires_grad=True):
        """Normal values at least ``margin`` away from each of ``points`` (kinks)."""
        values = self.rng.standard_normal(shape)
        for p in points:
            close = np.abs(values - p) < margin
            values = np.where(close, p + np.where(values >= p, margin, -margin) * 2, values)
        return self._tensor(values, requires_grad)

    def extreme(self, *shape, limit=None):
        """Logits uniform in ``[-limit, limit]`` with both extremes in the first row; the
        default limit is 1000 in float64 and 80 in float32 (exp overflows past ~709 and ~88)."""
        limit = limit if limit is not None else self.EXTREME[self.dtype]
        values = self.rng.uniform(-limit, limit, shape)
        values.reshape(-1, shape[-1])[0, :2] = [limit, -limit]
        return self._tensor(values)

    def integers(self, low, high, *shape):
        """An int64 tensor (indices, targets); never differentiated."""
        return tensor(self.rng.integers(low, high, shape), dtype="int64", device=self.device)

    def mask(self, *shape, p_true=0.7):
        """A bool tensor, True with probability ``p_true``."""
        return tensor(self.rng.random(shape) < p_true, device=self.device)

    def ints(self, values):
        """Given integers (targets, indices) as an int64 tensor."""
        return tensor(np.asarray(values, dtype=np.int64), dtype="int64", device=self.device)

    def bools(self, values):
        """Given truth values as a bool tensor."""
        return tensor(np.asarray(values, dtype=bool), device=self.device)


@dataclasses.dataclass(frozen=True)
class Sample:
    """One set of inputs for an operation.

    Attributes:
        name: the sample's name; a gradient-check sample is listed under it by
            ``python -m gradcheck`` (e.g. ``"layer_norm (weight, bias)"``).
        make: ``make(inputs) -> list``, the positional inputs, drawn from an :class:`Inputs`.
        kwargs: keyword options, passed to the op and to its references alike.
        edges: the tags of :data:`EDGES` this sample exercises (none for an ordinary one).
        gradcheck: whether the gradient-check suite differentiates it by finite
            differences (default: ordinary samples only; inputs must be away from kinks).
        fn: a composition to check instead of ``op(*inputs, **kwargs)`` (two ops in one
            graph, a reseeded dropout); such a sample is checked by finite differences only.
        tasks: the homework tasks its gradient check counts for (None: the record's task).
        fast_mode: an option of the gradient check (one random direction per input).
        n_ops: the rounding steps of a composition ``fn`` whose rounding is not the op's
            (``x + 100`` before a LayerNorm of ``x`` at scale 0.1 loses 100 / 0.1 = 1000
            times the LayerNorm's own); None: the record's ``n_ops``.
        torch_wrong: where PyTorch's answer is wrong for this sample, why (its comparison
            with PyTorch is then skipped with that reason; the NumPy reference still holds).
    """

    name: str
    make: Callable[[Inputs], list]
    kwargs: dict = dataclasses.field(default_factory=dict)
    edges: frozenset = frozenset()
    gradcheck: bool | None = None
    fn: Callable | None = None
    tasks: tuple | None = None
    fast_mode: bool = False
    n_ops: int | None = None
    torch_wrong: str | None = None

    def __post_init__(self):
        unknown = set(self.edges) - set(EDGES)
        if unknown:
            raise ValueError(f"sample {self.name!r}: unknown edge tags {sorted(unknown)}; known: {sorted(EDGES)}")
        object.__setattr__(self, "edges", frozenset(self.edges))
        if self.gradcheck is None:
            object.__setattr__(self, "gradcheck", not self.edges)

    def tasks_of(self, record):
        """The homework tasks this sample's gradient check counts for."""
        if not self.gradcheck:
            return ()
        if self.tasks is not None:
            return tuple(self.tasks)
        return (record.task,) if record.task else ()

    def rounding_steps(self, record, dtype, backward=False):
        """How many roundings of ``dtype`` its results may be off by: the record's count (or the
        sample's own, for a composition), plus,
        for extreme logits, one per unit of logit spread (the condition number of exp at
        ``s - max`` is ``|s - max|``, at most twice the extreme value) in the forward, and
        twice that in the backward, where the softmax's output enters twice (through the
        product with ``P`` and through the row term ``D``) and its two errors add. With one
        count for both, the exact float64 reference gradient of attention's keys failed at one
        seed in 300 (an error of 2,200 roundings)."""
        n_ops = self.n_ops if self.n_ops is not None else record.n_ops
        if "extreme" in self.edges:
            return n_ops + (4 if backward else 2) * int(Inputs.EXTREME[dtype])
        return n_ops

    def call(self, op):
        """The function the checks run: ``fn``, or ``op`` with this sample's options."""
        if self.fn is not None:
            return self.fn
        return lambda *args: op(*args, **self.kwargs)


TORCH_KEEPS_INTS = {
    dtype: f"PyTorch computes it in {dtype}; ours refuses (TypeError): it is a float op" for dtype in ("int64", "int32")
}


@dataclasses.dataclass(frozen=True)
class OneInput:
    """The op called on one tensor ``x`` of shape (2, 3), for the checks that run every op on
    the same input: integer and bool promotion (``tests/test_promotion.py``) and NaN
    propagation (``tests/test_nan.py``). Attention ops view ``x`` as (1, 2, 3) queries, keys
    and values.

    Attributes:
        call: ``call(x)``, with this package's ops.
        torch_call: ``torch_call(torch, x)``, the same in PyTorch, or None where it has none.
        of_ints: the dtype an int or bool ``x`` gives: ``"same"`` (the input's), ``"int64"``
            (a sum), ``"float"`` (the default float dtype, as PyTorch) or ``"TypeError"`` (it
            needs floats and says so).
        refuses: input dtypes it refuses with a TypeError though ``of_ints`` says otherwise
            (as PyTorch refuses ``sub`` of bools).
        torch_differs: ``{input dtype: why}`` where PyTorch's dtype differs from ours on purpose.
        hides_nan: why a NaN in ``x`` leaves no NaN in the result, where it is meant to.
        nan_gradient_differs: why the gradient at a NaN differs from PyTorch's, where it does.
    """

    call: Callable
    torch_call: Callable | None = None
    of_ints: str = "same"
    refuses: tuple = ()
    torch_differs: dict = dataclasses.field(default_factory=dict)
    hides_nan: str | None = None
    nan_gradient_differs: str | None = None

    def __post_init__(self):
        if self.of_ints not in ("same", "int64", "float", "TypeError"):
            raise ValueError(f"of_ints must be 'same', 'int64', 'float' or 'TypeError', not {self.of_ints!r}")

    def dtype_of_ints(self, dtype, default_float):
        """The dtype ``call`` gives for an ``x`` of int or bool ``dtype`` (TypeError: it refuses)."""
        if self.of_ints == "TypeError" or dtype in self.refuses:
            return TypeError
        return {"same": dtype, "int64": "int64", "float": default_float}[self.of_ints]


@dataclasses.dataclass(frozen=True)
class OpInfo:
    """Everything the project knows about one differentiable operation, written once.

    Attributes:
        name: the op's name (PyTorch's where one exists).
        op: the callable the samples call.
        covers: the public names this record stands for (``"F.softmax"``, ``"mt.exp"``,
            ``"Tensor.exp"``, ``"Tensor.__add__"``); the completeness test reads them.
        samples: its :class:`Sample` s, ordinary ones first (the gradient checks) and
            then the edge cases.
        source: where its forward and backward come from (paper and equation, or the rule
            of calculus), shown in the table of operations.
        ref: ``ref(*arrays, **kwargs)``, the forward in float64 NumPy on host arrays (tensors
            of the sample become arrays, other values pass as they are); None for random ops.
        torch_ref: ``torch_ref(torch, *args, **kwargs)``, the same in PyTorch, or None.
        ref_backward: ``ref_backward(grad_outputs, *arrays, **kwargs)``, the gradients of
            the inputs (None where there is none) in closed form, float64 NumPy; it lets the
            backward be checked where PyTorch is not installed (the grader's machine).
            ``gradients.BY_LINEARITY`` for an op affine in each input: the exact
            Jacobian of ``ref``, column by column (see :mod:`.gradients`).
        task: the homework task that writes its backward (``"3.1"``), or None;
            ``forward_task`` the one that writes its forward, when another (``"4.1"``).
        differentiable_in: the parameters it has a gradient for; ``not_differentiable_in``
            the tensor parameters it has none for (targets, indices, boolean masks).
        dtypes: the float dtypes it accepts; gradients keep their input's dtype, and so do
            the outputs when ``keeps_dtype`` (all but a cast).
        n_ops: the rounding steps its results may be off by, in any dtype: the tolerance is
            ``n_ops * eps(dtype) * max(1, |reference|)``.
        exponentiates: it normalizes exponentials of its input (softmax, attention), so it
            must subtract a maximum first, and its samples include extreme logits.
        no_empty: why it has no sample with an empty dimension, where it has none.
        one_input: its :class:`OneInput` call, for every record of a public ``mt.`` or ``F.``
            function (one per function).
        forward: the op in one line, in the notation of the "backward at a glance" page
            (:mod:`.glance`): ``y`` the output (``"y = e^x"``).
        backward: its backward rule in one line: ``g`` the upstream gradient, ``unbroadcast``
            the sum over broadcast axes (``"dx = g y"``). Every record has both (a test says
            so). A rule that is a homework task's answer is a constant in the task's
            ``# BEGIN REFERENCE`` region, so a student tree of that task holds a stand-in there
            (:mod:`.held_back`) and the page says "(task 2.1)" in its place.
    """

    name: str
    op: Callable
    covers: tuple
    samples: tuple
    source: str
    ref: Callable | None = None
    torch_ref: Callable | None = None
    ref_backward: Callable | _ByLinearity | None = None
    task: str | None = None
    forward_task: str | None = None
    differentiable_in: tuple = ("input",)
    not_differentiable_in: tuple = ()
    dtypes: tuple = ("float32", "float64")
    keeps_dtype: bool = True
    n_ops: int = 16
    exponentiates: bool = False
    no_empty: str | None = None
    one_input: OneInput | None = None
    forward: str | None = None
    backward: object | None = None  # a str, or held_back's stand-in in a student tree

    def __post_init__(self):
        if self.ref_backward is BY_LINEARITY:
            object.__setattr__(self, "ref_backward", by_linearity(self.ref))

    @property
    def module(self):
        """The file that holds this record, as a reader finds it (``opinfo/softmax.py``)."""
        return "minitorch_attn/opinfo/" + _defining_module(self) + ".py"


def _defining_module(record):
    for name, records in _REGISTRY.items():
        if any(r is record for r in records):
            return name
    return "?"


_REGISTRY: dict = {}


def register(module_name, records):
    """Remember which module holds ``records`` (for :attr:`OpInfo.module`); returns them."""
    _REGISTRY[module_name.rsplit(".", 1)[-1]] = records
    return records


# ---- input makers shared by several records ----
def seeded(fn, seed=0):
    """``fn`` with :func:`mt.manual_seed` called first: one dropout mask for every evaluation."""

    def call(*args, **kwargs):
        mt.manual_seed(seed)
        return fn(*args, **kwargs)

    return call


def with_neg_inf(d, *shape):
    """Normal values with about a third set to -inf (never a whole row along the last dim)."""
    values = d.rng.standard_normal(shape)
    masked = d.rng.random(shape) < 0.35
    masked[..., 0] = False
    return d._tensor(np.where(masked, -np.inf, values))


def float_mask(d, *shape):
    """An additive attention bias with some -inf entries (never a whole row)."""
    bias = d.rng.standard_normal(shape)
    blocked = d.rng.random(shape) < 0.3
    blocked[..., 0] = False
    return d._tensor(np.where(blocked, -np.inf, bias), requires_grad=False)
