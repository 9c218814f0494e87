"""Optimizers, gradient clipping and the learning-rate schedule used to train the GPT.

Every optimizer updates ``param.data`` in place from ``param.grad`` (both raw arrays of
the parameter's device), outside the autograd graph. Names, arguments and update rules
are PyTorch's (``torch.optim.SGD``, ``Adam``, ``AdamW``), so results can be compared
step for step:

=========  =====================================================================
SGD        ``b = μ b + g`` (``b = g`` on the first step);  ``p -= lr b``
           (Polyak momentum; Sutskever et al. 2013, eq. 1 in PyTorch's form)
Adam       ``g += λ p`` (L2 penalty);  ``m = β1 m + (1-β1) g``;  ``v = β2 v + (1-β2) g²``;
           ``p -= lr (m / (1-β1ᵗ)) / (sqrt(v / (1-β2ᵗ)) + ε)``  (Kingma & Ba,
           arXiv:1412.6980, Alg. 1)
AdamW      as Adam, but the weight decay is decoupled: ``p *= 1 - lr λ`` before the
           Adam step (Loshchilov & Hutter, arXiv:1711.05101, Alg. 2)
=========  =====================================================================

An optimizer takes an iterable of parameters, or of *parameter groups*: dicts with a
``"params"`` list and any hyperparameter to override for that group (as in PyTorch;
the training job, :func:`minitorch_attn.app.train.make_optimizer`, decays every matrix --
projections, token and position embeddings -- and leaves biases and norm gains alone).
``optimizer.param_groups[i]["lr"]`` is the learning rate a schedule changes.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable
from typing import Any

import numpy

from .core.backend import backend_of
from .core.tensor import Tensor, _is_int
from .speed import blas_threads, each_on_threads, fused_kernels


class Optimizer:
    """Base class: parameter groups, ``zero_grad``, and per-parameter state that can be
    saved (``state_dict``) and restored (``load_state_dict``).

    Args:
        params: an iterable of Parameters, or of dicts ``{"params": [...], **options}``.
        defaults: the hyperparameters every group starts from.
    A tensor that does not require gradients may be listed, as in PyTorch: it has no
    gradient, so :meth:`step` leaves it alone (a frozen layer's parameters, listed with the
    rest, stay as they are).

    Raises:
        ValueError: if there are no parameters, one appears twice, or one is not a leaf.
        TypeError: if ``params`` is a single Tensor (as PyTorch: wrap it in a list), a group
            has no ``"params"``, or a parameter is not a Tensor.
    """

    def __init__(self, params: Iterable[Tensor] | Iterable[dict[str, Any]], defaults: dict[str, Any]) -> None:
        if isinstance(params, Tensor) or not hasattr(params, "__iter__"):
            raise TypeError(
                "params argument given to the optimizer should be an iterable of Tensors or dicts, "
                f"but got {type(params).__name__}"
            )
        given: list[Any] = list(params)
        if not given:
            raise ValueError(f"{type(self).__name__} got an empty parameter list")
        groups = given if isinstance(given[0], dict) else [{"params": given}]
        self.defaults = dict(defaults)
        self.param_groups: list[dict[str, Any]] = []
        seen = set()
        for group in groups:
            if not isinstance(group, dict) or "params" not in group:
                raise TypeError(f"a parameter group must be a dict with a 'params' list, got {group!r:.80}")
            group = {**self.defaults, **group, "params": list(group["params"])}
            for p in group["params"]:
                if not isinstance(p, Tensor):
                    raise TypeError(
                        f"{type(self).__name__} can only optimize Tensors, but one of the params is {type(p).__name__}"
                    )
                if p.grad_fn is not None:
                    raise ValueError(
                        f"{type(self).__name__} can't optimize a non-leaf Tensor (the result of an "
                        f"operation); give it the leaf, the Parameter itself"
                    )
                if id(p) in seen:
                    raise ValueError("a parameter appears in more than one group")
                seen.add(id(p))
            self.param_groups.append(group)
        self.state: dict[int, dict[str, Any]] = {}  # id(param) -> {"step": int, name: array}

    def parameters(self) -> list[Tensor]:
        return [p for group in self.param_groups for p in group["params"]]

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Forget every parameter's gradient (``grad = None``, as PyTorch's default), or with
        ``set_to_none=False`` fill each with zeros in place."""
        for p in self.parameters():
            p.zero_grad(set_to_none)

    def step(self) -> None:
        """Update every parameter that has a gradient (``_update`` of each, with its group's
        hyperparameters and its own state).

        speed: one parameter's update reads and writes only its own arrays, so on the CPU
        the pool's threads (:func:`minitorch_attn.get_num_threads`) take the parameters one
        at a time, largest first; the numbers are those of one thread.
        """
        todo = []
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state.setdefault(id(p), {"step": 0})
                state["step"] += 1
                todo.append((p, state, group))
        todo.sort(key=lambda item: -math.prod(item[0].shape))

        def update(n):
            p, state, group = todo[n]
            self._update(p, p.grad.data, state, group)

        each_on_threads(len(todo), update, on_cpu=all(backend_of(p.data).name == "cpu" for p, _, _ in todo))
        for p, _, _ in todo:
            p._version_counter[0] += 1  # an in-place write: a graph that saved p sees it

    def _update(self, p, grad, state, group):
        raise NotImplementedError

    # ---- saving and restoring -------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """``{"param_groups": [hyperparameters per group], "state": {index: {name: value}}}``.

        Parameters are named by their position in :meth:`parameters` (as PyTorch does);
        arrays stay on their device. :mod:`minitorch_attn.app.checkpoint` stores this."""
        index = {id(p): i for i, p in enumerate(self.parameters())}
        groups = [{k: v for k, v in g.items() if k != "params"} for g in self.param_groups]
        for g, group in zip(groups, self.param_groups):
            g["params"] = [index[id(p)] for p in group["params"]]
        state = {index[key]: dict(value) for key, value in self.state.items() if key in index}
        return {"param_groups": groups, "state": state}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore hyperparameters and per-parameter state saved by :meth:`state_dict`.

        Arrays (NumPy or any backend) are copied onto each parameter's device.
        Raises:
            ValueError: if ``state_dict`` is not shaped like one, the number of groups or of
                parameters per group differs, or a saved moment has a different shape from
                its parameter.
        """
        _check_state_dict(state_dict, len(self.parameters()))
        groups = state_dict["param_groups"]
        if len(groups) != len(self.param_groups):
            raise ValueError(
                f"optimizer state has {len(groups)} parameter groups, this optimizer has {len(self.param_groups)}"
            )
        for saved, group in zip(groups, self.param_groups):
            if len(saved["params"]) != len(group["params"]):
                raise ValueError(
                    f"optimizer state has a group of {len(saved['params'])} parameters where this "
                    f"optimizer has {len(group['params'])}"
                )
        params = self.parameters()
        self.state = {}
        for i, entry in state_dict["state"].items():
            p = params[int(i)]
            backend = backend_of(p.data)
            restored = {}
            for name, value in entry.items():
                if name == "step":
                    restored[name] = int(value)
                    continue
                if tuple(value.shape) != p.shape:
                    raise ValueError(
                        f"optimizer state '{name}' of parameter {i} has shape {tuple(value.shape)}, expected {p.shape}"
                    )
                host = backend_of(value).to_numpy(value)
                restored[name] = backend.xp.astype(backend.asarray(host), p.data.dtype, copy=True)  # never shared
            self.state[id(p)] = restored
        for saved, group in zip(groups, self.param_groups):
            group.update({k: v for k, v in saved.items() if k != "params"})


def _check_state_dict(state_dict, num_params):
    """Raise a ValueError unless ``state_dict`` has the layout :meth:`Optimizer.state_dict` makes."""
    if not isinstance(state_dict, dict) or not {"param_groups", "state"} <= state_dict.keys():
        found = sorted(state_dict) if isinstance(state_dict, dict) else type(state_dict).__name__
        raise ValueError(f"an optimizer state dict needs 'param_groups' and 'state', got {found}")
    groups, state = state_dict["param_groups"], state_dict["state"]
    if not isinstance(groups, (list, tuple)) or not all(isinstance(g, dict) and "params" in g for g in groups):
        raise ValueError("optimizer state's 'param_groups' must be a list of dicts, each with 'params'")
    if not isinstance(state, dict) or not all(isinstance(entry, dict) for entry in state.values()):
        raise ValueError("optimizer state's 'state' must be a dict {parameter index: {name: value}}")
    for index in state:
        if not (isinstance(index, (int, str)) and str(index).isdigit() and int(index) < num_params):
            raise ValueError(f"optimizer state names parameter {index!r}; this optimizer has {num_params}")


def _check_hyperparameters(lr, weight_decay, **others):
    if not lr >= 0.0:
        raise ValueError(f"invalid learning rate {lr!r}; expected lr >= 0")
    if not weight_decay >= 0.0:
        raise ValueError(f"invalid weight_decay {weight_decay!r}; expected >= 0")
    for name, value in others.items():
        if not 0.0 <= value < 1.0:
            raise ValueError(f"invalid {name} {value!r}; expected 0 <= {name} < 1")


class SGD(Optimizer):
    """Stochastic gradient descent with optional momentum, as ``torch.optim.SGD``.

    With ``g`` the gradient, ``λ`` the weight decay and ``μ`` the momentum, each step::

        1. g = g + λ p
        2. b = μ b + (1 - dampening) g      (with momentum; b = g on the first step)
        3. g = g + μ b if nesterov, else b   (with momentum)
        4. p = p - lr g

    ``p`` is written in place: the model's layers (and the replicas of
    :class:`~minitorch_attn.nn.SplitBatch`) hold that very array.
    """

    def __init__(
        self,
        params: Iterable[Tensor] | Iterable[dict[str, Any]],
        lr: float = 1e-3,
        momentum: float = 0.0,
        dampening: float = 0.0,
        weight_decay: float = 0.0,
        nesterov: bool = False,
    ) -> None:
        _check_hyperparameters(lr, weight_decay, momentum=momentum)
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("nesterov momentum needs momentum > 0 and dampening = 0")
        super().__init__(
            params, dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay, nesterov=nesterov)
        )

    def _update(self, p, grad, state, group):
        momentum = group["momentum"]
        if group["weight_decay"]:
            grad = grad + group["weight_decay"] * p.data  # 1
        if momentum and "momentum_buffer" not in state:
            state["momentum_buffer"] = grad + 0  # 2: b = g (a copy)
        elif momentum:
            state["momentum_buffer"] = momentum * state["momentum_buffer"] + (1 - group["dampening"]) * grad  # 2
        if momentum:
            buf = state["momentum_buffer"]
            grad = grad + momentum * buf if group["nesterov"] else buf  # 3
        p.data -= group["lr"] * grad  # 4


class Adam(Optimizer):
    """Adam (Kingma & Ba, arXiv:1412.6980, Algorithm 1), as ``torch.optim.Adam``.

    With ``g`` the gradient, ``t`` the step (from 1) and ``λ`` the weight decay, each step::

        0. g = g + λ p                   (AdamW instead: p = p (1 - lr λ))
        1. m = β1 m + (1 - β1) g
        2. v = β2 v + (1 - β2) g²
        3. m̂ = m / (1 - β1ᵗ),  v̂ = v / (1 - β2ᵗ)
        4. p = p - lr m̂ / (sqrt(v̂) + ε)

    Steps 3 and 4 are taken in PyTorch's order, ``p - (lr / (1 - β1ᵗ)) (m / (sqrt(v) /
    sqrt(1 - β2ᵗ) + ε))``, so that the numbers are PyTorch's. ``p`` is written in place: the
    model's layers (and the replicas of :class:`~minitorch_attn.nn.SplitBatch`) hold that
    very array.

    ``weight_decay`` adds ``λ p`` to the gradient (an L2 penalty, coupled to the adaptive
    step); prefer :class:`AdamW` for decoupled decay. Moments are kept in the parameter's
    dtype and device.
    """

    decoupled = False

    def __init__(
        self,
        params: Iterable[Tensor] | Iterable[dict[str, Any]],
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
    ) -> None:
        _check_hyperparameters(lr, weight_decay, beta1=betas[0], beta2=betas[1])
        if not eps >= 0.0:
            raise ValueError(f"invalid eps {eps!r}; expected eps >= 0")
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay))

    def _update(self, p, grad, state, group):
        xp = backend_of(p.data).xp
        lr, (beta1, beta2), eps, decay = group["lr"], group["betas"], group["eps"], group["weight_decay"]
        t = state["step"]
        if "exp_avg" not in state:
            state["exp_avg"], state["exp_avg_sq"] = xp.zeros_like(p.data), xp.zeros_like(p.data)
        if decay and self.decoupled:
            p.data *= 1 - lr * decay  # 0 (AdamW): p = p (1 - lr λ)
        elif decay:
            grad = grad + decay * p.data  # 0 (Adam): g = g + λ p
        kernels = fused_kernels()
        if kernels is not None:  # speed: steps 1-4 written into m, v, p (minitorch_attn/speed/fused.py)
            kernels.adam_steps_(xp, p.data, grad, state["exp_avg"], state["exp_avg_sq"], lr, beta1, beta2, eps, t)
            return
        m = state["exp_avg"] = beta1 * state["exp_avg"] + (1 - beta1) * grad  # 1
        v = state["exp_avg_sq"] = beta2 * state["exp_avg_sq"] + (1 - beta2) * (grad * grad)  # 2
        sqrt_v_hat_eps = xp.sqrt(v) / math.sqrt(1 - beta2**t) + eps  # 3: sqrt(v̂) + ε
        p.data -= lr / (1 - beta1**t) * (m / sqrt_v_hat_eps)  # 3, 4: lr m̂ / (sqrt(v̂) + ε)


class AdamW(Adam):
    """Adam with decoupled weight decay (Loshchilov & Hutter, arXiv:1711.05101, Alg. 2),
    as ``torch.optim.AdamW``: ``p *= 1 - lr * weight_decay`` and then the Adam step."""

    decoupled = True

    def __init__(
        self,
        params: Iterable[Tensor] | Iterable[dict[str, Any]],
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 1e-2,
    ) -> None:
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)


def clip_grad_norm_(parameters: Tensor | Iterable[Tensor], max_norm: float, error_if_nonfinite: bool = False) -> Tensor:
    """Scale all gradients together so that their global L2 norm is at most ``max_norm``
    (as ``torch.nn.utils.clip_grad_norm_``; Pascanu et al., arXiv:1211.5063, Alg. 2).

    ``total = sqrt(Σ_p Σ g²)``; every gradient is multiplied by
    ``scale = min(1, max_norm / (total + 1e-6))``: by 1, which changes no number, when
    the norm is within ``max_norm`` (on the CPU that product is skipped, and the
    gradients' versions stay). Parameters without a gradient are skipped. The norm
    and the scale stay arrays on the gradients' device, so clipping never makes the host
    wait for a GPU (a host synchronisation, ``core/backend.py``); PyTorch does the same.

    The squares of large float32 gradients overflow (``(2e19)² > 3.4e38``), so a gradient
    whose sum of squares overflows (or underflows) has its norm taken after dividing by
    its largest magnitude ``m``: ``||g|| = m sqrt(Σ (g / m)²)``; the norms are combined in
    float64 by the same rule (the largest norm taken out). The result is finite whenever
    the true norm is. speed: on the CPU, where a check costs no wait, the usual gradients
    (all of them in training) take one BLAS dot product each, ``Σ g² = g · g``, instead
    of four passes: 0.2 against 1.6 ms for the 34 gradients of the default GPT; on a
    device both are computed and the right one kept (``all_false``). The dots run on a
    one-thread BLAS: two threads gain nothing on vectors this short and leave BLAS's
    second thread spinning for about 0.1 s after them, on the core that the next step's
    second part of the batch needs (``benchmarks/step_profile.py``); the pool's threads,
    tried, cost more than the dots (0.45 against 0.27 ms at 2 threads).

    Args:
        parameters: an iterable of Tensors, or a single Tensor (as PyTorch).
        max_norm: the largest global norm allowed (> 0).
        error_if_nonfinite: raise instead of clipping when the norm is inf or NaN (as
            PyTorch's option, which reads the norm on the host; without it, the gradients
            are scaled by the non-finite norm like PyTorch does, which makes them 0 or NaN).
    Returns:
        the norm before clipping, a 0-d float64 Tensor on the gradients' device (PyTorch
        returns it in the gradients' dtype; float64 keeps the norm of float32 gradients
        finite up to float32's largest number). ``float(total)`` reads it.
    Raises:
        ValueError: if ``max_norm`` is not positive, or with ``error_if_nonfinite`` if a
            gradient holds inf or NaN (the message names which).
    """
    if not max_norm > 0:
        raise ValueError(f"max_norm must be positive, got {max_norm!r}")
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    grads = [p.grad for p in parameters if p.grad is not None]
    if not grads:
        return Tensor(numpy.zeros((), dtype=numpy.float64))
    xp = backend_of(grads[0].data).xp
    with numpy.errstate(over="ignore", under="ignore", invalid="ignore"), blas_threads(1):  # speed: see above
        norms = xp.stack([_l2_norm(g.data) for g in grads])  # float64 (a dot that overflows is redone)
        total = _l2_norm(norms)
        if error_if_nonfinite and not math.isfinite(float(total)):
            bad = [i for i, n in enumerate(backend_of(norms).to_numpy(norms).tolist()) if not math.isfinite(n)]
            raise ValueError(
                f"the total gradient norm is {float(total)}: the gradients of {len(bad)} of the "
                f"{len(grads)} parameters with a gradient (number {', '.join(map(str, bad[:5]))}) hold "
                f"inf or NaN, so they cannot be clipped (error_if_nonfinite=True)"
            )
        scale = xp.minimum(max_norm / (total + 1e-6), 1.0)  # a NaN norm gives NaN, as PyTorch
        if not backend_of(scale).all_false(~(scale >= 1.0)):  # speed: on the CPU, nothing to do within max_norm
            for g in grads:
                g.data *= xp.astype(scale, g.data.dtype)  # the scale in the gradient's dtype, as a float would be
                g._version_counter[0] += 1
    return Tensor(total)


def _l2_norm(array):
    """``sqrt(Σ x²)`` of one array as a 0-d float64 array on its device, without overflow:
    ``sqrt(x · x)`` where that sum is far from over- and underflow, else
    ``m sqrt(Σ (x/m)²)`` with ``m = max |x|`` (inf or NaN when the array holds them)."""
    backend = backend_of(array)
    xp = backend.xp
    n = math.prod(array.shape)
    f64 = backend.dtype("float64")
    if n == 0:
        return xp.zeros((), dtype=f64, device=backend.device)
    flat = xp.reshape(array, (n,))
    squares = xp.vecdot(flat, flat)  # overflows to inf, or loses what underflowed
    limits = xp.finfo(array.dtype)
    plain = xp.sqrt(xp.astype(squares, f64))
    fine = (n * float(limits.smallest_normal) / float(limits.eps) <= squares) & (squares < math.inf)
    if backend.all_false(~fine):  # each term that underflowed is < eps / n of the sum
        return plain
    largest = xp.max(xp.abs(flat))
    usable = (largest > 0) & xp.isfinite(largest)
    scaled = flat / xp.where(usable, largest, xp.ones_like(largest))
    rescaled = xp.astype(largest, f64) * xp.sqrt(xp.astype(xp.vecdot(scaled, scaled), f64))
    return xp.where(fine, plain, xp.where(usable, rescaled, xp.astype(largest, f64)))


class WarmupCosineLR:
    """Linear warmup, then cosine decay to ``min_lr_ratio`` times the base rate.

    For step ``s`` (counted from 0):

    - ``s < warmup_steps``:  ``lr = base (s + 1) / warmup_steps``
    - after warmup:  ``lr = base (r + (1 - r) (1 + cos(π t)) / 2)`` with
      ``t = (s - warmup) / (total - warmup)`` clipped to [0, 1] and ``r = min_lr_ratio``
      (default 0: down to 0, as PyTorch's ``CosineAnnealingLR`` with ``eta_min=0``)

    (the SGDR cosine of Loshchilov & Hutter, arXiv:1608.03983, eq. 5, after a linear warmup as in
    Goyal et al., arXiv:1706.02677). ``total_steps`` may be changed while training (the
    training job re-estimates it when it runs for a time budget rather than a step count).

    Use it as PyTorch's schedulers: creating it writes the rate of step 0 into every
    parameter group, and :meth:`step`, called after each ``optimizer.step()``, writes the
    rate of the next step (and returns it)::

        scheduler = WarmupCosineLR(optimizer, warmup_steps=50, total_steps=1000)
        for x, y in batches:
            loss = loss_fn(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            scheduler.step()

    With ``total_steps <= warmup_steps`` there is no decay: the rate climbs to the base
    rate and stays there.

    Raises:
        TypeError: ``warmup_steps`` or ``total_steps`` not an int, ``min_lr_ratio`` not a number.
        ValueError: ``warmup_steps < 0``, ``total_steps < 1``, ``min_lr_ratio`` outside [0, 1].
    """

    # what __init__ sets (declared here: mypy reads the numbers.Real check of a float as always failing)
    optimizer: Optimizer
    warmup_steps: int
    total_steps: int
    min_lr_ratio: float
    base_lrs: list[float]
    last_step: int

    def __init__(self, optimizer: Optimizer, warmup_steps: int, total_steps: int, min_lr_ratio: float = 0.0) -> None:
        for name, value in (("warmup_steps", warmup_steps), ("total_steps", total_steps)):
            if not _is_int(value):
                raise TypeError(f"{name} must be an int, got {value!r}")
        if not (warmup_steps >= 0 and total_steps >= 1):
            raise ValueError(f"need warmup_steps >= 0 and total_steps >= 1, got {warmup_steps}, {total_steps}")
        if isinstance(min_lr_ratio, bool) or not isinstance(min_lr_ratio, numbers.Real):
            raise TypeError(f"min_lr_ratio must be a number in [0, 1], got {min_lr_ratio!r}")
        if not 0.0 <= min_lr_ratio <= 1.0:
            raise ValueError(f"min_lr_ratio must be in [0, 1], got {min_lr_ratio!r}")
        self.optimizer = optimizer
        self.warmup_steps = int(warmup_steps)
        self.total_steps = int(total_steps)
        self.min_lr_ratio = float(min_lr_ratio)  # a Python float, so that the rates it writes save as JSON
        self.base_lrs = [group["lr"] for group in optimizer.param_groups]
        self.last_step = -1
        self.step()  # the rate of step 0, as PyTorch's schedulers set it when they are made

    def factor(self, step: int) -> float:
        """The multiplier of the base rate at ``step`` (>= 0)."""
        if not step >= 0:
            raise ValueError(f"a schedule step must be >= 0, got {step!r}")
        if step < self.warmup_steps:
            return (step + 1) / self.warmup_steps
        span = max(1, self.total_steps - self.warmup_steps)
        t = min(1.0, max(0.0, (step - self.warmup_steps) / span))
        r = self.min_lr_ratio
        return r + (1 - r) * 0.5 * (1 + math.cos(math.pi * t))

    def step(self, step: int | None = None) -> float:
        """Move to the next step (or to ``step``, counted from 0) and write its rate."""
        self.last_step = self.last_step + 1 if step is None else step
        f = self.factor(self.last_step)
        for group, base in zip(self.optimizer.param_groups, self.base_lrs):
            group["lr"] = base * f
        return self.base_lrs[0] * f
