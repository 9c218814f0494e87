"""cross_entropy as PyTorch defines it: class weights (also with label smoothing and
ignore_index), ignored rows that add nothing whatever their logits, and empty inputs.

Each case is checked against PyTorch in float64, the loss and its gradient under a random
upstream gradient, or against the value PyTorch gives.
"""

import numpy as np
import pytest

import minitorch_attn as mt
import minitorch_attn.functional as F
from tests.test_functional import _assert_same, _assert_torch_agrees, _run, _t, _torch_run

REDUCTIONS = ["mean", "sum", "none"]


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("smoothing", [0.0, 0.3])
def test_class_weights_match_torch(rng, torch, reduction, smoothing):
    logits = rng.standard_normal((3, 4, 2))  # (N, C, d1)
    target = np.array([[0, 3], [-100, 1], [2, 2]])
    weight = rng.uniform(0.2, 2.0, 4)

    def ours(x):
        return F.cross_entropy(
            x,
            mt.tensor(target),
            weight=mt.tensor(weight, dtype="float64"),
            reduction=reduction,
            label_smoothing=smoothing,
        )

    def theirs(x):
        return torch.nn.functional.cross_entropy(
            x, torch.tensor(target), weight=torch.tensor(weight), reduction=reduction, label_smoothing=smoothing
        )

    _assert_torch_agrees(torch, ours, theirs, [logits])


def test_weighted_mean_divides_by_the_targets_weights(device):
    logits = _t([[0.0, 0.0], [0.0, 0.0], [5.0, -5.0]], device)
    weight = _t([1.0, 3.0], device)
    loss = F.cross_entropy(logits, mt.tensor([0, 1, -100], device=device), weight=weight)
    # rows 0 and 1 lose log 2 each, weighted 1 and 3; row 2 is ignored
    np.testing.assert_allclose(loss.item(), (1 * np.log(2) + 3 * np.log(2)) / (1 + 3), rtol=1e-15)


@pytest.mark.parametrize("reduction, expected", [("sum", 0.0), ("mean", np.nan), ("none", [0.0])])
def test_an_ignored_row_of_minus_inf_logits_adds_nothing(device, reduction, expected):
    logits = _t([[-np.inf]], device, requires_grad=True)
    loss = F.cross_entropy(logits, mt.tensor([-100], device=device), reduction=reduction)
    np.testing.assert_array_equal(loss.numpy(), expected)  # PyTorch: 0.0, nan (0 / 0), [0.]
    loss.backward(mt.ones(loss.shape, dtype="float64", device=device))
    np.testing.assert_array_equal(logits.grad.numpy(), [[0.0]])


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("option", ["plain", "label_smoothing", "weight"])
def test_padding_rows_of_minus_inf_add_nothing_next_to_real_rows(rng, torch, reduction, option):
    """The loss and the real rows' gradients are PyTorch's; the padding rows' gradients are
    exactly 0 (PyTorch 2.13 gives NaN there, the bug this guards against)."""
    logits = rng.standard_normal((4, 3))
    logits[[1, 3]] = -np.inf  # padding positions
    target = np.array([2, -100, 0, -100])
    weight = np.array([0.5, 1.0, 2.0])
    kwargs = {"plain": {}, "label_smoothing": {"label_smoothing": 0.1}, "weight": {"weight": weight}}[option]
    ours = {k: mt.tensor(v) if k == "weight" else v for k, v in kwargs.items()}
    theirs = {k: torch.tensor(v) if k == "weight" else v for k, v in kwargs.items()}
    loss, (grad,) = _run(lambda x: F.cross_entropy(x, mt.tensor(target), reduction=reduction, **ours), [logits], "cpu")
    ref_loss, (ref_grad,) = _torch_run(
        torch,
        lambda x: torch.nn.functional.cross_entropy(x, torch.tensor(target), reduction=reduction, **theirs),
        [logits],
    )
    _assert_same([loss, grad[[0, 2]]], [ref_loss, ref_grad[[0, 2]]])
    np.testing.assert_array_equal(grad[[1, 3]], 0.0)


@pytest.mark.parametrize(
    "logits_shape, target_shape, target_value",
    [
        ((0, 3), (0,), 0),  # no rows
        ((2, 0), (2,), -100),  # no classes, every target ignored
        ((2, 3, 0), (2, 0), 0),  # (N, C, d1) with d1 = 0
    ],
)
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_empty_inputs_give_what_torch_gives(torch, logits_shape, target_shape, target_value, reduction):
    logits = np.ones(logits_shape)
    target = np.full(target_shape, target_value)
    x = mt.tensor(logits, dtype="float64", requires_grad=True)
    loss = F.cross_entropy(x, mt.tensor(target), reduction=reduction)
    tx = torch.tensor(logits, requires_grad=True)
    expected = torch.nn.functional.cross_entropy(tx, torch.tensor(target), reduction=reduction)
    np.testing.assert_array_equal(loss.numpy(), expected.detach().numpy())  # nan, 0.0 or empty
    loss.backward(mt.ones(loss.shape, dtype="float64"))
    assert x.grad.shape == logits_shape


def test_weight_is_checked():
    logits, target = mt.zeros(2, 3), mt.tensor([0, 1])
    with pytest.raises(ValueError, match=r"one entry per class, shape \(3,\)"):
        F.cross_entropy(logits, target, weight=mt.ones(2))
    with pytest.raises(TypeError, match="weight is float64 on 'cpu' but the logits are float32"):
        F.cross_entropy(logits, target, weight=mt.ones(3, dtype="float64"))
    with pytest.raises(TypeError, match="weight: expected a Tensor"):
        F.cross_entropy(logits, target, weight=[1.0, 1.0, 1.0])
