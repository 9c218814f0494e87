"""The Transformer operations of minitorch_attn.functional.

For each op: the values quoted in its issue, the same math composed from the core's
primitive ops (forward and backward, on every device), PyTorch in float64 (forward and
backward under a random upstream gradient), the edge cases (-inf, empty attention rows,
constant rows), dtype preservation and clear errors.
"""

import inspect
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import minitorch_attn as mt
import minitorch_attn.functional as F
from minitorch_attn.core.backend import get_backend
from minitorch_attn.functional import _attention_common as common
from tests.conftest import expect_close, float64_tolerance


def _t(values, device, dtype="float64", requires_grad=False):
    return mt.tensor(np.asarray(values), dtype=dtype, device=device, requires_grad=requires_grad)


def _run(fn, arrays, device, upstream_seed=1, dtype="float64"):
    """Call ``fn`` on tensors made from ``arrays`` (float arrays require grad; other values
    pass through), backpropagate a random upstream gradient; return (output, grads)."""
    inputs = [
        _t(a, device, dtype, requires_grad=True) if isinstance(a, np.ndarray) and a.dtype.kind == "f" else a
        for a in arrays
    ]
    out = fn(*inputs)
    upstream = np.random.default_rng(upstream_seed).standard_normal(out.shape)
    out.backward(_t(upstream, device, out.dtype))
    return out.numpy(), [t.grad.numpy() if isinstance(t, mt.Tensor) and t.requires_grad else None for t in inputs]


def _assert_same(ours, reference, n_ops=64, dtype="float64", names=None):
    """Ours against a reference, both (lists of) arrays, to a tolerance from the dtype's eps.
    A list is ``[output, gradient of each input]`` unless ``names`` says what each is; the
    failure names the array that differs, its worst element and the tolerance."""
    pairs = list(zip(ours, reference)) if isinstance(ours, list) else [(ours, reference)]
    names = names or (["output"] + [f"gradient of input {i}" for i in range(len(pairs) - 1)])
    for what, (a, b) in zip(names, pairs):
        if a is None and b is None:
            continue
        expect_close(a, b, what=what, atol=float64_tolerance(b, n_ops, dtype))


def _names(fn, count):
    """``["output", "gradient of <each parameter of fn>"]``: the names of what :func:`_run` returns."""
    try:
        params = list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        params = []
    params += [f"input {i}" for i in range(len(params), count)]
    return ["output"] + [f"gradient of {name}" for name in params[:count]]


def _assert_runs_agree(fn, reference, arrays, device, n_ops=64):
    """``fn`` and ``reference`` give the same output and gradients on ``arrays`` (float64)."""
    out, grads = _run(fn, arrays, device)
    ref_out, ref_grads = _run(reference, arrays, device)
    _assert_same([out] + grads, [ref_out] + ref_grads, n_ops, names=_names(fn, len(grads)))


def _assert_torch_agrees(torch, fn, torch_fn, arrays, n_ops=64):
    """``fn`` on NumPy and ``torch_fn`` in PyTorch give the same output and gradients (float64)."""
    out, grads = _run(fn, arrays, "cpu")
    ref_out, ref_grads = _torch_run(torch, torch_fn, arrays)
    _assert_same([out] + grads, [ref_out] + ref_grads, n_ops, names=_names(fn, len(grads)))


def _torch_run(torch, fn, arrays, upstream_seed=1):
    """The same as :func:`_run` with PyTorch tensors in float64."""
    inputs = [
        torch.tensor(a, requires_grad=True) if isinstance(a, np.ndarray) and a.dtype.kind == "f" else a for a in arrays
    ]
    out = fn(*inputs)
    upstream = np.random.default_rng(upstream_seed).standard_normal(tuple(out.shape))
    out.backward(torch.tensor(upstream))
    return out.detach().numpy(), [t.grad.numpy() if hasattr(t, "grad") and t.requires_grad else None for t in inputs]


# ---- references composed from the primitive ops (an independent derivation of each backward) ----
def composed_softmax(x, dim=-1):
    e = (x - x.max(dim=dim, keepdim=True)).exp()
    return e / e.sum(dim=dim, keepdim=True)


def composed_log_softmax(x, dim=-1):
    shifted = x - x.max(dim=dim, keepdim=True)
    return shifted - shifted.exp().sum(dim=dim, keepdim=True).log()


def composed_layer_norm(x, w, b, eps=1e-5):
    xc = x - x.mean(dim=-1, keepdim=True)
    return xc / ((xc * xc).mean(dim=-1, keepdim=True) + eps).sqrt() * w + b


def composed_rms_norm(x, w, eps):
    return x / ((x * x).mean(dim=-1, keepdim=True) + eps).sqrt() * w


def composed_attention(q, k, v, keep=None, bias=None, scale=None):
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    scores = (q @ k.transpose(-2, -1)) * scale
    if bias is not None:
        scores = scores + bias
    if keep is not None:
        scores = scores.masked_fill(~keep, float("-inf"))
    return composed_softmax(scores) @ v


# =============================================================================================
# softmax and log_softmax
# =============================================================================================
@pytest.mark.task_2_2
def test_log_softmax_of_far_apart_and_far_shifted_rows(device):
    np.testing.assert_array_equal(F.log_softmax(_t([1000.0, 0.0], device, "float32")).numpy(), [0.0, -1000.0])
    y = F.log_softmax(_t([-1e4, -1e4 - 1], device, "float32")).numpy()
    expected = [-0.31326169, -1.31326169]
    np.testing.assert_allclose(y, expected, rtol=0, atol=float64_tolerance(expected, 4))
    assert y.dtype == np.float32


SOFTMAX_FAMILY = [
    pytest.param("softmax", marks=pytest.mark.task_2_1),
    pytest.param("log_softmax", marks=pytest.mark.task_2_2),
]  # each its own task's


@pytest.mark.parametrize("dim", [-1, 0, 1])
@pytest.mark.parametrize("name", SOFTMAX_FAMILY)
def test_softmax_and_log_softmax_match_the_composed_primitives(rng, device, name, dim):
    x = rng.standard_normal((3, 4, 5)) * 3
    ours, composed = {"softmax": (F.softmax, composed_softmax), "log_softmax": (F.log_softmax, composed_log_softmax)}[
        name
    ]
    _assert_runs_agree(lambda t: ours(t, dim), lambda t: composed(t, dim), [x], device)


def test_softmax_and_log_softmax_match_torch(rng, torch):
    x = rng.standard_normal((4, 6)) * 4
    for ours, theirs in ((F.softmax, torch.softmax), (F.log_softmax, torch.log_softmax)):
        _assert_torch_agrees(torch, lambda t: ours(t, dim=1), lambda t: theirs(t, dim=1), [x])  # noqa: B023


@pytest.mark.task_2_1
def test_softmax_of_minus_inf_entries_is_exactly_zero_with_zero_gradient(rng, device):
    x = _t([[0.5, -np.inf, 1.0, -np.inf], [-np.inf, -np.inf, 3.0, -np.inf]], device, "float32", requires_grad=True)
    p = F.softmax(x)
    p.backward(_t(rng.standard_normal((2, 4)), device, "float32"))
    p, grad = p.numpy(), x.grad.numpy()
    assert np.all(np.isfinite(p)) and np.all(np.isfinite(grad))
    assert np.all(p[:, [1, 3]] == 0) and p[1, 0] == 0 and p[1, 2] == 1
    assert np.all(grad[:, [1, 3]] == 0) and np.all(grad[1] == 0)


@pytest.mark.task_2_2
def test_log_softmax_with_minus_inf_entries_has_finite_gradient(device):
    x = _t([[0.5, -np.inf, 1.0]], device, requires_grad=True)
    y = F.log_softmax(x)
    y.backward(_t([[1.0, 2.0, 3.0]], device))
    assert y.numpy()[0, 1] == -np.inf and np.all(np.isfinite(x.grad.numpy()))


@pytest.mark.filterwarnings("ignore:divide by zero encountered", "ignore:invalid value encountered")
@pytest.mark.parametrize("name", SOFTMAX_FAMILY)
def test_the_backward_never_divides_by_p_where_a_route_through_log_p_would(device, name):
    """The counterexample of the softmax docstring: x = [0, -inf], p = [1, 0]. Composing
    log(softmax(x)) differentiates through 1/p and gets NaN; the fused kernels give the
    exact gradients: p ∘ (g - Σ g p) = [0, 0] and g - p Σ g = [1 - 3, 2 - 0]."""
    upstream = _t([1.0, 2.0], device)
    grads = {}
    routes = {
        "softmax": (("softmax", F.softmax), ("log(softmax)", lambda t: mt.log(F.softmax(t)))),
        "log_softmax": (("log_softmax", F.log_softmax),),
    }[name]
    for route, fn in routes:
        x = _t([0.0, -np.inf], device, requires_grad=True)
        fn(x).backward(upstream)
        grads[route] = x.grad.numpy()
    if name == "softmax":
        np.testing.assert_array_equal(grads["softmax"], [0.0, 0.0])
        assert np.isnan(grads["log(softmax)"]).any()
    else:
        np.testing.assert_array_equal(grads["log_softmax"], [-2.0, 2.0])


@pytest.mark.filterwarnings("ignore:invalid value encountered")  # NumPy's note on -inf - (-inf)
@pytest.mark.parametrize("name", SOFTMAX_FAMILY)
def test_an_all_minus_inf_row_gives_nan_as_in_torch(device, name):
    x = _t([[-np.inf, -np.inf], [0.0, 0.0]], device, "float32")
    y = getattr(F, name)(x).numpy()
    assert np.all(np.isnan(y[0])) and np.all(np.isfinite(y[1]))


@pytest.mark.filterwarnings("ignore:invalid value encountered", "ignore:overflow encountered")
@pytest.mark.parametrize("poison", [np.nan, np.inf])
def test_a_nan_or_plus_inf_entry_makes_its_whole_row_nan_as_in_torch(rng, device, poison):
    """softmax([1, nan, 0]) once gave [inf, nan, inf] (a NaN sum was taken for an empty
    one) and softmax([1, inf, 0]) gave [0, nan, 0]; PyTorch gives NaN for the whole row,
    and so do its gradients. The other rows are untouched."""
    values = rng.standard_normal((2, 3))
    values[0, 1] = poison
    for fn in (F.softmax, F.log_softmax):
        x = _t(values, device, requires_grad=True)
        y = fn(x)
        y.backward(_t(np.ones((2, 3)), device))
        y, grad = y.numpy(), x.grad.numpy()
        assert np.all(np.isnan(y[0])) and np.all(np.isnan(grad[0])), (fn.__name__, y[0], grad[0])
        assert np.all(np.isfinite(y[1])) and np.all(np.isfinite(grad[1]))


@pytest.mark.filterwarnings("ignore:invalid value encountered", "ignore:overflow encountered")
def test_softmax_family_with_nan_and_inf_matches_torch(torch):
    rows = np.array([[1.0, np.nan, 0.0], [0.0, np.inf, 1.0], [-np.inf, 0.0, 2.0], [1e308, -1e308, 0.0]])
    for ours, theirs in ((F.softmax, torch.softmax), (F.log_softmax, torch.log_softmax)):
        out, grads = _run(lambda t: ours(t, dim=1), [rows], "cpu")  # noqa: B023 (run in this iteration)
        ref_out, ref_grads = _torch_run(torch, lambda t: theirs(t, dim=1), [rows])  # noqa: B023
        np.testing.assert_array_equal(np.isnan(out), np.isnan(ref_out))
        np.testing.assert_array_equal(np.isnan(grads[0]), np.isnan(ref_grads[0]))
        np.testing.assert_allclose(out, ref_out, rtol=0, atol=float64_tolerance(1.0, 8, "float64"))


@pytest.mark.parametrize("dim", [0, -1])
def test_softmax_of_a_0d_tensor_is_one_with_zero_gradient_as_in_torch(device, dim):
    for fn, expected in ((F.softmax, 1.0), (F.log_softmax, 0.0)):
        x = _t(3.5, device, requires_grad=True)
        y = fn(x, dim)
        y.backward()
        assert y.shape == () and y.item() == expected and x.grad.item() == 0.0


# =============================================================================================
# cross_entropy
# =============================================================================================
@pytest.mark.task_2_3
def test_cross_entropy_excludes_ignored_rows_from_the_mean(device):
    logits = _t([[1, 2, 3], [0, 0, 0]], device, "float32", requires_grad=True)
    loss = F.cross_entropy(logits, mt.tensor([1, -100], device=device))
    expected = 1.40760596
    np.testing.assert_allclose(loss.item(), expected, rtol=0, atol=float64_tolerance(expected, 8))
    loss.backward()
    assert np.all(logits.grad.numpy()[1] == 0) and loss.dtype == "float32"


@pytest.mark.task_2_3
def test_cross_entropy_with_label_smoothing(device):
    loss = F.cross_entropy(_t([[1, 2, 3]], device, "float32"), mt.tensor([0], device=device), label_smoothing=0.1)
    np.testing.assert_allclose(loss.item(), 2.30760596, rtol=0, atol=float64_tolerance(2.3, 8))


@pytest.mark.task_2_3
def test_cross_entropy_never_indexes_with_the_ignore_index(rng, device):
    logits = _t(rng.standard_normal((3, 4)), device, requires_grad=True)
    for ignore in (-100, 7, -1):  # negative or past the classes: must not be read as an index
        loss = F.cross_entropy(logits, mt.tensor([2, ignore, 0], device=device), ignore_index=ignore)
        reference = F.cross_entropy(logits[[0, 2]], mt.tensor([2, 0], device=device))
        np.testing.assert_allclose(loss.item(), reference.item(), rtol=1e-14)


@pytest.mark.parametrize("target", [[0, 3], [-2, 1]])
def test_cross_entropy_rejects_targets_out_of_range(device, target):
    with pytest.raises(ValueError, match="class indices in \\[0, 3\\)"):  # on a device: with the loss's read
        F.cross_entropy(_t(np.zeros((2, 3)), device), mt.tensor(target, device=device)).item()


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("smoothing", [0.0, 0.2])
def test_cross_entropy_matches_torch(rng, torch, reduction, smoothing):
    logits = rng.standard_normal((2, 5, 3))  # (N, C, d1)
    target = np.array([[0, 4, -100], [2, -100, 1]])
    _assert_torch_agrees(
        torch,
        lambda x: F.cross_entropy(x, mt.tensor(target), reduction=reduction, label_smoothing=smoothing),
        lambda x: torch.nn.functional.cross_entropy(
            x, torch.tensor(target), reduction=reduction, label_smoothing=smoothing
        ),
        [logits],
    )


@pytest.mark.task_2_3
def test_cross_entropy_of_one_unbatched_example(rng, device, torch):
    logits = rng.standard_normal(5)
    _assert_runs_agree(
        lambda x: F.cross_entropy(x, mt.tensor(3, device=device)),
        lambda x: F.cross_entropy(x.reshape(1, 5), mt.tensor([3], device=device)),
        [logits],
        device,
    )
    expected = torch.nn.functional.cross_entropy(torch.tensor(logits), torch.tensor(3)).item()
    np.testing.assert_allclose(
        F.cross_entropy(_t(logits, device), mt.tensor(3, device=device)).item(), expected, rtol=1e-14
    )


@pytest.mark.task_2_3
def test_cross_entropy_matches_the_composed_primitives(rng, device):
    logits = rng.standard_normal((5, 4))
    target = np.array([3, 0, 0, 2, 1])
    onehot = np.eye(4)[target]

    def composed(x):
        return -(composed_log_softmax(x) * _t(onehot, device)).sum() / 5

    _assert_runs_agree(lambda x: F.cross_entropy(x, mt.tensor(target, device=device)), composed, [logits], device)


def test_cross_entropy_errors():
    logits = mt.zeros(2, 3)
    with pytest.raises(TypeError, match="target"):
        F.cross_entropy(logits, mt.zeros(2))
    with pytest.raises(ValueError, match="target of shape"):
        F.cross_entropy(logits, mt.tensor([0, 1, 2]))
    with pytest.raises(ValueError, match="reduction"):
        F.cross_entropy(logits, mt.tensor([0, 1]), reduction="avg")


# =============================================================================================
# gelu, relu, dropout
# =============================================================================================
@pytest.mark.parametrize(
    "approximate, value, derivative", [("none", 0.8413447461, 1.0833154706), ("tanh", 0.8411919906, 1.0829640838)]
)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_gelu_at_one(device, approximate, value, derivative, dtype):
    x = _t([1.0], device, dtype, requires_grad=True)
    y = F.gelu(x, approximate=approximate)
    y.backward(mt.ones_like(y))
    tol = float64_tolerance(1.0, 8, dtype) + 1e-10
    assert y.dtype == dtype
    np.testing.assert_allclose(y.item(), value, rtol=0, atol=tol)
    np.testing.assert_allclose(x.grad.item(), derivative, rtol=0, atol=tol)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_and_relu_match_torch(rng, torch, approximate):
    x = rng.standard_normal((3, 7)) * 3
    _assert_torch_agrees(
        torch,
        lambda t: F.gelu(t, approximate=approximate),
        lambda t: torch.nn.functional.gelu(t, approximate=approximate),
        [x],
    )
    _assert_torch_agrees(torch, F.relu, torch.relu, [x])


def test_tanh_gelu_matches_the_composed_primitives(rng, device):
    x = rng.standard_normal((4, 5)) * 2
    c = math.sqrt(2 / math.pi)
    _assert_runs_agree(
        lambda t: F.gelu(t, approximate="tanh"),
        lambda t: 0.5 * t * (1 + (c * (t + 0.044715 * t**3)).tanh()),
        [x],
        device,
    )


def test_relu_matches_the_composed_primitives(rng, device):
    x = rng.standard_normal((4, 5))
    _assert_runs_agree(F.relu, lambda t: mt.maximum(t, mt.zeros_like(t)), [np.where(x == 0, 1.0, x)], device)


def test_dropout_is_inverted_and_backward_reuses_the_mask(rng, device):
    x = _t(np.ones((200, 50)), device, "float32", requires_grad=True)
    y = F.dropout(x, p=0.25)
    upstream = rng.standard_normal((200, 50)).astype(np.float32)
    y.backward(_t(upstream, device, "float32"))
    out, grad = y.numpy(), x.grad.numpy()
    assert y.dtype == "float32"
    assert set(np.unique(out)) <= {0.0, np.float32(1 / 0.75)}
    assert abs((out == 0).mean() - 0.25) < 0.02  # about p of them dropped
    np.testing.assert_array_equal(grad, upstream * out)  # the same mask, the same scale


@pytest.mark.parametrize("flag", ["yes", "False", None, 1])
def test_yes_no_options_must_be_bools(flag):
    """training="False" (a string, e.g. read from a config file) once dropped as if True,
    and enable_gqa="False" grouped heads; every yes/no option takes only True or False."""
    q = mt.ones(1, 2, 3, 4)
    calls = {
        "training": lambda: F.dropout(q, 0.5, training=flag),
        "enable_gqa": lambda: F.scaled_dot_product_attention(q, q, q, enable_gqa=flag),
        "is_causal": lambda: F.flash_attention(q, q, q, is_causal=flag),
        "interleaved": lambda: F.rotary_embedding(q, interleaved=flag),
    }
    for name, call in calls.items():
        with pytest.raises(TypeError, match=f"{name} must be True or False"):
            call()


def test_dropout_identity_zeros_and_seed(rng, device):
    x = _t(rng.standard_normal((4, 5)), device, "float32", requires_grad=True)
    assert F.dropout(x, 0.5, training=False) is x and F.dropout(x, 0.0) is x
    y = F.dropout(x, 1.0)
    y.backward(mt.ones_like(y))
    assert np.all(y.numpy() == 0) and np.all(x.grad.numpy() == 0)
    mt.manual_seed(3)
    first = F.dropout(x, 0.5).numpy()
    mt.manual_seed(3)
    np.testing.assert_array_equal(F.dropout(x, 0.5).numpy(), first)
    with pytest.raises(ValueError, match="probability"):
        F.dropout(x, 1.5)


# =============================================================================================
# layer_norm
# =============================================================================================
@pytest.mark.task_3_1
def test_layer_norm_of_a_far_shifted_row_is_exact(device):
    y = F.layer_norm(_t([[40000, 40001, 40002, 40003]], device, "float32"), (4,)).numpy()
    expected = [-1.3416355, -0.4472118, 0.4472118, 1.3416355]
    np.testing.assert_allclose(y[0], expected, rtol=0, atol=float64_tolerance(expected, 4))


@pytest.mark.task_3_1
@pytest.mark.parametrize("offset", [1.0, 1e3, 4e4])
def test_layer_norm_is_shift_invariant(rng, device, offset):
    x = rng.integers(-8, 8, (3, 8)) / 4.0  # exact in float32 even after the shift
    base = F.layer_norm(_t(x, device, "float32"), 8).numpy()
    shifted = F.layer_norm(_t(x + offset, device, "float32"), 8).numpy()
    np.testing.assert_allclose(shifted, base, rtol=0, atol=float64_tolerance(base, 4))


@pytest.mark.task_3_1
def test_layer_norm_of_zero_two(device):
    y = F.layer_norm(_t([[0, 2]], device, "float32"), 2).numpy()
    np.testing.assert_allclose(y, [[-1, 1]], rtol=0, atol=1e-5)  # 1/sqrt(1 + eps) with eps = 1e-5


@pytest.mark.task_3_1
def test_layer_norm_of_a_constant_row_is_the_bias(device):
    x = _t([[3.0, 3.0, 3.0], [1.0, 2.0, 4.0]], device, "float32", requires_grad=True)
    w = _t([0.5, 2.0, -1.0], device, "float32", requires_grad=True)
    b = _t([0.1, 0.2, 0.3], device, "float32", requires_grad=True)
    y = F.layer_norm(x, 3, w, b)
    np.testing.assert_array_equal(y.numpy()[0], b.numpy())
    y[0].backward(_t([1.0, -2.0, 0.5], device, "float32"))
    assert np.all(w.grad.numpy() == 0) and np.all(np.isfinite(x.grad.numpy()))


@pytest.mark.task_3_1
@pytest.mark.parametrize("value, n", [(0.1, 3), (1 / 3, 7), (12345.678, 5), (-7.77, 768)])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_layer_norm_of_any_constant_row_is_exactly_the_bias(value, n, dtype):
    # the mean of a constant row is rounded for most values; it must be corrected exactly
    x = mt.full((2, n), value, dtype=dtype, requires_grad=True)
    w = mt.randn(n, dtype=dtype, requires_grad=True)
    b = mt.randn(n, dtype=dtype, requires_grad=True)
    y = F.layer_norm(x, (n,), w, b)
    y.backward(mt.randn(2, n, dtype=dtype))
    np.testing.assert_array_equal(y.numpy(), np.broadcast_to(b.numpy(), (2, n)))
    assert np.all(w.grad.numpy() == 0) and np.all(np.isfinite(x.grad.numpy()))


@pytest.mark.task_3_1
def test_layer_norm_over_several_dims_equals_flattening_them(rng, device):
    x, w, b = rng.standard_normal((2, 3, 2, 4)), rng.standard_normal((2, 4)), rng.standard_normal((2, 4))
    _assert_runs_agree(
        lambda x, w, b: F.layer_norm(x, (2, 4), w, b),
        lambda x, w, b: F.layer_norm(x.reshape(2, 3, 8), 8, w.reshape(8), b.reshape(8)).reshape(2, 3, 2, 4),
        [x, w, b],
        device,
    )


@pytest.mark.task_3_1
def test_layer_norm_matches_the_composed_primitives(rng, device):
    arrays = [rng.standard_normal((2, 3, 6)), rng.standard_normal(6), rng.standard_normal(6)]
    _assert_runs_agree(lambda x, w, b: F.layer_norm(x, 6, w, b), composed_layer_norm, arrays, device)


def test_layer_norm_matches_torch(rng, torch):
    arrays = [rng.standard_normal((2, 3, 2, 5)) * 3 + 1, rng.standard_normal((2, 5)), rng.standard_normal((2, 5))]
    _assert_torch_agrees(
        torch,
        lambda x, w, b: F.layer_norm(x, (2, 5), w, b, eps=1e-4),
        lambda x, w, b: torch.nn.functional.layer_norm(x, (2, 5), w, b, eps=1e-4),
        arrays,
    )


def test_layer_norm_errors():
    x = mt.zeros(2, 4)
    with pytest.raises(ValueError, match="trailing dims"):
        F.layer_norm(x, (3,))
    with pytest.raises(ValueError, match="weight has shape"):
        F.layer_norm(x, 4, mt.ones(3))
    with pytest.raises(TypeError, match="float"):
        F.layer_norm(mt.tensor([[1, 2]]), 2)
    for bad in ((4.0,), "4", None, (True,)):
        with pytest.raises(TypeError, match="normalized_shape must be an int or a sequence of ints"):
            F.layer_norm(x, bad)


def test_normalized_shape_may_hold_numpy_ints():
    """normalized_shape=np.int64(4) (a size read from an array) once failed with
    "'numpy.int64' object is not iterable"; PyTorch takes it."""
    x = mt.randn(2, 4)
    for shape in (np.int64(4), (np.int64(4),), [np.int32(4)]):
        assert F.layer_norm(x, shape).shape == (2, 4) and F.rms_norm(x, shape).shape == (2, 4)


# =============================================================================================
# rms_norm
# =============================================================================================
@pytest.mark.task_3_2
def test_rms_norm_puts_eps_inside_the_root(device):
    y = F.rms_norm(_t([[1e-3, -1e-3, 1e-3, -1e-3]], device, "float32"), 4, eps=1e-6).numpy()
    np.testing.assert_allclose(np.abs(y), 1 / math.sqrt(2), rtol=0, atol=1e-6)  # 0.7071, not 0.999


@pytest.mark.task_3_2
def test_rms_norm_of_zero_rows_is_zero_with_finite_gradients(rng, device):
    x = _t(np.zeros((2, 4)), device, "float32", requires_grad=True)
    w = _t(rng.standard_normal(4), device, "float32", requires_grad=True)
    y = F.rms_norm(x, 4, w)
    y.backward(_t(rng.standard_normal((2, 4)), device, "float32"))
    assert np.all(y.numpy() == 0) and np.all(np.isfinite(x.grad.numpy())) and np.all(w.grad.numpy() == 0)


@pytest.mark.task_3_2
def test_rms_norm_default_eps_is_the_dtype_epsilon(device):
    x = np.array([[1e-4, -2e-4, 0.0, 3e-4]])
    for dtype in ("float32", "float64"):
        eps = float(np.finfo(dtype).eps)
        y = F.rms_norm(_t(x, device, dtype), 4).numpy()
        expected = x / np.sqrt((x * x).mean() + eps)
        np.testing.assert_allclose(y, expected, rtol=0, atol=float64_tolerance(expected, 8, dtype))


@pytest.mark.task_3_2
def test_rms_norm_matches_the_composed_primitives(rng, device):
    arrays = [rng.standard_normal((2, 3, 6)), rng.standard_normal(6)]
    _assert_runs_agree(
        lambda x, w: F.rms_norm(x, 6, w, eps=1e-5), lambda x, w: composed_rms_norm(x, w, 1e-5), arrays, device
    )


@pytest.mark.parametrize("eps", [None, 1e-3])
def test_rms_norm_matches_torch(rng, torch, eps):
    arrays = [rng.standard_normal((3, 2, 4)) * 0.1, rng.standard_normal((2, 4))]
    _assert_torch_agrees(
        torch,
        lambda x, w: F.rms_norm(x, (2, 4), w, eps=eps),
        lambda x, w: torch.nn.functional.rms_norm(x, (2, 4), w, eps=eps),
        arrays,
    )


# =============================================================================================
# linear and embedding
# =============================================================================================
def test_linear_matches_the_composed_primitives(rng, device):
    arrays = [rng.standard_normal((2, 3, 4)), rng.standard_normal((5, 4)), rng.standard_normal(5)]
    _assert_runs_agree(F.linear, lambda x, w, b: x @ w.transpose(0, 1) + b, arrays, device)


def test_linear_and_embedding_match_torch(rng, torch):
    arrays = [rng.standard_normal((2, 3, 4)), rng.standard_normal((5, 4)), rng.standard_normal(5)]
    _assert_torch_agrees(torch, F.linear, torch.nn.functional.linear, arrays)
    _assert_torch_agrees(torch, F.linear, torch.nn.functional.linear, arrays[:2])
    index = np.array([[0, 3, 3], [1, 0, 3]])
    _assert_torch_agrees(
        torch,
        lambda w: F.embedding(mt.tensor(index), w),
        lambda w: torch.nn.functional.embedding(torch.tensor(index), w),
        [rng.standard_normal((4, 3))],
    )


def test_embedding_accumulates_repeated_rows(rng, device):
    w = _t(rng.standard_normal((4, 2)), device, "float32", requires_grad=True)
    y = F.embedding(mt.tensor([1, 3, 1], device=device), w)
    y.backward(_t([[1, 2], [3, 4], [5, 6]], device, "float32"))
    np.testing.assert_array_equal(w.grad.numpy(), [[0, 0], [6, 8], [0, 0], [3, 4]])
    assert y.dtype == "float32"


def test_linear_and_embedding_errors():
    with pytest.raises(ValueError, match="do not match"):
        F.linear(mt.zeros(2, 3), mt.zeros(4, 5))
    with pytest.raises(ValueError, match="bias has shape"):
        F.linear(mt.zeros(2, 3), mt.zeros(4, 3), mt.zeros(3))
    with pytest.raises(TypeError, match="indices"):
        F.embedding(mt.zeros(3), mt.zeros(4, 2))
    with pytest.raises(ValueError, match=r"indices must be in \[0, 4\)"):
        F.embedding(mt.tensor([4]), mt.zeros(4, 2))


# =============================================================================================
# the attention helpers shared with flash.py
# =============================================================================================
def test_causal_mask_alignments(device):
    top = F.causal_mask(2, 5, device=device).numpy()
    bottom = F.causal_mask(2, 5, "bottom_right", device=device).numpy()
    np.testing.assert_array_equal(top, [[1, 0, 0, 0, 0], [1, 1, 0, 0, 0]])
    np.testing.assert_array_equal(bottom, [[1, 1, 1, 1, 0], [1, 1, 1, 1, 1]])
    np.testing.assert_array_equal(F.causal_mask(3).numpy(), np.tril(np.ones((3, 3))))
    assert F.causal_mask(3, 3, "bottom_right").dtype == "bool"
    with pytest.raises(ValueError, match="alignment"):
        F.causal_mask(2, 2, "middle")


def test_causal_mask_with_a_sliding_window(device):
    band = F.causal_mask(4, window=2, device=device).numpy()
    np.testing.assert_array_equal(band, [[1, 0, 0, 0], [1, 1, 0, 0], [0, 1, 1, 0], [0, 0, 1, 1]])
    bottom = F.causal_mask(2, 5, "bottom_right", window=3, device=device).numpy()
    np.testing.assert_array_equal(bottom, [[0, 1, 1, 1, 0], [0, 0, 1, 1, 1]])
    np.testing.assert_array_equal(F.causal_mask(3, window=3).numpy(), F.causal_mask(3).numpy())
    for bad in (0, 1.5, True):
        with pytest.raises(ValueError, match="window must be an int >= 1"):
            F.causal_mask(3, window=bad)


def test_check_attention_inputs_returns_the_group_size():
    q, k = mt.zeros(2, 6, 3, 4), mt.zeros(2, 2, 5, 4)
    assert common._check_attention_inputs(q, k, mt.zeros(2, 2, 5, 7), enable_gqa=True) == 3
    assert common._check_attention_inputs(q, q, q) == 1
    assert common._check_attention_inputs(q.data, k.data, k.data, enable_gqa=True) == 3  # raw arrays too
    with pytest.raises(ValueError, match="multiple"):
        common._check_attention_inputs(mt.zeros(1, 5, 3, 4), k[:1], k[:1], enable_gqa=True)
    with pytest.raises(ValueError, match="enable_gqa"):
        common._check_attention_inputs(q, k, k)


def test_the_causal_rule_and_its_offset_are_one_function(device):
    backend = get_backend(device)
    assert common.causal_offset("top_left", 3, 5) == 0 and common.causal_offset("bottom_right", 3, 5) == 2
    tile = backend.to_numpy(common.causal_keep(backend.xp, backend.device, 1, 3, 2, 5, offset=0))
    np.testing.assert_array_equal(tile, [[0, 0, 0], [1, 0, 0]])  # queries 1-2, keys 2-4: j <= i
    for call in (
        lambda: F.causal_mask(2, 2, "middle"),
        lambda: F.scaled_dot_product_attention(*[mt.zeros(2, 2)] * 3, causal_alignment="middle"),
        lambda: F.attention_weights(mt.zeros(2, 2), mt.zeros(2, 2), causal_alignment="middle"),
        lambda: F.flash_attention(*[mt.zeros(2, 2)] * 3, causal_alignment="middle"),
    ):
        with pytest.raises(ValueError, match=r"causal_alignment must be one of \('top_left', 'bottom_right'\)"):
            call()


def test_gqa_layout_is_a_view_where_head_h_meets_key_head_h_over_g(device):
    backend = get_backend(device)
    xp = backend.xp
    q, k, mask = (
        mt.zeros(2, 6, 3, 4, device=device),
        mt.zeros(2, 2, 5, 4, device=device),
        mt.zeros(6, 1, 5, device=device),
    )
    lq, lk, lv, lmask = common.gqa_layout(xp, q.data, k.data, k.data, mask.data, groups=3)
    assert tuple(lq.shape) == (2, 2, 3, 3, 4) and tuple(lk.shape) == tuple(lv.shape) == (2, 2, 1, 5, 4)
    assert tuple(lmask.shape) == (1, 2, 3, 1, 5)  # the mask's heads split as (H_kv, G)
    grad = backend.asarray(np.arange(2 * 2 * 3 * 5 * 4, dtype=np.float64).reshape(2, 2, 3, 5, 4))
    summed = backend.to_numpy(common.sum_over_group(xp, grad))
    np.testing.assert_array_equal(summed, backend.to_numpy(grad).sum(axis=2, keepdims=True))


# =============================================================================================
# scaled_dot_product_attention
# =============================================================================================
@pytest.mark.task_4_1
@pytest.mark.parametrize(
    "scale, expected",
    [(None, [0.66976, 0.33024]), (1.0, [0.73106, 0.26894]), (2.0, [0.88080, 0.11920]), (0.0, [0.5, 0.5])],
)
def test_sdpa_scale(device, scale, expected):
    q, eye = _t([[1.0, 0.0]], device, "float32"), _t(np.eye(2), device, "float32")
    out = F.scaled_dot_product_attention(q, eye, eye, scale=scale)
    np.testing.assert_allclose(out.numpy()[0], expected, rtol=0, atol=5e-6)
    assert out.dtype == "float32"


@pytest.mark.task_4_1
def test_sdpa_scale_multiplies_scores_before_the_bias(device):
    q, eye = _t([[1.0, 0.0]], device), _t(np.eye(2), device)
    bias = _t([[0.0, 1.0]], device)
    out = F.scaled_dot_product_attention(q, eye, eye, attn_mask=bias, scale=2.0).numpy()
    p0 = 1 / (1 + math.exp(1.0 - 2.0))  # scores 2·[1, 0] + [0, 1] = [2, 1]
    np.testing.assert_allclose(out[0], [p0, 1 - p0], rtol=1e-14)


@pytest.mark.task_4_1
@pytest.mark.parametrize("how, expected", [("top_left", [0.0, 0.5]), ("bottom_right", [1.5, 2.0])])
def test_sdpa_causal_alignments(device, how, expected):
    q, k = mt.zeros(2, 1, device=device), mt.zeros(5, 1, device=device)
    v = mt.arange(5, device=device).float().reshape(5, 1)
    via_mask = F.scaled_dot_product_attention(q, k, v, attn_mask=F.causal_mask(2, 5, how, device=device))
    via_flag = F.scaled_dot_product_attention(q, k, v, is_causal=True, causal_alignment=how)
    np.testing.assert_allclose(via_mask.numpy()[:, 0], expected, rtol=1e-6)
    np.testing.assert_array_equal(via_flag.numpy(), via_mask.numpy())
    if how == "top_left":
        np.testing.assert_array_equal(F.scaled_dot_product_attention(q, k, v, is_causal=True).numpy(), via_mask.numpy())


def test_sdpa_row_without_keys_outputs_zero_with_zero_gradients(rng, device):
    q, k, v = (_t(rng.standard_normal(s), device, "float32", requires_grad=True) for s in [(3, 4), (5, 4), (5, 2)])
    keep = _t(rng.random((3, 5)) < 0.6, device, "bool")
    keep = mt.tensor(np.concatenate([keep.numpy()[:2], np.zeros((1, 5), bool)]), device=device)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=keep)
    out.backward(_t(rng.standard_normal((3, 2)), device, "float32"))
    assert np.all(out.numpy()[2] == 0) and np.all(q.grad.numpy()[2] == 0)
    for t in (out, q.grad, k.grad, v.grad):
        assert np.all(np.isfinite(t.numpy()))
    bottom = F.scaled_dot_product_attention(q, k[:2], v[:2], is_causal=True, causal_alignment="bottom_right")
    assert np.all(bottom.numpy()[0] == 0) and np.all(np.isfinite(bottom.numpy()))  # L > S: row 0 sees nothing


@pytest.mark.task_4_1
def test_sdpa_inf_and_nan_at_masked_positions_never_reach_the_output(device):
    k = np.array([[1.0, 0.0], [np.nan, 1.0], [np.inf, 0.0]])
    keep = mt.tensor([[True, False, False]], device=device)
    out = F.scaled_dot_product_attention(
        _t([[1.0, 1.0]], device), _t(k, device), _t(np.eye(3)[:, :2], device), attn_mask=keep
    )
    np.testing.assert_array_equal(out.numpy(), [[1.0, 0.0]])


@pytest.mark.task_4_1
def test_sdpa_finite_minimum_bias_is_an_ordinary_number(device):
    v = _t([[1.0], [3.0]], device, "float32")
    q, k = mt.zeros(1, 2, device=device), mt.zeros(2, 2, device=device)
    lowest = float(np.finfo(np.float32).min)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=_t([[lowest, lowest]], device, "float32"))
    np.testing.assert_allclose(out.numpy(), [[2.0]])  # equal scores: the plain average
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=_t([[0.0, lowest]], device, "float32"))
    np.testing.assert_allclose(out.numpy(), [[1.0]])


@pytest.mark.task_4_1
def test_sdpa_row_without_keys_outputs_zero(rng, device):
    q, k, v = (_t(rng.standard_normal(s), device, "float32") for s in [(3, 4), (5, 4), (5, 2)])
    keep = mt.tensor(np.concatenate([rng.random((2, 5)) < 0.6, np.zeros((1, 5), bool)]), device=device)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=keep)
    assert np.all(out.numpy()[2] == 0) and np.all(np.isfinite(out.numpy()))
    bottom = F.scaled_dot_product_attention(q, k[:2], v[:2], is_causal=True, causal_alignment="bottom_right")
    assert np.all(bottom.numpy()[0] == 0) and np.all(np.isfinite(bottom.numpy()))  # L > S: row 0 sees nothing


@pytest.mark.task_4_1
def test_sdpa_forward_matches_the_composed_primitives(rng, device):
    q, k, v = (_t(rng.standard_normal(s), device) for s in [(2, 3, 4), (2, 5, 4), (2, 5, 3)])
    bias, causal = _t(rng.standard_normal((3, 5)), device), F.causal_mask(3, 5, device=device)
    for ours, composed in [
        (
            F.scaled_dot_product_attention(q, k, v, attn_mask=bias, scale=0.3),
            composed_attention(q, k, v, bias=bias, scale=0.3),
        ),
        (F.scaled_dot_product_attention(q, k, v, is_causal=True), composed_attention(q, k, v, keep=causal)),
    ]:
        _assert_same(ours.numpy(), composed.numpy(), names=["attention output"])


def _sdpa_backward_on_its_own(q, k, v, dO, scale, drop=None):
    """``ScaledDotProductAttention.backward`` (task 4.2) on the Context its forward leaves (the
    code outside task 4.1's regions saves q, k, v in the grouped-query layout, the weights P,
    the dropout scale, the output), with P and the output computed here in NumPy: so the
    backward is tested without the forward, task 4.1's. Returns (dq, dk, dv)."""
    from minitorch_attn.core.autograd import Context
    from minitorch_attn.functional.attention import ScaledDotProductAttention

    Q, K, V, _ = common.gqa_layout(np, q, k, v, None, 1)
    S = scale * Q @ np.swapaxes(K, -1, -2)
    P = np.exp(S - S.max(-1, keepdims=True))
    P /= P.sum(-1, keepdims=True)
    O = (P if drop is None else P * drop) @ V
    ctx = Context(get_backend("cpu"), (True, True, True, False))
    ctx.save_for_backward(Q, K, V, P, drop, O)
    ctx.scale, ctx.shapes = scale, (q.shape, k.shape, v.shape)
    dq, dk, dv, _ = ScaledDotProductAttention.backward(ctx, dO)
    return dq, dk, dv


@pytest.mark.task_4_2
@pytest.mark.parametrize("dropout", [False, True], ids=["no dropout", "dropout"])
def test_sdpa_backward_on_its_own_matches_the_composed_primitives(rng, dropout):
    """The backward on its own (no engine around it) gives the gradients that autograd finds
    through the same attention composed of primitives (matmul, softmax of exp and sum, the
    dropout scale as a product), in float64."""
    q, k, v = (rng.standard_normal(s) for s in [(2, 3, 4), (2, 5, 4), (2, 5, 3)])
    dO, scale = rng.standard_normal((2, 3, 3)), 0.7
    M = (rng.random((2, 3, 5)) > 0.3) / 0.7 if dropout else np.ones((2, 3, 5))
    leaves = [_t(a, "cpu", requires_grad=True) for a in (q, k, v)]
    weights = composed_softmax((leaves[0] @ leaves[1].transpose(-2, -1)) * scale)
    ((weights * _t(M, "cpu")) @ leaves[2]).backward(_t(dO, "cpu"))
    drop = M[:, None] if dropout else None  # in the grouped-query layout, as P
    dq, dk, dv = _sdpa_backward_on_its_own(q, k, v, dO, scale, drop)
    _assert_same(
        [dq, dk, dv], [leaf.grad.numpy() for leaf in leaves], names=["gradient of q", "gradient of k", "gradient of v"]
    )


def test_sdpa_matches_the_composed_primitives(rng, device):
    arrays = [rng.standard_normal(s) for s in [(2, 3, 4), (2, 5, 4), (2, 5, 3)]]
    bias = rng.standard_normal((3, 5))
    keep = rng.random((2, 1, 5)) < 0.7
    keep[..., 0] = True
    causal = F.causal_mask(3, 5, device=device)
    _assert_runs_agree(
        lambda q, k, v, b: F.scaled_dot_product_attention(q, k, v, attn_mask=b, scale=0.3),
        lambda q, k, v, b: composed_attention(q, k, v, bias=b, scale=0.3),
        arrays + [bias],
        device,
    )
    _assert_runs_agree(
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
        lambda q, k, v: composed_attention(q, k, v, keep=causal),
        arrays,
        device,
    )
    mask = mt.tensor(keep, device=device)
    _assert_runs_agree(
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=mask),
        lambda q, k, v: composed_attention(q, k, v, keep=mask),
        arrays,
        device,
    )


@pytest.mark.parametrize("case", ["plain", "causal", "bool mask", "float mask", "gqa", "empty row"])
def test_sdpa_matches_torch(rng, torch, case):
    q, k, v = (rng.standard_normal(s) for s in [(2, 4, 3, 5), (2, 4, 6, 5), (2, 4, 6, 2)])
    kw, mask = {}, None
    if case == "causal":
        kw = dict(is_causal=True)
    elif case in ("bool mask", "empty row"):
        mask = rng.random((4, 1, 6)) < 0.6
        mask[..., 0] = True
        if case == "empty row":
            mask[1, 0, :] = False  # head 1: no query sees any key
    elif case == "gqa":
        k, v = k[:, :2], v[:, :2]
        kw = dict(enable_gqa=True)
    arrays = [q, k, v] + ([rng.standard_normal((3, 6))] if case == "float mask" else [])
    wrap = mt.tensor if mask is not None else None

    def ours(q, k, v, *bias):
        m = bias[0] if bias else (wrap(mask) if mask is not None else None)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=m, **kw)

    def theirs(q, k, v, *bias):
        m = bias[0] if bias else (torch.tensor(mask) if mask is not None else None)
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=m, **kw)

    _assert_torch_agrees(torch, ours, theirs, arrays)


@pytest.mark.torch
@settings(max_examples=25, deadline=None, derandomize=True)
@given(
    L=st.integers(1, 4),
    S=st.integers(1, 5),
    E=st.integers(1, 3),
    Ev=st.integers(1, 3),
    kind=st.sampled_from(["bool", "float", "causal", "none"]),
    seed=st.integers(0, 2**16),
)
def test_sdpa_matches_torch_on_random_shapes_and_masks(L, S, E, Ev, kind, seed):
    torch = pytest.importorskip("torch")
    draw = np.random.default_rng(seed)
    arrays = [draw.standard_normal(s) for s in [(2, L, E), (2, S, E), (2, S, Ev)]]
    mask = draw.random((L, S)) < 0.5  # rows with no key included
    if kind == "float":
        arrays.append(np.where(mask, draw.standard_normal((L, S)), -np.inf))
    options = dict(is_causal=kind == "causal")

    def ours(q, k, v, *bias):
        m = bias[0] if bias else (mt.tensor(mask) if kind == "bool" else None)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=m, **options)

    def theirs(q, k, v, *bias):
        m = bias[0] if bias else (torch.tensor(mask) if kind == "bool" else None)
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=m, **options)

    out, grads = _run(ours, arrays, "cpu", upstream_seed=seed)
    ref_out, ref_grads = _torch_run(torch, theirs, arrays, upstream_seed=seed)
    assert np.all(np.isfinite(out)) and all(np.all(np.isfinite(g)) for g in grads)
    _assert_same([out] + grads, [ref_out] + ref_grads, names=_names(ours, len(grads)))


def test_sdpa_gqa_uses_repeat_interleave_and_sums_the_groups(rng, device):
    q, k, v = (rng.standard_normal(s) for s in [(1, 4, 3, 2), (1, 2, 5, 2), (1, 2, 5, 3)])
    index = mt.tensor([0, 0, 1, 1], device=device)  # query head h -> kv head h // 2

    def repeat_interleave(t):  # (1, 2, S, D) -> (1, 4, S, D)
        return t.transpose(0, 1)[index].transpose(0, 1)

    _assert_runs_agree(
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, enable_gqa=True),
        lambda q, k, v: composed_attention(q, repeat_interleave(k), repeat_interleave(v)),
        [q, k, v],
        device,
    )


def test_sdpa_float_mask_gradient_has_the_mask_shape(rng, device):
    q, k, v = (_t(rng.standard_normal(s), device, requires_grad=True) for s in [(2, 3, 4), (2, 5, 4), (2, 5, 3)])
    bias = _t(rng.standard_normal((1, 5)), device, requires_grad=True)
    F.scaled_dot_product_attention(q, k, v, attn_mask=bias).sum().backward()
    assert bias.grad.shape == (1, 5) and np.all(np.isfinite(bias.grad.numpy()))


def test_sdpa_dropout_uses_one_mask_forward_and_backward(rng, device):
    # with V = I the output is the dropped attention matrix itself, P̃, and the gradient of V shows P̃ too
    q, k = _t(rng.standard_normal((6, 3)), device), _t(rng.standard_normal((6, 3)), device)
    v = _t(np.eye(6), device, requires_grad=True)
    out = F.scaled_dot_product_attention(q, k, v, dropout_p=0.4)
    upstream = rng.standard_normal((6, 6))
    out.backward(_t(upstream, device))
    dropped = out.numpy()
    assert 0 < np.mean(dropped == 0) < 1
    np.testing.assert_allclose(v.grad.numpy(), dropped.T @ upstream, rtol=1e-12, atol=1e-14)
    weights = F.attention_weights(q, k).numpy()
    np.testing.assert_allclose(dropped, np.where(dropped == 0, 0, weights / 0.6), rtol=1e-12)
    mt.manual_seed(5)
    first = F.scaled_dot_product_attention(q, k, v, dropout_p=0.4).numpy()
    mt.manual_seed(5)
    np.testing.assert_array_equal(F.scaled_dot_product_attention(q, k, v, dropout_p=0.4).numpy(), first)


@pytest.mark.task_4_1
def test_attention_weights_are_what_sdpa_applies(rng, device, torch):
    q, k, v = (_t(rng.standard_normal(s), device) for s in [(2, 4, 3, 5), (2, 2, 6, 5), (2, 2, 6, 3)])
    w = F.attention_weights(q, k, is_causal=True, enable_gqa=True)
    assert w.shape == (2, 4, 3, 6)
    np.testing.assert_allclose(w.numpy().sum(-1), 1.0, rtol=1e-14)
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True).numpy()
    repeated_v = np.repeat(v.numpy(), 2, axis=1)
    np.testing.assert_allclose(w.numpy() @ repeated_v, out, rtol=1e-12, atol=1e-14)


def test_sdpa_keeps_float32_and_ev_may_differ(device):
    q, k, v = mt.randn(2, 3, 4, device=device), mt.randn(2, 5, 4, device=device), mt.randn(2, 5, 7, device=device)
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert out.shape == (2, 3, 7) and out.dtype == "float32"


def test_sdpa_errors():
    q, k, v = mt.zeros(2, 3, 4), mt.zeros(2, 5, 4), mt.zeros(2, 5, 3)
    with pytest.raises(ValueError, match="not both"):
        F.scaled_dot_product_attention(q, k, v, attn_mask=F.causal_mask(3, 5), is_causal=True)
    with pytest.raises(ValueError, match=r"\(4, 5\).*\(2, 3, 5\)"):
        F.scaled_dot_product_attention(q, k, v, attn_mask=mt.zeros(4, 5))
    with pytest.raises(ValueError, match="last dim E"):
        F.scaled_dot_product_attention(q, mt.zeros(2, 5, 3), v)
    with pytest.raises(TypeError, match="attn_mask must be bool"):
        F.scaled_dot_product_attention(q, k, v, attn_mask=mt.zeros(3, 5, dtype="int64"))
    with pytest.raises(TypeError, match="one float dtype"):
        F.scaled_dot_product_attention(q, k.double(), v)
    with pytest.raises(ValueError, match="dropout_p"):
        F.scaled_dot_product_attention(q, k, v, dropout_p=-0.1)
    with pytest.raises(ValueError, match="causal_alignment"):
        F.scaled_dot_product_attention(q, k, v, is_causal=True, causal_alignment="top")


def test_embedding_rejects_negative_and_too_large_ids():
    weight = mt.randn(10, 3)
    for ids in ([0, -1], [0, 10]):
        with pytest.raises(ValueError, match=r"indices must be in \[0, 10\)"):
            F.embedding(mt.tensor(ids), weight)
    assert F.embedding(mt.zeros(0, dtype="int64"), weight).shape == (0, 3)


@pytest.mark.task_2_3
def test_cross_entropy_with_every_target_ignored_is_nan_with_zero_gradient():
    logits = mt.randn(4, 5, requires_grad=True)
    loss = F.cross_entropy(logits, mt.tensor([-100] * 4))
    assert np.isnan(loss.item())
    loss.backward()
    np.testing.assert_array_equal(logits.grad.numpy(), np.zeros((4, 5)))


def test_attention_and_norm_argument_errors():
    q = mt.randn(1, 2, 3, 4)
    cases = [
        (lambda: F.scaled_dot_product_attention(None, q, q), TypeError, "query must be a Tensor"),
        (lambda: F.scaled_dot_product_attention(q, q, None), TypeError, "value must be a Tensor"),
        (
            lambda: F.scaled_dot_product_attention(q, q, q, is_causal="yes"),
            TypeError,
            "is_causal must be True or False",
        ),
        (
            lambda: F.scaled_dot_product_attention(q, q, q, scale=float("nan")),
            ValueError,
            "scale must be a finite number",
        ),
        (
            lambda: F.scaled_dot_product_attention(mt.randn(1, 2, 3, 0), mt.randn(1, 2, 3, 0), q),
            ValueError,
            "head dim E is 0",
        ),
        (
            lambda: F.scaled_dot_product_attention(q, mt.randn(1, 0, 3, 4), mt.randn(1, 0, 3, 4), enable_gqa=True),
            ValueError,
            "multiple of key/value heads",
        ),
        (lambda: F.layer_norm(q, 4, eps=-1.0), ValueError, "eps must be a finite number > 0"),
        (lambda: F.rms_norm(q, 4, eps="small"), ValueError, "eps must be a finite number > 0"),
        (
            lambda: F.cross_entropy(mt.randn(2, 3), mt.tensor([0, 1]), ignore_index=None),
            TypeError,
            "ignore_index must be an int",
        ),
    ]
    for call, error, message in cases:
        with pytest.raises(error, match=message):
            call()


def test_dropout_accepts_any_real_number_as_p():
    x = mt.ones(1000)
    y = F.dropout(x, np.float32(0.5))
    assert 0.3 < float((y.numpy() == 0).mean()) < 0.7


# =============================================================================================
# embedding with padding_idx
# =============================================================================================
@pytest.mark.parametrize("padding_idx", [0, 3, -1])
def test_embedding_padding_idx_matches_torch(rng, padding_idx, torch):
    index = np.array([[0, 3, 3], [1, 0, 2]])
    weight = rng.standard_normal((4, 3))
    _assert_torch_agrees(
        torch,
        lambda w: F.embedding(mt.tensor(index), w, padding_idx=padding_idx),
        lambda w: torch.nn.functional.embedding(torch.tensor(index), w, padding_idx=padding_idx),
        [weight],
    )


def test_the_padding_row_is_read_but_gets_no_gradient(device):
    w = _t(np.arange(8.0).reshape(4, 2), device, "float64", requires_grad=True)
    y = F.embedding(mt.tensor([[2, 1, 2]], device=device), w, padding_idx=2)
    np.testing.assert_array_equal(y.numpy(), [[[4, 5], [2, 3], [4, 5]]])
    y.backward(_t(np.ones((1, 3, 2)), device, "float64"))
    np.testing.assert_array_equal(w.grad.numpy(), [[0, 0], [1, 1], [0, 0], [0, 0]])


@pytest.mark.parametrize(
    "padding_idx, error, message",
    [
        (4, ValueError, r"padding_idx must be in \[-4, 4\)"),
        (-5, ValueError, r"padding_idx must be in \[-4, 4\)"),
        (1.0, TypeError, "padding_idx must be an int or None"),
        (True, TypeError, "padding_idx must be an int or None"),
    ],
)
def test_a_padding_idx_outside_the_rows_is_refused(padding_idx, error, message):
    with pytest.raises(error, match=message):
        F.embedding(mt.tensor([0]), mt.zeros(4, 2), padding_idx=padding_idx)
