"""Finite-difference gradient checking: is a hand-written backward right?

For a function ``f`` of tensors and a random upstream gradient ``v`` (never a plain sum,
which hides errors that sum to zero, such as a wrong LayerNorm or softmax backward),
the scalar ``s(x) = sum(v * f(x))`` has the gradient ``vᵀ J`` that backward computes.
The check compares it with central differences

    ds/dx_i ≈ (s(x + eps e_i) - s(x - eps e_i)) / (2 eps)         (error O(eps²))

evaluated in float64, element by element (full mode), or along one random direction
``u`` per input, ``vᵀ J u`` (fast mode, for large inputs). An element passes when
``|analytic - numeric| <= atol + rtol * |numeric|``. It also checks that a zero upstream
gradient gives zero gradients, that every gradient has its input's shape and dtype, and
that two backward runs agree.

Sources: torch.autograd.gradcheck (defaults, fast mode, extra checks); Chainer's
gradient_check (float64, random directions, failure messages that show everything).
"""

from __future__ import annotations

import dataclasses
import warnings

import numpy

from ..core.autograd import backward, no_grad
from ..core.backend import backend_of
from ..core.tensor import Tensor


class GradcheckError(RuntimeError):
    """Raised when a backward disagrees with finite differences; the message names the
    input, the worst element, both values and the tolerances."""


@dataclasses.dataclass
class GradcheckReport:
    """What :func:`check_gradients` found: the largest absolute and relative errors over
    all checked inputs, and the failure message (None when everything passed)."""

    max_abs_error: float
    max_rel_error: float
    failure: str | None

    @property
    def passed(self):
        return self.failure is None


def gradcheck(fn, inputs, eps=1e-6, atol=1e-5, rtol=1e-3, fast_mode=False, nondet_tol=0.0, seed=0):
    """Check the gradients of ``fn`` at ``inputs`` against central finite differences.

    Args:
        fn: a function of the tensors in ``inputs`` returning a Tensor or a tuple of Tensors.
        inputs: a Tensor or a sequence of Tensors (and other values passed through).
            Floating-point tensors with ``requires_grad=True`` are checked; use float64.
        eps: finite-difference step.
        atol, rtol: an element passes when ``|analytic - numeric| <= atol + rtol * |numeric|``.
        fast_mode: compare ``vᵀ J u`` for one random direction ``u`` per input instead of
            every element (for large inputs).
        nondet_tol: how far two backward runs on the same inputs may differ (0: identical).
        seed: seeds the random upstream gradient ``v`` and directions ``u``.

    Returns:
        True when every check passes.

    Raises:
        GradcheckError: describing the first failed check.
        ValueError: if no input requires a gradient.

    Warns (UserWarning) when a checked input is not float64: float32 finite differences
    are too coarse for the default tolerances.
    """
    report = check_gradients(fn, inputs, eps=eps, atol=atol, rtol=rtol, fast_mode=fast_mode,
                             nondet_tol=nondet_tol, seed=seed)
    if not report.passed:
        raise GradcheckError(report.failure)
    return True


def check_gradients(fn, inputs, eps=1e-6, atol=1e-5, rtol=1e-3, fast_mode=False, nondet_tol=0.0, seed=0):
    """Run every check of :func:`gradcheck` and return a :class:`GradcheckReport` instead
    of raising (the gradcheck suite uses it to print its table)."""
    inputs = [inputs] if isinstance(inputs, Tensor) else list(inputs)
    checked = [i for i, t in enumerate(inputs) if isinstance(t, Tensor) and t.requires_grad]
    if not checked:
        raise ValueError("gradcheck: no input has requires_grad=True; nothing to check")
    for i in checked:
        if inputs[i].dtype != "float64":
            warnings.warn(
                f"gradcheck: input {i} is {inputs[i].dtype}; finite differences need float64 "
                f"to be meaningful at eps={eps}", UserWarning, stacklevel=3)
    rng = numpy.random.default_rng(seed)
    backend = backend_of(inputs[checked[0]].data)
    xp = backend.xp

    def as_tuple(out):
        outs = out if isinstance(out, tuple) else (out,)
        for o in outs:
            if not isinstance(o, Tensor):
                raise TypeError(f"gradcheck: fn must return Tensors, got {type(o).__name__}")
        return outs

    with no_grad():
        outputs = as_tuple(fn(*inputs))
    float_outputs = [k for k, o in enumerate(outputs) if o.dtype in ("float32", "float64")]
    upstream = {k: backend.asarray(rng.standard_normal(outputs[k].shape), dtype=outputs[k].data.dtype)
                for k in float_outputs}

    def analytic(upstream_grads):
        """Gradients of sum_k <v_k, f_k> for each checked input, as host arrays (None if unused)."""
        saved = [inputs[i].grad for i in checked]
        for i in checked:
            inputs[i].grad = None
        outs = as_tuple(fn(*inputs))
        roots = [(outs[k], Tensor(upstream_grads[k])) for k in float_outputs if outs[k].requires_grad]
        if roots:
            backward([r for r, _ in roots], [g for _, g in roots])
        result = []
        for i, previous in zip(checked, saved):
            grad = inputs[i].grad
            inputs[i].grad = previous
            result.append(grad)
        return result

    def contracted(values):
        """s = sum_k <v_k, f_k(values)> in float64, as a Python float."""
        with no_grad():
            outs = as_tuple(fn(*values))
        total = 0.0
        for k in float_outputs:
            total += float(xp.sum(xp.astype(outs[k].data, xp.float64) * xp.astype(upstream[k], xp.float64)))
        return total

    def failure(message):
        return GradcheckReport(float("nan"), float("nan"), message)

    # shape, dtype and determinism checks
    grads = analytic(upstream)
    for i, grad in zip(checked, grads):
        if grad is not None and (grad.shape != inputs[i].shape or grad.dtype != inputs[i].dtype):
            return failure(f"input {i}: gradient has shape {grad.shape} and dtype {grad.dtype}, "
                           f"expected {inputs[i].shape} and {inputs[i].dtype}")
    again = analytic(upstream)
    for i, first, second in zip(checked, grads, again):
        if (first is None) != (second is None):
            return failure(f"input {i}: one backward run gave a gradient and the other did not")
        if first is not None:
            diff = float(numpy.max(numpy.abs(first.numpy() - second.numpy()), initial=0.0))
            if diff > nondet_tol:
                return failure(f"input {i}: two backward runs differ by {diff:.3e} (nondet_tol={nondet_tol})")
    zero = analytic({k: xp.zeros_like(v) for k, v in upstream.items()})
    for i, grad in zip(checked, zero):
        if grad is not None and float(numpy.max(numpy.abs(grad.numpy()), initial=0.0)) != 0.0:
            return failure(f"input {i}: a zero upstream gradient gave a nonzero gradient "
                           f"(max {float(numpy.max(numpy.abs(grad.numpy()))):.3e})")

    # the comparison with finite differences, in float64
    base = [Tensor(xp.astype(t.data, xp.float64)) if (isinstance(t, Tensor) and t.dtype in ("float32", "float64"))
            else t for t in inputs]
    max_abs = max_rel = 0.0
    for i, grad in zip(checked, grads):
        analytic_host = numpy.zeros(inputs[i].shape) if grad is None else grad.numpy().astype(numpy.float64)
        flat = xp.reshape(base[i].data, (-1,))

        def evaluate(perturbation, i=i, flat=flat):
            values = list(base)
            values[i] = Tensor(xp.reshape(flat + perturbation, inputs[i].shape))
            return contracted(values)

        if fast_mode:
            direction = rng.standard_normal(flat.shape[0])
            step = backend.asarray(direction * eps, dtype=xp.float64)
            numeric = numpy.array([(evaluate(step) - evaluate(-step)) / (2 * eps)])
            analytic_values = numpy.array([float(numpy.dot(analytic_host.reshape(-1), direction))])
            positions = ["direction u"]
        else:
            numeric = numpy.empty(flat.shape[0])
            for j in range(flat.shape[0]):
                step = xp.zeros(flat.shape, dtype=xp.float64, device=backend.device)
                step[j] = eps
                numeric[j] = (evaluate(step) - evaluate(-step)) / (2 * eps)
            analytic_values = analytic_host.reshape(-1)
            positions = None

        error = numpy.abs(analytic_values - numeric)
        allowed = atol + rtol * numpy.abs(numeric)
        max_abs = max(max_abs, float(error.max(initial=0.0)))
        max_rel = max(max_rel, float((error / numpy.maximum(numpy.abs(numeric), atol)).max(initial=0.0))
                      if error.size else 0.0)
        if not numpy.all(error <= allowed):
            worst = int(numpy.argmax(error - allowed))
            where = positions[0] if positions else f"element {tuple(int(k) for k in numpy.unravel_index(worst, inputs[i].shape))}"
            return GradcheckReport(max_abs, max_rel, (
                f"gradient of input {i} (shape {inputs[i].shape}) is wrong at {where}: "
                f"analytic {analytic_values[worst]:.10g}, numeric {numeric[worst]:.10g}, "
                f"|difference| {error[worst]:.3e} > atol {atol:g} + rtol {rtol:g} * |numeric|"
                f"{'' if grad is not None else ' (backward gave this input no gradient)'}"))
    return GradcheckReport(max_abs, max_rel, None)
