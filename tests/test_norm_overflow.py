"""The norms and the other ops that square or exponentiate stay right for large inputs:
rows whose squares overflow are normalized as the math says (the result is
scale-invariant), with gradients from the same formulas."""

import warnings

import numpy as np
import pytest
from conftest import float64_tolerance

import minitorch_attn as mt
import minitorch_attn.functional as F

EPS = 1e-30  # small enough that the unscaled float64 reference does not feel it either
NORMS = {
    "rms_norm": lambda x, w: F.rms_norm(x, (x.shape[-1],), w, eps=EPS),
    "layer_norm": lambda x, w: F.layer_norm(x, (x.shape[-1],), w, None, eps=EPS),
}


def quiet(f, *args):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # the overflowing x² that is then avoided
        return f(*args)


@pytest.mark.parametrize("name", sorted(NORMS))
@pytest.mark.parametrize("big", [1e20, 1e30, 1e37])
def test_the_cases_of_the_report(name, big):
    y = quiet(NORMS[name], mt.tensor([[big, big], [big, -big]]), None).numpy()
    want = {"rms_norm": [[1, 1], [1, -1]], "layer_norm": [[0, 0], [1, -1]]}[name]
    np.testing.assert_allclose(y, want, rtol=0, atol=float64_tolerance(want, n_ops=8))


@pytest.mark.parametrize("name", sorted(NORMS))
@pytest.mark.parametrize("dtype, scale", [("float32", 1e20), ("float32", 1e33), ("float64", 1e160), ("float64", 1e300)])
def test_large_rows_are_scale_invariant_and_their_gradients_scale_by_one_over_s(name, dtype, scale):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((5, 16))
    x[0] = 0.0  # an all-zero row in the same call keeps its own rule
    w = rng.standard_normal(16)
    g = rng.standard_normal((5, 16))

    def run(values, dtype):
        xt = mt.tensor(values, dtype=dtype, requires_grad=True)
        wt = mt.tensor(w, dtype=dtype, requires_grad=True)
        y = quiet(NORMS[name], xt, wt)
        quiet(y.backward, mt.tensor(g, dtype=dtype))
        return y.numpy(), xt.grad.numpy(), wt.grad.numpy()

    y_ref, dx_ref, dw_ref = run(x, "float64")  # the unscaled rows, in float64
    y, dx, dw = run(x * scale, dtype)
    n_ops = 64
    np.testing.assert_allclose(y[1:], y_ref[1:], rtol=0, atol=float64_tolerance(y_ref, n_ops, dtype))
    np.testing.assert_allclose(dw, dw_ref, rtol=0, atol=float64_tolerance(dw_ref, n_ops, dtype))
    np.testing.assert_allclose(dx[1:] * scale, dx_ref[1:], rtol=0, atol=float64_tolerance(dx_ref, n_ops, dtype))
    assert np.all(y[0] == 0.0) and np.all(np.isfinite(dx[0]))


@pytest.mark.parametrize("name", sorted(NORMS))
def test_inf_and_nan_rows_still_give_nan(name):
    y = quiet(NORMS[name], mt.tensor([[float("inf"), 1.0], [float("nan"), 1.0], [1e20, 1.0]]), None).numpy()
    assert np.isnan(y[:2]).all() and np.isfinite(y[2]).all()


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_gelu_gradients_at_huge_inputs_are_their_limits(dtype):
    x = mt.tensor([1e20, -1e20, 1e30, -1e30, 25.0, -25.0], dtype=dtype, requires_grad=True)
    for approximate in ("tanh", "none"):
        x.grad = None
        quiet(lambda: F.gelu(x, approximate=approximate).sum().backward())  # noqa: B023 (called here)
        np.testing.assert_allclose(
            x.grad.numpy(), [1.0, 0.0, 1.0, 0.0, 1.0, 0.0], rtol=0, atol=float(np.finfo(dtype).eps)
        )  # the limits, to rounding


def test_softmax_and_cross_entropy_of_huge_logits():
    x = mt.tensor([[1e30, 1e30], [1e30, -1e30]], requires_grad=True)
    np.testing.assert_array_equal(F.softmax(x, -1).numpy(), [[0.5, 0.5], [1.0, 0.0]])
    loss = F.cross_entropy(x, mt.tensor([0, 0]))
    loss.backward()
    assert np.isfinite(loss.item()) and np.isfinite(x.grad.numpy()).all()


@pytest.mark.parametrize("norm", [F.rms_norm, F.layer_norm], ids=["rms_norm", "layer_norm"])
def test_a_row_that_overflows_leaves_the_rows_beside_it_as_they_are_alone(norm, device):
    rng = np.random.default_rng(1)
    rows = rng.standard_normal((8, 128)).astype(np.float32)
    alone = norm(mt.tensor(rows[1:], device=device), (128,)).numpy()
    rows[0] *= np.float32(1e20)  # its square overflows float32: the scaled r
    mixed = quiet(norm, mt.tensor(rows, device=device), (128,)).numpy()
    np.testing.assert_array_equal(mixed[1:], alone)  # the other rows keep their own r, to the last digit
    assert np.all(np.isfinite(mixed[0]))


@pytest.mark.parametrize("name", sorted(NORMS))
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_rows_whose_squares_overflow_warn_nothing(name, dtype):
    """The fault fixed: the overflowing ``x²`` that the norms then avoid warned "overflow
    encountered in multiply" on a documented path ([1e20, -1e20] -> [1, -1])."""
    x = mt.tensor([[1e20, -1e20]], dtype=dtype, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        y = NORMS[name](x, None)
        y.backward(mt.tensor([[1.0, 2.0]], dtype=dtype))
    np.testing.assert_array_equal(y.numpy(), [[1.0, -1.0]])
    assert np.all(np.isfinite(x.grad.numpy()))
