"""Flash attention (minitorch_attn.flash) against scaled_dot_product_attention.

In float64 the blockwise kernel must equal the dense one to 1e-12 (outputs, log-sum-exp and
every gradient) over lengths, block sizes, head dims, masks, causal alignments, GQA and
dropout; in float32 its error against a float64 reference may be at most 2x (outputs) and
3x (gradients) the error of dense float32 attention on the same inputs (the rule of
FlashAttention's own tests). Also: the causal tile skipping, empty rows, zero upstream
gradients, threads, memory that grows linearly, and clear errors.

The forward is homework task 5.1 and the backward task 5.2: the tests of 5.1 run the forward
alone, those of 5.2 the backward's loop alone (``_backward_chunk``, on a log-sum-exp computed
here densely), so that each passes or fails with its own task's code; the tests of both at once
carry no task's marker.
"""

import threading
import tracemalloc

import numpy as np
import pytest

import minitorch_attn as mt
import minitorch_attn.functional as F
from minitorch_attn.core.backend import get_backend
from minitorch_attn.functional import _attention_common as common
from minitorch_attn.functional import flash as flash_module
from minitorch_attn.functional import flash_attention
from minitorch_attn.functional._flash_dropout import dropout_mask
from minitorch_attn.speed import pool, rows, threads
from tests.conftest import expect_close

TOL64 = 1e-12


def _t(values, device, dtype="float64", requires_grad=False):
    return mt.tensor(np.asarray(values), dtype=dtype, device=device, requires_grad=requires_grad)


def _inputs(shape_q, shape_k, dim_v, seed=0):
    """Host arrays q (..., N_q, E), k (..., N_k, E), v (..., N_k, dim_v) in float64."""
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape_q), rng.standard_normal(shape_k), rng.standard_normal(shape_k[:-1] + (dim_v,)))


def _run(fn, arrays, device, dtype="float64", mask=None, seed=1):
    """Outputs and gradients of ``fn(q, k, v, mask)`` under a random upstream gradient.

    ``fn`` returns ``out`` or ``(out, lse)``; lse gets an upstream gradient too on the rows
    where it is finite. ``mask`` is a host array (float masks require grad)."""
    tensors = [_t(a, device, dtype, requires_grad=True) for a in arrays]
    if mask is not None:
        mask = _t(mask, device, "bool" if mask.dtype == bool else dtype, requires_grad=mask.dtype != bool)
    result = fn(*tensors, mask)
    outs = result if isinstance(result, tuple) else (result,)
    rng = np.random.default_rng(seed)
    roots, grads = [], []
    for o in outs:
        g = rng.standard_normal(o.shape)
        g = np.where(np.isfinite(o.numpy()), g, 0.0)
        roots.append(o)
        grads.append(_t(g, device, dtype))
    mt.backward(roots, grads)
    leaves = tensors + ([mask] if mask is not None and mask.requires_grad else [])
    return [o.numpy() for o in outs], [t.grad.numpy() for t in leaves]


def _logsumexp_reference(q, k, mask=None, is_causal=False, alignment="top_left", scale=None, groups=1):
    """The log-sum-exp of the scaled, masked scores composed from the core's ops (so that
    autograd differentiates it), +inf on rows with no allowed key."""
    if groups > 1:
        k = mt.stack([k] * groups, dim=-3).reshape(*q.shape[:-2], *k.shape[-2:])
    scale = 1.0 / float(np.sqrt(q.shape[-1])) if scale is None else scale
    scores = (q @ k.transpose(-2, -1)) * scale
    N_q, N_k = scores.shape[-2:]
    if mask is not None and mask.dtype == "bool":
        scores = scores.masked_fill(~mask, -np.inf)
    elif mask is not None:
        scores = scores + mask
    if is_causal:
        scores = scores.masked_fill(~F.causal_mask(N_q, N_k, alignment, device=q.device), -np.inf)
    top = scores.max(dim=-1, keepdim=True).detach()
    top = mt.where(top == -np.inf, mt.zeros_like(top), top)
    total = (scores - top).exp().sum(dim=-1, keepdim=True)
    safe = mt.where(total > 0, total, mt.ones_like(total))
    lse = (top + safe.log()).squeeze(-1)
    return mt.where(total.squeeze(-1) > 0, lse, mt.full(lse.shape, np.inf, dtype=lse.dtype, device=lse.device))


def _assert_close(ours, reference, tol=TOL64, names=None):
    """Each array of ``ours`` equals the one of ``reference`` to ``tol`` times its largest
    finite magnitude, infinities in the same places; ``names`` says what each is (default:
    the output, then the gradients of q, k, v and the mask), so that a failure names the
    array that differs, its worst element and the tolerance."""
    names = names or ["output", "gradient of q", "gradient of k", "gradient of v", "gradient of the mask"]
    for what, a, b in zip(names, ours, reference, strict=False):
        assert a.shape == b.shape, f"{what}: shape {a.shape}, expected {b.shape}"
        assert np.array_equal(np.isinf(a), np.isinf(b)), f"{what}: infinities not where expected"
        finite = np.isfinite(b)
        scale = max(1.0, float(np.max(np.abs(b[finite]), initial=0.0)))
        expect_close(a[finite], b[finite], what=what, atol=tol * scale)
    assert len(ours) == len(reference) <= len(names), f"{len(ours)} arrays, expected {len(reference)}"


def _names(result):
    """What each array of ``_run``'s ``outputs + gradients`` is."""
    outs, grads = result
    return ["output", "log-sum-exp"][: len(outs)] + [
        "gradient of q",
        "gradient of k",
        "gradient of v",
        "gradient of the mask",
    ][: len(grads)]


# ---- float64: exactly the dense attention ---------------------------------------------------------
CASES = {
    # name: (q shape, k shape, value dim, options)
    "N_q > N_k, ragged": ((2, 3, 7, 4), (2, 3, 5, 4), 3, dict(block_size_q=3, block_size_k=2)),
    "N_q < N_k, ragged": ((2, 3, 5, 4), (2, 3, 9, 4), 4, dict(block_size_q=2, block_size_k=4)),
    "N_q = 1": ((2, 2, 1, 3), (2, 2, 6, 3), 2, dict(block_size_q=1, block_size_k=4)),
    "N_k = 1": ((2, 2, 6, 3), (2, 2, 1, 3), 2, dict(block_size_q=4, block_size_k=1)),
    "blocks of 1": ((1, 2, 4, 3), (1, 2, 5, 3), 2, dict(block_size_q=1, block_size_k=1)),
    "blocks larger than the sequence": ((2, 2, 5, 3), (2, 2, 6, 3), 2, dict(block_size_q=64, block_size_k=64)),
    "default blocks, 3-D": ((3, 9, 5), (3, 11, 5), 4, {}),
    "head dim 1": ((1, 2, 6, 1), (1, 2, 7, 1), 1, dict(block_size_q=4, block_size_k=3)),
    "head dim 59, value dim 7": ((1, 2, 9, 59), (1, 2, 10, 59), 7, dict(block_size_q=4, block_size_k=3)),
    "head dim 111": ((1, 1, 6, 111), (1, 1, 5, 111), 111, dict(block_size_q=4, block_size_k=2)),
    "causal top-left, N_q = N_k": ((2, 2, 9, 3), (2, 2, 9, 3), 2, dict(is_causal=True, block_size_q=2, block_size_k=3)),
    "causal top-left, N_q < N_k": ((1, 2, 5, 3), (1, 2, 9, 3), 2, dict(is_causal=True, block_size_q=2, block_size_k=2)),
    "causal top-left, N_q > N_k": ((1, 2, 9, 3), (1, 2, 5, 3), 2, dict(is_causal=True, block_size_q=4, block_size_k=2)),
    "causal bottom-right, N_q < N_k": (
        (1, 2, 5, 3),
        (1, 2, 9, 3),
        2,
        dict(is_causal=True, causal_alignment="bottom_right", block_size_q=2, block_size_k=3),
    ),
    "causal bottom-right, N_q > N_k (empty rows)": (
        (1, 2, 9, 3),
        (1, 2, 5, 3),
        2,
        dict(is_causal=True, causal_alignment="bottom_right", block_size_q=2, block_size_k=2),
    ),
    "causal, N_q = 1, bottom-right": (
        (2, 1, 1, 3),
        (2, 1, 7, 3),
        2,
        dict(is_causal=True, causal_alignment="bottom_right", block_size_q=1, block_size_k=3),
    ),
    "GQA": ((2, 6, 5, 3), (2, 2, 7, 3), 2, dict(enable_gqa=True, block_size_q=2, block_size_k=3)),
    "GQA, causal, scale": (
        (1, 4, 6, 3),
        (1, 1, 6, 3),
        4,
        dict(enable_gqa=True, is_causal=True, scale=0.3, block_size_q=4, block_size_k=4),
    ),
}


@pytest.mark.task_5_1
@pytest.mark.parametrize("name", CASES)
def test_forward_equals_dense_attention_in_float64(device, name):
    shape_q, shape_k, dim_v, options = CASES[name]
    q, k, v = (_t(a, device) for a in _inputs(shape_q, shape_k, dim_v))
    dense_options = {k: v for k, v in options.items() if not k.startswith("block")}
    _assert_close(
        [flash_attention(q, k, v, **options).numpy()],
        [F.scaled_dot_product_attention(q, k, v, **dense_options).numpy()],
    )


@pytest.mark.parametrize("name", CASES)
def test_equals_dense_attention_in_float64(device, name):
    shape_q, shape_k, dim_v, options = CASES[name]
    arrays = _inputs(shape_q, shape_k, dim_v)
    dense_options = {k: v for k, v in options.items() if not k.startswith("block")}
    ours = _run(lambda q, k, v, m: flash_attention(q, k, v, **options), arrays, device)
    reference = _run(lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, **dense_options), arrays, device)
    _assert_close(ours[0] + ours[1], reference[0] + reference[1], names=_names(ours))


MASKS = {
    # name: (q shape, k shape, mask shape, kind)
    "key padding (B, 1, 1, N_k)": ((2, 3, 5, 4), (2, 3, 7, 4), (2, 1, 1, 7), "padding"),
    "bool (B, H, N_q, N_k) with empty rows": ((2, 2, 5, 3), (2, 2, 6, 3), (2, 2, 5, 6), "bool"),
    "bool (N_q, N_k)": ((2, 2, 5, 3), (2, 2, 6, 3), (5, 6), "bool"),
    "additive (B, 1, N_q, N_k) with -inf": ((2, 3, 5, 3), (2, 3, 6, 3), (2, 1, 5, 6), "float"),
    "additive (H, 1, N_k) under GQA": ((1, 4, 5, 3), (1, 2, 6, 3), (4, 1, 6), "float"),
    "additive (1, H, N_q, 1)": ((2, 2, 5, 3), (2, 2, 6, 3), (1, 2, 5, 1), "float"),
}


def _mask(shape, kind, rng):
    if kind == "padding":
        lengths = rng.integers(1, shape[-1] + 1, shape[0])
        return (np.arange(shape[-1]) < lengths[:, None]).reshape(shape)
    if kind == "bool":
        keep = rng.random(shape) < 0.6
        keep[..., 0, :] = False  # the first query row sees no key at all
        return keep
    bias = rng.standard_normal(shape)
    return np.where(rng.random(shape) < 0.25, -np.inf, bias)


@pytest.mark.task_5_1
@pytest.mark.parametrize("name", MASKS)
def test_forward_with_masks_equals_dense_attention_in_float64(device, name):
    shape_q, shape_k, shape_m, kind = MASKS[name]
    q, k, v = (_t(a, device) for a in _inputs(shape_q, shape_k, 3))
    mask = _mask(shape_m, kind, np.random.default_rng(2))
    mask = _t(mask, device, "bool" if mask.dtype == bool else "float64")
    gqa = shape_q[-3] != shape_k[-3]
    _assert_close(
        [flash_attention(q, k, v, mask, enable_gqa=gqa, block_size_q=2, block_size_k=4).numpy()],
        [F.scaled_dot_product_attention(q, k, v, mask, enable_gqa=gqa).numpy()],
    )


@pytest.mark.parametrize("name", MASKS)
def test_masks_equal_dense_attention_in_float64(device, name):
    shape_q, shape_k, shape_m, kind = MASKS[name]
    arrays = _inputs(shape_q, shape_k, 3)
    mask = _mask(shape_m, kind, np.random.default_rng(2))
    gqa = shape_q[-3] != shape_k[-3]
    ours = _run(
        lambda q, k, v, m: flash_attention(q, k, v, m, enable_gqa=gqa, block_size_q=2, block_size_k=4),
        arrays,
        device,
        mask=mask,
    )
    reference = _run(
        lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, m, enable_gqa=gqa), arrays, device, mask=mask
    )
    _assert_close(ours[0] + ours[1], reference[0] + reference[1], names=_names(ours))
    assert all(np.all(np.isfinite(g)) for g in ours[1])


@pytest.mark.parametrize(
    "options",
    [
        dict(is_causal=True, causal_alignment="bottom_right"),
        dict(mask_kind="bool"),
        dict(mask_kind="float", enable_gqa=True),
    ],
    ids=["causal bottom-right", "bool mask", "additive mask, GQA"],
)
def test_logsumexp_and_its_gradient(device, options):
    options = dict(options)
    kind = options.pop("mask_kind", None)
    gqa = options.get("enable_gqa", False)
    arrays = _inputs((2, 4, 7, 3), (2, 2 if gqa else 4, 5, 3), 2)
    mask = None if kind is None else _mask((2, 1, 7, 5), kind, np.random.default_rng(3))
    ours = _run(
        lambda q, k, v, m: flash_attention(q, k, v, m, return_lse=True, block_size_q=3, block_size_k=2, **options)[1],
        arrays,
        device,
        mask=mask,
    )
    reference = _run(
        lambda q, k, v, m: (
            _logsumexp_reference(
                q,
                k,
                m,
                options.get("is_causal", False),
                options.get("causal_alignment", "top_left"),
                groups=2 if gqa else 1,
            )
            + 0 * v.sum()
        ),
        arrays,
        device,
        mask=mask,
    )
    _assert_close(ours[0] + ours[1], reference[0] + reference[1], names=_names(ours))


def test_float64_matches_pytorch(torch):
    arrays = _inputs((2, 4, 9, 5), (2, 2, 11, 5), 3)
    mask = np.random.default_rng(4).standard_normal((2, 1, 9, 11))
    ours = _run(
        lambda q, k, v, m: flash_attention(q, k, v, m, enable_gqa=True, block_size_q=4, block_size_k=3),
        arrays,
        "cpu",
        mask=mask,
    )
    q, k, v, m = (torch.tensor(a, requires_grad=True) for a in (*arrays, mask))
    out = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=m, enable_gqa=True)
    out.backward(torch.tensor(np.random.default_rng(1).standard_normal(out.shape)))
    _assert_close(
        ours[0] + ours[1], [out.detach().numpy()] + [t.grad.numpy() for t in (q, k, v, m)], names=_names(ours)
    )


# ---- the backward's loop on its own (task 5.2) -------------------------------------------------------
def _backward_loop_on_its_own(q, k, v, dO, block_q, block_k, causal_offset=None):
    """``(dQ, dK, dV)`` of flash attention's backward loop, ``_backward_chunk`` (task 5.2), on
    the log-sum-exp and output computed here densely in NumPy (the forward is task 5.1's), in
    the layout the forward saves (queries scaled, grouped-query axes)."""
    scale = 1.0 / np.sqrt(q.shape[-1])
    Q, K, V, _ = common.gqa_layout(np, q * scale, k, v, None, 1)
    S = Q @ np.swapaxes(K, -1, -2)
    if causal_offset is not None:
        S = np.where(np.tril(np.ones(S.shape[-2:], bool), causal_offset), S, -np.inf)
    lse = np.log(np.exp(S - S.max(-1, keepdims=True)).sum(-1, keepdims=True)) + S.max(-1, keepdims=True)
    O = np.exp(S - lse) @ V
    dO = dO.reshape(O.shape)
    plan = flash_module._Plan(
        scale=scale,
        causal_offset=causal_offset,
        dropout_p=0.0,
        seed=0,
        block_q=block_q,
        block_k=block_k,
        groups=1,
        threads=1,
    )
    dQ, dK, dV, _ = flash_module._backward_chunk(
        np, get_backend("cpu").device, plan, Q, K, V, None, None, lse, dO, (dO * O).sum(-1, keepdims=True), False
    )
    return (scale * dQ).reshape(q.shape), dK.reshape(k.shape), dV.reshape(v.shape)


@pytest.mark.task_5_2
@pytest.mark.parametrize(
    "shapes, blocks, causal_offset",
    [
        (((2, 3, 7, 4), (2, 3, 5, 4), 3), (3, 2), None),
        (((1, 2, 5, 3), (1, 2, 9, 3), 2), (2, 4), None),
        (((1, 2, 6, 3), (1, 2, 6, 3), 2), (4, 4), 0),
        (((1, 1, 5, 3), (1, 1, 8, 3), 2), (2, 3), 3),
    ],
    ids=["N_q > N_k, ragged", "N_q < N_k", "causal, one tile row", "causal bottom-right, ragged"],
)
def test_backward_loop_on_its_own_is_dense_attention_s_gradient(shapes, blocks, causal_offset):
    shape_q, shape_k, dim_v = shapes
    q, k, v = _inputs(shape_q, shape_k, dim_v)
    dO = np.random.default_rng(1).standard_normal(shape_q[:-1] + (dim_v,))
    ours = _backward_loop_on_its_own(q, k, v, dO, *blocks, causal_offset)
    alignment = "top_left" if not causal_offset else "bottom_right"
    dense = _run(
        lambda q, k, v, m: F.scaled_dot_product_attention(
            q, k, v, is_causal=causal_offset is not None, causal_alignment=alignment
        ),
        [q, k, v],
        "cpu",
    )
    _assert_close(list(ours), dense[1], names=["gradient of q", "gradient of k", "gradient of v"])


@pytest.mark.task_5_2
def test_backward_loop_gives_keys_no_query_sees_exactly_zero_gradients():
    # top-left causal with N_k > N_q: keys j >= N_q are above the diagonal for every query, and
    # whole key blocks there are skipped
    q, k, v = _inputs((1, 2, 4, 3), (1, 2, 10, 3), 2)
    dO = np.random.default_rng(1).standard_normal((1, 2, 4, 2))
    _, dk, dv = _backward_loop_on_its_own(q, k, v, dO, 2, 3, causal_offset=0)
    assert np.all(dk[..., 4:, :] == 0) and np.all(dv[..., 4:, :] == 0)
    assert np.all(dk[..., :4, :] != 0)


# ---- float32: no worse than dense float32 attention ---------------------------------------------------
@pytest.mark.parametrize("options", [{}, dict(is_causal=True), dict(enable_gqa=True)], ids=["plain", "causal", "GQA"])
def test_float32_error_at_most_that_of_dense_attention(device, options):
    gqa = options.get("enable_gqa", False)
    arrays = _inputs((2, 4, 96, 32), (2, 2 if gqa else 4, 80, 32), 32, seed=5)
    arrays = [3.0 * a for a in arrays]  # larger scores: a peakier softmax, a harder case
    blocks = dict(block_size_q=32, block_size_k=24)
    reference = _run(lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, **options), arrays, device)
    dense = _run(lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, **options), arrays, device, "float32")
    ours = _run(lambda q, k, v, m: flash_attention(q, k, v, **options, **blocks), arrays, device, "float32")
    assert ours[0][0].dtype == np.float32 and all(g.dtype == np.float32 for g in ours[1])
    eps = float(np.finfo(np.float32).eps)
    for factor, mine, theirs, ref in [(2, ours[0], dense[0], reference[0]), (3, ours[1], dense[1], reference[1])]:
        for a, b, r in zip(mine, theirs, ref, strict=True):
            ours_error = np.max(np.abs(a - r))
            dense_error = np.max(np.abs(b - r))
            assert np.all(np.isfinite(a))
            assert ours_error <= factor * dense_error + eps * np.max(np.abs(r)), (ours_error, dense_error)


# ---- edge cases -----------------------------------------------------------------------------------------
@pytest.mark.task_5_1
def test_rows_without_keys_give_zero_output_and_infinite_lse(device):
    q, k, v = (_t(a, device) for a in _inputs((2, 2, 5, 3), (2, 2, 4, 3), 2))
    keep = np.ones((2, 1, 5, 4), dtype=bool)
    keep[0, :, 1] = False  # query row 1 of batch 0 sees nothing
    for mask in (_t(keep, device, "bool"), _t(np.where(keep, 0.0, -np.inf), device)):
        out, lse = (t.numpy() for t in flash_attention(q, k, v, mask, return_lse=True, block_size_q=2, block_size_k=3))
        assert np.all(out[0, :, 1] == 0) and np.all(np.isfinite(out))
        assert np.all(lse[0, :, 1] == np.inf) and np.all(np.isfinite(np.delete(lse, 1, axis=2)))


def test_rows_without_keys_give_zero_output_zero_gradient_and_infinite_lse(device):
    arrays = _inputs((2, 2, 5, 3), (2, 2, 4, 3), 2)
    keep = np.ones((2, 1, 5, 4), dtype=bool)
    keep[0, :, 1] = False  # query row 1 of batch 0 sees nothing
    bias = np.where(keep, 0.0, -np.inf)
    for mask in (keep, bias):
        (out, lse), (dq, dk, dv, *rest) = _run(
            lambda q, k, v, m: flash_attention(q, k, v, m, return_lse=True, block_size_q=2, block_size_k=3),
            arrays,
            device,
            mask=mask,
        )
        assert np.all(out[0, :, 1] == 0) and np.all(dq[0, :, 1] == 0)
        assert np.all(lse[0, :, 1] == np.inf) and np.all(np.isfinite(np.delete(lse, 1, axis=2)))
        assert all(np.all(np.isfinite(g)) for g in (dq, dk, dv, *rest))


def _poisoned_bias(poison):
    """A bias (1, 1, 3, 4) whose query row 1 holds one NaN or +inf score: PyTorch's
    softmax makes that row NaN, so its output, and every gradient it reaches, is NaN."""
    bias = np.random.default_rng(7).standard_normal((1, 1, 3, 4))
    bias[0, 0, 1, 2] = poison
    return bias


@pytest.mark.filterwarnings("ignore:invalid value encountered")
@pytest.mark.parametrize("poison", [np.nan, np.inf])
def test_a_nan_or_plus_inf_score_makes_its_row_nan_in_both_kernels_as_in_torch(torch, poison):
    """Flash attention took a NaN row sum for an empty row (lse = +inf, so a finite dV
    where PyTorch's is NaN); dense attention took a NaN sum for 0 (output [0, nan])."""
    arrays, bias = _inputs((1, 1, 3, 5), (1, 1, 4, 5), 2), _poisoned_bias(poison)
    tensors = [torch.tensor(a, requires_grad=True) for a in (*arrays, bias)]
    out = torch.nn.functional.scaled_dot_product_attention(*tensors[:3], attn_mask=tensors[3])
    out.backward(torch.tensor(np.random.default_rng(1).standard_normal(out.shape)))
    expected = [out.detach().numpy()] + [t.grad.numpy() for t in tensors]
    for fn in (
        lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, m),
        lambda q, k, v, m: flash_attention(q, k, v, m, block_size_q=2, block_size_k=3),
    ):
        outs, grads = _run(fn, arrays, "cpu", mask=bias)
        for ours, theirs in zip(outs + grads, expected, strict=True):
            np.testing.assert_array_equal(np.isnan(ours), np.isnan(theirs))
            _assert_close([np.nan_to_num(ours)], [np.nan_to_num(theirs)])


def test_zero_upstream_gradient_gives_exactly_zero_gradients(device):
    q, k, v = (_t(a, device, requires_grad=True) for a in _inputs((1, 2, 7, 3), (1, 2, 6, 3), 2))
    bias = _t(np.random.default_rng(0).standard_normal((7, 6)), device, requires_grad=True)
    out, lse = flash_attention(q, k, v, bias, dropout_p=0.2, return_lse=True, block_size_q=3, block_size_k=2)
    mt.backward([out, lse], [mt.zeros_like(out), mt.zeros_like(lse)])
    for t in (q, k, v, bias):
        assert np.all(t.grad.numpy() == 0)


def test_keys_no_query_sees_get_exactly_zero_gradients(device):
    # top-left causal with N_k > N_q: keys j >= N_q are above the diagonal for every query, and
    # whole key blocks there are skipped
    (out,), (dq, dk, dv) = _run(
        lambda q, k, v, m: flash_attention(q, k, v, is_causal=True, block_size_q=2, block_size_k=3),
        _inputs((1, 2, 4, 3), (1, 2, 10, 3), 2),
        device,
    )
    assert np.all(dk[..., 4:, :] == 0) and np.all(dv[..., 4:, :] == 0)
    assert np.all(dk[..., :4, :] != 0)


def test_causal_tiles_above_the_diagonal_are_never_computed(monkeypatch):
    visited = {"forward": [], "backward": []}
    phase = ["forward"]
    original = flash_module._scores

    def recording(xp, device, q_i, kT_j, mask, offset, visible, i0, i1, j0, j1):
        visited[phase[0]].append((i0, j0, visible))
        return original(xp, device, q_i, kT_j, mask, offset, visible, i0, i1, j0, j1)

    monkeypatch.setattr(flash_module, "_scores", recording)
    for alignment, N_q, N_k in (("top_left", 10, 10), ("bottom_right", 6, 11), ("bottom_right", 11, 6)):
        offset = 0 if alignment == "top_left" else N_k - N_q
        visited["forward"].clear()
        visited["backward"].clear()
        phase[0] = "forward"
        q, k, v = (_t(a, "cpu", requires_grad=True) for a in _inputs((1, 1, N_q, 2), (1, 1, N_k, 2), 2))
        out = flash_attention(q, k, v, is_causal=True, causal_alignment=alignment, block_size_q=3, block_size_k=2)
        phase[0] = "backward"
        out.sum().backward()
        assert sorted(visited["forward"]) == sorted(visited["backward"])
        expected = set()
        for i0 in range(0, N_q, 3):
            for j0 in range(0, N_k, 2):
                i1, j1 = min(i0 + 3, N_q), min(j0 + 2, N_k)
                if j0 <= i1 - 1 + offset:  # some key of the tile is visible to some query
                    expected.add((i0, j0, "all" if j1 - 1 <= i0 + offset else "some"))
        assert set(visited["forward"]) == expected
        assert len(visited["forward"]) == len(expected)


# ---- dropout ------------------------------------------------------------------------------------------------
def test_dropout_equals_dense_attention_with_the_same_mask(device):
    arrays = _inputs((2, 4, 7, 3), (2, 2, 6, 3), 2)
    p = 0.3
    mt.manual_seed(11)
    seed = get_backend(device).next_seed()  # what flash_attention draws after manual_seed(11)
    keep = dropout_mask(seed, (2, 4), 7, 6, p, device=device)
    with mt.no_grad():
        keep_scale = mt.where(
            keep,
            mt.full((1,), 1 / (1 - p), dtype="float64", device=device),
            mt.zeros(1, dtype="float64", device=device),
        )

    def ours(q, k, v, m):
        mt.manual_seed(11)
        return flash_attention(q, k, v, dropout_p=p, enable_gqa=True, is_causal=True, block_size_q=3, block_size_k=2)

    def dense(q, k, v, m):
        weights = F.attention_weights(q, k, is_causal=True, enable_gqa=True)
        return (weights * keep_scale) @ mt.stack([v, v], dim=-3).reshape(2, 4, 6, 2)

    mine, reference = _run(ours, arrays, device), _run(dense, arrays, device)
    _assert_close(mine[0] + mine[1], reference[0] + reference[1], names=_names(mine))


def test_dropout_mask_does_not_depend_on_the_tiling(device):
    arrays = _inputs((1, 2, 9, 3), (1, 2, 8, 3), 2)
    results = []
    for blocks in ((1, 1), (2, 3), (4, 8), (64, 64)):
        mt.manual_seed(3)

        def tiled(q, k, v, m, blocks=blocks):
            return flash_attention(q, k, v, dropout_p=0.5, block_size_q=blocks[0], block_size_k=blocks[1])

        results.append(_run(tiled, arrays, device))
    for other in results[1:]:
        _assert_close(other[0] + other[1], results[0][0] + results[0][1], names=_names(other))


def test_dropout_keeps_the_expected_fraction():
    keep = dropout_mask(12345, (2, 4), 64, 64, 0.25).numpy()
    assert abs(keep.mean() - 0.75) < 0.01
    assert abs(keep[0, 0].mean() - keep[1, 3].mean()) < 0.05
    assert not np.array_equal(keep[0, 0], keep[0, 1])  # heads get different masks
    assert not np.array_equal(keep, dropout_mask(12346, (2, 4), 64, 64, 0.25).numpy())


def test_dropout_one_gives_zero_output(device):
    q, k, v = (_t(a, device, requires_grad=True) for a in _inputs((1, 1, 4, 3), (1, 1, 5, 3), 2))
    out = flash_attention(q, k, v, dropout_p=1.0, block_size_q=2, block_size_k=2)
    out.sum().backward()
    assert np.all(out.numpy() == 0) and np.all(q.grad.numpy() == 0) and np.all(v.grad.numpy() == 0)


# ---- threads, memory, dtypes, errors ---------------------------------------------------------------------
@pytest.mark.parametrize("bias_shape", [(1, 4, 7, 6), (3, 1, 7, 6)], ids=["shared by the batch", "per batch"])
def test_threads_give_the_same_result(monkeypatch, bias_shape):
    # the chunks split the batch axis: a bias shared by the batch sums the chunks' gradients,
    # a per-batch one concatenates them; dropout must key each weight by its global index
    arrays = _inputs((3, 4, 7, 3), (3, 2, 6, 3), 2)
    bias = np.random.default_rng(6).standard_normal(bias_shape)

    def call(q, k, v, m):
        mt.manual_seed(7)
        return flash_attention(q, k, v, m, enable_gqa=True, dropout_p=0.2, block_size_q=3, block_size_k=4)

    monkeypatch.setattr(threads, "_requested", 1)
    single = _run(call, arrays, "cpu", mask=bias)
    monkeypatch.setattr(threads, "_requested", 2)
    threaded = _run(call, arrays, "cpu", mask=bias)
    _assert_close(threaded[0] + threaded[1], single[0] + single[1], tol=1e-14, names=_names(threaded))


def test_the_pool_is_used_by_default_with_a_one_thread_blas(monkeypatch):
    """No variable, no set_num_threads: flash splits the heads over one thread per core,
    and BLAS runs one thread inside the pool (two layers of threads would fight for the
    cores); BLAS gets its own count back afterwards."""
    monkeypatch.setattr(threads, "_requested", None)
    monkeypatch.setattr(threads, "available_cores", lambda: 2)
    monkeypatch.setitem(rows.SPLITS, "FlashAttention", rows.Split(from_bytes=0))  # the pool at any size
    seen = []
    chunk = flash_module._forward_chunk

    def spy(*args):
        seen.append(threads.blas_thread_count())
        return chunk(*args)

    monkeypatch.setattr(flash_module, "_forward_chunk", spy)
    q, k, v = (_t(a, "cpu") for a in _inputs((1, 4, 8, 3), (1, 4, 8, 3), 3))
    with threads.blas_threads(2):
        flash_attention(q, k, v)
        after = threads.blas_thread_count()
    assert seen == [1] * 2 * pool.CHUNKS_PER_THREAD and after == 2  # the 4 heads in 4 chunks


def test_a_call_too_small_for_the_pool_runs_as_at_one_thread(monkeypatch):
    """At two threads, flash attention of CS336's test shape (4, 128, 64) float32, whose
    scores are below the pool's threshold (``speed.SPLITS``), runs in one chunk in the
    calling thread with a one-thread BLAS, as at one thread: with the pool it took 2.58 ms
    against 1.63 ms at one thread. The same call at the size of the threshold uses the pool."""
    monkeypatch.setattr(threads, "_requested", 2)
    seen = []
    chunk = flash_module._forward_chunk

    def spy(*args):
        seen.append((threading.current_thread() is threading.main_thread(), threads.blas_thread_count()))
        return chunk(*args)

    monkeypatch.setattr(flash_module, "_forward_chunk", spy)
    q, k, v = (mt.tensor(np.zeros((4, 128, 64), dtype=np.float32)) for _ in range(3))
    with threads.blas_threads(2):
        flash_attention(q, k, v)
        assert seen == [(True, 1)] and threads.blas_thread_count() == 2
        seen.clear()
        monkeypatch.setitem(
            rows.SPLITS, "FlashAttention", rows.Split(from_bytes=4 * 4 * 128 * 128)
        )  # its scores' bytes
        flash_attention(q, k, v)
    assert len(seen) == 2 * pool.CHUNKS_PER_THREAD and not any(main for main, _ in seen)


def test_memory_grows_linearly_not_quadratically():
    """Forward and backward at N = 2048 without any (N, N) array: a dense float32 score
    matrix alone would take 16 MiB."""
    N, d = 2048, 16
    rng = np.random.default_rng(0)
    q, k, v = (mt.tensor(rng.standard_normal((1, 1, N, d)), dtype="float32", requires_grad=True) for _ in range(3))
    tracemalloc.start()
    try:
        out = flash_attention(q, k, v, is_causal=True, block_size_q=128, block_size_k=128)
        out.backward(mt.ones_like(out))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < N * N * 4 / 8, f"peak {peak / 2**20:.1f} MiB"


def test_dtype_and_shapes(device):
    q, k, v = (_t(a, device, "float32") for a in _inputs((2, 3, 5, 4), (2, 3, 6, 4), 7))
    out, lse = flash_attention(q, k, v, return_lse=True)
    assert out.shape == (2, 3, 5, 7) and lse.shape == (2, 3, 5)
    assert out.dtype == "float32" and lse.dtype == "float32"


@pytest.mark.parametrize("N_q, N_k", [(3, 0), (0, 3)])
def test_empty_sequences(device, N_q, N_k):
    q, k, v = (_t(a, device, requires_grad=True) for a in _inputs((1, 2, N_q, 4), (1, 2, N_k, 4), 5))
    out, lse = flash_attention(q, k, v, return_lse=True)
    out.sum().backward()
    assert out.shape == (1, 2, N_q, 5) and lse.shape == (1, 2, N_q)
    assert np.all(out.numpy() == 0) and np.all(lse.numpy() == np.inf)
    assert q.grad.shape == q.shape and k.grad.shape == k.shape and v.grad.shape == v.shape


def test_clear_errors():
    q, k, v = (_t(a, "cpu") for a in _inputs((1, 2, 4, 3), (1, 2, 5, 3), 2))
    with pytest.raises(ValueError, match="not both"):
        flash_attention(q, k, v, mt.ones(4, 5, dtype="bool"), is_causal=True)
    with pytest.raises(ValueError, match="causal_alignment"):
        flash_attention(q, k, v, is_causal=True, causal_alignment="middle")
    with pytest.raises(ValueError, match="block_size_q"):
        flash_attention(q, k, v, block_size_q=0)
    with pytest.raises(ValueError, match="block_size_k"):
        flash_attention(q, k, v, block_size_k=2.5)
    with pytest.raises(ValueError, match="multiple"):
        flash_attention(_t(np.zeros((1, 3, 4, 3)), "cpu"), k, v, enable_gqa=True)
    with pytest.raises(ValueError, match="broadcast"):
        flash_attention(q, k, v, mt.ones(4, 4, dtype="bool"))
    with pytest.raises(TypeError, match="attn_mask"):
        flash_attention(q, k, v, mt.ones(4, 5, dtype="int64"))
    with pytest.raises(TypeError, match="dtype"):
        flash_attention(q, k.float(), v)
    with pytest.raises(ValueError, match="dropout_p"):
        flash_attention(q, k, v, dropout_p=1.5)
