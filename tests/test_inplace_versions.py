"""Every in-place write bumps the written tensor's version; backward refuses to use a
saved tensor whose version changed since the forward (PyTorch's error), and the rules of
in-place writes on tensors that require grad are PyTorch's."""

import inspect

import numpy as np
import pytest

import minitorch_attn as mt
import minitorch_attn.functional as F
from minitorch_attn import nn, optim

MODIFIED = "modified by an inplace operation"

# every in-place write the package offers, as (name, write) on a float tensor of shape (3,)
WRITES = [
    ("zero_", lambda t: t.zero_()),
    ("fill_", lambda t: t.fill_(2.5)),
    ("copy_", lambda t: t.copy_(mt.tensor([7.0, 8.0, 9.0]))),
    ("add_", lambda t: t.add_(1.0)),
    ("sub_", lambda t: t.sub_(mt.tensor([1.0, 1.0, 1.0]))),
    ("mul_", lambda t: t.mul_(3.0)),
    ("div_", lambda t: t.div_(2.0)),
    ("clamp_", lambda t: t.clamp_(min=1.5)),
    ("setitem", lambda t: t.__setitem__(0, 5.0)),
    ("setitem slice", lambda t: t.__setitem__(slice(1, None), mt.tensor([4.0, 4.0]))),
]


def test_the_writes_listed_here_are_every_in_place_method_of_tensor():
    methods = {
        name for name, _ in inspect.getmembers(mt.Tensor, callable) if name.endswith("_") and not name.startswith("_")
    } - {"requires_grad_"}
    assert methods == {name for name, _ in WRITES if name != "setitem" and "setitem" not in name}


@pytest.mark.parametrize("name, write", WRITES, ids=[n for n, _ in WRITES])
def test_every_write_bumps_the_version_and_writes_the_tensors_own_memory(name, write):
    t = mt.tensor([1.0, 2.0, 3.0])
    view = t.reshape(3, 1)
    array = t.data
    assert t._version == 0
    returned = write(t)
    assert returned is t or returned is None
    assert t._version == 1 and view._version == 1 and t.data is array
    np.testing.assert_array_equal(view.numpy()[:, 0], t.numpy())


@pytest.mark.parametrize("name, write", WRITES, ids=[n for n, _ in WRITES])
def test_a_write_to_a_saved_input_makes_backward_raise(name, write):
    w = mt.tensor([1.0, 2.0, 3.0], requires_grad=True)
    x = mt.tensor([0.5, -1.0, 2.0])
    loss = (w * x).sum()  # saves x for w's gradient
    write(x)
    with pytest.raises(
        RuntimeError,
        match=rf"{MODIFIED}: \[float32 tensor of shape \(3,\)\], argument 1 of "
        rf"<MulBackward> \(a leaf\), is at version 1; expected version 0",
    ):
        loss.backward()


@pytest.mark.parametrize("name, write", WRITES, ids=[n for n, _ in WRITES])
def test_a_write_to_a_saved_output_makes_backward_raise(name, write):
    w = mt.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = w.exp()  # saves its output
    with mt.no_grad():
        write(y)
    with pytest.raises(RuntimeError, match=rf"{MODIFIED}: .*output 0 of <ExpBackward>, is at version 1"):
        y.sum().backward()


@pytest.mark.parametrize("name, write", WRITES, ids=[n for n, _ in WRITES])
def test_a_write_through_a_view_is_seen(name, write):
    w = mt.tensor([[1.0, 2.0, 3.0]], requires_grad=True)
    x = mt.tensor([[0.5, -1.0, 2.0]])
    loss = (w * x.reshape(1, 3).transpose(0, 1).transpose(0, 1)).sum()
    write(x.reshape(3))
    with pytest.raises(RuntimeError, match=MODIFIED):
        loss.backward()


def test_a_write_to_a_tensor_that_backward_does_not_need_is_no_error():
    w = mt.tensor([1.0, 2.0, 3.0], requires_grad=True)
    x = mt.tensor([0.5, -1.0, 2.0])
    loss = (w + x).sum() + (w * 2.0).sum() + w.tanh().sum()  # add and tanh save nothing of x or w
    with mt.no_grad():
        x.add_(1.0)
        w.add_(1.0)
    loss.backward()
    assert w.grad is not None


def test_an_optimizer_step_between_forward_and_backward_raises():
    layer = nn.Linear(3, 2)
    opt = optim.SGD(layer.parameters(), lr=0.1)
    x = mt.randn(4, 3)
    layer(x).sum().backward()
    loss = layer(x).sum()
    opt.step()
    with pytest.raises(RuntimeError, match=MODIFIED):
        loss.backward()


@pytest.mark.parametrize(
    "make",
    [lambda p: optim.SGD(p, lr=0.1, momentum=0.9), lambda p: optim.Adam(p), lambda p: optim.AdamW(p)],
    ids=["SGD", "Adam", "AdamW"],
)
def test_every_optimizer_step_bumps_the_versions_of_what_it_updates(make):
    w = nn.Parameter(mt.randn(3))
    other = nn.Parameter(mt.randn(3))
    opt = make([w, other])
    (w * w).sum().backward()
    opt.step()
    assert w._version == 1 and other._version == 0  # other had no gradient: not written


def test_clip_grad_norm_bumps_the_versions_of_the_gradients_it_scales():
    w = nn.Parameter(mt.randn(3))
    (w * 100.0).sum().backward()
    optim.clip_grad_norm_([w], 1.0)
    assert w.grad._version == 1


def test_the_no_grad_write_to_a_leaf_before_the_forward_still_works():
    w = mt.tensor([1.0, 2.0, 3.0], requires_grad=True)
    with mt.no_grad():
        w.mul_(2.0)
        w[0] = -1.0
    (w * w).sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), 2 * np.array([-1.0, 4.0, 6.0]))
    assert w.is_leaf and w.requires_grad


@pytest.mark.parametrize(
    "name, write", [w for w in WRITES if "setitem" not in w[0]], ids=lambda v: v if isinstance(v, str) else ""
)
def test_a_leaf_that_requires_grad_refuses_a_write_in_grad_mode(name, write):
    w = mt.tensor([1.0, 2.0, 3.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in an in-place"):
        write(w)
    assert w._version == 0


def test_setitem_with_a_graph_involved_raises_a_clear_error():
    w = mt.tensor([1.0, 2.0, 3.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="records no graph"):
        w[0] = 1.0
    x = mt.zeros(3)
    with pytest.raises(RuntimeError, match="records no graph"):
        x[0:1] = w[0:1]


def test_an_in_place_op_on_a_computed_tensor_is_recorded_as_pytorch():
    w = mt.tensor([1.0, 2.0, 3.0], requires_grad=True, dtype="float64")
    a = w * 2.0
    a.add_(w).mul_(3.0)  # a = 3 (2w + w) = 9 w
    a.sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), [9.0, 9.0, 9.0])
    assert not a.is_leaf


def test_in_place_dtype_and_shape_rules():
    i = mt.tensor([1, 2, 3])
    with pytest.raises(RuntimeError, match="can't be cast"):
        i.add_(0.5)
    f = mt.zeros(3)
    with pytest.raises(RuntimeError, match="doesn't match the broadcast shape"):
        f.add_(mt.zeros(2, 3))
    f.add_(mt.tensor([1, 2, 3]))  # an int value into a float tensor is fine
    assert f.dtype == "float32" and f.tolist() == [1.0, 2.0, 3.0]


def test_requires_grad_false_on_a_computed_tensor_raises_as_pytorch():
    w = mt.tensor([1.0, 2.0], requires_grad=True)
    y = w * 2.0
    with pytest.raises(RuntimeError, match="only change requires_grad flags of leaf variables"):
        y.requires_grad_(False)
    with pytest.raises(RuntimeError, match="only change requires_grad flags of leaf variables"):
        y.requires_grad = False
    y.requires_grad_(True)  # already so: allowed
    w.requires_grad_(False)  # a leaf: allowed
    assert not w.requires_grad


def test_detach_and_parameter_share_the_version_counter():
    t = mt.tensor([1.0, 2.0])
    d = t.detach()
    p = nn.Parameter(t)
    d.add_(1.0)
    assert t._version == p._version == 1
    c = t.clone()
    c.add_(1.0)
    assert t._version == 1 and c._version == 1


def test_embedding_padding_row_is_written_as_a_counted_write():
    e = nn.Embedding(5, 3, padding_idx=1)
    assert e.weight._version == 1 and e.weight.numpy()[1].tolist() == [0.0, 0.0, 0.0]


def test_the_layer_norm_in_chunks_checks_its_parameters_too():
    # large enough that layer_norm runs in row chunks (2.5 MiB; see minitorch_attn.speed.rows)
    x = mt.randn(640, 1024)
    w = nn.Parameter(mt.ones(1024))
    y = F.layer_norm(x, (1024,), w, None)
    assert "row_chunks" in vars(y.grad_fn.ctx) and repr(y.grad_fn) == "<LayerNormBackward>"
    with mt.no_grad():
        w.mul_(2.0)
    with pytest.raises(RuntimeError, match=MODIFIED):
        y.sum().backward()


def test_torch_raises_where_we_raise(torch):
    w = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    x = torch.tensor([0.5, -1.0, 2.0])
    loss = (w * x).sum()
    x.add_(1.0)
    with pytest.raises(RuntimeError, match=MODIFIED):
        loss.backward()
    a = w * 2.0
    with pytest.raises(RuntimeError, match="only change requires_grad flags of leaf variables"):
        a.requires_grad_(False)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in an in-place"):
        w.add_(1.0)


def test_repr_of_a_wrapped_array_names_its_dtype_once():
    text = repr(mt.randn(2, 4))  # NumPy puts its dtype= on a line of its own here
    assert text.count("dtype=") == 1 and text.endswith("device='cpu', dtype=float32)")


def test_an_in_place_op_saves_the_old_values_it_needs_as_pytorch():
    w = mt.tensor([1.0, 2.0], requires_grad=True, dtype="float64")
    b = mt.tensor([3.0, 4.0], requires_grad=True, dtype="float64")
    a = w * 2.0
    a.mul_(b)  # b's gradient is a's old value, 2 w
    a.sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), [6.0, 8.0])
    np.testing.assert_allclose(b.grad.numpy(), [2.0, 4.0])


def test_a_constant_written_with_a_value_that_requires_grad_joins_the_graph_without_a_cycle():
    w = mt.tensor([1.0, 2.0], requires_grad=True, dtype="float64")
    x = mt.ones(2, dtype="float64")
    x.mul_(w).add_(w)  # x = 1 * w + w
    assert not x.is_leaf and x.requires_grad
    x.sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), [2.0, 2.0])


def test_a_node_recorded_before_the_write_still_raises():
    w = mt.tensor([1.0, 2.0], requires_grad=True)
    a = w * 2.0
    c = a * a  # saves a
    a.add_(1.0)
    with pytest.raises(RuntimeError, match=MODIFIED):
        c.sum().backward()
