"""Primitive operations: forward against NumPy, backward against PyTorch (float64),
broadcasting shapes (hypothesis), and clear errors.

The tests of one homework task reach that task's code only: an op's backward is asked of its
node directly (``node_backward``: no engine, task 1.1), the sum over broadcast dims is
``sum_to_shape`` itself (task 1.3)."""

import math
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis.extra import numpy as hnp

import minitorch_attn as mt
from minitorch_attn.core.autograd import sum_to_shape
from tests.conftest import node_backward


def _t(array, device, requires_grad=False):
    return mt.tensor(np.asarray(array, dtype=np.float64), device=device, requires_grad=requires_grad)


UNARY = {
    "exp": (mt.exp, np.exp, lambda a: a),
    "log": (mt.log, np.log, lambda a: np.abs(a) + 0.5),
    "sqrt": (mt.sqrt, np.sqrt, lambda a: np.abs(a) + 0.5),
    "tanh": (mt.tanh, np.tanh, lambda a: a),
    "abs": (mt.abs, np.abs, lambda a: a),
    "neg": (lambda t: -t, np.negative, lambda a: a),
    "pow": (lambda t: t**3, lambda a: a**3, lambda a: a),
    "clamp": (lambda t: t.clamp(-0.5, 0.5), lambda a: np.clip(a, -0.5, 0.5), lambda a: a),
}


DERIVATIVES = {  # op, its input domain, d op(a) / da
    "exp": (mt.exp, lambda a: a, np.exp),
    "log": (mt.log, lambda a: np.abs(a) + 0.5, lambda a: 1 / a),
    "sqrt": (mt.sqrt, lambda a: np.abs(a) + 0.5, lambda a: 0.5 / np.sqrt(a)),
    "tanh": (mt.tanh, lambda a: a, lambda a: 1 - np.tanh(a) ** 2),
    "pow 3": (lambda t: t**3, lambda a: a, lambda a: 3 * a**2),
    "pow -1.5": (lambda t: t**-1.5, lambda a: np.abs(a) + 0.5, lambda a: -1.5 * a**-2.5),
    "pow 0": (lambda t: t**0, lambda a: a, lambda a: 0 * a),
}


@pytest.mark.task_1_2
@pytest.mark.parametrize("name", sorted(DERIVATIVES))
def test_elementwise_backward_is_the_derivative_times_the_upstream_gradient(rng, name, device):
    op, domain, derivative = DERIVATIVES[name]
    a, g = domain(rng.standard_normal((3, 4))), rng.standard_normal((3, 4))
    grad = node_backward(op(_t(a, device, True)), _t(g, device).data)[0]
    np.testing.assert_allclose(mt.Tensor(grad).numpy(), g * derivative(a), rtol=1e-13, atol=1e-15)


@pytest.mark.task_1_2
def test_product_and_quotient_rules(rng, device):
    a, b, g = rng.standard_normal((3, 4)), rng.standard_normal((3, 4)) + 3.0, rng.standard_normal((3, 4))
    ta, tb = _t(a, device, True), _t(b, device, True)
    for name, out, expected in (("a * b", ta * tb, (g * b, g * a)), ("a / b", ta / tb, (g / b, -g * a / b**2))):
        grads = node_backward(out, _t(g, device).data)
        for grad, wanted, which in zip(grads, expected, "ab"):
            np.testing.assert_allclose(
                mt.Tensor(grad).numpy(), wanted, rtol=1e-13, atol=1e-15, err_msg=f"gradient of {which} in {name}"
            )


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_forward_matches_numpy(rng, name, device):
    ours, reference, domain = UNARY[name]
    a = domain(rng.standard_normal((3, 4)))
    np.testing.assert_allclose(ours(_t(a, device)).numpy(), reference(a), rtol=1e-15, atol=0)


BINARY = {
    "add": (lambda a, b: a + b, np.add),
    "sub": (lambda a, b: a - b, np.subtract),
    "mul": (lambda a, b: a * b, np.multiply),
    "div": (lambda a, b: a / b, np.divide),
    "maximum": (mt.maximum, np.maximum),
    "minimum": (mt.minimum, np.minimum),
}

# the broadcasting cases named in the design (the last: an added dim and two stretched ones),
# plus more from hypothesis below, derandomized: the same examples on every run
NAMED_SHAPES = [
    ((3, 4), (4,)),
    ((2, 1, 4, 64), (2, 1, 4, 1)),
    ((), (2, 3)),
    ((5, 1), (1, 3)),
    ((1, 3, 1), (2, 5, 1, 4)),
]


@pytest.mark.parametrize("shapes", NAMED_SHAPES)
@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_broadcasting_forward_and_gradient_shapes(rng, name, shapes, device):
    ours, reference = BINARY[name]
    a = rng.standard_normal(shapes[0])
    b = rng.standard_normal(shapes[1]) + 3.0  # keeps division away from zero
    ta, tb = _t(a, device, True), _t(b, device, True)
    out = ours(ta, tb)
    np.testing.assert_allclose(out.numpy(), reference(a, b), rtol=1e-15, atol=0)
    out.backward(mt.ones(out.shape, dtype="float64", device=device))
    assert ta.grad.shape == ta.shape and tb.grad.shape == tb.shape


@pytest.mark.task_1_3
@pytest.mark.parametrize("shapes", NAMED_SHAPES)
def test_sum_to_shape_undoes_each_named_broadcast(rng, shapes, device):
    result = np.broadcast_shapes(*shapes)
    upstream = rng.standard_normal(result)
    xp = mt.tensor(0.0, device=device).data.__array_namespace__()
    for shape in shapes:
        summed = sum_to_shape(xp, _t(upstream, device).data, shape)
        np.testing.assert_allclose(
            mt.Tensor(summed).numpy(),
            _sum_to(upstream, shape),
            rtol=1e-13,
            atol=1e-13,
            err_msg=f"{result} summed back to {shape}",
        )


@pytest.mark.task_1_3
@settings(max_examples=40, deadline=None, derandomize=True)
@given(hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=4, max_side=4))
def test_broadcast_gradients_are_the_sums_numpy_implies(shapes):
    rng = np.random.default_rng(1976962696)  # seeded per test
    (sa, sb), result = shapes.input_shapes, shapes.result_shape
    b = rng.standard_normal(sb)
    upstream = rng.standard_normal(result)
    # d(sum(g * a * b))/da = sum of g*b over the broadcast axes, computed by brute force
    expected_a = _sum_to(upstream * np.broadcast_to(b, result), sa)
    np.testing.assert_allclose(
        sum_to_shape(np, upstream * np.broadcast_to(b, result), sa), expected_a, rtol=1e-12, atol=1e-12
    )
    assert sum_to_shape(np, upstream, sb).shape == tuple(sb)


def _sum_to(g, shape):
    while g.ndim > len(shape):
        g = g.sum(axis=0)
    for axis, size in enumerate(shape):
        if size == 1:
            g = g.sum(axis=axis, keepdims=True)
    return g


def test_reductions_forward(rng, device):
    a = rng.standard_normal((2, 3, 4))
    t = _t(a, device)
    np.testing.assert_allclose(t.sum(dim=(0, 2)).numpy(), a.sum(axis=(0, 2)), rtol=1e-14)
    np.testing.assert_allclose(t.mean(dim=-1, keepdim=True).numpy(), a.mean(axis=-1, keepdims=True), rtol=1e-14)
    np.testing.assert_allclose(t.max(dim=1).numpy(), a.max(axis=1), rtol=0)
    np.testing.assert_allclose(t.var(dim=2).numpy(), a.var(axis=2, ddof=1), rtol=1e-14)
    np.testing.assert_allclose(t.var(correction=0).numpy(), a.var(), rtol=1e-14)
    assert t.sum().shape == ()


@pytest.mark.task_1_4
def test_max_gradient_is_shared_between_ties():
    x = mt.tensor([[1.0, 3.0, 3.0]], requires_grad=True)
    (grad,) = node_backward(x.max(dim=1), np.ones(1, dtype=np.float32))
    np.testing.assert_array_equal(grad, [[0.0, 0.5, 0.5]])


@pytest.mark.task_1_5
def test_matmul_shapes_as_numpy(rng, device):
    cases = [
        ((3, 4), (4, 2)),
        ((4,), (4, 2)),
        ((3, 4), (4,)),
        ((4,), (4,)),
        ((2, 1, 3, 4), (5, 4, 2)),
        ((2, 3, 4), (4,)),
        ((4,), (2, 4, 3)),
    ]
    for sa, sb in cases:
        a, b = rng.standard_normal(sa), rng.standard_normal(sb)
        ta, tb = _t(a, device, True), _t(b, device, True)
        out = ta @ tb
        np.testing.assert_allclose(out.numpy(), a @ b, rtol=1e-13, atol=1e-13)
        ga, gb = node_backward(out, mt.ones(out.shape, dtype="float64", device=device).data)
        # a gradient may keep broadcast batch dims: summed over them (the engine's job), the input's shape
        assert _sum_to(mt.Tensor(ga).numpy(), sa).shape == sa
        assert _sum_to(mt.Tensor(gb).numpy(), sb).shape == sb


def test_matmul_errors_name_the_shapes():
    with pytest.raises(ValueError, match=r"inner dimensions differ: \(3, 4\) @ \(3, 2\)"):
        mt.randn(3, 4) @ mt.randn(3, 2)
    with pytest.raises(ValueError, match="at least one dimension"):
        mt.matmul(mt.tensor(1.0), mt.randn(2))


def test_shape_ops_forward(rng, device):
    a = rng.standard_normal((2, 3, 4))
    t = _t(a, device)
    np.testing.assert_array_equal(t.reshape(4, -1).numpy(), a.reshape(4, -1))
    np.testing.assert_array_equal(t.view(6, 4).numpy(), a.reshape(6, 4))
    np.testing.assert_array_equal(t.transpose(0, 2).numpy(), a.transpose(2, 1, 0))
    np.testing.assert_array_equal(t.permute(1, 2, 0).numpy(), a.transpose(1, 2, 0))
    np.testing.assert_array_equal(t.unsqueeze(1).numpy(), a[:, None])
    np.testing.assert_array_equal(t.unsqueeze(-1).squeeze(-1).numpy(), a)
    np.testing.assert_array_equal(t[:, :1].expand(2, 5, 4).numpy(), np.broadcast_to(a[:, :1], (2, 5, 4)))
    np.testing.assert_array_equal(t.flatten(1).numpy(), a.reshape(2, 12))
    np.testing.assert_array_equal(t[1, ..., ::2].numpy(), a[1, ..., ::2])
    np.testing.assert_array_equal(t[None, 0].numpy(), a[None, 0])
    np.testing.assert_array_equal(t.T.numpy(), a.T)
    np.testing.assert_array_equal(mt.concat([t, t], dim=1).numpy(), np.concatenate([a, a], axis=1))
    np.testing.assert_array_equal(mt.stack([t, t], dim=-1).numpy(), np.stack([a, a], axis=-1))
    pieces = t.split([1, 3], dim=2)
    np.testing.assert_array_equal(pieces[1].numpy(), a[:, :, 1:])
    assert [p.shape[1] for p in t.chunk(2, dim=1)] == [2, 1]
    np.testing.assert_array_equal(mt.tril(t).numpy(), np.tril(a))
    np.testing.assert_array_equal(mt.triu(t, 1).numpy(), np.triu(a, 1))


def test_integer_tensor_indexing_accumulates_repeats(device):
    w = mt.randn(4, 2, dtype="float64", device=device, requires_grad=True)
    idx = mt.tensor([[1, 1], [3, 1]], device=device)
    out = w[idx]
    np.testing.assert_array_equal(out.numpy(), w.numpy()[np.array([[1, 1], [3, 1]])])
    out.backward(mt.ones(out.shape, dtype="float64", device=device))
    np.testing.assert_array_equal(w.grad.numpy()[:, 0], [0.0, 3.0, 0.0, 1.0])


def test_index_errors():
    x = mt.randn(3, 2)
    with pytest.raises(IndexError, match=r"must be in \[-3, 3\)"):
        x[mt.tensor([0, 3])]
    with pytest.raises(TypeError, match="index tensors must be int32/int64 or bool"):
        x[x]
    with pytest.raises(TypeError, match="unsupported index"):
        x[1.5]


def test_where_and_masked_fill(rng, device):
    a, b = rng.standard_normal((2, 3)), rng.standard_normal((3,))
    cond = a > 0
    ta, tb = _t(a, device, True), _t(b, device, True)
    tc = mt.tensor(cond, device=device)
    np.testing.assert_array_equal(mt.where(tc, ta, tb).numpy(), np.where(cond, a, b))
    filled = ta.masked_fill(tc, -1.0)
    np.testing.assert_array_equal(filled.numpy(), np.where(cond, -1.0, a))
    filled.backward(mt.ones((2, 3), dtype="float64", device=device))
    np.testing.assert_array_equal(ta.grad.numpy(), (~cond).astype(float))
    with pytest.raises(TypeError, match="mask must be a bool tensor"):
        ta.masked_fill(ta, 0.0)


def test_shape_errors_are_value_errors():
    x = mt.randn(2, 3)
    with pytest.raises(ValueError, match=r"cannot reshape a tensor of shape \(2, 3\) to \(4, 2\)"):
        x.reshape(4, 2)
    with pytest.raises(ValueError, match="not a permutation"):
        x.permute(0, 0)
    with pytest.raises(ValueError, match="cannot expand"):
        x.expand(2, 4)
    with pytest.raises(ValueError, match="out of range"):
        x.sum(dim=2)
    with pytest.raises(ValueError, match="do not add up"):
        x.split([1, 1], dim=1)
    with pytest.raises(TypeError, match="exponent must be a number or a Tensor"):
        x ** "2"


# ---- against PyTorch in float64, forward and backward ------------------------------------------
TORCH_CASES = {
    "broadcast arithmetic": (lambda a, b: (a * b + a / (b * b + 1.0) - b) ** 2, [(3, 1, 4), (2, 4)]),
    "exp log sqrt tanh abs": (
        lambda a, b: ((a.exp() + b.abs()).log() + (a * a + 1.0).sqrt()) * a.tanh(),
        [(3, 4), (4,)],
    ),
    "matmul batched": (lambda a, b: a @ b, [(2, 3, 4), (4, 5)]),
    "reductions": (lambda a, b: a.sum(dim=1) * b.mean() + a.var(dim=0).sum() + a.amax(dim=-1).sum(), [(3, 4), (4,)]),
    "shapes": (
        lambda a, b: (a.reshape(2, 6).transpose(0, 1)[1:, None] * b.unsqueeze(0)[..., :2]).permute(2, 0, 1),
        [(3, 4), (2, 3)],
    ),
    "max/min/clamp": (lambda a, b: mt_or_torch_max(a, b) + a.clamp(-0.3, 0.4), [(3, 4), (4,)]),
}


def mt_or_torch_max(a, b):
    if isinstance(a, mt.Tensor):
        return mt.maximum(a, b) - mt.minimum(a, b)
    import torch

    return torch.maximum(a, b) - torch.minimum(a, b)


@pytest.mark.torch
@pytest.mark.parametrize("name", sorted(TORCH_CASES))
def test_forward_and_backward_match_pytorch_float64(rng, name, torch):
    fn, shapes = TORCH_CASES[name]
    arrays = [rng.standard_normal(s) for s in shapes]
    ours = [mt.tensor(a, requires_grad=True) for a in arrays]
    theirs = [torch.tensor(a, requires_grad=True) for a in arrays]
    out, ref = fn(*ours), fn(*theirs)
    upstream = rng.standard_normal(ref.shape)
    out.backward(mt.tensor(upstream))
    ref.backward(torch.tensor(upstream))
    tol = 1e-12
    np.testing.assert_allclose(out.numpy(), ref.detach().numpy(), rtol=tol, atol=tol)
    for o, t in zip(ours, theirs):
        np.testing.assert_allclose(o.grad.numpy(), t.grad.numpy(), rtol=tol, atol=tol)


def test_bad_arguments_are_value_errors_that_say_what_was_expected():
    x = mt.randn(2, 3, 4)
    cases = [
        (lambda: x + mt.randn(5), r"Add: the shapes \(2, 3, 4\), \(5,\) do not broadcast"),
        (lambda: x * mt.randn(3, 1, 1), r"Mul: the shapes \(2, 3, 4\), \(3, 1, 1\) do not broadcast"),
        (lambda: mt.maximum(x, mt.randn(2)), r"Maximum: the shapes \(2, 3, 4\), \(2,\) do not broadcast"),
        (
            lambda: mt.where(mt.ones(3, dtype="bool"), x, 0.0),
            r"Where: the shapes \(3,\), \(2, 3, 4\), \(\) do not broadcast",
        ),
        (lambda: mt.arange(0, 5, 0), "step must not be 0"),
        (lambda: mt.chunk(x, 0), "chunks must be a positive int"),
        (lambda: x.reshape(-2, 12), "sizes must be >= 0, or -1"),
        (lambda: mt.flatten(x, 3), "out of range"),
        (lambda: mt.flatten(x, 2, 1), "start_dim 2 comes after end_dim 1"),
        (lambda: mt.tril(mt.randn(3)), "at least 2 dims"),
    ]
    for call, message in cases:
        with pytest.raises(ValueError, match=message):
            call()


def test_iterating_gives_differentiable_rows_and_a_0d_tensor_is_not_iterable():
    x = mt.randn(3, 2, requires_grad=True)
    rows = list(x)
    assert [r.shape for r in rows] == [(2,)] * 3
    (rows[0] * 2 + rows[2]).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[2, 2], [0, 0], [1, 1]])
    with pytest.raises(TypeError, match="0-d"):
        list(mt.tensor(1.0))


def test_empty_integer_index_gives_an_empty_result():
    w = mt.randn(4, 3, requires_grad=True)
    out = w[mt.zeros(0, dtype="int64")]
    assert out.shape == (0, 3)
    with pytest.raises(IndexError, match=r"must be in \[-4, 4\).*got values from 0 to 4"):
        w[mt.tensor([0, 4])]


# ---- empty dimensions, against PyTorch --------------------------------------------------------
def _index(like, values):
    """An int64 index tensor of ``like``'s library (ours or PyTorch) and device."""
    if isinstance(like, mt.Tensor):
        return mt.tensor(np.asarray(values, dtype=np.int64), device=like.device)
    import torch

    return torch.tensor(values, dtype=torch.int64)


def _lib(like):
    if isinstance(like, mt.Tensor):
        return mt
    import torch

    return torch


EMPTY_CASES = {
    "sum over an empty dim": (lambda x: x.sum(0), [(0, 3)]),
    "sum of no elements": (lambda x: x.sum(), [(2, 0)]),
    "mean over an empty dim": (lambda x: x.mean(0), [(0, 3)]),
    "mean of no elements": (lambda x: x.mean(), [(2, 0)]),
    "mean over dims, one empty, keepdim": (lambda x: x.mean((0, 1), keepdim=True), [(2, 0, 3)]),
    "mean over a full dim of an empty tensor": (lambda x: x.mean(1), [(0, 3)]),
    "var over an empty dim": (lambda x: x.var(0), [(0, 3)]),
    "var of one element": (lambda x: x.var(), [(1,)]),
    "max over a full dim of an empty tensor": (lambda x: x.amax(1), [(0, 3)]),
    "matmul with inner size 0": (lambda a, b: a @ b, [(2, 0), (0, 3)]),
    "matmul of no rows": (lambda a, b: a @ b, [(0, 4), (4, 3)]),
    "batched matmul of no matrices": (lambda a, b: a @ b, [(0, 2, 3), (3, 4)]),
    "matmul of empty vectors": (lambda a, b: a @ b, [(0,), (0,)]),
    "reshape an empty tensor": (lambda x: x.reshape(-1) + x.reshape(3, 0, 2).sum((0, 1)).sum(), [(0, 6)]),
    "concat with an empty piece": (lambda a, b: _lib(a).cat([a, b]), [(0, 3), (2, 3)]),
    "concat of empty pieces": (lambda a, b: _lib(a).cat([a, b], dim=1), [(0, 2), (0, 3)]),
    "concat with a (0,) piece": (lambda a, b: _lib(a).cat([a, b], dim=1), [(0,), (2, 3)]),
    "stack of empty tensors": (lambda a, b: _lib(a).stack([a, b], dim=1), [(0, 3), (0, 3)]),
    "chunk an empty dim": (lambda x: _lib(x).stack(list(x.chunk(3))), [(0, 3)]),
    "split an empty dim": (lambda x: _lib(x).stack(list(x.split(2))), [(0, 3)]),
    "index an empty slice": (lambda x: x[1:1] + x[:, 0][:0, None], [(3, 2)]),
    "take no rows": (lambda x: x[_index(x, [])], [(3, 2)]),
    "broadcast arithmetic and elementwise": (
        lambda a, b: (a * b + a / (b * b + 1.0)).exp().tanh() - a.abs(),
        [(0, 3), (1, 3)],
    ),
    "shape ops of an empty tensor": (
        lambda x: x.transpose(0, 1).unsqueeze(0).squeeze(0).permute(1, 0).flatten(),
        [(0, 3)],
    ),
}


@pytest.mark.parametrize("name", sorted(EMPTY_CASES))
def test_empty_dimensions_forward_and_backward_as_pytorch(rng, name, device, torch):
    fn, shapes = EMPTY_CASES[name]
    arrays = [rng.standard_normal(s) for s in shapes]
    ours = [_t(a, device, True) for a in arrays]
    theirs = [torch.tensor(a, requires_grad=True) for a in arrays]
    out = fn(*ours)
    with warnings.catch_warnings():  # PyTorch warns about the variance of no degrees of freedom
        warnings.simplefilter("ignore", UserWarning)
        ref = fn(*theirs)
        upstream = rng.standard_normal(tuple(ref.shape))
        ref.backward(torch.tensor(upstream))
    assert out.shape == tuple(ref.shape)
    np.testing.assert_allclose(out.numpy(), ref.detach().numpy(), rtol=1e-12, atol=1e-12)  # NaN where torch has NaN
    out.backward(_t(upstream, device))
    for o, t in zip(ours, theirs):
        assert o.grad.shape == o.shape
        np.testing.assert_allclose(o.grad.numpy(), t.grad.numpy(), rtol=1e-12, atol=1e-12)


def test_variance_without_degrees_of_freedom_is_nan_or_inf_as_pytorch(torch):
    x = mt.tensor([1.0, 2.0], dtype="float64")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        expected = [torch.tensor([1.0, 2.0]).var(correction=c).item() for c in (2, 3)]
    assert [x.var(correction=c).item() for c in (2, 3)] == expected == [math.inf, math.inf]


EMPTY_ERRORS = {
    "max over an empty dim": (
        lambda x: x.amax(0),
        (0, 3),
        r"the maximum over a dim of size 0 is undefined \(shape \(0, 3\), dim 0\)",
    ),
    "max of no elements": (lambda x: x.amax(), (2, 0), "the maximum over a tensor with no elements is undefined"),
    "-1 in a reshape of no elements": (
        lambda x: x.reshape(0, -1),
        (0, 3),
        "it has 0 elements, so the -1 could be any size",
    ),
    "concat of nothing": (lambda x: _lib(x).cat([]), (1,), "concat needs a non-empty sequence"),
    "stack of nothing": (lambda x: _lib(x).stack([]), (1,), "stack needs a non-empty sequence"),
    "split into pieces of 0": (lambda x: x.split(0), (2,), "split_size must be positive"),
}


@pytest.mark.parametrize("name", sorted(EMPTY_ERRORS))
def test_where_pytorch_refuses_an_empty_dimension_we_raise_a_value_error(name, torch):
    fn, shape, message = EMPTY_ERRORS[name]
    with pytest.raises((RuntimeError, IndexError, ValueError)):
        fn(torch.zeros(shape))
    with pytest.raises(ValueError, match=message):
        fn(mt.zeros(shape))


@pytest.mark.task_1_2
def test_integer_tensors_promote_as_pytorch(torch):
    """NumPy makes float64 of an integer array meeting a Python float or divided; PyTorch
    (and we) make the default float32, or the other float tensor's dtype."""
    cases = [
        (lambda m: m.tensor([1, 2]) + 0.5, "float32"),
        (lambda m: m.tensor([1, 2]) * m.tensor([1.0, 2.0]), "float32"),
        (lambda m: m.tensor([1, 2]) / 2, "float32"),
        (lambda m: m.tensor([3, 4]) / m.tensor([2, 2]), "float32"),
        (lambda m: m.tensor([1, 2]) - m.tensor([1.0, 2.0], dtype=m.float64), "float64"),
        (lambda m: m.tensor([1, 2]) + 1, "int64"),
        (lambda m: m.maximum(m.tensor([1, 5]), m.tensor([2.5, 2.5])), "float32"),
    ]
    for make, dtype in cases:
        ours, theirs = make(mt), make(torch)
        assert ours.dtype == dtype == str(theirs.dtype).removeprefix("torch.")
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


def test_mean_and_var_of_an_integer_tensor_are_type_errors_as_pytorch():
    for reduce in (lambda t: t.mean(), lambda t: t.var(), lambda t: mt.mean(t, dim=0)):
        with pytest.raises(TypeError, match="float32 or float64"):
            reduce(mt.tensor([1, 2, 3]))


@pytest.mark.parametrize("dim", [True, 1.0, "0", (0, 1.5)])
def test_a_dim_that_is_not_an_int_is_a_type_error(dim):
    with pytest.raises(TypeError, match="dim must be an int"):
        mt.ones(2, 3).sum(dim)


def test_numpy_integers_serve_as_dims_indices_and_exponents():
    x = mt.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    np.testing.assert_array_equal(x.sum(np.int64(1)).numpy(), [6.0, 15.0])
    np.testing.assert_array_equal(x[np.int64(1)].numpy(), [4.0, 5.0, 6.0])
    np.testing.assert_array_equal((x ** np.int64(2)).numpy(), x.numpy() ** 2)
    with pytest.raises(TypeError, match="exponent must be a number or a Tensor"):
        x**True
