"""Finite-difference gradient checking: is a hand-written backward right?

For a function ``f`` of tensors and a random upstream gradient ``v`` (never a plain sum,
which hides errors that sum to zero, such as a wrong LayerNorm or softmax backward),
the scalar ``s(x) = sum(v * f(x))`` has the gradient ``vᵀ J`` that backward computes.
The check compares it with central differences

    D(h) = (s(x + h e_i) - s(x - h e_i)) / (2 h)  =  ds/dx_i + c h² + O(h⁴)          (1)

evaluated in float64, element by element (full mode), or along one random direction
``u`` per input, ``vᵀ J u`` (fast mode, for large inputs). It also checks that a zero
upstream gradient gives zero gradients, that every gradient has its input's shape and
dtype, and that two backward runs agree.

How close is close enough, two ways:

* PyTorch's fixed tolerances (the defaults of :func:`gradcheck` and
  :func:`check_gradients`, for users): the step ``h = eps = 1e-6``, and an element passes
  when ``|analytic - numeric| <= atol + rtol * |numeric|`` (``atol=1e-5``, ``rtol=1e-3``).
  A backward that is 0.1% off passes them.
* Tolerances derived from the error of (1) in float64 (``derived=True``; the
  gradient-check suite uses them). ``D(h)`` is off by its truncation ``c h²``
  (``c = s'''/6``) and by rounding: each evaluation of ``s`` is off by at most
  ``δ = K eps64 ‖v‖₁ max(1, ‖f‖∞)`` (``K``: the op's rounding steps ``n_ops`` plus
  ``log2`` of the number of terms summed), so ``D(h)`` by at most ``r(h) = δ / h``.

  1. The step: a pilot along a random direction measures
     ``c ≈ |D(h₀) - D(h₀/2)| / (¾ h₀²)`` at ``h₀ = 1e-3``; the bound of step 3,
     ``¾ c h² + 3 δ / h``, is smallest at ``h = (2 δ / c)^(1/3)``, kept in [1e-6, 1e-3]
     (inputs are drawn at least 0.05 from kinks).
  2. Each element's error (Richardson): ``D₁ = D(h)``, ``D₂ = D(h/2)``; ``t = |D₁ - D₂|``
     estimates the truncation ``¾ c h²`` of ``D₁``; the numeric value is the extrapolation
     ``N = (4 D₂ - D₁) / 3``, whose truncation is ``O(h⁴)``, far below ``t``, and whose
     rounding is at most ``(4·2r + r) / 3 = 3 r(h)``.
  3. An element passes when
     ``|analytic - N| <= 2 (t + 3 r(h)) + n_ops eps(dtype) max(1, max|analytic|)``:
     twice the estimated error of ``N``, plus the rounding of the backward itself in its
     dtype (the floor).

  For a well-conditioned op this allows about 1e-8 of the gradient's size, so a backward
  0.1% off fails; the report gives the step, the largest allowed difference and the
  largest share of it that was used.

Sources: torch.autograd.gradcheck (defaults, fast mode, extra checks); Chainer's
gradient_check (float64, random directions, failure messages that show everything);
Richardson extrapolation and the step that balances truncation against rounding
(Press et al., Numerical Recipes, 3rd ed., section 5.7).
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections.abc import Callable
from typing import Any

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
    all checked inputs, and the failure message (None when everything passed); with the
    finite-difference step used (the largest, over the inputs), the largest allowed
    difference and ``error_ratio``, the largest share of its allowance an element used
    (below 1: it passed), where the comparison ran."""

    max_abs_error: float
    max_rel_error: float
    failure: str | None
    step: float | None = None
    max_tolerance: float | None = None
    error_ratio: float | None = None

    @property
    def passed(self):
        return self.failure is None


def gradcheck(
    fn: Callable[..., Any],
    inputs: Any,
    eps: float = 1e-6,
    atol: float = 1e-5,
    rtol: float = 1e-3,
    fast_mode: bool = False,
    nondet_tol: float = 0.0,
    seed: int = 0,
    derived: bool = False,
    n_ops: int = 16,
) -> bool:
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
        derived: instead of ``eps``, ``atol`` and ``rtol`` (PyTorch's defaults, which let a
            backward 0.1% off pass), pick the step and each element's tolerance from the
            error analysis of the module docstring, as the gradient-check suite does.
        n_ops: with ``derived``, the rounding steps the function's results may be off by.

    Returns:
        True when every check passes.

    Raises:
        GradcheckError: describing the first failed check.
        ValueError: if no input requires a gradient.

    Warns (UserWarning) when a checked input is not float64: float32 finite differences
    are too coarse for the default tolerances.
    """
    report = check_gradients(
        fn,
        inputs,
        eps=eps,
        atol=atol,
        rtol=rtol,
        fast_mode=fast_mode,
        nondet_tol=nondet_tol,
        seed=seed,
        derived=derived,
        n_ops=n_ops,
    )
    if not report.passed:
        raise GradcheckError(report.failure)
    return True


def check_gradients(
    fn: Callable[..., Any],
    inputs: Any,
    eps: float = 1e-6,
    atol: float = 1e-5,
    rtol: float = 1e-3,
    fast_mode: bool = False,
    nondet_tol: float = 0.0,
    seed: int = 0,
    derived: bool = False,
    n_ops: int = 16,
    differences_on: Any = None,
) -> GradcheckReport:
    """Run every check of :func:`gradcheck` and return a :class:`GradcheckReport` instead
    of raising (the gradcheck suite uses it to print its table).

    With ``derived=True``, ``eps``, ``atol`` and ``rtol`` are not used: the step and each
    element's tolerance come from the error analysis in the module docstring, with
    ``n_ops`` the rounding steps the op's results may be off by (its record's ``n_ops``).

    ``differences_on`` (a device, e.g. ``"cpu"``; default the inputs' own) is where the
    finite differences evaluate ``fn``, on copies of the inputs: the backward under test still
    runs on the inputs' device, and is compared with the same numeric gradient as on that
    device. The test suite takes the differences of the array-api-strict runs on NumPy, where
    they are the same numbers about ten times faster (the forward on each device is compared
    with the reference by ``tests/test_opinfo.py``).
    """
    inputs = [inputs] if isinstance(inputs, Tensor) else list(inputs)
    checked = [i for i, t in enumerate(inputs) if isinstance(t, Tensor) and t.requires_grad]
    if not checked:
        raise ValueError("gradcheck: no input has requires_grad=True; nothing to check")
    for i in checked:
        if inputs[i].dtype != "float64":
            warnings.warn(
                f"gradcheck: input {i} is {inputs[i].dtype}; finite differences need float64 "
                f"to be meaningful at eps={eps}",
                UserWarning,
                stacklevel=3,
            )
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
    upstream = {
        k: backend.asarray(rng.standard_normal(outputs[k].shape), dtype=outputs[k].data.dtype) for k in float_outputs
    }

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
            return failure(
                f"input {i}: gradient has shape {grad.shape} and dtype {grad.dtype}, "
                f"expected {inputs[i].shape} and {inputs[i].dtype}"
            )
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
            return failure(
                f"input {i}: a zero upstream gradient gave a nonzero gradient "
                f"(max {float(numpy.max(numpy.abs(grad.numpy()))):.3e})"
            )

    # the comparison with finite differences, in float64 (on the device differences_on, when given)
    if differences_on is not None:
        moved = [t.detach().to(device=differences_on) if isinstance(t, Tensor) else t for t in inputs]
        backend = backend_of(moved[checked[0]].data)
        xp, host_upstream = backend.xp, upstream
        upstream = {k: backend.asarray(backend_of(v).to_numpy(v)) for k, v in host_upstream.items()}
    else:
        moved = inputs
    base = [
        Tensor(xp.astype(t.data, xp.float64)) if (isinstance(t, Tensor) and t.dtype in ("float32", "float64")) else t
        for t in moved
    ]
    delta = _evaluation_error(fn, base, outputs, upstream, float_outputs, n_ops, as_tuple, xp) if derived else 0.0
    pilot = numpy.random.default_rng([seed, 1])  # its own draws: fast mode's directions stay as they were
    max_abs = max_rel = ratio = largest_allowed = largest_step = 0.0
    for i, grad in zip(checked, grads):
        analytic_host = numpy.zeros(inputs[i].shape) if grad is None else grad.numpy().astype(numpy.float64)
        flat = xp.reshape(base[i].data, (-1,))
        size = flat.shape[0]

        def central(direction, h, i=i, flat=flat, size=size):
            """D(h) of (1) along ``direction``: an element's index, or a host vector."""
            if isinstance(direction, int):
                step = xp.zeros((size,), dtype=xp.float64, device=backend.device)
                step[direction] = h
            else:
                step = backend.asarray(direction * h, dtype=xp.float64)
            values = list(base)
            values[i] = Tensor(xp.reshape(flat + step, inputs[i].shape))
            plus = contracted(values)
            values[i] = Tensor(xp.reshape(flat - step, inputs[i].shape))
            return (plus - contracted(values)) / (2 * h)

        if fast_mode:
            direction = rng.standard_normal(size)
            if derived:
                direction = direction / max(float(numpy.max(numpy.abs(direction), initial=0.0)), 1e-300)
            directions: list | range = [direction]
            analytic_values = numpy.array([float(numpy.dot(analytic_host.reshape(-1), direction))])
            positions = ["direction u"]
        else:
            directions = range(size)
            analytic_values = analytic_host.reshape(-1)
            positions = None

        if derived:
            h = _pick_step(central, pilot.standard_normal(size), delta) if size else MAX_STEP
            first = numpy.array([central(d, h) for d in directions], dtype=numpy.float64)
            second = numpy.array([central(d, h / 2) for d in directions], dtype=numpy.float64)
            numeric = (4 * second - first) / 3  # Richardson
            truncation = numpy.abs(first - second)
            floor = (
                n_ops
                * float(numpy.finfo(inputs[i].dtype).eps)
                * max(1.0, float(numpy.max(numpy.abs(analytic_values), initial=0.0)))
            )
            allowed = 2 * (truncation + 3 * delta / h) + floor
            tiny = floor
        else:
            h = eps
            numeric = numpy.array([central(d, eps) for d in directions], dtype=numpy.float64)
            allowed = atol + rtol * numpy.abs(numeric)
            tiny = atol

        error = numpy.abs(analytic_values - numeric)
        share = numpy.divide(error, allowed, out=numpy.where(error > 0, numpy.inf, 0.0), where=allowed > 0)
        max_abs = max(max_abs, float(error.max(initial=0.0)))
        max_rel = max(
            max_rel, float((error / numpy.maximum(numpy.abs(numeric), tiny)).max(initial=0.0)) if error.size else 0.0
        )
        ratio = max(ratio, float(share.max(initial=0.0)))
        largest_allowed = max(largest_allowed, float(allowed.max(initial=0.0)) if error.size else 0.0)
        largest_step = max(largest_step, h)
        if not numpy.all(error <= allowed):
            worst = int(numpy.argmax(share))
            where = (
                positions[0]
                if positions
                else f"element {tuple(int(k) for k in numpy.unravel_index(worst, inputs[i].shape))}"
            )
            rule = (
                f"allowed {allowed[worst]:.3e} = 2 (truncation {truncation[worst]:.3e} + rounding "
                f"{3 * delta / h:.3e}) + floor {floor:.3e}, step {h:.3g}"
                if derived
                else f"atol {atol:g} + rtol {rtol:g} * |numeric|"
            )
            return GradcheckReport(
                max_abs,
                max_rel,
                (
                    f"gradient of input {i} (shape {inputs[i].shape}) is wrong at {where}: "
                    f"analytic {analytic_values[worst]:.10g}, numeric {numeric[worst]:.10g}, "
                    f"|difference| {error[worst]:.3e} > {rule}"
                    f"{'' if grad is not None else ' (backward gave this input no gradient)'}"
                ),
                largest_step,
                largest_allowed,
                ratio,
            )
    return GradcheckReport(max_abs, max_rel, None, largest_step, largest_allowed, ratio)


MIN_STEP, PILOT_STEP, MAX_STEP = 1e-6, 1e-3, 1e-3


def _evaluation_error(fn, base, outputs, upstream, float_outputs, n_ops, as_tuple, xp):
    """``δ``, a bound on the rounding error of one float64 evaluation of ``s``: each output
    off by ``n_ops`` roundings at ``max(1, ‖f‖∞)``, the sum by one per halving of its terms."""
    with no_grad():
        outs = as_tuple(fn(*base))
    terms = sum(int(numpy.prod(outputs[k].shape)) for k in float_outputs)
    largest = max((float(xp.max(xp.abs(outs[k].data))) for k in float_outputs if outs[k].data.size), default=0.0)
    weight = sum(float(xp.sum(xp.abs(xp.astype(upstream[k], xp.float64)))) for k in float_outputs)
    steps = n_ops + math.ceil(math.log2(terms + 1))
    return steps * float(numpy.finfo(numpy.float64).eps) * weight * max(1.0, largest)


def _pick_step(central, direction, delta):
    """Step 1 of the derived tolerances: the step that balances truncation (``¾ c h²``,
    ``c`` measured along ``direction`` at ``PILOT_STEP``) against rounding (``3 δ / h``)."""
    direction = direction / max(float(numpy.max(numpy.abs(direction), initial=0.0)), 1e-300)
    c = abs(central(direction, PILOT_STEP) - central(direction, PILOT_STEP / 2)) / (0.75 * PILOT_STEP**2)
    if not c > 0:  # a linear function along direction (or no input elements): rounding alone
        return MAX_STEP
    return min(max((2 * delta / c) ** (1 / 3), MIN_STEP), MAX_STEP)
