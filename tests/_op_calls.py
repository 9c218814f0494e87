"""One call of every public operation, for the tests that must cover all of them
(promotion, NaN, 0-d): ``CALLS[name] = (ours, theirs)``, each a function of the package
(``mt``) or of torch and of one input tensor ``x`` of shape (2, 3) (attention ops view it
as ``(1, 2, 3)`` queries, keys and values). :func:`public_operations` lists every name the
package exports, so a new op without an entry here fails ``test_every_op_has_a_call``.
A catalogue of op records is expected to replace this table."""

import inspect

import minitorch_attn as mt
import minitorch_attn.functional as F

NOT_OPERATIONS = {
    # factories, modes, engine and helpers: they take no input tensor to promote
    "Function", "GradcheckError", "GradcheckReport", "Tensor", "arange", "backward", "check_gradients",
    "draw_graph", "dtype_name", "enable_grad", "full", "get_default_device", "get_default_dtype",
    "get_num_threads", "gradcheck", "is_grad_enabled", "keep_freed_memory", "manual_seed", "no_grad",
    "ones", "rand", "randint", "randn", "set_default_device", "set_default_dtype", "set_grad_enabled",
    "set_num_threads", "tensor", "zeros", "causal_mask", "result_dtype",
}


def public_operations():
    """Every public callable of ``minitorch_attn`` and ``minitorch_attn.functional`` that
    takes a tensor (the factories and modes excluded by name)."""
    names = {n for n in dir(mt) if not n.startswith("_") and callable(getattr(mt, n))
             and not inspect.isclass(getattr(mt, n))}
    names |= {f"F.{n}" for n in F.__all__}
    return sorted(n for n in names if n.split(".")[-1] not in NOT_OPERATIONS or n.startswith("F.")
                  and n[2:] not in NOT_OPERATIONS)


def _qkv(x, lib):
    return (x.reshape(1, 2, 3),) * 3


def calls(torch=None):
    """``{name: (ours, theirs)}``; theirs is None without torch."""
    t = torch
    tf = torch.nn.functional if torch else None
    table = {
        "abs": (mt.abs, t and t.abs),
        "amax": (lambda x: mt.amax(x, dim=-1), t and (lambda x: t.amax(x, dim=-1))),
        "max": (lambda x: mt.max(x, dim=-1), t and (lambda x: t.amax(x, dim=-1))),
        "cat": (lambda x: mt.cat([x, x]), t and (lambda x: t.cat([x, x]))),
        "concat": (lambda x: mt.concat([x, x]), t and (lambda x: t.cat([x, x]))),
        "chunk": (lambda x: mt.chunk(x, 2, dim=1)[0], t and (lambda x: t.chunk(x, 2, dim=1)[0])),
        "clamp": (lambda x: mt.clamp(x, min=0.5), t and (lambda x: t.clamp(x, min=0.5))),
        "exp": (mt.exp, t and t.exp),
        "expand": (lambda x: mt.expand(x, (2, 2, 3)), t and (lambda x: x.expand(2, 2, 3))),
        "flatten": (mt.flatten, t and t.flatten),
        "log": (mt.log, t and t.log),
        "masked_fill": (lambda x: mt.masked_fill(x, x > 0, 0.5), t and (lambda x: x.masked_fill(x > 0, 0.5))),
        "matmul": (lambda x: mt.matmul(x, x.T), t and (lambda x: t.matmul(x, x.T))),
        "maximum": (lambda x: mt.maximum(x, 0.5), t and (lambda x: t.maximum(x, t.tensor(0.5)))),
        "minimum": (lambda x: mt.minimum(x, 0.5), t and (lambda x: t.minimum(x, t.tensor(0.5)))),
        "mean": (mt.mean, t and t.mean),
        "ones_like": (mt.ones_like, t and t.ones_like),
        "zeros_like": (mt.zeros_like, t and t.zeros_like),
        "permute": (lambda x: mt.permute(x, (1, 0)), t and (lambda x: x.permute(1, 0))),
        "pow": (lambda x: mt.pow(x, 0.5), t and (lambda x: t.pow(x, 0.5))),
        "reshape": (lambda x: mt.reshape(x, 3, 2), t and (lambda x: x.reshape(3, 2))),
        "split": (lambda x: mt.split(x, 1)[0], t and (lambda x: t.split(x, 1)[0])),
        "sqrt": (mt.sqrt, t and t.sqrt),
        "squeeze": (mt.squeeze, t and t.squeeze),
        "stack": (lambda x: mt.stack([x, x]), t and (lambda x: t.stack([x, x]))),
        "sum": (mt.sum, t and t.sum),
        "tanh": (mt.tanh, t and t.tanh),
        "transpose": (lambda x: mt.transpose(x, 0, 1), t and (lambda x: t.transpose(x, 0, 1))),
        "tril": (mt.tril, t and t.tril),
        "triu": (mt.triu, t and t.triu),
        "unsqueeze": (lambda x: mt.unsqueeze(x, 0), t and (lambda x: x.unsqueeze(0))),
        "var": (mt.var, t and t.var),
        "where": (lambda x: mt.where(x > 0, x, 0.5), t and (lambda x: t.where(x > 0, x, 0.5))),
        "add": (lambda x: mt.add(x, x, alpha=2), t and (lambda x: t.add(x, x, alpha=2))),
        "sub": (lambda x: mt.sub(x, x, alpha=2), t and (lambda x: t.sub(x, x, alpha=2))),
        "div": (lambda x: mt.div(x, 2), t and (lambda x: t.div(x, 2))),
        "min": (lambda x: mt.min(x, dim=-1), t and (lambda x: t.amin(x, dim=-1))),
        "amin": (lambda x: mt.amin(x, dim=-1), t and (lambda x: t.amin(x, dim=-1))),
        "std": (mt.std, t and t.std),
        "logsumexp": (lambda x: mt.logsumexp(x, -1), t and (lambda x: t.logsumexp(x, -1))),
        "sigmoid": (mt.sigmoid, t and t.sigmoid),
        "einsum": (lambda x: mt.einsum("ij,kj->ik", x, x), t and (lambda x: t.einsum("ij,kj->ik", x, x))),
        "gather": (lambda x: mt.gather(x, 1, mt.tensor([[0], [2]])), t and (lambda x: t.gather(x, 1, t.tensor([[0], [2]])))),
        "F.sigmoid": (F.sigmoid, t and t.sigmoid),
        "F.nll_loss": (lambda x: F.nll_loss(x, mt.tensor([0, 2])), t and (lambda x: tf.nll_loss(x, t.tensor([0, 2])))),
        "F.pad": (lambda x: F.pad(x, (1, 1)), t and (lambda x: tf.pad(x, (1, 1)))),
        "F.softmax": (F.softmax, t and (lambda x: tf.softmax(x, -1))),
        "F.log_softmax": (F.log_softmax, t and (lambda x: tf.log_softmax(x, -1))),
        "F.cross_entropy": (lambda x: F.cross_entropy(x, mt.tensor([0, 2])),
                            t and (lambda x: tf.cross_entropy(x, t.tensor([0, 2])))),
        "F.gelu": (F.gelu, t and tf.gelu),
        "F.silu": (F.silu, t and tf.silu),
        "F.relu": (F.relu, t and tf.relu),
        "F.dropout": (lambda x: F.dropout(x, 0.0), t and (lambda x: tf.dropout(x, 0.0))),
        "F.layer_norm": (lambda x: F.layer_norm(x, (3,)), t and (lambda x: tf.layer_norm(x, (3,)))),
        "F.rms_norm": (lambda x: F.rms_norm(x, (3,)), t and (lambda x: tf.rms_norm(x, (3,)))),
        "F.linear": (lambda x: F.linear(x, x), t and (lambda x: tf.linear(x, x))),
        "F.embedding": (lambda x: F.embedding(mt.tensor([1, 0]), x),
                        t and (lambda x: tf.embedding(t.tensor([1, 0]), x))),
        "F.scaled_dot_product_attention": (lambda x: F.scaled_dot_product_attention(*_qkv(x, mt)),
                                           t and (lambda x: tf.scaled_dot_product_attention(*_qkv(x, t)))),
        "F.attention_weights": (lambda x: F.attention_weights(*_qkv(x, mt)[:2]),
                                t and (lambda x: tf.softmax(_qkv(x, t)[0] @ _qkv(x, t)[1].transpose(-1, -2)
                                                            / 3 ** 0.5, -1))),
        "F.flash_attention": (lambda x: F.flash_attention(*_qkv(x, mt)),
                              t and (lambda x: tf.scaled_dot_product_attention(*_qkv(x, t)))),
        "F.rotary_embedding": (lambda x: F.rotary_embedding(mt.concat([x, x], dim=1).reshape(1, 2, 6)),
                               None),
    }
    return table
