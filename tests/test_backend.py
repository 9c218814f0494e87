"""Backends: device names, the default device, seeding, and the kernels the array API lacks."""

import math
import sys

import numpy as np
import pytest

import minitorch_attn as mt
from minitorch_attn.core import backend


def test_unknown_device_names_the_choices():
    with pytest.raises(ValueError, match="unknown device 'tpu'.*cpu, cuda, strict"):
        mt.zeros(2, device="tpu")


def test_device_must_be_a_string():
    with pytest.raises(TypeError, match="device must be a string"):
        mt.zeros(2, device=0)


def test_cuda_without_cupy_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", None)  # makes "import cupy" raise ImportError
    monkeypatch.delitem(backend._backends, "cuda", raising=False)
    with pytest.raises(
        RuntimeError, match=r'pip install -e "\.\[cuda12\]" for CUDA 12, or -e "\.\[cuda13\]" for CUDA 13'
    ):
        mt.zeros(2, device="cuda")


def test_strict_without_array_api_strict_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "array_api_strict", None)
    monkeypatch.delitem(backend._backends, "strict", raising=False)
    with pytest.raises(RuntimeError, match=r'pip install -e "\.\[strict\]"'):
        mt.zeros(2, device="strict")


def test_every_device_flag_lists_the_devices_it_accepts(capsys):
    from minitorch_attn.app.cli import main

    for command in (["train"], ["sample", "--checkpoint", "c.npz"]):
        with pytest.raises(SystemExit):
            main([*command, "--help"])
        assert "cpu, cuda or strict" in " ".join(capsys.readouterr().out.split())
        with pytest.raises(SystemExit):
            main([*command, "--device", "gpu"])
        assert "unknown device 'gpu'; expected one of cpu, cuda, strict" in capsys.readouterr().err


def test_default_device_from_environment(monkeypatch):
    monkeypatch.setattr(backend, "_default_device", None)
    monkeypatch.setenv("MINITORCH_ATTN_DEVICE", "strict")
    assert mt.get_default_device() == "strict"
    assert mt.zeros(3).device == "strict"
    monkeypatch.setenv("MINITORCH_ATTN_DEVICE", "gpu")
    with pytest.raises(ValueError, match="unknown device 'gpu'"):
        mt.zeros(3)


def test_set_default_device_in_code(monkeypatch):
    monkeypatch.setattr(backend, "_default_device", None)
    mt.set_default_device("strict")
    assert mt.randn(2).device == "strict"
    mt.set_default_device("cpu")
    assert mt.randn(2).device == "cpu"


def test_manual_seed_reproduces_draws(device):
    mt.manual_seed(123)
    first = [
        mt.randn(4, device=device).numpy(),
        mt.rand(3, device=device).numpy(),
        mt.randint(0, 10, (5,), device=device).numpy(),
    ]
    mt.manual_seed(123)
    second = [
        mt.randn(4, device=device).numpy(),
        mt.rand(3, device=device).numpy(),
        mt.randint(0, 10, (5,), device=device).numpy(),
    ]
    for a, b in zip(first, second):
        np.testing.assert_array_equal(a, b)
    mt.manual_seed(124)
    assert not np.array_equal(mt.randn(4, device=device).numpy(), first[0])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_one_seed_gives_the_same_draws_on_every_host_backed_device(dtype):
    """cpu and strict share one random-number implementation (a NumPy default_rng)."""
    draws = {}
    for device in ("cpu", "strict"):
        mt.manual_seed(7)
        draws[device] = [
            mt.randn(5, dtype=dtype, device=device).numpy(),
            mt.rand(3, dtype=dtype, device=device).numpy(),
            mt.randint(0, 9, (4,), device=device).numpy(),
            backend.get_backend(device).next_seed(),
        ]
    for a, b in zip(draws["cpu"], draws["strict"]):
        np.testing.assert_array_equal(a, b)


def test_manual_seed_rejects_non_int():
    with pytest.raises(TypeError, match="seed must be an int"):
        mt.manual_seed(1.5)


def test_erf_matches_math_erf_to_the_last_digits(device):
    xs = np.concatenate(
        [np.linspace(-7, 7, 2001), [0.0, -0.0, 1e-300, -1e-10, 0.84375, 1.25, 1 / 0.35, 6.0, 30.0, -np.inf, np.inf]]
    )
    be = backend.get_backend(device)
    got = be.to_numpy(be.erf(be.asarray(xs)))
    expected = np.array([math.erf(v) for v in xs])
    # two units in the last place of float64, relative to the value
    np.testing.assert_allclose(got, expected, rtol=2 * np.finfo(np.float64).eps, atol=0)


def test_erf_keeps_float32(device):
    be = backend.get_backend(device)
    x = be.asarray(np.array([0.5, 1.0], dtype=np.float32))
    assert mt.dtype_name(be.erf(x).dtype) == "float32"


def test_erf_nan_stays_nan():
    be = backend.get_backend("cpu")
    assert np.isnan(be.to_numpy(be.erf(be.asarray([np.nan])))[0])


def test_index_add_accumulates_repeated_rows(device):
    be = backend.get_backend(device)
    index = be.asarray(np.array([[0, 2], [2, 2]]), dtype=be.dtype("int64"))
    values = be.asarray(np.arange(8.0).reshape(2, 2, 2))
    out = be.to_numpy(be.index_add(4, index, values))
    expected = np.zeros((4, 2))
    np.add.at(expected, np.array([[0, 2], [2, 2]]), np.arange(8.0).reshape(2, 2, 2))
    np.testing.assert_array_equal(out, expected)


def test_arrays_of_unknown_libraries_are_rejected():
    with pytest.raises(TypeError, match="not supported"):
        mt.Tensor([1.0, 2.0])


@pytest.mark.parametrize(
    "index_shape, rest, num_rows",
    [
        ((1024,), (16,), 7),  # many repeats of few rows (an embedding's backward)
        ((3, 5), (2, 3), 4),  # a 2-D index, 2-D rows
        ((0,), (3,), 5),  # no index at all
        ((6,), (), 3),  # scalar rows
        ((6,), (0,), 4),  # rows of width 0
    ],
)
def test_cpu_index_add_is_a_scatter_add(index_shape, rest, num_rows):
    """The cpu backend's sorted, run-by-run scatter-add equals numpy.add.at's in float64,
    within float32's rounding of a sum of k terms (k eps Σ|v| per row), negative indices
    included."""
    rng = np.random.default_rng(0)
    index = rng.integers(-num_rows, num_rows, index_shape)
    values = rng.standard_normal(index_shape + rest).astype(np.float32)
    exact, magnitude = (np.zeros((num_rows, *rest)) for _ in range(2))
    np.add.at(exact, index, values.astype(np.float64))
    np.add.at(magnitude, index, np.abs(values.astype(np.float64)))
    terms = np.bincount(np.reshape(index, -1) % num_rows, minlength=num_rows).reshape((num_rows,) + (1,) * len(rest))
    got = backend.get_backend("cpu").index_add(num_rows, index, values)
    assert got.dtype == np.float32 and got.shape == exact.shape
    assert np.all(np.abs(got - exact) <= np.finfo(np.float32).eps * terms * magnitude)
