"""Empty dimensions (a batch, a sequence or a feature dim of size 0) in every op of
minitorch_attn.functional, forward and backward, against PyTorch in float64.

PyTorch accepts all of these; so must we, with its values: an empty result, the bias of a
linear map with no input features, the zero output of attention with no keys.
"""

import numpy as np
import pytest

import minitorch_attn as mt
import minitorch_attn.functional as F
from tests.test_functional import _assert_torch_agrees


def tf(torch):
    return torch.nn.functional


# name: (our function, PyTorch's function, input shapes)
CASES = {
    "softmax over a 0-length dim": (lambda x: F.softmax(x, -1), lambda t, x: t.softmax(x, -1), [(2, 0)]),
    "softmax, empty batch": (lambda x: F.softmax(x, 0), lambda t, x: t.softmax(x, 0), [(0, 3)]),
    "log_softmax over a 0-length dim": (lambda x: F.log_softmax(x, 1), lambda t, x: t.log_softmax(x, 1), [(3, 0, 2)]),
    "gelu": (F.gelu, lambda t, x: tf(t).gelu(x), [(0, 4)]),
    "gelu (tanh)": (lambda x: F.gelu(x, "tanh"), lambda t, x: tf(t).gelu(x, approximate="tanh"), [(2, 0)]),
    "relu": (F.relu, lambda t, x: tf(t).relu(x), [(0, 4)]),
    "layer_norm, empty batch": (lambda x, w, b: F.layer_norm(x, 4, w, b),
                                lambda t, x, w, b: tf(t).layer_norm(x, (4,), w, b), [(0, 4), (4,), (4,)]),
    "layer_norm, 0 features": (lambda x, w, b: F.layer_norm(x, 0, w, b),
                               lambda t, x, w, b: tf(t).layer_norm(x, (0,), w, b), [(3, 0), (0,), (0,)]),
    "rms_norm, empty batch": (lambda x, w: F.rms_norm(x, 4, w),
                              lambda t, x, w: tf(t).rms_norm(x, (4,), w), [(2, 0, 4), (4,)]),
    "rms_norm, 0 features": (lambda x, w: F.rms_norm(x, 0, w),
                             lambda t, x, w: tf(t).rms_norm(x, (0,), w), [(3, 0), (0,)]),
    "linear, 0 in-features: the bias": (F.linear, lambda t, x, w, b: tf(t).linear(x, w, b), [(3, 0), (2, 0), (2,)]),
    "linear, 0 in-features, no bias": (F.linear, lambda t, x, w: tf(t).linear(x, w), [(2, 3, 0), (4, 0)]),
    "linear, 0 out-features": (F.linear, lambda t, x, w, b: tf(t).linear(x, w, b), [(3, 4), (0, 4), (0,)]),
    "linear, empty batch": (F.linear, lambda t, x, w, b: tf(t).linear(x, w, b), [(0, 4), (2, 4), (2,)]),
}


# attention: q, k, v shapes (and options), each run densely and blockwise
ATTENTION = {
    "no keys": ([(1, 1), (0, 1), (0, 1)], {}),                 # PyTorch: [[0.]]
    "no keys, heads": ([(2, 3, 4, 5), (2, 3, 0, 5), (2, 3, 0, 6)], {}),
    "no keys, causal bottom-right": ([(1, 2, 3, 4), (1, 2, 0, 4), (1, 2, 0, 4)], {"is_causal": True}),
    "no queries": ([(2, 0, 4), (2, 3, 4), (2, 3, 5)], {}),
    "no queries, causal": ([(1, 0, 4), (1, 3, 4), (1, 3, 4)], {"is_causal": True}),
    "empty batch": ([(0, 2, 3, 4), (0, 2, 3, 4), (0, 2, 3, 4)], {}),
    "empty batch, GQA": ([(0, 4, 3, 4), (0, 2, 3, 4), (0, 2, 3, 4)], {"enable_gqa": True}),
    "no value features": ([(2, 3, 4), (2, 5, 4), (2, 5, 0)], {}),
}


@pytest.mark.parametrize("kernel", ["sdpa", "flash"])
@pytest.mark.parametrize("name", sorted(ATTENTION))
def test_attention_with_empty_dims_matches_torch(rng, torch, kernel, name):
    shapes, options = ATTENTION[name]
    ours = {"sdpa": F.scaled_dot_product_attention, "flash": F.flash_attention}[kernel]
    alignment = {"causal_alignment": "bottom_right"} if "bottom-right" in name else {}
    arrays = [rng.standard_normal(shape) for shape in shapes]
    if alignment:   # PyTorch has no bottom-right flag; with no keys every row is empty either way
        theirs = dict(options, is_causal=False, attn_mask=torch.zeros(shapes[0][-2], 0, dtype=torch.bool))
    else:
        theirs = options
    _assert_torch_agrees(torch, lambda q, k, v: ours(q, k, v, **options, **alignment),
                         lambda q, k, v: tf(torch).scaled_dot_product_attention(q, k, v, **theirs), arrays)


def test_no_keys_give_zero_as_pytorch_documents(device):
    q = mt.ones(1, 1, dtype="float64", device=device, requires_grad=True)
    k = mt.zeros(0, 1, dtype="float64", device=device, requires_grad=True)
    for kernel in (F.scaled_dot_product_attention, F.flash_attention):
        out = kernel(q, k, k)
        np.testing.assert_array_equal(out.numpy(), [[0.0]])
        out.backward(mt.ones(1, 1, dtype="float64", device=device))
        np.testing.assert_array_equal(q.grad.numpy(), [[0.0]])
        assert k.grad.shape == (0, 1)
        q.grad = k.grad = None


@pytest.mark.parametrize("shapes", [[(1, 1), (0, 1)], [(2, 0, 3), (2, 4, 3)], [(0, 2, 3, 4), (0, 2, 5, 4)]])
def test_attention_weights_with_empty_dims_match_torch(rng, torch, shapes):
    arrays = [rng.standard_normal(shape) for shape in shapes]
    scale = 1 / np.sqrt(shapes[0][-1])
    _assert_torch_agrees(torch, F.attention_weights,
                         lambda q, k: torch.softmax(q @ k.transpose(-2, -1) * scale, -1), arrays)


@pytest.mark.parametrize("name", sorted(CASES))
def test_empty_dims_match_torch(rng, torch, name):
    ours, theirs, shapes = CASES[name]
    arrays = [rng.standard_normal(shape) for shape in shapes]
    _assert_torch_agrees(torch, ours, lambda *xs: theirs(torch, *xs), arrays)


def test_dropout_of_an_empty_tensor_is_empty_with_an_empty_gradient(device):
    x = mt.zeros(0, 3, device=device, requires_grad=True)
    y = F.dropout(x, 0.5)
    y.backward(mt.zeros(0, 3, device=device))
    assert y.shape == (0, 3) and x.grad.shape == (0, 3)
    np.testing.assert_array_equal(x.grad.numpy(), np.zeros((0, 3)))
