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
