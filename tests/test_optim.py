"""Optimizers against their closed-form first steps and against PyTorch, step for step."""

import math

import numpy as np
import pytest

import minitorch_attn as mt
from minitorch_attn import nn, optim
from minitorch_attn.app import checkpoint as ckpt
from tests.conftest import float64_tolerance


def _param(values, device="cpu", dtype="float64"):
    return mt.tensor(np.asarray(values), dtype=dtype, device=device, requires_grad=True)


def _set_grad(p, values):
    p.grad = mt.tensor(np.asarray(values), dtype=p.dtype, device=p.device)


P0 = [0.5, -1.0, 2.0]
G = [0.1, -0.3, 0.0]


def test_sgd_plain_step_is_p_minus_lr_g(device):
    p = _param(P0, device)
    opt = optim.SGD([p], lr=0.1)
    _set_grad(p, G)
    opt.step()
    np.testing.assert_allclose(p.numpy(), np.array(P0) - 0.1 * np.array(G))


def test_sgd_momentum_two_steps(device):
    p = _param(P0, device)
    opt = optim.SGD([p], lr=0.1, momentum=0.9)
    g = np.array(G)
    _set_grad(p, G)
    opt.step()  # b1 = g
    _set_grad(p, G)
    opt.step()  # b2 = 0.9 g + g
    np.testing.assert_allclose(p.numpy(), np.array(P0) - 0.1 * g - 0.1 * 1.9 * g)


def test_adam_first_step_moves_each_weight_by_lr(device):
    """After one step m̂ = g and v̂ = g², so p -= lr g / (|g| + eps) ≈ lr sign(g)."""
    p = _param(P0, device)
    opt = optim.Adam([p], lr=0.01, eps=1e-8)
    _set_grad(p, G)
    opt.step()
    g = np.array(G)
    np.testing.assert_allclose(p.numpy(), np.array(P0) - 0.01 * g / (np.abs(g) + 1e-8), rtol=1e-12)


def test_adamw_decay_is_decoupled(device):
    """With a zero gradient AdamW only shrinks the weights by (1 - lr λ); Adam's L2 term
    instead enters the moments (and moves by about lr)."""
    p = _param(P0, device)
    opt = optim.AdamW([p], lr=0.1, weight_decay=0.5)
    _set_grad(p, [0.0, 0.0, 0.0])
    opt.step()
    np.testing.assert_allclose(p.numpy(), np.array(P0) * (1 - 0.05))

    q = _param(P0, device)
    opt = optim.Adam([q], lr=0.1, weight_decay=0.5)
    _set_grad(q, [0.0, 0.0, 0.0])
    opt.step()
    np.testing.assert_allclose(q.numpy(), np.array(P0) - 0.1 * np.sign(P0), rtol=1e-6)


@pytest.mark.parametrize(
    "name,kwargs",
    [
        ("SGD", dict(lr=0.05, momentum=0.9, weight_decay=0.01)),
        ("SGD", dict(lr=0.05, momentum=0.9, nesterov=True)),
        ("Adam", dict(lr=0.01, betas=(0.8, 0.99), weight_decay=0.1)),
        ("AdamW", dict(lr=0.01, weight_decay=0.1)),
    ],
)
def test_matches_pytorch_over_five_steps(torch, name, kwargs):
    rng = np.random.default_rng(1)
    start = rng.standard_normal((4, 3))
    grads = rng.standard_normal((5, 4, 3))
    p = _param(start)
    ours = getattr(optim, name)([p], **kwargs)
    tp = torch.tensor(start, requires_grad=True)
    theirs = getattr(torch.optim, name)([tp], **kwargs)
    for g in grads:
        _set_grad(p, g)
        ours.step()
        tp.grad = torch.tensor(g)
        theirs.step()
    expected = tp.detach().numpy()
    np.testing.assert_allclose(p.numpy(), expected, atol=float64_tolerance(expected, 50, "float64"))


def test_float32_parameters_stay_float32():
    p = _param(P0, dtype="float32")
    opt = optim.AdamW([p], lr=0.1)
    _set_grad(p, G)
    opt.step()
    assert p.dtype == "float32" and opt.state[id(p)]["exp_avg"].dtype == np.float32


def test_param_groups_override_defaults():
    a, b = _param(P0), _param(P0)
    opt = optim.SGD([{"params": [a]}, {"params": [b], "lr": 1.0}], lr=0.1)
    _set_grad(a, G)
    _set_grad(b, G)
    opt.step()
    np.testing.assert_allclose(a.numpy(), np.array(P0) - 0.1 * np.array(G))
    np.testing.assert_allclose(b.numpy(), np.array(P0) - 1.0 * np.array(G))


def test_bad_arguments_raise():
    with pytest.raises(ValueError, match="learning rate"):
        optim.SGD([_param(P0)], lr=-1)
    with pytest.raises(ValueError, match="empty"):
        optim.Adam([])
    with pytest.raises(ValueError, match="beta1"):
        optim.Adam([_param(P0)], betas=(1.0, 0.9))
    with pytest.raises(TypeError, match="can only optimize Tensors, but one of the params is list"):
        optim.SGD([P0])
    with pytest.raises(ValueError, match="can't optimize a non-leaf Tensor"):
        optim.SGD([_param(P0) * 2])


def test_state_dict_round_trip_continues_identically():
    rng = np.random.default_rng(2)
    grads = rng.standard_normal((4, 3))
    p, q = _param(P0), _param(P0)
    a, b = optim.AdamW([p], lr=0.1), optim.AdamW([q], lr=0.1)
    for g in grads[:2]:
        _set_grad(p, g)
        a.step()
        _set_grad(q, g)
        b.step()
    fresh = optim.AdamW([q], lr=0.5)
    fresh.load_state_dict(b.state_dict())
    assert fresh.param_groups[0]["lr"] == 0.1
    for g in grads[2:]:
        _set_grad(p, g)
        a.step()
        _set_grad(q, g)
        fresh.step()
    np.testing.assert_array_equal(p.numpy(), q.numpy())


def test_clip_grad_norm_scales_to_max_norm():
    a, b = _param([0.0, 0.0]), _param([0.0])
    _set_grad(a, [3.0, 0.0])
    _set_grad(b, [4.0])
    total = float(optim.clip_grad_norm_([a, b], max_norm=1.0))
    assert total == pytest.approx(5.0)
    new_norm = math.sqrt(float(np.sum(a.grad.numpy() ** 2) + np.sum(b.grad.numpy() ** 2)))
    assert new_norm == pytest.approx(1.0, rel=1e-5)
    assert float(optim.clip_grad_norm_([a, b], max_norm=10.0)) == pytest.approx(1.0, rel=1e-5)  # no change
    with pytest.raises(ValueError):
        optim.clip_grad_norm_([a], max_norm=0)


def test_clip_grad_norm_of_a_huge_float32_gradient_matches_pytorch(device, torch):
    p, t = _param([0.0], device, "float32"), torch.zeros(1, requires_grad=True)
    _set_grad(p, [2e19])  # its square overflows float32
    t.grad = torch.tensor([2e19])
    total = float(optim.clip_grad_norm_(p, max_norm=1.0))
    expected = torch.nn.utils.clip_grad_norm_(t, max_norm=1.0).item()
    assert total == pytest.approx(expected, rel=1e-7) and total == pytest.approx(2e19, rel=1e-7)
    np.testing.assert_allclose(p.grad.numpy(), t.grad.numpy(), rtol=1e-7)
    np.testing.assert_allclose(p.grad.numpy(), [1.0], rtol=1e-6)


@pytest.mark.parametrize(
    "grads",
    [[[3e19, -1.0], [4e19]], [[1e-30, 2e-30], [], [3.0]], [[3e38], [3e38]]],
    ids=["huge in two tensors", "tiny and empty", "each norm near float32's largest"],
)
def test_clip_grad_norm_in_float32_is_the_float64_norm_whenever_that_is_finite(grads, device):
    ours = [_param(np.zeros(len(g)), device, "float32") for g in grads]
    for p, g in zip(ours, grads):
        _set_grad(p, g)
    exact = float(np.linalg.norm(np.concatenate([np.asarray(g, dtype=np.float32) for g in grads]).astype(np.float64)))
    total = float(optim.clip_grad_norm_(ours, max_norm=1.0))  # (PyTorch 2.13 overflows to inf on the first and last)
    assert total == pytest.approx(exact, rel=1e-6)
    clipped = math.hypot(*(float(np.linalg.norm(p.grad.numpy().astype(np.float64))) for p in ours))
    assert clipped == pytest.approx(min(1.0, exact), rel=1e-5)


@pytest.mark.parametrize("bad", [math.inf, -math.inf, math.nan])
def test_clip_grad_norm_error_if_nonfinite_as_pytorch(bad, torch):
    a, b = _param([0.0, 0.0], dtype="float32"), _param([0.0], dtype="float32")
    _set_grad(a, [1.0, 2.0])
    _set_grad(b, [bad])
    t = torch.tensor([bad], requires_grad=True)
    t.grad = torch.tensor([bad])
    with pytest.raises(RuntimeError, match="non-finite"):
        torch.nn.utils.clip_grad_norm_([t], 1.0, error_if_nonfinite=True)
    with pytest.raises(
        ValueError, match=r"gradients of 1 of the 2 parameters with a gradient \(number 1\) hold inf or NaN"
    ):
        optim.clip_grad_norm_([a, b], 1.0, error_if_nonfinite=True)
    np.testing.assert_array_equal(a.grad.numpy(), [1.0, 2.0])  # nothing was scaled
    with np.errstate(invalid="ignore"):  # inf * 0 is NaN, as in PyTorch
        total = float(optim.clip_grad_norm_([a, b], 1.0))
    expected = torch.nn.utils.clip_grad_norm_([t], 1.0).item()
    assert total == expected or (math.isnan(total) and math.isnan(expected))


def test_clip_grad_norm_returns_the_norm_as_a_float64_tensor_on_the_gradients_device(device):
    p = _param([0.0, 0.0], device, "float32")
    _set_grad(p, [3.0, 4.0])
    total = optim.clip_grad_norm_([p], 10.0)  # as PyTorch: a tensor, read only when asked
    assert isinstance(total, mt.Tensor) and total.shape == () and total.dtype == "float64"
    assert total.device == device and total.item() == 5.0
    np.testing.assert_array_equal(p.grad.numpy(), [3.0, 4.0])  # within max_norm: not a digit changed
    assert float(optim.clip_grad_norm_([], 1.0)) == 0.0


def test_warmup_cosine_schedule():
    p = _param(P0)
    opt = optim.SGD([p], lr=1.0)
    sched = optim.WarmupCosineLR(opt, warmup_steps=4, total_steps=14, min_lr_ratio=0.1)
    lrs = [opt.param_groups[0]["lr"]]  # made: the rate of step 0, as PyTorch's schedulers
    lrs += [sched.step() for _ in range(15)]  # each call after an optimizer step: the next rate
    assert lrs[:4] == pytest.approx([0.25, 0.5, 0.75, 1.0])
    assert lrs[4] == pytest.approx(1.0)  # cosine starts at the top
    assert lrs[9] == pytest.approx(0.1 + 0.9 * 0.5)  # halfway
    assert lrs[14] == pytest.approx(0.1) and lrs[15] == pytest.approx(0.1)  # floor
    assert opt.param_groups[0]["lr"] == pytest.approx(0.1)
    assert all(x >= y for x, y in zip(lrs[3:], lrs[4:]))


def test_a_single_tensor_is_clipped_as_pytorch_does():
    p = mt.tensor([3.0, 4.0], requires_grad=True)
    p.grad = mt.tensor([3.0, 4.0])
    assert float(optim.clip_grad_norm_(p, 1.0)) == pytest.approx(5.0)
    np.testing.assert_allclose(p.grad.numpy(), [0.6, 0.8], rtol=1e-5)


def test_a_single_tensor_as_params_is_a_type_error():
    p = mt.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(TypeError, match="iterable of Tensors or dicts"):
        optim.SGD(p, lr=0.1)
    with pytest.raises(TypeError, match="'params'"):
        optim.SGD([{"lr": 0.1}])


@pytest.mark.parametrize(
    "state",
    [
        {},
        [],
        {"param_groups": "x", "state": {}},
        {"param_groups": [{"params": [0]}], "state": {"x": {}}},
        {"param_groups": [{"params": [0]}], "state": {7: {}}},
    ],
)
def test_load_state_dict_of_the_wrong_layout_is_a_value_error(state):
    opt = optim.SGD([mt.tensor([1.0], requires_grad=True)], lr=0.1)
    with pytest.raises(ValueError, match="optimizer state"):
        opt.load_state_dict(state)


def test_schedule_arguments_are_checked():
    opt = optim.SGD([mt.tensor([1.0], requires_grad=True)], lr=0.1)
    for ratio in (2, -0.5, float("nan")):
        with pytest.raises(ValueError, match="min_lr_ratio"):
            optim.WarmupCosineLR(opt, 1, 10, min_lr_ratio=ratio)
    with pytest.raises(ValueError, match="warmup_steps >= 0"):
        optim.WarmupCosineLR(opt, -1, 10)
    with pytest.raises(ValueError, match="step must be >= 0"):
        optim.WarmupCosineLR(opt, 1, 10).factor(-5)
    for bad in (0.5, float("inf"), True, "5"):
        with pytest.raises(TypeError, match="warmup_steps must be an int"):
            optim.WarmupCosineLR(opt, bad, 10)
        with pytest.raises(TypeError, match="total_steps must be an int"):
            optim.WarmupCosineLR(opt, 1, bad)
    for bad in ("0.5", np.array([0.5]), True):
        with pytest.raises(TypeError, match="min_lr_ratio must be a number"):
            optim.WarmupCosineLR(opt, 1, 10, min_lr_ratio=bad)


def test_a_numpy_ratio_writes_python_float_rates_that_a_checkpoint_can_save(tmp_path):
    model = nn.Linear(2, 2)
    opt = optim.AdamW(model.parameters(), lr=np.float32(0.5).item())
    schedule = optim.WarmupCosineLR(opt, np.int64(1), np.int64(3), min_lr_ratio=np.float32(0.5))
    schedule.step(3)
    assert type(opt.param_groups[0]["lr"]) is float and opt.param_groups[0]["lr"] == 0.25
    ckpt.save(tmp_path / "c.npz", model, opt)  # the rates go into JSON


@pytest.mark.parametrize("name", ["SGD", "Adam", "AdamW"])
def test_a_step_on_two_threads_gives_the_numbers_of_one_thread(monkeypatch, name):
    """The pool's threads take the parameters one at a time (largest first): the same
    weights and moments to the last bit as one after the other, groups and all; a
    parameter without a gradient is left alone, and a step with none at all does nothing."""
    from minitorch_attn.speed import threads

    rng = np.random.default_rng(5)
    shapes = [(7, 5), (3,), (40, 2), (1,), (6, 6)]
    start = [rng.standard_normal(s) for s in shapes]
    grads = [[rng.standard_normal(s) for s in shapes] for _ in range(3)]
    options = {"SGD": dict(lr=0.1, momentum=0.9), "Adam": dict(lr=0.1), "AdamW": dict(lr=0.1)}[name]
    results = []
    for count in (1, 2):
        monkeypatch.setattr(threads, "_requested", count)
        params = [_param(s) for s in start]
        opt = getattr(optim, name)([{"params": params[:2], "weight_decay": 0.1}, {"params": params[2:]}], **options)
        opt.zero_grad()
        opt.step()  # nothing to update
        for step in grads:
            for p, g in zip(params[:-1], step):  # the last never gets a gradient
                _set_grad(p, g)
            opt.step()
        results.append(
            [p.numpy() for p in params]
            + [v for s in opt.state.values() for v in s.values() if isinstance(v, np.ndarray)]
        )
    for one, two in zip(results[0], results[1], strict=True):
        np.testing.assert_array_equal(one, two)
    np.testing.assert_array_equal(results[1][len(shapes) - 1], start[-1])
