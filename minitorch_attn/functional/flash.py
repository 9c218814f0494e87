"""Flash attention: exact attention in blocks, without the (seq_len x seq_len) matrix.

``scaled_dot_product_attention`` builds the score matrix ``S = scale * Q Kᵀ`` of shape
``(L, S)`` per head, its softmax ``P`` and then ``O = P V``: memory grows as ``L * S``.
:func:`flash_attention` computes the *same* ``O`` (to rounding) while holding only one
``(block_size_q, block_size_k)`` tile of ``S`` at a time, so its memory grows as ``L + S``.
The trick is the *online softmax* (Milakov & Gimelshein, arXiv:1805.02867): softmax
needs the row maximum and the row sum of exponentials, and both can be carried along
while the keys stream past in blocks::

    m  = running row max          (m_new = max(m, rowmax(S_block)))
    ℓ  = running Σ exp(S - m)      (ℓ_new = exp(m - m_new) ℓ + rowsum(exp(S_block - m_new)))
    Õ  = running Σ exp(S - m) V    (Õ_new = exp(m - m_new) Õ + exp(S_block - m_new) V_block)

and at the end ``O = Õ / ℓ``. When the max grows, everything summed so far was scaled by
the old max and is rescaled by ``exp(m_old - m_new) <= 1``. The forward saves only ``O``
and the log-sum-exp ``L = m + log ℓ`` (one number per query row); the backward
*recomputes* each tile of ``P = exp(S - L)`` from ``Q``, ``K`` and ``L`` instead of
storing it. This is FlashAttention-2 (Dao, arXiv:2307.08691), Algorithm 1 (forward) and
Algorithm 2 (backward), written with the batch and head dimensions vectorized: Python
loops run only over blocks.

Layout used inside this module
------------------------------
Inputs are reshaped (views, no copies) to a common layout where grouped-query attention
(GQA) is plain broadcasting::

    q    (*batch, H_kv, G, L, E)     G = H_q / H_kv query heads share one key/value head
    k    (*batch, H_kv, 1, S, E)
    v    (*batch, H_kv, 1, S, E_v)
    mask (*batch or 1, H_kv or 1, G or 1, L or 1, S or 1)

so query head ``h`` meets key/value head ``h // G``, which is exactly PyTorch's
``repeat_interleave`` rule, without copying keys or values ``G`` times. Without GQA,
``G = 1``.

Speed choices (all optional for correctness; each is marked "speed:" in the code)
-------------------------------------------------------------------------------
* the softmax scale is folded into ``Q`` once, instead of into every tile of ``S``;
* ``Kᵀ`` and ``Vᵀ`` are copied once into row-major arrays (NumPy's batched matmul is slow
  on a transposed view);
* elementwise work is done in place (``s -= m``; ``exp`` into the same buffer where the
  namespace allows ``out=``, i.e. NumPy and CuPy), so a tile is allocated once per step;
* the default block sizes are tuned per shape (:func:`default_block_sizes`);
* on NumPy the independent (batch, head) slices are split over a small thread pool:
  NumPy releases the GIL inside BLAS and ufuncs, so the blocks of different heads run
  on different cores. The pool has one thread per core (``minitorch_attn.set_num_threads``
  changes that) and BLAS runs one thread while it works (:mod:`minitorch_attn.threads`);
  CuPy and array-api-strict run the same code in one thread.

Measured at B=1, H=8, N=2048, d=64, float32 on 2 CPU cores, forward+backward runs within
about 10% of PyTorch's own CPU kernel (``benchmarks/attention_bench.py``).
"""

from __future__ import annotations

import dataclasses
import functools
import math

from ..core.autograd import Function
from ..core.backend import backend_of
from ._attention_common import CAUSAL_ALIGNMENTS, _attention_setup
from ._flash_dropout import _drop_threshold, _keep_scale, _keep_tile, _row_keys
from ._parallel import _chunks, _concat, _run, _take, _thread_count


# ---- public API -----------------------------------------------------------------------------------
def flash_attention(query, key, value, attn_mask=None, is_causal=False, causal_alignment="top_left",
                    scale=None, dropout_p=0.0, enable_gqa=False, block_size_q=None, block_size_k=None,
                    return_lse=False):
    """Attention computed blockwise with an online softmax (FlashAttention-2).

    Same result as ``scaled_dot_product_attention`` (to rounding) with memory linear in
    the sequence lengths: no ``(L, S)`` matrix is ever formed, in the forward or the
    backward.

    Args:
        query: ``(*batch, H_q, L, E)`` float32 or float64 (or ``(L, E)``, ``(*batch, L, E)``).
        key: ``(*batch, H_kv, S, E)``, same dtype.
        value: ``(*batch, H_kv, S, E_v)``, same dtype; ``E_v`` may differ from ``E``.
        attn_mask: None, a bool tensor (True = the key takes part) or a float tensor of
            the query's dtype added to the scaled scores, broadcastable to
            ``(*batch, H_q, L, S)``: e.g. a key-padding mask ``(B, 1, 1, S)``. A float
            mask that requires grad receives its gradient. Cannot be combined with
            ``is_causal`` (as in PyTorch; put the causal pattern into the mask instead).
        is_causal: query ``i`` sees only keys ``j <= i + offset`` (see ``causal_alignment``).
            Tiles entirely above that diagonal are skipped, in the forward and the backward.
        causal_alignment: ``"top_left"`` (offset 0, PyTorch's ``is_causal``) or
            ``"bottom_right"`` (offset ``S - L``: the last query sees every key, as when
            new queries attend to a cache of earlier keys).
        scale: multiplies ``Q Kᵀ``; default ``1 / sqrt(E)``.
        dropout_p: probability of dropping each attention weight (after the softmax,
            survivors scaled by ``1 / (1 - p)``). The keep-mask is a counter-based hash
            of (seed, batch-head, query index, key index) (:func:`dropout_mask`), so the
            backward regenerates it exactly; the seed is drawn with one call of the
            backend's ``next_seed()`` (reproducible with ``manual_seed``). ``p = 1``
            drops everything: the output is 0.
        enable_gqa: grouped-query attention: ``H_q`` must be a multiple of ``H_kv`` and
            query head ``h`` uses key/value head ``h // (H_q // H_kv)``.
        block_size_q, block_size_k: tile sizes (>= 1, any value, also larger than the
            sequence); default tuned per shape (:func:`default_block_sizes`).
        return_lse: also return the log-sum-exp of the scaled (and masked) scores.

    Returns:
        ``out`` of shape ``(*batch, H_q, L, E_v)`` and dtype of ``query``; with
        ``return_lse=True`` the pair ``(out, lse)``, ``lse`` of shape ``(*batch, H_q, L)``,
        itself differentiable (``d lse_i / d S_ij = P_ij``). A query row with no allowed
        key gets ``out = 0``, zero gradients and ``lse = +inf``.

    Raises:
        TypeError: non-Tensor inputs, non-float or mismatched dtypes, a mask that is
            neither bool nor the query's float dtype.
        ValueError: inconsistent shapes, bad head counts for GQA, ``attn_mask`` together
            with ``is_causal`` (as in PyTorch), an unknown ``causal_alignment``,
            ``dropout_p`` outside ``[0, 1]``, block sizes < 1.
        (The checks are those of ``scaled_dot_product_attention``: the two share them.)

    Source: Dao, "FlashAttention-2", arXiv:2307.08691, Algorithms 1 and 2; online
    softmax from Milakov & Gimelshein, arXiv:1805.02867.
    """
    groups, scale = _attention_setup(query, key, attn_mask, is_causal, scale, enable_gqa, value, dropout_p)
    if causal_alignment not in CAUSAL_ALIGNMENTS:
        raise ValueError(f"flash_attention: causal_alignment must be one of {CAUSAL_ALIGNMENTS}, "
                         f"got {causal_alignment!r}")
    L, S = query.shape[-2], key.shape[-2]
    default_q, default_k = default_block_sizes(L, S)
    backend = backend_of(query.data)
    plan = _Plan(
        scale=scale,
        causal_offset=(0 if causal_alignment == "top_left" else S - L) if is_causal else None,
        dropout_p=float(dropout_p),
        seed=backend.next_seed() if dropout_p > 0 else 0,
        block_q=_check_block_size(block_size_q, default_q, "block_size_q"),
        block_k=_check_block_size(block_size_k, default_k, "block_size_k"),
        groups=groups,
        threads=_thread_count(backend),
    )
    out, lse = FlashAttention.apply(query, key, value, attn_mask, plan=plan)
    return (out, lse) if return_lse else out


def default_block_sizes(L, S):
    """Tile sizes ``(block_size_q, block_size_k)`` for query length ``L`` and key length ``S``.

    A tile costs a fixed Python overhead (a dozen array calls) plus work proportional to
    its area, so bigger tiles are faster until they stop fitting in the CPU's caches:
    256 x 256 (a float32 tile of 256 KiB per head) measured best at d = 64 on NumPy, a
    few percent ahead of 128 x 256 and 256 x 128. Memory stays linear in ``L + S`` because the tile does not
    grow with the sequence.
    """
    return max(1, min(L, 256)), max(1, min(S, 256))



# ---- the autograd Function --------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class _Plan:
    """Everything the forward and backward loops need besides the arrays."""

    scale: float
    causal_offset: int | None  # None: not causal; else query i sees keys j <= i + offset
    dropout_p: float
    seed: int
    block_q: int
    block_k: int
    groups: int                # G = H_q / H_kv
    threads: int


class FlashAttention(Function):
    """``(out, lse) = flash(q, k, v, mask)``; see :func:`flash_attention` for shapes."""

    @staticmethod
    def forward(ctx, query, key, value, mask, *, plan):
        xp = ctx.xp
        q, k, v, mask_c = _to_layout(xp, query, key, value, mask, plan.groups)
        q = q * plan.scale   # speed: scale Q once instead of every tile of S = scale Q Kᵀ
        row_keys = _row_keys(xp, ctx.backend.device, plan.seed, q.shape[:-2] + (1, 1)) \
            if plan.dropout_p > 0 else None
        chunks = _chunks(q.shape[:-3], plan.threads)
        results = _run(plan.threads, [
            functools.partial(_forward_chunk, xp, ctx.backend.device, plan,
                              *(_take(a, c) for a in (q, k, v, mask_c, row_keys)))
            for c in chunks])
        o, lse = (_concat(xp, [r[n] for r in results], chunks) for n in range(2))

        ctx.plan, ctx.shapes = plan, (query.shape, key.shape, value.shape)
        ctx.mask_shape = None if mask is None else mask.shape
        ctx.save_for_backward(q, k, v, mask_c, row_keys, o, lse)
        out = xp.reshape(o, query.shape[:-1] + (value.shape[-1],))
        return out, xp.reshape(lse, query.shape[:-1])

    @staticmethod
    def backward(ctx, grad_out, grad_lse):
        xp, plan = ctx.xp, ctx.plan
        q, k, v, mask_c, row_keys, o, lse = ctx.saved_tensors
        (query_shape, key_shape, value_shape) = ctx.shapes
        do = xp.reshape(grad_out, o.shape)
        # D_i = rowsum(dO ∘ O) = Σ_j P_ij dP_ij: the softmax backward's row term, from O
        # and dO alone, so no row of P is needed to form it (Alg. 2, line 4).
        # The lse output adds its own term: d lse_i / d S_ij = P_ij, so an upstream dlse_i
        # adds dlse_i P_ij to dS_ij, which is the same as subtracting it from D_i.
        delta = xp.sum(do * o, axis=-1, keepdims=True) - xp.reshape(grad_lse, lse.shape)
        mask_needs_grad = ctx.needs_input_grad[3]
        chunks = _chunks(q.shape[:-3], plan.threads)
        results = _run(plan.threads, [
            functools.partial(_backward_chunk, xp, ctx.backend.device, plan,
                              *(_take(a, c) for a in (q, k, v, mask_c, row_keys, lse, do, delta)),
                              mask_needs_grad)
            for c in chunks])
        dq, dk, dv = (_concat(xp, [r[n] for r in results], chunks) for n in range(3))
        dq = dq * plan.scale  # S = scale Q Kᵀ  =>  dQ = scale dS K   (the scale was left out of the loop)
        dmask = None
        if mask_needs_grad:
            parts = [r[3] for r in results]
            # a mask shared by all chunks (size 1 on the chunk axis) sums their gradients
            shared = len(parts) > 1 and mask_c.shape[chunks[0].axis] == 1
            dmask = functools.reduce(lambda a, b: a + b, parts) if shared else _concat(xp, parts, chunks)
            dmask = xp.reshape(dmask, ctx.mask_shape)
        return (xp.reshape(dq, query_shape), xp.reshape(dk, key_shape), xp.reshape(dv, value_shape),
                dmask)


# ---- Algorithm 1: the forward of one chunk of (batch, head) slices ---------------------------------
def _forward_chunk(xp, device, plan, q, k, v, mask, row_keys):
    """Forward over all tiles of one chunk; returns ``O`` and ``lse`` (keepdims).

    q: (..., G, L, E), already scaled; k: (..., 1, S, E); v: (..., 1, S, E_v).
    """
    L, S = q.shape[-2], k.shape[-2]
    kT = _transposed_copy(xp, k)
    threshold = _drop_threshold(plan.dropout_p)
    out_rows, lse_rows = [], []
    for i0 in range(0, L, plan.block_q):                          # outer loop: query blocks
        i1 = min(i0 + plan.block_q, L)
        q_i = q[..., i0:i1, :]
        rows = q_i.shape[:-1] + (1,)
        m = xp.full(rows, -math.inf, dtype=q.dtype, device=device)   # running row max
        ell = xp.zeros(rows, dtype=q.dtype, device=device)           # running Σ exp(S - m)
        acc = xp.zeros(q_i.shape[:-1] + (v.shape[-1],), dtype=q.dtype, device=device)  # Σ exp(S - m) V
        for j0 in range(0, S, plan.block_k):                      # inner loop: key/value blocks
            j1 = min(j0 + plan.block_k, S)
            visible = _tile_visibility(plan.causal_offset, i0, i1, j0, j1)
            if visible == "none":
                continue                                          # above the causal diagonal: skipped
            # 1. scores of the tile, masked entries -inf
            s = _scores(xp, device, q_i, kT[..., j0:j1], mask, plan.causal_offset, visible, i0, i1, j0, j1)
            # 2. new running max; a row that has seen only masked scores keeps m = -inf, and
            #    uses 0 in its place below so that exp(-inf - (-inf)) = nan never happens
            # BEGIN SOLUTION 5.1
            m_new = xp.maximum(m, xp.max(s, axis=-1, keepdims=True))
            m_safe = xp.where(m_new == -math.inf, 0.0, m_new)
            # 3. unnormalized probabilities of the tile, P̃ = exp(S - m_new)
            s -= m_safe
            p = _exp_(xp, s)
            # 4. rescale what was summed under the old max, then add this tile
            alpha = xp.exp(m - m_safe)                            # exp(m_old - m_new) <= 1
            ell *= alpha
            ell += xp.sum(p, axis=-1, keepdims=True)              # ℓ is the softmax's: no dropout
            if row_keys is not None:                              # dropout zeroes weights after the
                keep = _keep_tile(xp, device, row_keys, i0, i1, j0, j1, threshold)
                p = xp.where(keep, p, 0.0)                        # softmax (1/(1-p) comes in 5.)
            acc *= alpha
            acc += xp.matmul(p, v[..., j0:j1, :])
            m = m_new
            # END SOLUTION
        # 5. normalize once: O = Õ / ℓ and L = m + log ℓ; a row with no allowed key has ℓ = 0:
        #    O = 0 (Õ is 0 there) and L = +inf, so that exp(S - L) = 0 in the backward
        # BEGIN SOLUTION 5.1
        seen = ell > 0
        ell_safe = xp.where(seen, ell, 1.0)
        if plan.dropout_p > 0:
            acc *= _keep_scale(plan.dropout_p)                    # survivors are scaled by 1/(1-p)
        out_rows.append(acc / ell_safe)
        lse_rows.append(xp.where(seen, m + xp.log(ell_safe), math.inf))
        # END SOLUTION
    return (_join_blocks(xp, out_rows, q.shape[:-2] + (0, v.shape[-1]), q.dtype, device),
            _join_blocks(xp, lse_rows, q.shape[:-2] + (0, 1), q.dtype, device))


# ---- Algorithm 2: the backward of one chunk ---------------------------------------------------------
def _backward_chunk(xp, device, plan, q, k, v, mask, row_keys, lse, do, delta, mask_needs_grad):
    """Gradients of one chunk: ``(dQ / scale, dK, dV, dmask or None)``.

    The forward of a tile, recomputed here from the saved L (scale folded into q, Z the
    dropout keep-mask), and the backward step that undoes each line, walked bottom-up::

        1. S   = q Kᵀ + bias (-inf where masked)   1'. dq += dS K, dK += dSᵀ q, dbias += dS
        2. P   = exp(S - L)                        2'. dS  = P ∘ (dP - D)     (softmax)
        3. P_d = P ∘ Z / (1 - p)                   3'. dP  = dP_d ∘ Z / (1 - p)
        4. O  += P_d V                             4'. dV += P_dᵀ dO,  dP_d = dO Vᵀ

    with D = rowsum(dO ∘ O) computed once beforehand. The outer loop runs over key/value
    blocks, so dK and dV of a block are complete when its inner loop ends (FlashAttention
    keeps them in on-chip memory; here they are small local arrays); dQ accumulates
    across the outer loop, one array per query block.
    """
    L, S = q.shape[-2], k.shape[-2]
    groups_axis = q.ndim - 3                      # G: summed for dK, dV (GQA)
    kT, vT = _transposed_copy(xp, k), _transposed_copy(xp, v)
    threshold = _drop_threshold(plan.dropout_p)
    keep_scale = _keep_scale(plan.dropout_p)
    q_starts = range(0, L, plan.block_q)
    dq_rows = [xp.zeros(q[..., i0:min(i0 + plan.block_q, L), :].shape, dtype=q.dtype, device=device)
               for i0 in q_starts]
    dmask = xp.zeros(mask.shape, dtype=mask.dtype, device=device) if mask_needs_grad else None
    dk_rows, dv_rows = [], []
    for j0 in range(0, S, plan.block_k):                          # outer loop: key/value blocks
        j1 = min(j0 + plan.block_k, S)
        k_j, kT_j, vT_j = k[..., j0:j1, :], kT[..., j0:j1], vT[..., j0:j1]
        dk_j = xp.zeros(q.shape[:-2] + k_j.shape[-2:], dtype=q.dtype, device=device)
        dv_j = xp.zeros(q.shape[:-2] + (j1 - j0, v.shape[-1]), dtype=q.dtype, device=device)
        for n, i0 in enumerate(q_starts):                         # inner loop: query blocks
            i1 = min(i0 + plan.block_q, L)
            visible = _tile_visibility(plan.causal_offset, i0, i1, j0, j1)
            if visible == "none":
                continue                                          # same tiles as the forward skipped
            q_i, do_i = q[..., i0:i1, :], do[..., i0:i1, :]
            # 1.-2. recompute the tile of probabilities from the saved log-sum-exp
            s = _scores(xp, device, q_i, kT_j, mask, plan.causal_offset, visible, i0, i1, j0, j1)
            # BEGIN SOLUTION 5.2
            s -= lse[..., i0:i1, :]                               # masked: -inf - L; empty row: L = +inf
            p = _exp_(xp, s)                                      # either way exp(-inf) = 0
            dp = xp.matmul(do_i, vT_j)                            # 4'. dP_d = dO Vᵀ
            if row_keys is not None:                              # 3. the same keep-mask as the forward
                keep = _keep_tile(xp, device, row_keys, i0, i1, j0, j1, threshold)
                p_dropped = xp.where(keep, p * keep_scale, 0.0)
                dp = xp.where(keep, dp * keep_scale, 0.0)         # 3'. dP = dP_d ∘ Z / (1 - p)
            else:
                p_dropped = p
            dv_j += xp.matmul(xp.matrix_transpose(p_dropped), do_i)  # 4'. dV += P_dᵀ dO
            dp -= delta[..., i0:i1, :]                            # 2'. dS = P ∘ (dP - D), in place
            dp *= p
            ds = dp
            dq_rows[n] += xp.matmul(ds, k_j)                      # 1'. dq += dS K  (times scale later)
            dk_j += xp.matmul(xp.matrix_transpose(ds), q_i)       #     dK += dSᵀ (scale Q)
            if dmask is not None:                                 #     dbias = dS
                _add_tile(xp, dmask, ds, i0, i1, j0, j1)
            # END SOLUTION
        # key/value head h_kv received from all G query heads of its group
        dk_rows.append(xp.sum(dk_j, axis=groups_axis, keepdims=True) if dk_j.shape[groups_axis] > 1 else dk_j)
        dv_rows.append(xp.sum(dv_j, axis=groups_axis, keepdims=True) if dv_j.shape[groups_axis] > 1 else dv_j)
    return (_join_blocks(xp, dq_rows, q.shape, q.dtype, device),
            _join_blocks(xp, dk_rows, k.shape, q.dtype, device),
            _join_blocks(xp, dv_rows, v.shape, q.dtype, device), dmask)


# ---- pieces shared by the two passes --------------------------------------------------------------
def _tile_visibility(offset, i0, i1, j0, j1):
    """Which entries of tile (queries i0..i1-1, keys j0..j1-1) the causal rule
    ``j <= i + offset`` lets through: "all", "none" or "some". The forward and the
    backward ask this same function, so they skip exactly the same tiles."""
    if offset is None or j1 - 1 <= i0 + offset:     # its top-right corner is allowed
        return "all"
    if j0 > i1 - 1 + offset:                        # its bottom-left corner is not
        return "none"
    return "some"


def _scores(xp, device, q_i, kT_j, mask, offset, visible, i0, i1, j0, j1):
    """One tile of scores ``S = q Kᵀ``, with the attention mask and, on a tile that
    crosses the causal diagonal, the causal mask applied (-inf where not allowed)."""
    s = xp.matmul(q_i, kT_j)
    if mask is not None:
        m = _mask_tile(mask, i0, i1, j0, j1)
        if m.dtype == xp.bool:
            s = xp.where(m, s, -math.inf)
        else:
            s += m                                  # additive bias (may hold -inf itself)
    if visible == "some":
        rows = xp.arange(i0, i1, device=device)[:, None]
        cols = xp.arange(j0, j1, device=device)[None, :]
        s = xp.where(cols <= rows + offset, s, -math.inf)
    return s


def _join_blocks(xp, blocks, empty_shape, dtype, device):
    """The per-block results joined along the sequence axis (an empty sequence has no
    block: then an array of ``empty_shape``, of length 0 there)."""
    if not blocks:
        return xp.zeros(empty_shape, dtype=dtype, device=device)
    return xp.concat(blocks, axis=-2)


def _transposed_copy(xp, x):
    """``xᵀ`` (last two axes) as a row-major array of its own, made once per call.
    speed: NumPy's batched matmul misses its BLAS path when the right operand is a
    transposed view (see :func:`minitorch_attn.ops.matmul_transposed`)."""
    x_t = xp.matrix_transpose(x)
    return xp.reshape(x_t, x_t.shape, copy=True)


def _mask_tile(mask, i0, i1, j0, j1):
    """The part of a broadcastable mask over a tile (its size-1 axes are kept as they are)."""
    rows = slice(i0, i1) if mask.shape[-2] > 1 else slice(None)
    cols = slice(j0, j1) if mask.shape[-1] > 1 else slice(None)
    return mask[..., rows, cols]


def _add_tile(xp, dmask, ds, i0, i1, j0, j1):
    """``dmask[tile] += ds``, first summing ``ds`` over the axes where the mask broadcast."""
    axes = tuple(a for a in range(ds.ndim) if dmask.shape[a] == 1 and ds.shape[a] > 1)
    if axes:
        ds = xp.sum(ds, axis=axes, keepdims=True)
    rows = slice(i0, i1) if dmask.shape[-2] > 1 else slice(None)
    cols = slice(j0, j1) if dmask.shape[-1] > 1 else slice(None)
    dmask[..., rows, cols] += ds


def _exp_(xp, x):
    """``exp(x)``, overwriting ``x`` where the namespace takes ``out=`` (NumPy, CuPy).
    speed: saves allocating and page-faulting one tile per step; ``x`` must be a fresh
    temporary of the caller."""
    try:
        return xp.exp(x, out=x)
    except TypeError:  # array-api-strict: the standard has no out=
        return xp.exp(x)


# ---- input checks and layout ----------------------------------------------------------------------
def _check_block_size(value, default, name):
    if value is None:
        return default
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"flash_attention: {name} must be an int >= 1, got {value!r}")
    return value


def _to_layout(xp, query, key, value, mask, groups):
    """Reshape to the module's layout (see the module docstring); views, no copies."""
    L, E = query.shape[-2:]
    S = key.shape[-2]
    lead = query.shape[:-3] if query.ndim >= 3 else ()
    heads = query.shape[-3] if query.ndim >= 3 else 1
    q = xp.reshape(query, lead + (heads // groups, groups, L, E))
    k = xp.reshape(key, lead + (heads // groups, 1, S, E))
    v = xp.reshape(value, lead + (heads // groups, 1, S, value.shape[-1]))
    if mask is not None:
        padded = (1,) * (query.ndim - mask.ndim) + tuple(mask.shape)
        mask_heads = padded[-3] if query.ndim >= 3 else 1
        split = (1, 1) if mask_heads == 1 else (heads // groups, groups)
        mask = xp.reshape(mask, padded[:-3] + split + padded[-2:])
    return q, k, v, mask


