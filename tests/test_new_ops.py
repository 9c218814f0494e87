"""The ops added for the modern block and for code ported from PyTorch, beyond what their
catalogue records check: options the records cannot express (a ``dtype=`` that changes the
output's dtype) and the errors a wrong argument gets."""

import numpy as np
import pytest

import minitorch_attn as mt
import minitorch_attn.functional as F


# ---- softmax / log_softmax dtype= ---------------------------------------------------------------
@pytest.mark.parametrize("fn, torch_name", [(F.softmax, "softmax"), (F.log_softmax, "log_softmax")])
def test_softmax_dtype_casts_first_and_the_gradient_returns_in_the_input_dtype(fn, torch_name, torch):
    x = np.random.default_rng(0).standard_normal((3, 5)).astype(np.float32)
    ours = mt.tensor(x, requires_grad=True)
    y = fn(ours, dim=1, dtype=mt.float64)
    assert y.dtype == "float64"
    g = np.random.default_rng(1).standard_normal((3, 5))
    y.backward(mt.tensor(g))
    assert ours.grad.dtype == "float32"
    theirs = torch.tensor(x, requires_grad=True)
    ty = getattr(torch, torch_name)(theirs, 1, dtype=torch.float64)
    ty.backward(torch.tensor(g))
    np.testing.assert_allclose(y.numpy(), ty.detach().numpy(), rtol=0, atol=1e-15)
    np.testing.assert_allclose(ours.grad.numpy(), theirs.grad.numpy(), rtol=1e-6, atol=1e-7)


def test_softmax_dtype_float32_of_a_float64_input():
    y = F.softmax(mt.tensor([[0.0, 1.0]], dtype="float64"), dim=-1, dtype="float32")
    assert y.dtype == "float32"


@pytest.mark.parametrize("dtype", ["int64", "complex64", 3])
def test_softmax_refuses_a_dtype_that_is_not_float(dtype):
    with pytest.raises(TypeError, match="softmax: dtype must be float32 or float64"):
        F.softmax(mt.tensor([1.0, 2.0]), dim=0, dtype=dtype)


# ---- logsumexp and sigmoid ----------------------------------------------------------------------
def test_logsumexp_of_large_equal_logits_is_exact():
    out = mt.logsumexp(mt.tensor([1000.0, 1000.0], dtype="float64"), dim=0)
    assert out.item() == 1000.0 + np.log(2.0)


def test_logsumexp_needs_an_int_dim():
    with pytest.raises(TypeError, match="logsumexp: dim"):
        mt.logsumexp(mt.tensor([1.0, 2.0]), dim=1.0)
    with pytest.raises(ValueError, match="out of range"):
        mt.logsumexp(mt.tensor([1.0, 2.0]), dim=1)


def test_sigmoid_saturates_without_overflow():
    y = mt.sigmoid(mt.tensor([-800.0, 0.0, 800.0], dtype="float64"))
    assert y.tolist() == [0.0, 0.5, 1.0]


# ---- nll_loss ------------------------------------------------------------------------------------
def test_nll_loss_of_log_softmax_is_cross_entropy():
    rng = np.random.default_rng(0)
    logits = mt.tensor(rng.standard_normal((5, 4)), dtype="float64")
    target = mt.tensor([0, 3, -100, 1, 1])
    weight = mt.tensor(rng.uniform(0.5, 2.0, 4), dtype="float64")
    ours = F.nll_loss(F.log_softmax(logits, dim=1), target, weight=weight)
    np.testing.assert_allclose(ours.item(), F.cross_entropy(logits, target, weight=weight).item(), rtol=1e-14)


def test_nll_loss_errors_name_the_argument():
    logp = mt.tensor([[0.0, -1.0]])
    with pytest.raises(ValueError, match=r"targets must be class indices in \[0, 2\)"):
        F.nll_loss(logp, mt.tensor([5]))
    with pytest.raises(TypeError, match="nll_loss: target must be an int64/int32"):
        F.nll_loss(logp, mt.tensor([0.0]))
    with pytest.raises(ValueError, match="nll_loss: reduction"):
        F.nll_loss(logp, mt.tensor([0]), reduction="avg")


# ---- powers with a tensor exponent ---------------------------------------------------------------
def test_rotary_frequencies_written_as_number_to_a_tensor_power():
    d = 8
    inv_freq = 10000.0 ** (-mt.arange(0, d, 2, dtype="float64") / d)
    np.testing.assert_allclose(inv_freq.numpy(), 10000.0 ** (-np.arange(0, d, 2) / d), rtol=1e-15)


def test_pow_refuses_what_is_not_a_number_or_tensor():
    with pytest.raises(TypeError, match="pow: the exponent must be a number or a Tensor"):
        mt.tensor([1.0]) ** "2"
    with pytest.raises(TypeError, match="pow: expected a Tensor base or exponent"):
        mt.pow(2.0, 3.0)
    with pytest.raises(TypeError):
        "2" ** mt.tensor([1.0])
    with pytest.raises(ValueError, match="do not broadcast"):
        mt.tensor([1.0, 2.0]) ** mt.tensor([1.0, 2.0, 3.0])


# ---- min, argmin, std ------------------------------------------------------------------------------
def test_argmin_and_min_agree_with_numpy():
    x = np.random.default_rng(0).standard_normal((3, 4))
    t = mt.tensor(x)
    assert t.argmin().item() == x.argmin()
    np.testing.assert_array_equal(t.argmin(dim=1).numpy(), x.argmin(1))
    np.testing.assert_array_equal(t.min(dim=0, keepdim=True).numpy(), x.min(0, keepdims=True))
    np.testing.assert_allclose(t.std(dim=1).numpy(), x.std(1, ddof=1), rtol=1e-6)


def test_min_over_nothing_is_an_error_that_names_it():
    with pytest.raises(ValueError, match="min: the minimum over a dim of size 0 is undefined"):
        mt.min(mt.zeros(0, 3), dim=0)


# ---- advanced indexing and gather -----------------------------------------------------------------
def test_picking_the_target_logits_and_repeats_accumulate(device):
    logits = mt.tensor(np.arange(12.0).reshape(3, 4), dtype="float64", device=device, requires_grad=True)
    rows, targets = mt.arange(3, device=device), mt.tensor([1, 1, 3], device=device)
    picked = logits[rows, targets]
    assert picked.tolist() == [1.0, 5.0, 11.0]
    logits[:, mt.tensor([0, 0, 2], device=device)].sum().backward()
    assert logits.grad.numpy().tolist() == [[2.0, 0.0, 1.0, 0.0]] * 3


def test_a_boolean_mask_selects_and_its_gradient_lands_in_place():
    x = mt.tensor([[1.0, -2.0], [-3.0, 4.0]], requires_grad=True)
    y = x[x > 0]
    assert y.tolist() == [1.0, 4.0]
    y.sum().backward()
    assert x.grad.tolist() == [[1.0, 0.0], [0.0, 1.0]]


def test_indexing_errors_name_the_key_and_shape():
    x = mt.randn(3, 4)
    with pytest.raises(IndexError, match=r"does not fit a tensor of shape \(3, 4\)"):
        x[:, mt.tensor([4])]
    with pytest.raises(IndexError, match=r"does not fit a tensor of shape \(3, 4\)"):
        x[mt.tensor([True, False])]
    with pytest.raises(TypeError, match="index lists must hold ints or bools"):
        x[:, [0.5]]


def test_gather_errors():
    x = mt.randn(3, 4)
    with pytest.raises(IndexError, match=r"gather: index values must be in \[0, 4\)"):
        mt.gather(x, 1, mt.tensor([[4]]))
    with pytest.raises(ValueError, match="gather: index has 1 dims but input 2"):
        mt.gather(x, 1, mt.tensor([0]))
    with pytest.raises(ValueError, match="does not fit input"):
        mt.gather(x, 1, mt.tensor([[0]] * 4))
    with pytest.raises(TypeError, match="gather: index must be an int64/int32"):
        x.gather(1, mt.tensor([[0.0]]))


# ---- einsum ----------------------------------------------------------------------------------------
def test_einsum_is_matmul_and_takes_a_list():
    a, b = mt.randn(3, 4, dtype="float64"), mt.randn(4, 2, dtype="float64")
    np.testing.assert_allclose(mt.einsum("ij,jk->ik", [a, b]).numpy(), (a @ b).numpy(), rtol=1e-14)


@pytest.mark.parametrize(
    "equation, shapes, message",
    [
        ("ii->i", [(3, 3)], "a diagonal"),
        ("...ij->ij", [(2, 3, 3)], r"'\.\.\.'"),
        ("ij,jk->ik", [(3, 4), (5, 2)], "index 'j' has size 4 in one operand and 5"),
        ("ij->k", [(3, 4)], "found in no operand"),
        ("ij,jk->ik", [(3, 4)], "names 2 operands, got 1"),
        ("ijk->i", [(3, 4)], "operand 0 has 2 dims"),
    ],
)
def test_einsum_errors_name_what_is_wrong(equation, shapes, message):
    with pytest.raises(ValueError, match=message):
        mt.einsum(equation, *[mt.randn(*s) for s in shapes])


# ---- pad ---------------------------------------------------------------------------------------------
def test_pad_errors_name_what_is_wrong():
    x = mt.randn(2, 3)
    with pytest.raises(ValueError, match="mode 'reflect' is not implemented"):
        F.pad(x, (1, 1), mode="reflect")
    with pytest.raises(ValueError, match="3 amounts for a tensor of 2 dims"):
        F.pad(x, (1, 1, 1))
    with pytest.raises(TypeError, match="tuple of ints"):
        F.pad(x, (1.0, 1))
    with pytest.raises(ValueError, match="negative size"):
        F.pad(x, (-2, -2))


# ---- cross_entropy with probability targets ----------------------------------------------------------
def test_one_hot_probability_targets_give_the_class_index_loss_without_weights():
    rng = np.random.default_rng(0)
    logits = mt.tensor(rng.standard_normal((4, 3)), dtype="float64")
    classes = mt.tensor([0, 2, 1, 1])
    onehot = mt.tensor(np.eye(3)[classes.numpy()], dtype="float64")
    for eps in (0.0, 0.1):
        np.testing.assert_allclose(
            F.cross_entropy(logits, onehot, label_smoothing=eps).item(),
            F.cross_entropy(logits, classes, label_smoothing=eps).item(),
            rtol=1e-14,
        )


def test_probability_targets_of_another_shape_are_refused():
    with pytest.raises(ValueError, match="probability targets must have the logits' shape"):
        F.cross_entropy(mt.randn(4, 3), mt.rand(4, 2))


# ---- add/sub alpha, div rounding_mode --------------------------------------------------------------
def test_alpha_and_rounding_modes_as_pytorch():
    a, b = mt.tensor([1.0, 2.0]), mt.tensor([1.0, 1.0])
    assert mt.add(a, b, alpha=2).tolist() == [3.0, 4.0] and mt.sub(a, b, alpha=2).tolist() == [-1.0, 0.0]
    ints = mt.tensor([-7, 7])
    trunc, floor = mt.div(ints, mt.tensor([2, -2]), rounding_mode="trunc"), mt.div(ints, 2, rounding_mode="floor")
    assert (trunc.tolist(), trunc.dtype) == ([-3, -3], "int64") and floor.tolist() == [-4, 3]
    assert mt.div(ints, 2).dtype == "float32"


def test_a_wrong_rounding_mode_or_alpha_is_named():
    with pytest.raises(ValueError, match="rounding_mode must be None, 'trunc' or 'floor'"):
        mt.div(mt.tensor([1.0]), 2.0, rounding_mode="round")
    with pytest.raises(TypeError, match="add: alpha must be a number"):
        mt.add(mt.tensor([1.0]), 1.0, alpha="2")


# ---- attention: batch dims broadcast between queries and keys/values -------------------------------
@pytest.mark.parametrize("attend", [F.scaled_dot_product_attention, F.flash_attention])
def test_attention_broadcasts_batch_dims_as_pytorch(attend, torch):
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(s) for s in ((4, 3, 8), (4, 4, 6, 8), (4, 4, 6, 8))]
    ours = [mt.tensor(a, requires_grad=True) for a in arrays]
    theirs = [torch.tensor(a, requires_grad=True) for a in arrays]
    out = attend(*ours, is_causal=True)
    expected = torch.nn.functional.scaled_dot_product_attention(*theirs, is_causal=True)
    assert out.shape == (4, 4, 3, 8)
    g = rng.standard_normal(out.shape)
    out.backward(mt.tensor(g))
    expected.backward(torch.tensor(g))
    np.testing.assert_allclose(out.numpy(), expected.detach().numpy(), rtol=0, atol=1e-12)
    for o, t in zip(ours, theirs):
        assert o.grad.shape == o.shape
        np.testing.assert_allclose(o.grad.numpy(), t.grad.numpy(), rtol=0, atol=1e-12)


def test_attention_batch_dims_broadcast_with_gqa_and_errors_name_the_shapes():
    q, k = mt.randn(2, 4, 3, 8, dtype="float64"), mt.randn(1, 2, 5, 8, dtype="float64")
    assert F.scaled_dot_product_attention(q, k, k, enable_gqa=True).shape == (2, 4, 3, 8)
    with pytest.raises(ValueError, match=r"the batch dims of query \(2, 3, 8\), key \(3, 5, 8\)"):
        F.scaled_dot_product_attention(mt.randn(2, 3, 8), mt.randn(3, 5, 8), mt.randn(3, 5, 8))


def test_gradcheck_of_broadcast_attention():
    rng = np.random.default_rng(1)
    inputs = [mt.tensor(rng.standard_normal(s), requires_grad=True) for s in ((2, 1, 3, 4), (3, 5, 4), (3, 5, 2))]
    assert mt.gradcheck(lambda q, k, v: F.scaled_dot_product_attention(q, k, v), inputs)


# ---- PyTorch's older spellings of reductions ---------------------------------------------------------
def test_var_and_std_take_unbiased_and_an_empty_dim_reduces_everything():
    x = np.random.default_rng(0).standard_normal((3, 4))
    t = mt.tensor(x, dtype="float64")
    np.testing.assert_allclose(mt.var(t, True).item(), x.var(ddof=1), rtol=1e-14)
    np.testing.assert_allclose(mt.std(t, 1, unbiased=False).numpy(), x.std(1), rtol=1e-14)
    np.testing.assert_allclose(mt.sum(t, dim=()).item(), x.sum(), rtol=1e-14)
    assert mt.sum(mt.tensor(2.0), dim=0).item() == 2.0
