"""eps in LayerNorm and RMSNorm, one rule for both: it must be > 0 in the input's dtype,
a row with nothing to normalize (constant, or all zeros for RMSNorm) amplifies the
gradient by 1/sqrt(eps) as the docstrings state, and module and functional defaults agree."""

import numpy as np
import pytest

import minitorch_attn as mt
import minitorch_attn.functional as F
from minitorch_attn import nn
from tests.test_functional import _t

NORMS = {
    "layer_norm": lambda x, eps: F.layer_norm(x, x.shape[-1], eps=eps),
    "rms_norm": lambda x, eps: F.rms_norm(x, x.shape[-1], eps=eps),
    "LayerNorm": lambda x, eps: nn.LayerNorm(x.shape[-1], eps=eps, dtype=x.dtype)(x),
    "RMSNorm": lambda x, eps: nn.RMSNorm(x.shape[-1], eps=eps, dtype=x.dtype)(x),
}


@pytest.mark.parametrize("norm", sorted(NORMS))
@pytest.mark.parametrize("eps", [0.0, -1e-5, float("inf"), float("nan")])
def test_an_eps_that_leaves_a_row_undefined_is_rejected(norm, eps):
    with pytest.raises(ValueError, match=r"eps must be a finite number > 0.*0 / 0"):
        NORMS[norm](mt.ones(2, 3), eps)


@pytest.mark.parametrize("norm", sorted(NORMS))
def test_an_eps_that_rounds_to_zero_in_the_dtype_is_rejected(norm):
    with pytest.raises(ValueError, match="eps = 1e-50 rounds to 0 in float32"):
        NORMS[norm](mt.ones(2, 3), 1e-50)
    y = NORMS[norm](mt.ones(2, 3, dtype="float64"), 1e-50)  # representable in float64
    assert np.all(np.isfinite(y.numpy()))


@pytest.mark.parametrize("eps", [1e-5, 1e-2])
def test_a_constant_row_amplifies_the_layer_norm_gradient_by_one_over_sqrt_eps(rng, device, eps):
    x = _t(np.full((1, 4), 2.5), device, requires_grad=True)
    w, g = rng.standard_normal(4), rng.standard_normal((1, 4))
    F.layer_norm(x, 4, _t(w, device), eps=eps).backward(_t(g, device))
    dxhat = g * w
    expected = (dxhat - dxhat.mean()) / np.sqrt(eps)  # 316 times dx̂ - mean(dx̂) at 1e-5
    np.testing.assert_allclose(x.grad.numpy(), expected, rtol=1e-12)


@pytest.mark.parametrize("dtype, amplification", [("float32", 2.9e3), ("float64", 6.7e7)])
def test_an_all_zero_row_amplifies_the_rms_norm_gradient_by_one_over_sqrt_eps(device, dtype, amplification):
    x = _t(np.zeros((1, 4)), device, dtype, requires_grad=True)
    g = np.array([[1.0, -2.0, 0.5, 3.0]])
    y = F.rms_norm(x, 4)  # default eps: finfo(dtype).eps
    y.backward(_t(g, device, dtype))
    assert np.all(y.numpy() == 0)
    ratio = x.grad.numpy() / g
    np.testing.assert_allclose(ratio, 1 / np.sqrt(np.finfo(dtype).eps), rtol=1e-6)
    np.testing.assert_allclose(ratio, amplification, rtol=0.02)  # the figures the docstring states


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_rms_norm_module_and_functional_share_the_default_eps(rng, dtype):
    module = nn.RMSNorm(4, dtype=dtype)
    assert module.eps is None
    x = mt.tensor(rng.standard_normal((3, 4)) * 1e-4, dtype=dtype)  # small rows: eps matters
    np.testing.assert_array_equal(module(x).numpy(), F.rms_norm(x, 4, module.weight).numpy())


def test_a_large_offset_costs_only_the_float_spacing_near_it():
    """The layer_norm docstring: LN(x + c) equals LN(x) to about eps(dtype) · |c| / std(x)."""
    x = np.random.default_rng(3).standard_normal((4, 64)).astype(np.float32)
    reference = F.layer_norm(mt.tensor(x), 64).numpy()
    eps32 = float(np.finfo(np.float32).eps)
    for c in (1e2, 1e4, 1e6):
        shifted = F.layer_norm(mt.tensor(x + np.float32(c)), 64).numpy()
        assert np.max(np.abs(shifted - reference)) <= 4 * eps32 * c / x.std(), c
