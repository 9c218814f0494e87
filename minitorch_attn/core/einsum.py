"""``einsum``: a sum of products over named indices (Einstein's summation convention), as
``torch.einsum("ij,jk->ik", a, b)``, with a hand-written backward that is itself an einsum.

Forward. Give every index letter one axis of a common layout; place each operand's axes
there (size 1 where it lacks a letter), multiply them all with broadcasting, and sum over
the letters the output does not keep::

    1. a_k  -> the common layout (permute, then insert size-1 axes)      for every operand k
    2. p    = Π_k a_k                                                  (broadcast product)
    3. out  = Σ over the letters not in the output of p, permuted to the output's order

Backward (derived in :class:`Einsum`): the gradient of an operand is the einsum of the
upstream gradient with the other operands, producing that operand's letters, so the same
:func:`_contract` does forward and backward. Source: the definition of the Einstein
summation (e.g. the NumPy ``einsum`` documentation), and the product rule.

speed: the product is formed over all letters at once (memory: the product of all
sizes), which is plain but not what a BLAS contraction would do; this engine uses
``matmul`` for its own products and keeps einsum for what a user ports from PyTorch.
"""

from __future__ import annotations

from .autograd import Function
from .tensor import FLOAT_DTYPES, Tensor


def _contract(xp, specs, arrays, out_spec, sizes):
    """Steps 1 to 3: ``einsum(",".join(specs) + "->" + out_spec, *arrays)`` on raw arrays;
    ``sizes`` gives the size of every letter (also those of the output found in no input)."""
    letters = sorted(set("".join(specs)) | set(out_spec))
    product = None
    for spec, array in zip(specs, arrays):
        order = sorted(range(len(spec)), key=lambda i: letters.index(spec[i]))
        array = xp.permute_dims(array, tuple(order)) if order != sorted(order) else array  # 1
        shape = tuple(sizes[c] if c in spec else 1 for c in letters)
        array = xp.reshape(array, shape)
        product = array if product is None else product * array  # 2
    summed = tuple(i for i, c in enumerate(letters) if c not in out_spec)
    kept = [c for c in letters if c in out_spec]
    out = xp.sum(product, axis=summed) if summed else product  # 3
    out = xp.broadcast_to(out, tuple(sizes[c] for c in kept))  # a letter of no input: constant along it
    if kept != list(out_spec):
        out = xp.permute_dims(out, tuple(kept.index(c) for c in out_spec))
    return out


class Einsum(Function):
    r"""The forward is :func:`_contract` (steps 1-3 of the module docstring): with ``o`` the
    output's letters, ``i_k`` those of operand ``a_k`` and the sum over the other letters,

    .. math::

        \mathrm{out}[o] = \sum_{\text{rest}} \prod_k a_k[i_k]

    Backward (3-1, 2-1, 1-1 at once). ``out`` is linear in each operand, so by the product
    rule, with ``g = dL/dout``:

    .. math::

        da_k[i_k] = \sum_{\text{letters not in } i_k} g[o] \prod_{j \ne k} a_j[i_j]

    that is ``einsum("o, i_1, ..., i_n -> i_k", g, a_1, ..., a_n)`` with ``a_k`` (and its
    ``i_k`` on the left) left out: the gradient of an operand is the einsum of
    ``grad_output`` with the other operands, producing that operand's letters. A letter of
    ``a_k`` found in no other operand and not in the output (``"ij->i"``: ``j``) appears in
    no input of that einsum: its gradient is constant along it, broadcast to its size (the
    sum's rule)."""

    @staticmethod
    def forward(ctx, *arrays, specs, out_spec, sizes):
        ctx.save_for_backward(*arrays)
        ctx.specs, ctx.out_spec, ctx.sizes = specs, out_spec, sizes
        out = _contract(ctx.xp, specs, arrays, out_spec, sizes)
        return out if out.dtype == arrays[0].dtype else ctx.xp.astype(out, arrays[0].dtype)  # int32 sums stay int32

    @staticmethod
    def backward(ctx, grad_output):
        arrays = ctx.saved_tensors
        grads = []
        for k, spec in enumerate(ctx.specs):
            if not ctx.needs_input_grad[k]:
                grads.append(None)
                continue
            others = [j for j in range(len(arrays)) if j != k]
            grads.append(
                _contract(
                    ctx.xp,
                    [ctx.out_spec] + [ctx.specs[j] for j in others],
                    [grad_output] + [arrays[j] for j in others],
                    spec,
                    ctx.sizes,
                )
            )
        return tuple(grads)


def _parse(equation, operands):
    """``(specs, out_spec, sizes)`` of an equation such as ``"bij,bjk->bik"``; without ``->``
    the output is the letters used once, in alphabetical order (NumPy's and PyTorch's rule)."""
    if not isinstance(equation, str):
        raise TypeError(f"einsum: the equation must be a string such as 'ij,jk->ik', got {type(equation).__name__}")
    equation = equation.replace(" ", "")
    if "." in equation:
        raise ValueError("einsum: '...' (broadcast dims) is not supported; name every dim with a letter")
    inputs, arrow, out_spec = equation.partition("->")
    specs = inputs.split(",")
    for spec in specs + [out_spec]:
        if not all(c.isalpha() for c in spec):
            raise ValueError(f"einsum: {equation!r}: indices must be letters, got {spec!r}")
        if len(set(spec)) != len(spec):
            raise ValueError(
                f"einsum: {equation!r}: a letter repeated within one operand or the output "
                f"({spec!r}: a diagonal) is not supported"
            )
    if not arrow:
        joined = "".join(specs)
        out_spec = "".join(sorted(c for c in set(joined) if joined.count(c) == 1))
    if len(specs) != len(operands):
        raise ValueError(f"einsum: {equation!r} names {len(specs)} operands, got {len(operands)}")
    sizes = {}
    for k, (spec, x) in enumerate(zip(specs, operands)):
        if not isinstance(x, Tensor):
            raise TypeError(f"einsum: operand {k} must be a Tensor, got {type(x).__name__}")
        if x.ndim != len(spec):
            raise ValueError(f"einsum: operand {k} has {x.ndim} dims but {spec!r} names {len(spec)}")
        for c, size in zip(spec, x.shape):
            if sizes.setdefault(c, size) != size:
                raise ValueError(
                    f"einsum: {equation!r}: index {c!r} has size {sizes[c]} in one operand and {size} in operand {k}"
                )
    unknown = set(out_spec) - set(sizes)
    if unknown:
        raise ValueError(f"einsum: {equation!r}: the output names {''.join(sorted(unknown))!r}, found in no operand")
    return specs, out_spec, sizes


def einsum(equation: str, *operands: Tensor) -> Tensor:
    """Einstein summation over lettered indices, as ``torch.einsum``: ``einsum("ij,jk->ik", a, b)``
    is ``a @ b``, ``einsum("bhqd,bhkd->bhqk", q, k)`` attention scores, ``einsum("i,i->", a, b)``
    a dot product. Operands may also come as one list (``einsum(eq, [a, b])``).

    Shapes: each operand has one dim per letter of its part of the equation; a letter
    shared by operands has one size; the output has the letters after ``->`` (without it,
    the letters used once, sorted). Operands of one dtype, float or integer (integers
    stay integers, as PyTorch; bool is refused); the output has it. Backward: each
    operand's gradient is an einsum (see :mod:`.einsum`).

    Raises:
        TypeError: for an equation that is not a string, a non-Tensor or bool operand, or
            operands of different dtypes.
        ValueError: for a malformed equation, a letter repeated within one operand (a
            diagonal), ``...``, a wrong number of operands or dims, or unequal sizes.

    Catalogue record: ``opinfo/arithmetic.py`` (its samples, references and checks).
    """
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    specs, out_spec, sizes = _parse(equation, operands)
    dtypes = {x.dtype for x in operands}
    if not dtypes <= set(FLOAT_DTYPES) | {"int32", "int64"} or len(dtypes) > 1:
        raise TypeError(f"einsum: operands must be of one float or integer dtype, got {sorted(dtypes)}")
    if not operands:
        raise ValueError("einsum: needs at least one operand")
    return Einsum.apply(*operands, specs=tuple(specs), out_spec=out_spec, sizes=sizes)
