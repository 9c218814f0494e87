"""PyTorch's own OpInfo sample inputs (``torch.testing._internal.common_methods_invocations``,
float64 on the CPU, its reference inputs: the samples and the extremal values) run through
our ops, where torch is installed (skipped cleanly without it, or without ``expecttest``, which that module imports).

For every op we share with PyTorch, each sample either gives PyTorch's value (same shape;
equal to 1e-7, NaN where PyTorch's is NaN) or is refused with a TypeError, ValueError or
IndexError from our own checks, whose message is on the commented list :data:`REFUSED`
(a torch-only feature). No sample may give another value, crash with another exception,
or be refused for a reason not on the list. Values only: the gradients of the shared ops
are checked against PyTorch by the catalogue (``tests/test_opinfo.py``).
"""

import collections
import warnings

import numpy as np
import pytest

import minitorch_attn as mt
import minitorch_attn.functional as F

torch = pytest.importorskip("torch")
pytest.importorskip("expecttest")
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from torch.testing._internal.common_methods_invocations import op_db

# PyTorch's OpInfo name -> ours, called as PyTorch's op is: op(sample.input, *args, **kwargs)
OURS = {
    "softmax": F.softmax,
    "log_softmax": F.log_softmax,
    "logsumexp": mt.logsumexp,
    "sigmoid": mt.sigmoid,
    "nn.functional.silu": F.silu,
    "nn.functional.nll_loss": F.nll_loss,
    "gather": mt.gather,
    "einsum": lambda operands, equation: mt.einsum(equation, operands),
    "nn.functional.pad": F.pad,
    "amin": mt.amin,
    "amax": mt.amax,
    "std": mt.std,
    "var": mt.var,
    "pow": mt.pow,
    "add": mt.add,
    "sub": mt.sub,
    "div": mt.div,
    "__rpow__": lambda x, other: other**x,
    "nn.functional.cross_entropy": F.cross_entropy,
    "exp": mt.exp,
    "log": mt.log,
    "sqrt": mt.sqrt,
    "tanh": mt.tanh,
    "abs": mt.abs,
    "maximum": mt.maximum,
    "minimum": mt.minimum,
    "clamp": mt.clamp,
    "matmul": mt.matmul,
    "sum": mt.sum,
    "mean": mt.mean,
    "nn.functional.gelu": F.gelu,
    "nn.functional.relu": F.relu,
    "nn.functional.layer_norm": F.layer_norm,
    "nn.functional.rms_norm": F.rms_norm,
    "nn.functional.embedding": F.embedding,
    "nn.functional.linear": F.linear,
    "__getitem__": lambda x, key: x[key],
}

# What PyTorch has and we refuse, by OpInfo (name.variant) and the start of our message.
REFUSED = {
    # pad: only mode="constant" (reflect, replicate and circular borders are not implemented)
    "nn.functional.pad.reflect": "pad: mode 'reflect' is not implemented",
    "nn.functional.pad.replicate": "pad: mode 'replicate' is not implemented",
    "nn.functional.pad.replicate_negative": "pad: mode 'replicate' is not implemented",
    "nn.functional.pad.circular": "pad: mode 'circular' is not implemented",
    # einsum: no '...' and no repeated letter within one operand (a diagonal)
    "einsum": "einsum: ",
    # gather: uint8 tensors (the engine's dtypes are float32/64, int32/64, bool)
    "gather": "unsupported dtype 'uint8'",
    # embedding: float indices, and max_norm / sparse / scale_grad_by_freq (not implemented)
    "nn.functional.embedding": (
        "embedding: indices must be an int64/int32 tensor",
        "embedding() got an unexpected keyword argument",
    ),
    # a negative eps, which PyTorch accepts
    "nn.functional.layer_norm": "layer_norm: eps must be a finite number > 0",
    "nn.functional.rms_norm": "rms_norm: eps must be a finite number > 0",
}


def ours(value):
    """A PyTorch value as the same value of ours: tensors by their NumPy data and dtype."""
    if isinstance(value, torch.Tensor):
        return mt.tensor(value.detach().numpy(), dtype=str(value.dtype).replace("torch.", ""))
    if isinstance(value, (list, tuple)) and any(isinstance(v, torch.Tensor) for v in value):
        return type(value)(ours(v) for v in value)
    if isinstance(value, torch.dtype):
        return str(value).replace("torch.", "")
    return value


def outcomes(op):
    """``Counter`` of what each float64 sample of ``op`` gave, and the messages of the refusals."""
    name = op.name + (f".{op.variant_test_name}" if op.variant_test_name else "")
    counts, wrong = collections.Counter(), []
    for sample in op.reference_inputs("cpu", torch.float64, requires_grad=False):  # sample_inputs and more
        try:
            expected = op(sample.input, *sample.args, **sample.kwargs)
        except Exception:  # PyTorch refuses it too: nothing to compare
            continue
        try:
            got = OURS[op.name](
                ours(sample.input), *map(ours, sample.args), **{k: ours(v) for k, v in sample.kwargs.items()}
            )
        except (TypeError, ValueError, IndexError) as error:
            allowed = REFUSED.get(name, ())
            if any(str(error).startswith(m) for m in ((allowed,) if isinstance(allowed, str) else allowed)):
                counts["refused (listed)"] += 1
            else:
                wrong.append(f"{name}: refused, not listed: {type(error).__name__}: {error}")
            continue
        expected = expected.detach().numpy()
        got = got.numpy() if isinstance(got, mt.Tensor) else np.asarray(got)
        if got.shape == expected.shape and np.allclose(got, expected, rtol=1e-7, atol=1e-7, equal_nan=True):
            counts["pass"] += 1
        else:
            wrong.append(
                f"{name}: {sample}: ours {got.shape} {got.ravel()[:4]}, PyTorch {expected.shape} {expected.ravel()[:4]}"
            )
    return name, counts, wrong


SHARED = [op for op in op_db if op.name in OURS]


@pytest.mark.parametrize(
    "op", SHARED, ids=[op.name + (f".{op.variant_test_name}" if op.variant_test_name else "") for op in SHARED]
)
def test_pytorch_samples_give_pytorch_values_or_a_listed_refusal(op):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        name, counts, wrong = outcomes(op)
    assert not wrong, "\n".join(wrong)
    assert sum(counts.values()) > 0, f"{name}: no sample was run"


def test_every_shared_op_is_found_in_pytorch_and_every_listed_refusal_names_one():
    names = {op.name for op in op_db}
    assert set(OURS) <= names, sorted(set(OURS) - names)
    variants = {op.name + (f".{op.variant_test_name}" if op.variant_test_name else "") for op in SHARED}
    assert set(REFUSED) <= variants, sorted(set(REFUSED) - variants)
