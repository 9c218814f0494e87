"""Records of the shape, indexing, joining and selecting operations of
:mod:`minitorch_attn.core.shape_ops` (``expand`` belongs to homework task 1.3).

None of them computes: each moves values, so each backward moves the gradient back
(reshape it, transpose it back, write it into the selected places, split it).
"""

import numpy as np

import minitorch_attn as mt
import minitorch_attn.functional as F

from .gradients import BY_LINEARITY
from .record import OneInput, OpInfo, Sample, register

EMPTY, SCALAR, DIM, BROADCAST = (frozenset({e}) for e in ("empty", "0-d", "dim", "broadcast"))


def np_getitem(x, key):
    return x[key.astype(np.int64) if isinstance(key, np.ndarray) else key]


def np_split(x, split_size, dim=0):
    sizes = [split_size] * (x.shape[dim] // split_size) if isinstance(split_size, int) else list(split_size)
    if isinstance(split_size, int) and x.shape[dim] % split_size:
        sizes.append(x.shape[dim] % split_size)
    return tuple(np.split(x, np.cumsum(sizes)[:-1], axis=dim))


def np_chunk(x, chunks, dim=0):
    size = -(-x.shape[dim] // chunks)
    return np_split(x, size, dim)


def np_triangle(lower):
    def ref(x, diagonal=0):
        return np.tril(x, diagonal) if lower else np.triu(x, diagonal)

    return ref


def pick(x, *indices, key):
    """``x[key(*indices)]``: the index arrays are inputs of the sample (drawn on its device,
    passed to the references as NumPy or PyTorch arrays), the key's layout a function."""
    return x[key(*indices)]


def np_pad(x, pad, value=None):
    widths = [(0, 0)] * np.ndim(x)
    for i in range(len(pad) // 2):
        widths[np.ndim(x) - 1 - i] = (pad[2 * i], pad[2 * i + 1])
    cut = tuple(slice(max(-a, 0), s - max(-b, 0)) for (a, b), s in zip(widths, np.shape(x)))
    return np.pad(x[cut], [(max(a, 0), max(b, 0)) for a, b in widths], constant_values=value or 0.0)


def gather_take_along(x, dim, index):
    """``take_along_axis`` on ``x`` cut to ``index``'s size in every other dim (as torch.gather)."""
    if np.ndim(x) == 0:
        return x
    cut = tuple(slice(None) if d == dim % x.ndim else slice(0, s) for d, s in enumerate(index.shape))
    return np.take_along_axis(x[cut], index.astype(np.int64), axis=dim)


ALL = slice(None)

# BEGIN REFERENCE 1.3
BACKWARD_EXPAND = "dx = unbroadcast(g)"
# END REFERENCE


RECORDS = register(
    __name__,
    [
        OpInfo(
            "reshape",
            mt.reshape,
            ("mt.reshape", "Tensor.reshape", "Tensor.view", "mt.flatten", "Tensor.flatten"),
            (
                Sample("reshape", lambda d: [d.randn(2, 6), 3, -1]),
                Sample("reshape (empty)", lambda d: [d.randn(0, 4), 2, 0, 2], edges=EMPTY),
                Sample("reshape (0-d to 1-D)", lambda d: [d.randn(), 1], edges=SCALAR),
            ),
            "a reshape keeps every value: dx = reshape(g, x.shape)",
            ref=lambda x, *shape: np.reshape(x, shape),
            torch_ref=lambda torch, x, *shape: x.reshape(*shape),
            ref_backward=BY_LINEARITY,
            task=None,
            not_differentiable_in=("shape",),
            one_input=OneInput(lambda x: mt.reshape(x, 3, 2), lambda torch, x: x.reshape(3, 2)),
            forward="y = reshape(x, shape)",
            backward="dx = reshape(g, x.shape)",
        ),
        OpInfo(
            "transpose",
            mt.transpose,
            ("mt.transpose", "Tensor.transpose", "Tensor.T"),
            (
                Sample("transpose", lambda d: [d.randn(2, 3, 4), 0, 2]),
                Sample("transpose (empty)", lambda d: [d.randn(0, 3), 0, 1], edges=EMPTY),
            ),
            "transpose the gradient back: dx = swapaxes(g)",
            ref=lambda x, a, b: np.swapaxes(x, a, b),
            torch_ref=lambda torch, x, a, b: x.transpose(a, b),
            ref_backward=BY_LINEARITY,
            task=None,
            one_input=OneInput(lambda x: mt.transpose(x, 0, 1), lambda torch, x: torch.transpose(x, 0, 1)),
            forward="y = swapaxes(x, d0, d1)",
            backward="dx = swapaxes(g, d0, d1)",
        ),
        OpInfo(
            "permute",
            mt.permute,
            ("mt.permute", "Tensor.permute"),
            (
                Sample("permute", lambda d: [d.randn(2, 3, 4), (1, 2, 0)]),
                Sample("permute (empty)", lambda d: [d.randn(2, 0, 3), (2, 0, 1)], edges=EMPTY),
            ),
            "dx = permute(g, inverse permutation)",
            ref=lambda x, dims: np.transpose(x, dims),
            torch_ref=lambda torch, x, dims: x.permute(dims),
            ref_backward=BY_LINEARITY,
            task=None,
            one_input=OneInput(lambda x: mt.permute(x, (1, 0)), lambda torch, x: x.permute(1, 0)),
            forward="y = permute(x, dims)",
            backward="dx = permute(g, inverse of dims)",
        ),
        OpInfo(
            "unsqueeze/squeeze",
            mt.squeeze,
            ("mt.unsqueeze", "Tensor.unsqueeze", "mt.squeeze", "Tensor.squeeze"),
            (
                Sample("unsqueeze/squeeze", lambda d: [d.randn(3, 1, 2)], fn=lambda a: a.squeeze(1).unsqueeze(0)),
                Sample("squeeze (dim)", lambda d: [d.randn(3, 1, 2), 1], gradcheck=True),
                Sample("squeeze (empty)", lambda d: [d.randn(0, 1)], edges=EMPTY),
            ),
            "a reshape: dx = reshape(g, x.shape)",
            ref=lambda x, dim=None: np.squeeze(x, dim),
            torch_ref=lambda torch, x, dim=None: x.squeeze() if dim is None else x.squeeze(dim),
            ref_backward=BY_LINEARITY,
            task=None,
            one_input=OneInput(
                lambda x: mt.squeeze(mt.unsqueeze(x, 0)), lambda torch, x: torch.squeeze(x.unsqueeze(0))
            ),
            forward="y = x with a dim of size 1 added or removed",
            backward="dx = reshape(g, x.shape)",
        ),
        OpInfo(
            "expand",
            mt.expand,
            ("mt.expand", "Tensor.expand"),
            (
                Sample("expand", lambda d: [d.randn(3, 1), (2, 3, 4)], edges=BROADCAST, gradcheck=True),
                Sample("expand (to an empty batch)", lambda d: [d.randn(3, 1), (0, 3, 2)], edges=EMPTY),
            ),
            "a broadcast: dx = g summed over the expanded axes",
            ref=lambda x, shape: np.broadcast_to(x, shape),
            torch_ref=lambda torch, x, shape: x.expand(*shape),
            ref_backward=BY_LINEARITY,
            task="1.3",
            one_input=OneInput(lambda x: mt.expand(x, (2, 2, 3)), lambda torch, x: x.expand(2, 2, 3)),
            forward="y = broadcast_to(x, shape)",
            backward=BACKWARD_EXPAND,
        ),
        OpInfo(
            "getitem",
            lambda x, key: x[key],
            ("Tensor.__getitem__",),
            (
                Sample(
                    "getitem (slices, None, ...)",
                    lambda d: [d.randn(4, 5, 3), (None, slice(1, 3), Ellipsis, slice(None, None, 2))],
                ),
                Sample("getitem (integer tensor, repeats)", lambda d: [d.randn(5, 3), d.integers(0, 5, 2, 4)]),
                Sample("getitem (an int)", lambda d: [d.randn(4, 3), 2], gradcheck=True),
                Sample("getitem (empty slice)", lambda d: [d.randn(4, 3), slice(2, 2)], edges=EMPTY),
                Sample("getitem (empty index)", lambda d: [d.randn(4, 3), d.ints(np.zeros(0))], edges=EMPTY),
            ),
            "the gradient goes back to the selected places; repeated indices add up (a scatter-add)",
            ref=np_getitem,
            torch_ref=lambda torch, x, key: x[key],
            ref_backward=BY_LINEARITY,
            task=None,
            not_differentiable_in=("index",),
            forward="y = x[index]",
            backward="dx = zeros, then dx[index] += g",
        ),
        OpInfo(
            "index",
            pick,
            ("Tensor.__getitem__",),
            (
                Sample(
                    "index (x[:, idx])",
                    lambda d: [d.randn(4, 5, 3), d.integers(0, 5, 2, 3)],
                    kwargs=dict(key=lambda i: (ALL, i)),
                    edges=DIM,
                    gradcheck=True,
                ),
                Sample(
                    "index (x[rows, cols], repeats)",
                    lambda d: [d.randn(4, 6), d.ints([0, 1, 1, 3]), d.ints([5, 0, 0, 2])],
                    kwargs=dict(key=lambda i, j: (i, j)),
                ),
                Sample(
                    "index (apart: x[i, :, j], negative)",
                    lambda d: [d.randn(3, 4, 5), d.ints([0, -1, 2]), d.ints([1, 1, -4])],
                    kwargs=dict(key=lambda i, j: (i, ALL, j)),
                ),
                Sample("index (boolean mask)", lambda d: [d.randn(3, 4), d.mask(3, 4)], kwargs=dict(key=lambda m: m)),
                Sample(
                    "index (mask on dim 1, None)",
                    lambda d: [d.randn(3, 4, 2), d.bools([True, False, True, True])],
                    kwargs=dict(key=lambda m: (ALL, m, None)),
                    edges=DIM,
                    gradcheck=True,
                ),
                Sample(
                    "index (..., idx, int)",
                    lambda d: [d.randn(2, 3, 4), d.ints([2, 0, 2])],
                    kwargs=dict(key=lambda i: (Ellipsis, i, 1)),
                ),
                Sample(
                    "index (broadcast index arrays)",
                    lambda d: [d.randn(4, 5), d.ints([[0], [3], [3]]), d.ints([4, 0, 1, 1])],
                    kwargs=dict(key=lambda i, j: (i, j)),
                    edges=BROADCAST,
                    gradcheck=True,
                ),
                Sample(
                    "index (empty index on dim 1)",
                    lambda d: [d.randn(3, 4), d.ints(np.zeros((0,)))],
                    kwargs=dict(key=lambda i: (ALL, i)),
                    edges=EMPTY,
                ),
                Sample(
                    "index (empty mask)",
                    lambda d: [d.randn(3, 2), d.bools([False, False, False])],
                    kwargs=dict(key=lambda m: m),
                    edges=EMPTY,
                ),
                Sample(
                    "index (0-d index tensor)",
                    lambda d: [d.randn(3, 4), d.ints(2)],
                    kwargs=dict(key=lambda i: (ALL, i)),
                    edges=SCALAR,
                ),
            ),
            "out = take(flat x, linear positions by NumPy's rules); dx = scatter-add of g (repeats accumulate)",
            ref=pick,
            torch_ref=lambda torch, x, *indices, key: x[key(*indices)],
            ref_backward=BY_LINEARITY,
            task=None,
            not_differentiable_in=("indices",),
            forward="y = x[index arrays or mask]",
            backward="dx = scatter-add of g at the indexed places (repeats add up)",
        ),
        OpInfo(
            "gather",
            mt.gather,
            ("mt.gather", "Tensor.gather"),
            (
                Sample("gather (dim 1, repeats)", lambda d: [d.randn(3, 4), 1, d.integers(0, 4, 3, 5)]),
                Sample(
                    "gather (dim 0, smaller index)",
                    lambda d: [d.randn(4, 3, 2), 0, d.integers(0, 4, 2, 2, 2)],
                    edges=DIM,
                    gradcheck=True,
                ),
                Sample(
                    "gather (dim -1)",
                    lambda d: [d.randn(2, 3, 5), -1, d.integers(0, 5, 2, 3, 1)],
                    edges=DIM,
                    gradcheck=True,
                ),
                Sample("gather (empty index)", lambda d: [d.randn(3, 4), 1, d.ints(np.zeros((3, 0)))], edges=EMPTY),
                Sample("gather (0-d)", lambda d: [d.randn(), 0, d.ints(0)], edges=SCALAR),
            ),
            "out[i][j] = x[i][index[i][j]] (dim 1): dx = scatter-add of g at the same places (torch.scatter_add)",
            ref=gather_take_along,
            torch_ref=lambda torch, x, dim, index: torch.gather(x, dim, index),
            ref_backward=BY_LINEARITY,
            task=None,
            differentiable_in=("input",),
            not_differentiable_in=("index",),
            one_input=OneInput(
                lambda x: mt.gather(x, 1, mt.tensor([[0], [2]])),
                lambda torch, x: torch.gather(x, 1, torch.tensor([[0], [2]])),
            ),
            forward="y[i][j] = x[i][index[i][j]] (dim 1)",
            backward="dx = scatter-add of g at index",
        ),
        OpInfo(
            "pad",
            F.pad,
            ("F.pad",),
            (
                Sample("pad (last dim)", lambda d: [d.randn(3, 4), (1, 2)]),
                Sample(
                    "pad (last two dims, a value)",
                    lambda d: [d.randn(2, 3, 4), (0, 1, 2, 1)],
                    kwargs=dict(value=-1.5),
                    edges=DIM,
                    gradcheck=True,
                ),
                Sample("pad (negative: a cut)", lambda d: [d.randn(3, 5), (-1, 2, 1, -2)], gradcheck=True),
                Sample("pad (empty input)", lambda d: [d.randn(0, 3), (1, 1)], edges=EMPTY),
                Sample("pad (one element)", lambda d: [d.randn(1), (2, 0)], edges=frozenset({"one-element"})),
            ),
            "a constant border: dx = g at the places x went to (0 on the border and where cut off)",
            ref=np_pad,
            torch_ref=lambda torch, x, pad, value=None: torch.nn.functional.pad(x, pad, value=value),
            ref_backward=BY_LINEARITY,
            task=None,
            differentiable_in=("input",),
            one_input=OneInput(lambda x: F.pad(x, (1, 1)), lambda torch, x: torch.nn.functional.pad(x, (1, 1))),
            forward="y = x inside a constant border",
            backward="dx = g at x's places (the border dropped)",
        ),
        OpInfo(
            "concat",
            lambda *xs, dim=0: mt.concat(list(xs), dim=dim),
            ("mt.concat", "mt.cat"),
            (
                Sample("concat", lambda d: [d.randn(2, 3), d.randn(2, 1)], kwargs=dict(dim=1)),
                Sample("concat (an empty part)", lambda d: [d.randn(0, 3), d.randn(2, 3)], edges=EMPTY),
            ),
            "each input gets its slice of the gradient",
            ref=lambda *xs, dim=0: np.concatenate(xs, axis=dim),
            torch_ref=lambda torch, *xs, dim=0: torch.cat(xs, dim=dim),
            ref_backward=BY_LINEARITY,
            task=None,
            differentiable_in=("tensors",),
            one_input=OneInput(lambda x: mt.cat([x, x]), lambda torch, x: torch.cat([x, x])),
            forward="y = [a; b; ...] along dim",
            backward="da, db, ... = the slices of g",
        ),
        OpInfo(
            "stack",
            lambda *xs, dim=0: mt.stack(list(xs), dim=dim),
            ("mt.stack",),
            (
                Sample("stack", lambda d: [d.randn(2, 3), d.randn(2, 3)], kwargs=dict(dim=1)),
                Sample("stack (empty)", lambda d: [d.randn(0, 3), d.randn(0, 3)], edges=EMPTY),
            ),
            "each input gets its index of the gradient",
            ref=lambda *xs, dim=0: np.stack(xs, axis=dim),
            torch_ref=lambda torch, *xs, dim=0: torch.stack(xs, dim=dim),
            ref_backward=BY_LINEARITY,
            task=None,
            differentiable_in=("tensors",),
            one_input=OneInput(lambda x: mt.stack([x, x]), lambda torch, x: torch.stack([x, x])),
            forward="y = [a, b, ...] along a new dim",
            backward="da, db, ... = g[0], g[1], ...",
        ),
        OpInfo(
            "split/chunk",
            mt.split,
            ("mt.split", "Tensor.split", "mt.chunk", "Tensor.chunk"),
            (
                Sample(
                    "split/chunk",
                    lambda d: [d.randn(5, 2)],
                    fn=lambda a: tuple(p * (i + 1) for i, p in enumerate(a.chunk(3))),
                ),
                Sample("split (sizes, dim 1)", lambda d: [d.randn(2, 5), [1, 4]], kwargs=dict(dim=1), edges=DIM),
                Sample("split (empty)", lambda d: [d.randn(0, 4), 2], kwargs=dict(dim=1), edges=EMPTY),
            ),
            "each piece is a slice: its gradient is written back into its place",
            ref=np_split,
            torch_ref=lambda torch, x, size, dim=0: torch.split(x, size, dim),
            ref_backward=BY_LINEARITY,
            task=None,
            one_input=OneInput(lambda x: mt.chunk(x, 2, dim=1)[0], lambda torch, x: torch.chunk(x, 2, dim=1)[0]),
            forward="y_k = x[the k-th slice]",
            backward="dx = the pieces' gradients in their places (zeros where none)",
        ),
        OpInfo(
            "where",
            mt.where,
            ("mt.where", "Tensor.where"),
            (
                Sample("where", lambda d: [d.mask(3, 4), d.randn(3, 4), d.randn(4)], edges=BROADCAST, gradcheck=True),
                Sample("where (empty)", lambda d: [d.mask(0, 4), d.randn(0, 4), d.randn(4)], edges=EMPTY),
                Sample(
                    "where (inf in the unselected branch)",
                    lambda d: [d.bools([True, False]), d.values([1.0, np.inf]), d.values([np.nan, 2.0])],
                    edges=frozenset({"nonfinite"}),
                ),
            ),
            "g goes to a where the condition holds, to b elsewhere (each un-broadcast)",
            ref=np.where,
            torch_ref=lambda torch, c, a, b: torch.where(c, a, b),
            ref_backward=BY_LINEARITY,
            task=None,
            differentiable_in=("input", "other"),
            not_differentiable_in=("condition",),
            one_input=OneInput(
                lambda x: mt.where(x > 0, x, 0.5),
                lambda torch, x: torch.where(x > 0, x, 0.5),
                of_ints="float",
                hides_nan="where(x > 0, x, 0.5) picks 0.5 at a NaN (NaN > 0 is False), as meant",
            ),
            forward="y = cond ? a : b",
            backward="da = unbroadcast(g [cond]), db = unbroadcast(g [not cond])",
        ),
        OpInfo(
            "masked_fill",
            mt.masked_fill,
            ("mt.masked_fill", "Tensor.masked_fill"),
            (
                Sample("masked_fill", lambda d: [d.randn(3, 4), d.mask(1, 4), -2.0], edges=BROADCAST, gradcheck=True),
                Sample("masked_fill (-inf, empty)", lambda d: [d.randn(0, 4), d.mask(0, 4), -np.inf], edges=EMPTY),
            ),
            "g where the mask is False, 0 where it was filled",
            ref=lambda x, m, v: np.where(m, v, x),
            torch_ref=lambda torch, x, m, v: x.masked_fill(m, v),
            ref_backward=BY_LINEARITY,
            task=None,
            not_differentiable_in=("mask",),
            one_input=OneInput(lambda x: mt.masked_fill(x, x > 0, 0.5), lambda torch, x: x.masked_fill(x > 0, 0.5)),
            forward="y = mask ? value : x",
            backward="dx = g [not mask]",
        ),
        OpInfo(
            "tril/triu",
            mt.tril,
            ("mt.tril", "mt.triu", "Tensor.tril", "Tensor.triu"),
            (
                Sample("tril/triu", lambda d: [d.randn(2, 4, 4)], fn=lambda a: mt.tril(a, -1) + 2 * mt.triu(a, 1)),
                Sample("tril (diagonal 1)", lambda d: [d.randn(3, 4), 1], gradcheck=True),
                Sample("tril (empty)", lambda d: [d.randn(0, 3)], edges=EMPTY),
            ),
            "the same triangle of the gradient",
            ref=np_triangle(lower=True),
            torch_ref=lambda torch, x, diagonal=0: torch.tril(x, diagonal),
            ref_backward=BY_LINEARITY,
            task=None,
            one_input=OneInput(lambda x: mt.triu(mt.tril(x)), lambda torch, x: torch.triu(torch.tril(x))),
            forward="y = the lower (upper) triangle of x",
            backward="dx = the same triangle of g",
        ),
    ],
)
