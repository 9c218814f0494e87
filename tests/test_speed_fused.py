"""The fused twins of ``minitorch_attn/speed/fused.py`` against the plain formulas they stand
for: the same numbers, bit for bit, on every device, with the edge inputs of each formula
(SiLU below -80 and NaN; attention with a bias, a boolean mask, the causal rule and rows
with no key; Adam and AdamW over several steps, float32 and float64). The switch is off
by default and holds only inside its ``with`` block."""

import numpy as np
import pytest

import minitorch_attn as mt
import minitorch_attn.functional as F
from minitorch_attn import optim, speed

pytestmark = pytest.mark.skipif(speed.switch._kernels is None, reason="a student tree: no fused kernels")


def _run(fused, fn, arrays, device, seed=0):
    """Output and input gradients of ``fn`` under a random upstream gradient, as NumPy arrays."""
    tensors = [mt.tensor(a, requires_grad=True, device=device) for a in arrays]
    with speed.use_fused(fused):
        y = fn(*tensors)
        g = np.random.default_rng(seed).standard_normal(y.shape).astype(arrays[0].dtype)
        (y * mt.tensor(g, device=device)).sum().backward()
    return [y.numpy()] + [t.grad.numpy() for t in tensors]


def _same(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y, strict=True)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_silu_fused_equals_the_formula(device, dtype):
    x = (np.random.default_rng(1).standard_normal((8, 33)) * 30).astype(dtype)
    x[0, :7] = [-1e5, -90.0, -80.5, -80.0, 0.0, 1e5, np.nan]
    _same(_run(False, F.silu, [x], device), _run(True, F.silu, [x], device))
    y = np.abs(x[1:]) + 1.0                                        # no x below -80: the cheap path of the twin
    _same(_run(False, F.silu, [y], device), _run(True, F.silu, [y], device))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("case", ["none", "causal", "bool", "bias", "empty row"])
def test_attention_fused_equals_the_formula(device, dtype, case):
    rng = np.random.default_rng(2)
    q, k, v = (rng.standard_normal(s).astype(dtype) for s in [(2, 4, 9, 8), (2, 2, 7, 8), (2, 2, 7, 8)])
    keep = rng.random((2, 1, 9, 7)) > 0.4
    keep[0, 0, 3] = False                                          # a row with no key: P = 0
    options = {"none": {}, "causal": {"is_causal": True}, "bool": {"attn_mask": keep},
               "bias": {"attn_mask": rng.standard_normal((2, 1, 9, 7)).astype(dtype)},
               "empty row": {"is_causal": True, "causal_alignment": "bottom_right"}}[case]   # rows 0, 1: no key
    options = {name: mt.tensor(value, device=device) if name == "attn_mask" else value
               for name, value in options.items()}

    def fn(a, b, c):
        return F.scaled_dot_product_attention(a, b, c, enable_gqa=True, **options)

    _same(_run(False, fn, [q, k, v], device), _run(True, fn, [q, k, v], device))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("make", [lambda ps: optim.Adam(ps, lr=0.01, weight_decay=0.1),
                                  lambda ps: optim.AdamW(ps, lr=0.01, betas=(0.9, 0.99))], ids=["Adam", "AdamW"])
def test_adam_fused_equals_the_formula(device, dtype, make):
    rng = np.random.default_rng(3)
    start = rng.standard_normal((5, 6)).astype(dtype)
    grads = [rng.standard_normal((5, 6)).astype(dtype) for _ in range(4)]
    results = []
    for fused in (False, True):
        p = mt.tensor(start, requires_grad=True, device=device)
        opt = make([p])
        for g in grads:
            p.grad = mt.tensor(g, device=device)
            with speed.use_fused(fused):
                opt.step()
        state = opt.state[id(p)]
        results.append([p.numpy()] + [mt.tensor(state[n]).numpy() for n in ("exp_avg", "exp_avg_sq")])
    _same(*results)


def test_the_switch_is_off_by_default_and_holds_inside_its_block():
    assert speed.fused_kernels() is None
    with speed.use_fused():
        assert speed.fused_kernels() is speed.switch._kernels
        with speed.use_fused(False):
            assert speed.fused_kernels() is None
        assert speed.fused_kernels() is not None
    assert speed.fused_kernels() is None
    with pytest.raises(TypeError, match="True or False"):
        with speed.use_fused("yes"):
            pass
