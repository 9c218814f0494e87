"""Records of the linear map and the embedding lookup, :mod:`minitorch_attn.functional.linear`."""

import numpy as np

import minitorch_attn as mt
import minitorch_attn.functional as F

from .gradients import BY_LINEARITY
from .record import TORCH_KEEPS_INTS, OneInput, OpInfo, Sample, register

EMPTY = frozenset({"empty"})


def np_linear(x, weight, bias=None):
    y = x @ weight.T
    return y + bias if bias is not None else y


def np_embedding(indices, weight, padding_idx=None):
    return weight[np.asarray(indices, dtype=np.int64)]


def np_embedding_backward(grads, indices, weight, padding_idx=None):
    """dW[k] = Σ of the upstream rows at the positions holding k (none for the padding row)."""
    grad = np.zeros_like(weight, dtype=np.float64)
    rows = np.asarray(indices, dtype=np.int64).reshape(-1)
    np.add.at(grad, rows, np.asarray(grads[0], dtype=np.float64).reshape(rows.size, weight.shape[-1]))
    if padding_idx is not None:
        grad[padding_idx] = 0.0
    return [None, grad]


RECORDS = register(
    __name__,
    [
        OpInfo(
            "linear",
            F.linear,
            ("F.linear",),
            (
                Sample("linear (bias, batched)", lambda d: [d.randn(2, 3, 4), d.randn(5, 4), d.randn(5)]),
                Sample("linear (no bias)", lambda d: [d.randn(3, 4), d.randn(2, 4)]),
                Sample("linear (1-D input)", lambda d: [d.randn(4), d.randn(3, 4), d.randn(3)], gradcheck=True),
                Sample(
                    "linear (0 in-features: the bias)",
                    lambda d: [d.randn(3, 0), d.randn(2, 0), d.randn(2)],
                    edges=EMPTY,
                ),
                Sample("linear (0 in-features, no bias)", lambda d: [d.randn(2, 3, 0), d.randn(4, 0)], edges=EMPTY),
                Sample("linear (0 out-features)", lambda d: [d.randn(3, 4), d.randn(0, 4), d.randn(0)], edges=EMPTY),
                Sample("linear (empty batch)", lambda d: [d.randn(0, 4), d.randn(2, 4), d.randn(2)], edges=EMPTY),
            ),
            "y = x Wᵀ + b: dx and dW by the matmul rule (task 1.5, summed over the batch), db = Σ g",
            ref=np_linear,
            ref_backward=BY_LINEARITY,
            torch_ref=lambda torch, x, w, b=None: torch.nn.functional.linear(x, w, b),
            task=None,
            n_ops=64,
            differentiable_in=("input", "weight", "bias"),
            one_input=OneInput(
                lambda x: F.linear(x, x),
                lambda torch, x: torch.nn.functional.linear(x, x),
                of_ints="TypeError",
                torch_differs=TORCH_KEEPS_INTS,
            ),
            forward="y = x Wᵀ + b",
            backward="dx, dW as matmul's (task 1.5), db = Σ g",
        ),
        OpInfo(
            "embedding",
            F.embedding,
            ("F.embedding",),
            (
                Sample("embedding (repeated indices)", lambda d: [d.ints([[0, 3, 3], [1, 0, 3]]), d.randn(4, 3)]),
                Sample(
                    "embedding (padding_idx)",
                    lambda d: [d.ints([0, 2, 2, 1]), d.randn(3, 2)],
                    kwargs=dict(padding_idx=2),
                    gradcheck=False,
                ),  # the padding row is read but never trained: finite differences disagree
                Sample("embedding (no indices)", lambda d: [d.ints(np.zeros((2, 0))), d.randn(4, 3)], edges=EMPTY),
            ),
            "a row lookup: dW[k] = Σ of the upstream rows at the positions holding k (a scatter-add)",
            ref=np_embedding,
            ref_backward=np_embedding_backward,
            torch_ref=lambda torch, i, w, padding_idx=None: torch.nn.functional.embedding(
                i, w, padding_idx=padding_idx
            ),
            task=None,
            differentiable_in=("weight",),
            not_differentiable_in=("input",),
            one_input=OneInput(
                lambda x: F.embedding(mt.tensor([1, 0]), x),
                lambda torch, x: torch.nn.functional.embedding(torch.tensor([1, 0]), x),
                of_ints="TypeError",
                torch_differs=dict(TORCH_KEEPS_INTS, bool="PyTorch computes it in bools; ours refuses (TypeError)"),
            ),
            forward="y = W[idx]",
            backward="dW[k] = Σ g at the positions where idx = k",
        ),
    ],
)
