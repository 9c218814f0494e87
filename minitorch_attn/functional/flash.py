"""Flash attention: exact attention in blocks, without the ``(N_q, N_k)`` matrix.

``scaled_dot_product_attention`` builds the scores ``S = scale · Q Kᵀ`` of shape
``(N_q, N_k)`` per head, its softmax ``P`` and then ``O = P V``: memory grows as
``N_q · N_k``. :func:`flash_attention` computes the *same* ``O`` (to rounding) while
holding only one tile ``S_ij`` of ``(block_size_q, block_size_k)`` scores at a time, so its
memory grows as ``N_q + N_k``. The trick is the *online softmax* (Milakov & Gimelshein,
arXiv:1805.02867): the softmax needs each row's maximum and sum of exponentials, and both
can be carried along while the key blocks ``j = 1, 2, ...`` stream past::

    m^(j) = max(m^(j-1), rowmax(S_ij))                                  running row max
    ℓ^(j) = e^(m^(j-1) - m^(j)) ℓ^(j-1) + rowsum(exp(S_ij - m^(j)))      running Σ exp(S - m)
    Õ^(j) = e^(m^(j-1) - m^(j)) Õ^(j-1) + exp(S_ij - m^(j)) V_j          running Σ exp(S - m) V

Why this is exact, by induction over the blocks: if ``ℓ^(j-1) = Σ_k exp(S_k - m^(j-1))``
over the keys seen so far, multiplying by ``e^(m^(j-1) - m^(j))`` turns every term into
``exp(S_k - m^(j))``, and adding the new block's terms makes ``ℓ^(j)`` that sum over all
keys seen; the same holds for ``Õ``. After the last block ``m`` is the row's maximum, so
``O = Õ / ℓ = Σ_k exp(S_k - m) V_k / Σ_k exp(S_k - m) = softmax(S) V`` and
``lse = m + log ℓ = log Σ_k exp(S_k)``. The rescaling factor ``e^(m^(j-1) - m^(j))`` is
``<= 1``, so nothing overflows.

The forward saves only ``O`` and ``lse`` (one number per query row); the backward
*recomputes* each tile of ``P`` from ``Q``, ``K`` and ``lse`` instead of storing ``P``, then
takes dense attention's backward
(:class:`~minitorch_attn.functional.attention.ScaledDotProductAttention`, passes 5-1) one
tile at a time.

.. derivation 5.2 begin
The recomputed tile is ``P_ij = exp(S_ij - lse_i)``, which equals ``exp(S_ij - m)/ℓ``.
Every gradient of dense attention's backward is a sum over tiles of products of tiles
(``dV = Pᵀ dO`` sums over query blocks, ``dQ = dS K`` over key blocks), so adding up the
tiles' contributions gives the dense result. ``D = rowsum(dO ∘ O)``, the softmax's row
term, is formed once from ``O`` and ``dO`` (why that equals ``rowsum(dP ∘ P)``, also with
dropout, is shown there).
.. derivation end

This is FlashAttention-2 (Dao, arXiv:2307.08691): :func:`_forward_chunk` is its Algorithm
1 and :func:`_backward_chunk` its Algorithm 2, each comment numbered after the line of the
algorithm it implements, and the backward's comments name the forward line each step
undoes. Python loops run only over blocks: the batch and head dimensions are vectorized.
(Reading the paper beside the code: Algorithm 1's line 10 is printed with an inverse,
``diag(e^{m^(j-1) - m^(j)})^{-1} O``, a known typo; rescaling by ``e^{m_old - m_new} <= 1``
without the inverse, as the code does, is what the online softmax needs.)

Names follow the paper: blocks ``Q_i``, ``K_j``, ``V_j``, ``O_i``, ``dO_i``; tiles
``S_ij``, ``P_ij``, ``dP_ij``, ``dS_ij``; the running ``m_i``, ``ell_i`` (ℓ); ``lse`` for the
paper's log-sum-exp ``L``, and ``N_q``, ``N_k`` for its sequence length ``N``, so that no
letter means two things (see :mod:`._attention_common` for the notation). Inside this
module ``Q`` is already multiplied by the scale.

Layout: the inputs are reshaped (views, no copies) by
:func:`._attention_common.gqa_layout`, where grouped-query attention is broadcasting:
``Q (*batch, H_kv, G, N_q, E)`` against ``K (*batch, H_kv, 1, N_k, E)``.

Speed choices (all optional for correctness; each is marked "speed:" in the code)
---------------------------------------------------------------------------------
* the softmax scale is folded into ``Q`` once, instead of into every tile ``S_ij``;
* ``Kᵀ`` and ``Vᵀ`` are copied once into row-major arrays (NumPy's batched matmul is slow
  on a transposed view);
* tiles that the causal rule hides entirely are skipped, in both passes;
* the default block sizes are tuned per shape (:func:`default_block_sizes`);
* on NumPy the independent (batch, head) slices are split over a small thread pool:
  NumPy releases the GIL inside BLAS and ufuncs, so the blocks of different heads run
  on different cores. The pool has one thread per core (``minitorch_attn.set_num_threads``
  changes that) and BLAS runs one thread while it works (:mod:`minitorch_attn.speed`);
  a call whose scores are too small for the pool to pay (``speed.SPLITS``) runs as at one
  thread; CuPy and array-api-strict run the same code in one thread.

Measured at B=1, H=8, N=2048, d=64, float32 on 2 idle CPU cores, forward+backward takes
1.1-1.3 times as long as PyTorch's own CPU kernel; its matrix products alone take about
0.8 times, so the passes over each tile between them (the softmax's, which a fused kernel
does while the tile is in registers) cost 0.3-0.4 of PyTorch's time (``benchmarks/attention_bench.py``,
the ``products`` rows).
"""

from __future__ import annotations

import dataclasses
import functools
import math

from ..core.autograd import Function
from ..core.backend import backend_of
from ..core.ops import transposed_copy
from ..core.tensor import Tensor
from ..speed import batch_chunks, join, run_on_threads, take, threads_for
from ._attention_common import attention_setup, broadcast_batch, gqa_layout, sum_over_group
from ._flash_dropout import _drop_threshold, _keep_scale, _keep_tile, _row_keys
from ._flash_tiles import _add_tile, _check_block_size, _join_blocks, _scores, _tile_visibility


# ---- public API -----------------------------------------------------------------------------------
def flash_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attn_mask: Tensor | None = None,
    is_causal: bool = False,
    causal_alignment: str = "top_left",
    scale: float | None = None,
    dropout_p: float = 0.0,
    enable_gqa: bool = False,
    block_size_q: int | None = None,
    block_size_k: int | None = None,
    return_lse: bool = False,
) -> Tensor | tuple[Tensor, Tensor]:
    """Attention computed blockwise with an online softmax (FlashAttention-2).

    Same result as ``scaled_dot_product_attention`` (to rounding) with memory linear in
    the sequence lengths: no ``(N_q, N_k)`` matrix is ever formed, in the forward or the
    backward.

    Args:
        query: ``(*batch, H_q, N_q, E)`` float32 or float64 (or ``(N_q, E)``,
            ``(*batch, N_q, E)``). Any size may be 0; with no keys the output is 0.
        key: ``(*batch, H_kv, N_k, E)``, same dtype.
        value: ``(*batch, H_kv, N_k, E_v)``, same dtype; ``E_v`` may differ from ``E``.
            The batch dims of the three broadcast together, as PyTorch's (see
            :func:`~._attention_common.broadcast_batch`).
        attn_mask: None, a bool tensor (True = the key takes part) or a float tensor of
            the query's dtype added to the scaled scores, broadcastable to
            ``(*batch, H_q, N_q, N_k)``: e.g. a key-padding mask ``(B, 1, 1, N_k)``. A float
            mask that requires grad receives its gradient. Cannot be combined with
            ``is_causal`` (as in PyTorch; put the causal pattern into the mask instead).
        is_causal: query ``i`` sees only keys ``j <= i + offset`` (see ``causal_alignment``).
            Tiles entirely above that diagonal are skipped, in the forward and the backward.
        causal_alignment: ``"top_left"`` (offset 0, PyTorch's ``is_causal``) or
            ``"bottom_right"`` (offset ``N_k - N_q``: the last query sees every key, as when
            new queries attend to a cache of earlier keys).
        scale: multiplies ``Q Kᵀ``; default ``1 / sqrt(E)``.
        dropout_p: probability of dropping each attention weight (after the softmax,
            survivors scaled by ``1 / (1 - p)``). The keep-mask is a counter-based hash
            of (seed, batch-head, query index, key index)
            (:func:`~minitorch_attn.functional._flash_dropout.dropout_mask`), so the
            backward regenerates it exactly; the seed is drawn with one call of the
            backend's ``next_seed()`` (reproducible with ``manual_seed``). ``p = 1``
            drops everything: the output is 0.
        enable_gqa: grouped-query attention: ``H_q`` must be a multiple of ``H_kv`` and
            query head ``h`` uses key/value head ``h // (H_q // H_kv)``.
        block_size_q, block_size_k: tile sizes (>= 1, any value, also larger than the
            sequence); default tuned per shape (:func:`default_block_sizes`).
        return_lse: also return the log-sum-exp of the scaled (and masked) scores.

    Returns:
        ``out`` of shape ``(*batch, H_q, N_q, E_v)`` and dtype of ``query``; with
        ``return_lse=True`` the pair ``(out, lse)``, ``lse`` of shape ``(*batch, H_q, N_q)``,
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

    Catalogue record: ``opinfo/attention.py`` (its samples, references and checks).
    """
    query, key, value = broadcast_batch(query, key, value, enable_gqa)
    setup = attention_setup(query, key, value, attn_mask, is_causal, causal_alignment, scale, dropout_p, enable_gqa)
    default_q, default_k = default_block_sizes(query.shape[-2], key.shape[-2])
    backend = backend_of(query.data)
    plan = _Plan(
        scale=setup.scale,
        causal_offset=setup.causal_offset,
        dropout_p=float(dropout_p),
        seed=backend.next_seed() if dropout_p > 0 else 0,
        block_q=_check_block_size(block_size_q, default_q, "block_size_q"),
        block_k=_check_block_size(block_size_k, default_k, "block_size_k"),
        groups=setup.groups,
        threads=threads_for("FlashAttention", backend, _scores_bytes(query, key)),  # speed: the pool where it pays
    )
    out, lse = FlashAttention.apply(query, key, value, attn_mask, plan=plan)
    return (out, lse) if return_lse else out


def _scores_bytes(query, key):
    """The bytes of the scores ``S`` that a call never forms, ``(..., H_q, N_q, N_k)``: its
    work, the measure by which the speed layer decides whether the pool pays."""
    return math.prod(query.shape[:-1]) * key.shape[-2] * (8 if query.dtype == "float64" else 4)


def default_block_sizes(N_q, N_k):
    """Tile sizes ``(block_size_q, block_size_k)`` for ``N_q`` queries and ``N_k`` keys.

    A tile costs a fixed Python overhead (a dozen array calls) plus work proportional to
    its area, so bigger tiles are faster until they stop fitting in the CPU's caches:
    256 x 256 (a float32 tile of 256 KiB per head) measured best at d = 64 on NumPy, a
    few percent ahead of 128 x 256 and 256 x 128. Memory stays linear in ``N_q + N_k``
    because the tile does not grow with the sequence.
    """
    return max(1, min(N_q, 256)), max(1, min(N_k, 256))


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
    groups: int  # G = H_q / H_kv
    threads: int


class FlashAttention(Function):
    r"""``(out, lse) = flash(q, k, v, mask)``; see :func:`flash_attention` for shapes.

    Forward: FlashAttention-2's Algorithm 1 (:func:`_forward_chunk`; numbers are its lines),
    dense attention's ``O`` and its log-sum-exp, by the online softmax over key blocks ``j``
    (the module docstring derives it)::

        8.      S_ij = scale · Q_i K_jᵀ  (+ bias; masked entries -inf)
        9-10.   m_i, ℓ_i and Õ_i carried along the key blocks
        12-13.  O_i = Õ_i / ℓ_i,   lse_i = m_i + log ℓ_i

    Backward: Algorithm 2 (:func:`_backward_chunk`), dense attention's backward
    (:class:`~minitorch_attn.functional.attention.ScaledDotProductAttention`) one tile at a
    time, each line undoing the forward line it names; it returns ``(dQ, dK, dV, dmask)``
    (``dmask`` None unless the mask needs a gradient), also when ``lse`` is an output.

    .. derivation 5.2 begin
    .. hint 5.2: the weights are recomputed from the saved lse, never stored: which tile of P does lse give?
    .. hint 5.2: dense attention's backward (task 4.2) as sums of products of tiles; lse adds a term of its own.
    The weights are recomputed from
    ``lse``, never stored (line 11, forward lines 9, 12, 13 at once):

    .. math::

        P_{ij} = e^{S_{ij} - \mathrm{lse}_i}

    then, summed over the tiles (``dV = Pᵀ dO`` sums over query blocks, ``dQ = dS K`` over
    key blocks, so the tiles add up to the dense result):

    .. math::

        dV_j &= \textstyle\sum_i P_{ij}^\top dO_i,
            \quad dP_{ij} = dO_i V_j^\top
            &&\text{(12-13: undo line 10)}

        dS_{ij} &= P_{ij} \circ (dP_{ij} - D_i)
            &&\text{(14: undoes 9 and 12)}

        dQ_i &= \mathrm{scale} \textstyle\sum_j dS_{ij} K_j,
            \quad dK_j = \mathrm{scale} \textstyle\sum_i dS_{ij}^\top Q_i
            &&\text{(15-16: undo line 8)}

    (line 14 undoes the softmax, lines 9 and 12) with line 4's row term
    :math:`D_i = \mathrm{rowsum}(dO_i \circ O_i) - d\mathrm{lse}_i`.
    ``rowsum(dO ∘ O)`` equals the softmax's ``rowsum(dP ∘ P)`` (shown in
    ``ScaledDotProductAttention``); the ``lse`` output adds its own term, since
    :math:`\partial\,\mathrm{lse}_i/\partial S_{ij} = P_{ij}` (it undoes line 13): an
    upstream :math:`d\mathrm{lse}_i` adds :math:`d\mathrm{lse}_i P_{ij}` to :math:`dS_{ij}`,
    the same as subtracting it from :math:`D_i`. The mask's gradient is ``dS`` (the bias
    added at line 8), and ``dK``, ``dV`` are summed over the G query heads of each group
    (line 18). With dropout (keep-mask ``Z``), the dropped weights
    :math:`P_d = P \circ Z/(1-p)` take the place of ``P`` in ``dV``, and
    :math:`dP = (dO_i V_j^\top) \circ Z/(1-p)`.
    .. derivation end
    """

    @staticmethod
    def forward(ctx, query, key, value, mask, *, plan):
        xp = ctx.xp
        Q, K, V, mask_g = gqa_layout(xp, query, key, value, mask, plan.groups)
        Q = Q * plan.scale  # speed: scale Q once instead of every tile S_ij = scale Q_i K_jᵀ
        row_keys = _row_keys(xp, ctx.backend.device, plan.seed, Q.shape[:-2] + (1, 1)) if plan.dropout_p > 0 else None
        chunks = batch_chunks(Q.shape[:-3], plan.threads)
        results = run_on_threads(
            plan.threads,
            [
                functools.partial(
                    _forward_chunk, xp, ctx.backend.device, plan, *(take(a, c) for a in (Q, K, V, mask_g, row_keys))
                )
                for c in chunks
            ],
        )
        O, lse = (join(xp, [r[n] for r in results], chunks) for n in range(2))

        ctx.plan, ctx.shapes = plan, (query.shape, key.shape, value.shape)
        ctx.mask_shape = None if mask is None else mask.shape
        ctx.save_for_backward(Q, K, V, mask_g, row_keys, O, lse)
        return (xp.reshape(O, query.shape[:-1] + (value.shape[-1],)), xp.reshape(lse, query.shape[:-1]))

    @staticmethod
    def backward(ctx, dO, dlse):
        xp, plan = ctx.xp, ctx.plan
        Q, K, V, mask_g, row_keys, O, lse = ctx.saved_tensors
        (query_shape, key_shape, value_shape) = ctx.shapes
        dO = xp.reshape(dO, O.shape)
        # Algorithm 2, line 4: D, the softmax backward's row term, from O, dO and dlse
        # .. derivation 5.2 begin
        # D = rowsum(dO ∘ O), the softmax backward's row term rowsum(dP ∘ P), from O and
        # dO alone (the proof is in ScaledDotProductAttention). The lse output adds its
        # own term: d lse_i / d S_ij = P_ij (it undoes forward line 13), so an upstream
        # dlse_i adds dlse_i P_ij to dS_ij = P_ij (dP_ij - D_i), which is the same as
        # subtracting dlse_i from D_i.
        # .. derivation end
        # BEGIN SOLUTION 5.2
        D = xp.sum(dO * O, axis=-1, keepdims=True) - xp.reshape(dlse, lse.shape)
        # END SOLUTION
        mask_needs_grad = ctx.needs_input_grad[3]
        chunks = batch_chunks(Q.shape[:-3], plan.threads)
        results = run_on_threads(
            plan.threads,
            [
                functools.partial(
                    _backward_chunk,
                    xp,
                    ctx.backend.device,
                    plan,
                    *(take(a, c) for a in (Q, K, V, mask_g, row_keys, lse, dO, D)),
                    mask_needs_grad,
                )
                for c in chunks
            ],
        )
        dQ, dK, dV = (join(xp, [r[n] for r in results], chunks) for n in range(3))
        dQ = dQ * plan.scale  # S = (scale Q) Kᵀ: the scale was left out of the loop
        dmask = None
        if mask_needs_grad:
            parts = [r[3] for r in results]
            # a mask shared by all chunks (size 1 on the chunk axis) sums their gradients
            shared = len(parts) > 1 and mask_g.shape[chunks[0].axis] == 1
            dmask = functools.reduce(lambda a, b: a + b, parts) if shared else join(xp, parts, chunks)
            dmask = xp.reshape(dmask, ctx.mask_shape)
        return (xp.reshape(dQ, query_shape), xp.reshape(dK, key_shape), xp.reshape(dV, value_shape), dmask)


# ---- Algorithm 1: the forward of one chunk of (batch, head) slices ---------------------------------
def _forward_chunk(xp, device, plan, Q, K, V, mask, row_keys):
    """FlashAttention-2's Algorithm 1 over one chunk; returns ``O`` and ``lse`` (keepdims).

    ``Q (..., G, N_q, E)`` already scaled, ``K (..., 1, N_k, E)``, ``V (..., 1, N_k, E_v)``.
    The numbers are the lines of Algorithm 1. Dropout (not in the algorithm) zeroes the
    dropped entries of ``P̃_ij`` between lines 9 and 10, after ``ℓ`` has summed them (the
    softmax is taken before dropout), and scales the survivors by ``1/(1-p)`` at line 12.
    """
    N_q, N_k = Q.shape[-2], K.shape[-2]
    K_T = transposed_copy(xp, K)  # speed: row-major Kᵀ, once
    threshold = _drop_threshold(plan.dropout_p)
    O_blocks, lse_blocks = [], []
    for i0 in range(0, N_q, plan.block_q):  # 1, 3: for each query block i
        i1 = min(i0 + plan.block_q, N_q)
        Q_i = Q[..., i0:i1, :]  # 4: load Q_i
        rows = Q_i.shape[:-1] + (1,)
        O_i = xp.zeros(Q_i.shape[:-1] + (V.shape[-1],), dtype=Q.dtype, device=device)  # 5: O_i = 0,
        ell_i = xp.zeros(rows, dtype=Q.dtype, device=device)  #    ℓ_i = 0,
        m_i = xp.full(rows, -math.inf, dtype=Q.dtype, device=device)  #    m_i = -inf
        for j0 in range(0, N_k, plan.block_k):  # 1, 6: for each key/value block j
            j1 = min(j0 + plan.block_k, N_k)  # 7: load K_j, V_j (slices below)
            visible = _tile_visibility(plan.causal_offset, i0, i1, j0, j1)
            if visible == "none":
                continue  # speed: above the causal diagonal
            S_ij = _scores(xp, device, Q_i, K_T[..., j0:j1], mask, plan.causal_offset, visible, i0, i1, j0, j1)  # 8
            # BEGIN SOLUTION 5.1
            # 9: m_new = max(m_i, rowmax(S_ij)); a row that has seen only masked scores keeps
            #    m = -inf and is shifted by 0 instead, so exp(-inf - (-inf)) = NaN never forms
            #    (no gradient changes: the shift cancels in O = Õ/ℓ, and the backward uses lse)
            m_new = xp.maximum(m_i, xp.max(S_ij, axis=-1, keepdims=True))
            m_shift = xp.where(m_new == -math.inf, 0.0, m_new)
            P_ij = xp.exp(S_ij - m_shift)  #    P̃_ij = exp(S_ij - m_new)
            rescale = xp.exp(m_i - m_shift)  #    e^(m_old - m_new) <= 1
            ell_i = rescale * ell_i + xp.sum(P_ij, axis=-1, keepdims=True)  # ℓ_i: before dropout
            if row_keys is not None:  # (dropout: zero the dropped weights)
                keep = _keep_tile(xp, device, row_keys, i0, i1, j0, j1, threshold)
                P_ij = xp.where(keep, P_ij, 0.0)
            O_i = rescale * O_i + xp.matmul(P_ij, V[..., j0:j1, :])  # 10: O_i = diag(e^(m_old - m_new)) O_i + P̃_ij V_j
            m_i = m_new
            # END SOLUTION
        # BEGIN SOLUTION 5.1
        # 12: O_i = O_i / ℓ_i;  13: lse_i = m_i + log ℓ_i. A row with no allowed key has
        #     ℓ_i = 0 and O_i = 0 (nothing was added): its O stays 0 and lse = +inf, so that
        #     the backward's P = exp(S - lse) is 0 there. A row with NaN or +inf scores has
        #     ℓ_i = NaN, not 0: its O and lse stay NaN, as dense attention's and PyTorch's
        seen = ell_i != 0
        ell_safe = xp.where(seen, ell_i, 1.0)
        if plan.dropout_p > 0:
            O_i = O_i * _keep_scale(plan.dropout_p)  # (dropout: survivors times 1/(1-p))
        O_blocks.append(O_i / ell_safe)  # 12, 14: O_i is the i-th block of O
        lse_blocks.append(xp.where(seen, m_i + xp.log(ell_safe), math.inf))  # 13, 15
        # END SOLUTION
    return (
        _join_blocks(xp, O_blocks, Q.shape[:-2] + (0, V.shape[-1]), Q.dtype, device),  # 17
        _join_blocks(xp, lse_blocks, Q.shape[:-2] + (0, 1), Q.dtype, device),
    )


# ---- Algorithm 2: the backward of one chunk ---------------------------------------------------------
def _backward_chunk(xp, device, plan, Q, K, V, mask, row_keys, lse, dO, D, mask_needs_grad):
    """FlashAttention-2's Algorithm 2 over one chunk: ``(dQ / scale, dK, dV, dmask or None)``.

    The numbers are the lines of Algorithm 2; each step names the line of Algorithm 1 (the
    forward) that it recomputes or undoes. ``D`` (line 4) was formed by the caller. The
    outer loop runs over key/value blocks, so ``dK_j`` and ``dV_j`` are complete when
    their inner loop ends (FlashAttention keeps them in on-chip memory; here they are
    small local arrays); ``dQ`` accumulates across the outer loop, one array per query
    block. With dropout (keep-mask ``Z``), the forward used the dropped weights
    ``P_d = P ∘ Z / (1-p)`` at its line 10 (dense attention's ``P_d``; the paper's ``P̃`` is
    the unnormalized tile of Algorithm 1, a different thing), so lines 12-13 use ``P_d``
    and pass ``dP = dP_d ∘ Z / (1-p)`` on.
    """
    N_q, N_k = Q.shape[-2], K.shape[-2]
    K_T, V_T = transposed_copy(xp, K), transposed_copy(xp, V)  # speed: row-major Kᵀ, Vᵀ, once
    threshold = _drop_threshold(plan.dropout_p)
    keep_scale = _keep_scale(plan.dropout_p)
    q_starts = range(0, N_q, plan.block_q)
    dQ_blocks = [
        xp.zeros(Q[..., i0 : min(i0 + plan.block_q, N_q), :].shape, dtype=Q.dtype, device=device) for i0 in q_starts
    ]  # 3: dQ = 0, in blocks dQ_i
    dmask = xp.zeros(mask.shape, dtype=mask.dtype, device=device) if mask_needs_grad else None
    dK_blocks, dV_blocks = [], []
    for j0 in range(0, N_k, plan.block_k):  # 1, 5: for each key/value block j
        j1 = min(j0 + plan.block_k, N_k)
        K_j, K_T_j, V_T_j = K[..., j0:j1, :], K_T[..., j0:j1], V_T[..., j0:j1]  # 6: load K_j, V_j
        dK_j = xp.zeros(Q.shape[:-2] + K_j.shape[-2:], dtype=Q.dtype, device=device)  # 7: dK_j = 0,
        dV_j = xp.zeros(Q.shape[:-2] + (j1 - j0, V.shape[-1]), dtype=Q.dtype, device=device)  # dV_j = 0
        for n, i0 in enumerate(q_starts):  # 1, 8: for each query block i
            i1 = min(i0 + plan.block_q, N_q)
            visible = _tile_visibility(plan.causal_offset, i0, i1, j0, j1)
            if visible == "none":
                continue  # speed: the tiles the forward skipped
            Q_i, dO_i = Q[..., i0:i1, :], dO[..., i0:i1, :]  # 9: load Q_i, dO_i, lse_i, D_i
            lse_i, D_i = lse[..., i0:i1, :], D[..., i0:i1, :]
            S_ij = _scores(xp, device, Q_i, K_T_j, mask, plan.causal_offset, visible, i0, i1, j0, j1)  # 10
            # BEGIN SOLUTION 5.2
            P_ij = xp.exp(S_ij - lse_i)  # 11: P_ij = exp(S_ij - lse_i), forward
            #     lines 9, 12, 13 at once
            if row_keys is not None:  #     masked: exp(-inf) = 0; empty row: lse = +inf
                keep = _keep_tile(xp, device, row_keys, i0, i1, j0, j1, threshold)
                P_used = xp.where(keep, P_ij * keep_scale, 0.0)  #     P_d, the dropped weights of line 10
            else:
                P_used = P_ij
            dV_j += xp.matmul(xp.matrix_transpose(P_used), dO_i)  # 12: dV_j += P_dᵀ dO_i     (undoes line 10 for V_j)
            dP_ij = xp.matmul(dO_i, V_T_j)  # 13: dP_ij = dO_i V_jᵀ     (undoes line 10 for P_d)
            if row_keys is not None:  #     dropout: dP = dP_d ∘ Z / (1-p)
                dP_ij = xp.where(keep, dP_ij * keep_scale, 0.0)
            dS_ij = P_ij * (dP_ij - D_i)  # 14: dS_ij = P_ij ∘ (dP_ij - D_i)  (undoes
            #     lines 9 and 12, the softmax)
            dQ_blocks[n] += xp.matmul(dS_ij, K_j)  # 15: dQ_i += dS_ij K_j     (undoes line 8 for Q_i)
            dK_j += xp.matmul(xp.matrix_transpose(dS_ij), Q_i)  # 16: dK_j += dS_ijᵀ Q_i    (undoes line 8 for K_j)
            if dmask is not None:  #     the bias added at line 8: dbias = dS
                _add_tile(xp, dmask, dS_ij, i0, i1, j0, j1)
            # END SOLUTION
        dK_blocks.append(sum_over_group(xp, dK_j))  # 18: write dK_j, dV_j, each summed over
        dV_blocks.append(sum_over_group(xp, dV_j))  #     the G query heads of its group (GQA)
    return (
        _join_blocks(xp, dQ_blocks, Q.shape, Q.dtype, device),  # 20
        _join_blocks(xp, dK_blocks, K.shape, Q.dtype, device),
        _join_blocks(xp, dV_blocks, V.shape, Q.dtype, device),
        dmask,
    )


__all__ = ["flash_attention"]  # what minitorch_attn.functional exports
