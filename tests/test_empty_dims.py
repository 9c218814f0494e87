"""Empty dimensions: the case with a story of its own.

Every op's empty-input samples (a batch, a sequence or a feature dim of size 0) live in its
record of the catalogue, ``minitorch_attn/opinfo/``, and ``tests/test_opinfo.py`` runs them
forward and backward against the NumPy reference and PyTorch. What stays here is the value
PyTorch documents for attention with no keys, written out by hand.
"""

import numpy as np

import minitorch_attn as mt
import minitorch_attn.functional as F


def test_no_keys_give_zero_as_pytorch_documents(device):
    q = mt.ones(1, 1, dtype="float64", device=device, requires_grad=True)
    k = mt.zeros(0, 1, dtype="float64", device=device, requires_grad=True)
    for kernel in (F.scaled_dot_product_attention, F.flash_attention):
        out = kernel(q, k, k)
        np.testing.assert_array_equal(out.numpy(), [[0.0]])
        out.backward(mt.ones(1, 1, dtype="float64", device=device))
        np.testing.assert_array_equal(q.grad.numpy(), [[0.0]])
        assert k.grad.shape == (0, 1)
        q.grad = k.grad = None
