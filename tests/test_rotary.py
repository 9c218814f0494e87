"""Rotary position embeddings: against independent float64 references (complex numbers in
NumPy; PyTorch's GPT-NeoX and LLaMA formulations), the relative-position property, the
backward as the rotation by minus the angle, and the argument checks."""

import numpy as np
import pytest

import minitorch_attn as mt
import minitorch_attn.functional as F
from tests.conftest import float64_tolerance


def complex_reference(x, positions, base=10000.0, interleaved=False):
    """RoPE as the paper writes it (eq. 34 read in complex numbers): pair i is the complex
    number a + ib, multiplied by e^{i m θ_i}."""
    d = x.shape[-1]
    theta = base ** (-np.arange(0, d, 2) / d)
    rotation = np.exp(1j * np.asarray(positions, dtype=np.float64)[..., None] * theta)
    if interleaved:
        z = (x[..., 0::2] + 1j * x[..., 1::2]) * rotation
        out = np.empty_like(x)
        out[..., 0::2], out[..., 1::2] = z.real, z.imag
        return out
    z = (x[..., : d // 2] + 1j * x[..., d // 2 :]) * rotation
    return np.concatenate([z.real, z.imag], axis=-1)


@pytest.mark.parametrize("interleaved", [False, True])
def test_rotary_matches_the_complex_number_reference(device, rng, interleaved):
    x = rng.standard_normal((2, 3, 5, 8))
    positions = np.array([0, 1, 2, 30, 999])
    out = F.rotary_embedding(
        mt.tensor(x, device=device), mt.tensor(positions, device=device), base=500.0, interleaved=interleaved
    )
    np.testing.assert_allclose(out.numpy(), complex_reference(x, positions, 500.0, interleaved), rtol=0, atol=1e-12)
    default = F.rotary_embedding(mt.tensor(x, device=device), interleaved=interleaved)  # positions 0..T-1
    np.testing.assert_allclose(
        default.numpy(), complex_reference(x, np.arange(5), interleaved=interleaved), rtol=0, atol=1e-12
    )


def test_the_two_pairings_differ_and_position_zero_is_the_identity(rng):
    x = mt.tensor(rng.standard_normal((4, 6)))
    halves, adjacent = F.rotary_embedding(x), F.rotary_embedding(x, interleaved=True)
    np.testing.assert_array_equal(halves.numpy()[0], x.numpy()[0])
    assert not np.allclose(halves.numpy()[1:], adjacent.numpy()[1:])


def test_float32_stays_accurate_at_large_positions(rng):
    x = rng.standard_normal((3, 16))
    positions = np.array([4000, 4001, 9999])
    reference = complex_reference(x, positions)
    out = F.rotary_embedding(mt.tensor(x, dtype="float32"), mt.tensor(positions)).numpy()
    # a rotation of each pair: a few roundings of a product and a sum per coordinate
    np.testing.assert_allclose(out, reference, rtol=0, atol=float64_tolerance(reference, n_ops=4))


def test_scores_depend_only_on_the_distance(rng):
    q, k = (mt.tensor(rng.standard_normal((1, 6, 8))) for _ in range(2))
    positions = mt.arange(6)

    def scores(shift):
        at = positions + shift
        return (F.rotary_embedding(q, at) @ F.rotary_embedding(k, at).transpose(-2, -1)).numpy()

    np.testing.assert_allclose(scores(0), scores(1000), rtol=1e-9, atol=1e-12)
    assert not np.allclose(scores(0), (q @ k.transpose(-2, -1)).numpy())


@pytest.mark.parametrize("interleaved", [False, True])
def test_the_backward_is_the_rotation_by_minus_the_angle(device, rng, interleaved):
    x = mt.tensor(rng.standard_normal((2, 5, 6)), device=device, requires_grad=True)
    upstream = mt.tensor(rng.standard_normal((2, 5, 6)), device=device)
    positions = mt.tensor([3, 1, 4, 1, 5], device=device)
    (F.rotary_embedding(x, positions, interleaved=interleaved) * upstream).sum().backward()
    expected = F.rotary_embedding(upstream, -positions, interleaved=interleaved)
    np.testing.assert_allclose(x.grad.numpy(), expected.numpy(), rtol=0, atol=1e-14)
    # a rotation keeps lengths, so it is undone by the rotation back
    y = F.rotary_embedding(F.rotary_embedding(upstream, positions), -positions)
    np.testing.assert_allclose(y.numpy(), upstream.numpy(), rtol=0, atol=1e-14)


@pytest.mark.parametrize("interleaved", [False, True])
def test_rotary_matches_pytorch_formulations(torch, rng, interleaved):
    """Split halves as GPT-NeoX / Hugging Face LLaMA (``rotate_half``); adjacent pairs as
    Meta's LLaMA (``torch.view_as_complex``); forward and gradient, float64."""
    x = rng.standard_normal((2, 4, 7, 8))
    upstream = rng.standard_normal(x.shape)
    d, base = 8, 10000.0
    inv_freq = 1.0 / (base ** (torch.arange(0, d, 2, dtype=torch.float64) / d))
    freqs = torch.outer(torch.arange(7, dtype=torch.float64), inv_freq)  # (T, d/2)
    tx = torch.tensor(x, requires_grad=True)
    if interleaved:
        rotation = torch.polar(torch.ones_like(freqs), freqs)
        z = torch.view_as_complex(tx.reshape(*tx.shape[:-1], -1, 2)) * rotation
        t_out = torch.view_as_real(z).flatten(-2)
    else:
        emb = torch.cat([freqs, freqs], dim=-1)
        rotate_half = torch.cat([-tx[..., d // 2 :], tx[..., : d // 2]], dim=-1)
        t_out = tx * emb.cos() + rotate_half * emb.sin()
    (t_out * torch.tensor(upstream)).sum().backward()

    ours_x = mt.tensor(x, requires_grad=True)
    out = F.rotary_embedding(ours_x, interleaved=interleaved)
    (out * mt.tensor(upstream)).sum().backward()
    np.testing.assert_allclose(out.numpy(), t_out.detach().numpy(), rtol=0, atol=1e-12)
    np.testing.assert_allclose(ours_x.grad.numpy(), tx.grad.numpy(), rtol=0, atol=1e-12)


@pytest.mark.parametrize(
    "call, error, message",
    [
        (lambda x: F.rotary_embedding(x[..., :5]), ValueError, "even d"),
        (lambda x: F.rotary_embedding(x[0, 0, 0]), ValueError, r"\(\.\.\., seq_len, d\)"),
        (lambda x: F.rotary_embedding(x, mt.arange(5)), ValueError, "do not broadcast"),
        (lambda x: F.rotary_embedding(x, [0, 1, 2, 3]), TypeError, "positions must be a Tensor"),
        (lambda x: F.rotary_embedding(x, mt.ones(4) > 0), TypeError, "positions must be a Tensor"),
        (lambda x: F.rotary_embedding(x, base=0), ValueError, "base must be a finite number > 0"),
        (lambda x: F.rotary_embedding(x, base=float("inf")), ValueError, "base"),
        (lambda x: F.rotary_embedding(x, interleaved=1), TypeError, "interleaved must be True or False"),
        (lambda x: F.rotary_embedding(mt.arange(8).reshape(2, 4)), TypeError, "float32 or float64"),
    ],
)
def test_bad_arguments_say_what_was_expected(call, error, message):
    with pytest.raises(error, match=message):
        call(mt.randn(2, 3, 4, 6))


def test_a_head_dim_of_zero_rotates_nothing(device):
    """d = 0 is even; it once divided by zero computing the frequencies."""
    x = mt.zeros(2, 3, 0, device=device, requires_grad=True)
    y = F.rotary_embedding(x)
    y.sum().backward()
    assert y.shape == (2, 3, 0) and x.grad.shape == (2, 3, 0)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_split_halves_give_the_numbers_of_the_two_line_formula(rng, dtype):
    """The rotation over whole rows (``[a, b] [cos, cos] + [b, a] [-sin, sin]``) is the
    formula ``a cos - b sin, a sin + b cos`` to the last bit, forward and backward."""
    from minitorch_attn.functional.rotary import _rotate

    x = rng.standard_normal((3, 2, 5, 8)).astype(dtype)
    angles = rng.uniform(-4, 4, size=(5, 4))
    cos, sin = np.cos(angles).astype(dtype), np.sin(angles).astype(dtype)
    a, b = x[..., :4], x[..., 4:]
    np.testing.assert_array_equal(
        _rotate(np, x, cos, sin, False), np.concatenate([a * cos - b * sin, a * sin + b * cos], axis=-1)
    )
    np.testing.assert_array_equal(
        _rotate(np, x, cos, -sin, False), np.concatenate([a * cos + b * sin, -a * sin + b * cos], axis=-1)
    )
