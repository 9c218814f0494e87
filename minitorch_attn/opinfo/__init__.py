"""The catalogue of operations: one record per differentiable operation, every check derived from it.

What the project knows about an operation is written once, in its record
(:class:`~.record.OpInfo`, after PyTorch's OpInfo): the callable; a float64 NumPy reference
(and PyTorch's, used where torch is installed); its samples, ordinary ones and the edge
cases the engine promises (empty dims, 0-d tensors, one-element rows, ±inf and NaN,
extreme logits, broadcasting, other dims); the dtypes it accepts; its float32 tolerance;
its homework task; the inputs it is differentiable in; its source.

From the records come, with no second list anywhere:

* the gradient-check suite, ``python -m gradcheck`` (:mod:`minitorch_attn.gradcheck.suite`);
* the comparisons with the references, forward and backward, in float64 and float32, on
  every device, and the empty-input cases (``tests/test_opinfo.py``);
* each homework task's gradient checks (``tests/instructor/test_gradcheck_by_task.py``, the
  student folder's README);
* the table of operations and each op's section of the documentation site
  (``docs/_ext/catalogue.py``; ``python -m minitorch_attn.opinfo`` prints the table);
* backward at a glance, each op's forward and backward rule in one line (:mod:`.glance`,
  ``python -m minitorch_attn.opinfo --glance``, the site's ``opinfo-glance`` page).

One module per topic, in the order of the course:

* :mod:`.arithmetic`    -- add, sub, mul, div (also with alpha and rounding_mode), neg, pow (number,
  tensor and number ** tensor exponents), exp, log, sqrt, tanh, abs, maximum, minimum, clamp,
  matmul, einsum;
* :mod:`.reductions`    -- sum, mean, max, min, var, std;
* :mod:`.shape`         -- reshape, transpose, permute, squeeze, expand, getitem, advanced indexing,
  gather, pad, concat, stack, split, where, masked_fill, tril;
* :mod:`.engine`        -- a dtype change, a copy, a custom Function returning None;
* :mod:`.inplace`       -- the in-place writes that carry a gradient (``add_``, ``copy_``, ...);
* :mod:`.softmax` (with logsumexp, nll_loss and probability targets), :mod:`.activations`,
  :mod:`.normalization`, :mod:`.linear`, :mod:`.attention` (dense and flash), :mod:`.rotary` --
  the records of :mod:`minitorch_attn.functional`, topic by topic (pad's is in :mod:`.shape`).

Adding an operation: write it in its module, then its record here (the completeness test in
``tests/test_opinfo.py`` names the file when a public op has none).
"""

from . import (
    activations,
    arithmetic,
    attention,
    engine,
    inplace,
    linear,
    normalization,
    reductions,
    rotary,
    shape,
    softmax,
)
from .record import EDGES, Inputs, OneInput, OpInfo, Sample

MODULES = (
    arithmetic,
    reductions,
    shape,
    engine,
    inplace,
    softmax,
    activations,
    normalization,
    linear,
    attention,
    rotary,
)


def op_db():
    """Every record, in the order of the course (and of ``python -m gradcheck``)."""
    return [record for module in MODULES for record in module.RECORDS]


def find(name):
    """The record called ``name``; KeyError naming the known ones otherwise."""
    for record in op_db():
        if record.name == name:
            return record
    raise KeyError(f"no record {name!r}; known: {', '.join(r.name for r in op_db())}")


def one_input_calls():
    """``{record name: OneInput}`` for every record with a one-input call (every public ``mt.``
    and ``F.`` function): the promotion and NaN checks run each of them."""
    return {record.name: record.one_input for record in op_db() if record.one_input is not None}


def gradcheck_samples():
    """``(record, sample)`` for every sample the gradient-check suite differentiates."""
    return [(record, sample) for record in op_db() for sample in record.samples if sample.gradcheck]


def gradcheck_names_of_task(task_id):
    """The names of the gradient checks that count for homework task ``task_id`` (e.g. "3.1")."""
    return [sample.name for record, sample in gradcheck_samples() if task_id in sample.tasks_of(record)]


__all__ = [
    "EDGES",
    "Inputs",
    "OneInput",
    "OpInfo",
    "Sample",
    "op_db",
    "find",
    "one_input_calls",
    "gradcheck_samples",
    "gradcheck_names_of_task",
]
