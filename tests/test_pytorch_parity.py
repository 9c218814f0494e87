"""What a learner writes here carries over to PyTorch: arguments PyTorch accepts or
refuses, randomness under ``manual_seed``, state dicts and ``tensor`` of tensors as PyTorch
writes them, the methods a ``torch.Tensor`` has, and the last OpInfo differences.

Each kind has torch-free tests that state the expected values (PyTorch's, written down)
and, where torch is installed, a test against PyTorch itself (the ``torch`` fixture skips
it cleanly without).
"""

import numpy as np
import pytest

import minitorch_attn as mt


# ---- div(..., rounding_mode=...) as PyTorch computes it ------------------------------------------
def test_floor_division_is_pytorchs_not_the_floor_of_the_rounded_quotient():
    # 1 / 0.1 rounds to 10.0, but 0.1 is stored above 1/10: the exact quotient is below 10
    a = mt.tensor([1.0, -501.0, 501.0, -1001.2, 5.0, -5.0, 0.0, -0.0], dtype="float64")
    b = mt.tensor([0.1, 1e20, -1e20, 1e20, 0.0, 0.0, 3.0, 3.0], dtype="float64")
    got = mt.div(a, b, rounding_mode="floor").numpy()
    np.testing.assert_array_equal(got, [9.0, -1.0, -1.0, -1.0, np.inf, -np.inf, 0.0, -0.0])
    assert not np.signbit(got[6]) and np.signbit(got[7])
    assert mt.div(mt.tensor([1.0]), 0.1, rounding_mode="floor").item() == 9.0  # float32 too
    np.testing.assert_array_equal(mt.div(a, b, rounding_mode="trunc").numpy()[:4], [10.0, -0.0, -0.0, -0.0])


def test_div_add_sub_of_two_numbers_give_a_tensor_as_pytorch():
    assert mt.div(7, 2).item() == 3.5 and mt.div(7, 2).dtype == "float32"
    assert mt.div(7, 2, rounding_mode="floor").dtype == "int64"
    assert mt.div(-7.5, 2, rounding_mode="trunc").item() == -3.0
    assert mt.add(2, 3).dtype == "int64" and mt.sub(2.0, 3).dtype == "float32"
    with pytest.raises(TypeError, match="add: expected Tensors or numbers, got str"):
        mt.add("a", 2)


def test_floor_division_matches_pytorch_on_random_and_extreme_values(torch):
    rng = np.random.default_rng(0)
    a = rng.standard_normal(20_000) * rng.choice([1e-3, 1.0, 1e3, 1e20], 20_000)
    b = rng.standard_normal(20_000) * rng.choice([1e-3, 0.1, 7.0, 1e20], 20_000)
    a[:4], b[:4] = [1.0, 0.0, -0.0, 5.0], [0.1, 3.0, 3.0, 0.0]
    for dtype in ("float64", "float32"):
        x, y = a.astype(dtype), b.astype(dtype)
        for mode in ("floor", "trunc"):
            expected = torch.div(torch.from_numpy(x), torch.from_numpy(y), rounding_mode=mode).numpy()
            got = mt.div(mt.tensor(x), mt.tensor(y), rounding_mode=mode).numpy()
            np.testing.assert_array_equal(got, expected)
            np.testing.assert_array_equal(np.signbit(got), np.signbit(expected))


# ---- gather: 0-d tensors count as 1-d, an empty index picks nothing ------------------------------
def test_gather_takes_a_0d_input_or_index_as_pytorch():
    x = mt.tensor(3.0)
    assert mt.gather(x, 0, mt.tensor([0])).shape == (1,)
    assert mt.gather(x, 0, mt.tensor(0)).shape == ()
    assert mt.gather(x, -1, mt.tensor([0, 0])).tolist() == [3.0, 3.0]
    assert mt.gather(mt.tensor([1.0, 2.0, 3.0]), 0, mt.tensor(1)).tolist() == 2.0
    with pytest.raises(ValueError, match="index has 2 dims but input 0"):
        mt.gather(x, 0, mt.tensor([[0]]))
    with pytest.raises(IndexError):
        mt.gather(x, 0, mt.tensor([1]))


def test_gather_with_an_empty_index_of_any_rank_or_dtype_gives_an_empty_output():
    x = mt.ones(2, 3, requires_grad=True)
    out = mt.gather(x, 1, mt.zeros(5, 0, 7, dtype="int64"))
    assert out.shape == (5, 0, 7) and out.dtype == "float32"
    assert mt.gather(x, 1, mt.zeros(0)).shape == (0,)  # a float index, empty: PyTorch takes it
    mt.gather(x, 1, mt.zeros(0, dtype="int64")).sum().backward()
    assert x.grad.tolist() == [[0.0] * 3] * 2
    with pytest.raises(ValueError, match="dim 5 is out of range"):
        mt.gather(x, 5, mt.zeros(0, dtype="int64"))


# ---- every operation PyTorch has as a Tensor method is one here too ------------------------------
import minitorch_attn.functional as F  # noqa: E402

# name -> the arguments after the tensor (a 3x4 float64 tensor of values in (0.5, 1.5)); a
# Tensor among them is made from the same values for both libraries. A new operation that
# PyTorch has as a method makes the test below ask for its line here.
_Y = np.linspace(-1.0, 1.0, 12).reshape(3, 4)
METHOD_SAMPLES = {
    "abs": (),
    "exp": (),
    "log": (),
    "sqrt": (),
    "tanh": (),
    "sigmoid": (),
    "relu": (),
    "add": (_Y,),
    "sub": (_Y,),
    "div": (_Y,),
    "matmul": (_Y.T,),
    "maximum": (_Y,),
    "minimum": (_Y,),
    "pow": (3,),
    "amax": (1,),
    "amin": (0,),
    "max": (),
    "min": (),
    "mean": (1,),
    "sum": (0,),
    "std": (1,),
    "var": (0,),
    "logsumexp": (1,),
    "softmax": (1,),
    "log_softmax": (0,),
    "clamp": (0.7, 1.2),
    "chunk": (2, 1),
    "split": (2, 1),
    "expand": (2, 3, 4),
    "flatten": (),
    "permute": (1, 0),
    "reshape": (4, 3),
    "squeeze": (),
    "unsqueeze": (1,),
    "transpose": (0, 1),
    "tril": (),
    "triu": (1,),
    "gather": (1, np.array([[0, 1], [2, 3], [1, 1]])),
    "masked_fill": (_Y > 0, 2.0),
    "where": (_Y > 0, 0.5),
}
NOT_COMPARED = {"backward"}  # a method of both, not an operation on values
_X = np.linspace(0.5, 1.5, 12).reshape(3, 4)


def _shared_method_names(torch):
    ops = set(F.__all__) | {n for n in dir(mt) if not n.startswith("_") and callable(getattr(mt, n))}
    return sorted(n for n in ops - NOT_COMPARED if hasattr(torch.Tensor, n))


def _call(module_or_tensor, name, x, args, make):
    args = [make(a) if isinstance(a, np.ndarray) else a for a in args]
    out = getattr(module_or_tensor, name)(*args) if x is None else getattr(module_or_tensor, name)(x, *args)
    return [np.asarray(o.tolist()) for o in out] if isinstance(out, (tuple, list)) else np.asarray(out.tolist())


def test_sigmoid_and_logsumexp_are_tensor_methods():
    x = mt.tensor(_X)
    np.testing.assert_array_equal(x.sigmoid().numpy(), mt.sigmoid(x).numpy())
    np.testing.assert_array_equal(x.logsumexp(1).numpy(), mt.logsumexp(x, 1).numpy())
    np.testing.assert_array_equal(x.softmax(-1).numpy(), F.softmax(x, -1).numpy())
    np.testing.assert_array_equal(x.where(x > 1, 0.0).numpy(), np.where(_X > 1, _X, 0.0))
    assert x.add(x, alpha=2).tolist() == mt.add(x, x, alpha=2).tolist()


@pytest.mark.parametrize("name", sorted(METHOD_SAMPLES))
def test_each_method_is_its_function(name):
    if name == "where":
        pytest.skip("Tensor.where(condition, other) is where(condition, self, other): tested above")
    x, args = mt.tensor(_X), METHOD_SAMPLES[name]
    method = _call(x, name, None, args, mt.tensor)
    if name in ("expand", "permute"):  # x.permute(1, 0) is permute(x, (1, 0)), as PyTorch
        args = (args,)
    np.testing.assert_array_equal(method, _call(mt if hasattr(mt, name) else F, name, x, args, mt.tensor))


def test_every_operation_pytorch_has_as_a_method_is_one_here_and_gives_pytorchs_values(torch):
    names = _shared_method_names(torch)
    assert set(names) <= set(METHOD_SAMPLES), f"no sample for {sorted(set(names) - set(METHOD_SAMPLES))}"
    missing = [n for n in names if not hasattr(mt.Tensor, n)]
    assert not missing, f"PyTorch has these as Tensor methods, mt.Tensor has not: {missing}"
    for name in names:
        ours = _call(mt.tensor(_X), name, None, METHOD_SAMPLES[name], mt.tensor)
        theirs = _call(torch.tensor(_X), name, None, METHOD_SAMPLES[name], torch.tensor)
        np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-15, err_msg=name)


# ---- state dicts and tensor() as PyTorch writes them ---------------------------------------------
import minitorch_attn.nn as nn  # noqa: E402


def _tied_gpt():
    return nn.GPT(7, d_model=8, num_heads=2, num_layers=1, max_seq_len=4)


def test_state_dict_lists_a_tied_weight_under_both_names_and_loads_it():
    model = _tied_gpt()
    state = model.state_dict()
    assert "token_embedding.weight" in state and "lm_head.weight" in state
    assert np.shares_memory(state["lm_head.weight"].numpy(), state["token_embedding.weight"].numpy())
    other = _tied_gpt()
    assert other.load_state_dict(state) == ([], [])  # strict: nothing unexpected
    assert other.lm_head.weight is other.token_embedding.weight  # still tied
    np.testing.assert_array_equal(other.lm_head.weight.numpy(), model.token_embedding.weight.numpy())
    del state["lm_head.weight"]  # listed once: still loads
    assert _tied_gpt().load_state_dict(state) == ([], [])
    del state["token_embedding.weight"]
    assert _tied_gpt().load_state_dict(state, strict=False).missing_keys == ["token_embedding.weight", "lm_head.weight"]


def test_pytorchs_state_dict_of_a_tied_model_loads(torch):
    from minitorch_attn.app.export import torch_config
    from minitorch_attn.app.torch_gpt import GPT

    model = _tied_gpt()
    theirs = GPT(**torch_config(model))  # PyTorch's GPT, lm_head tied to the embedding
    state = {k: v.detach().numpy() for k, v in theirs.state_dict().items()}
    assert np.shares_memory(state["lm_head.weight"], state["token_embedding.weight"])
    assert model.load_state_dict(state) == ([], [])
    np.testing.assert_array_equal(model.lm_head.weight.numpy(), state["lm_head.weight"])


def test_tensor_of_a_list_of_tensors_is_torchs():
    t = mt.tensor
    assert t([t(1.0), t(2.0)]).shape == (2,) and t([t(1.0), t(2.0)]).dtype == "float32"
    assert t([t([1.0]), t([2.0])]).shape == (2,)  # one-element tensors are numbers
    assert t([[t(1), t(2)], [t(3), 4]]).tolist() == [[1, 2], [3, 4]]
    assert t([t(1.0, dtype="float64"), 2.5]).dtype == "float64"
    assert t([t(1), 2.5]).dtype == "float32"
    assert t([t(1, dtype="int32"), t(2, dtype="int32")]).dtype == "int32"
    assert t([t(1, dtype="int32"), 2]).dtype == "int64"
    assert t([t(True), t(False)]).dtype == "bool"
    assert t([np.float64(1.5), 2.0]).dtype == "float64" and t(np.float64(2.0)).dtype == "float64"
    assert t([t(1.0, requires_grad=True)]).requires_grad is False
    with pytest.raises(ValueError, match="only one-element tensors"):
        t([t([1.0, 2.0]), t([3.0, 4.0])])


def test_tensor_of_a_list_of_tensors_matches_torch(torch):
    cases = [
        lambda T, d: T([T(1.0), T(2.0)]),
        lambda T, d: T([T([1.0]), T([2.0])]),
        lambda T, d: T([[T(1), T(2)], [T(3), 4]]),
        lambda T, d: T([T(1.0, dtype=d["float64"]), 2.5]),
        lambda T, d: T([T(1, dtype=d["int32"]), 2]),
        lambda T, d: T([T(1, dtype=d["int32"]), T(2.0, dtype=d["float64"])]),
        lambda T, d: T([[T(1.0)], [T(2.0)]]),
        lambda T, d: T([np.float32(1), 2.0]),
    ]
    ours_dtypes = {"float64": "float64", "int32": "int32"}
    their_dtypes = {"float64": torch.float64, "int32": torch.int32}
    for case in cases:
        ours, theirs = case(mt.tensor, ours_dtypes), case(torch.tensor, their_dtypes)
        assert ours.tolist() == theirs.tolist() and ours.dtype == str(theirs.dtype).replace("torch.", "")


# ---- optimizers and zero_grad as PyTorch's --------------------------------------------------------
import minitorch_attn.optim as optim  # noqa: E402


@pytest.mark.parametrize(
    "make",
    [
        lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9),
        lambda ps: optim.Adam(ps, lr=0.1),
        lambda ps: optim.AdamW(ps, lr=0.1),
    ],
)
def test_an_optimizer_takes_tensors_that_need_no_gradient_and_leaves_them_alone(make):
    frozen, trained = mt.tensor([1.0, 2.0]), mt.tensor([1.0, 2.0], requires_grad=True)
    opt = make([frozen, trained])
    (trained * mt.tensor([1.0, -1.0])).sum().backward()
    opt.step()
    assert frozen.tolist() == [1.0, 2.0] and trained.tolist() != [1.0, 2.0]
    assert len(opt.state_dict()["state"]) == 1


def test_zero_grad_sets_to_none_by_default_or_fills_zeros_in_place():
    model = nn.Linear(2, 2)
    opt = optim.SGD(model.parameters(), lr=0.1)
    for owner in (model, opt):
        model(mt.ones(1, 2)).sum().backward()
        grad = model.weight.grad
        owner.zero_grad(set_to_none=False)
        assert model.weight.grad.tolist() == [[0.0, 0.0], [0.0, 0.0]]
        assert grad.tolist() == [[0.0, 0.0], [0.0, 0.0]]  # in place: a gradient held before sees it
        owner.zero_grad()
        assert model.weight.grad is None and model.bias.grad is None


def test_optimizer_and_zero_grad_match_torch(torch):
    theirs = [
        torch.tensor([1.0, 2.0], dtype=torch.float64),
        torch.tensor([1.0, 2.0], dtype=torch.float64, requires_grad=True),
    ]
    ours = [mt.tensor([1.0, 2.0], dtype="float64"), mt.tensor([1.0, 2.0], dtype="float64", requires_grad=True)]
    t_opt, o_opt = torch.optim.Adam(theirs, lr=0.1), optim.Adam(ours, lr=0.1)
    for step in range(3):
        (theirs[1] ** 2).sum().backward()
        (ours[1] ** 2).sum().backward()
        t_opt.step(), o_opt.step()
        t_opt.zero_grad(set_to_none=step % 2 == 0), o_opt.zero_grad(set_to_none=step % 2 == 0)
        assert (theirs[1].grad is None) == (ours[1].grad is None)
    for t, o in zip(theirs, ours):
        np.testing.assert_allclose(o.numpy(), t.detach().numpy(), rtol=1e-12)


# ---- mt.manual_seed governs every random draw of the package --------------------------------------
from minitorch_attn.app import data, sampling  # noqa: E402

_QKV = np.linspace(-1.0, 1.0, 2 * 4 * 8).reshape(1, 2, 4, 8)
RANDOM_DRAWS = {
    "randn": lambda: mt.randn(5).tolist(),
    "rand": lambda: mt.rand(5).tolist(),
    "randint": lambda: mt.randint(0, 100, (5,)).tolist(),
    "init of a module": lambda: nn.Linear(3, 3).weight.tolist(),
    "F.dropout": lambda: F.dropout(mt.ones(20), 0.5).tolist(),
    "nn.Dropout": lambda: nn.Dropout(0.5)(mt.ones(20)).tolist(),
    "attention dropout": lambda: F.scaled_dot_product_attention(*[mt.tensor(_QKV)] * 3, dropout_p=0.5).tolist(),
    "flash attention dropout": lambda: F.flash_attention(*[mt.tensor(_QKV)] * 3, dropout_p=0.5).tolist(),
    "sampling": lambda: sampling.generate_ids(
        nn.GPT(11, d_model=8, num_heads=2, num_layers=1, max_seq_len=4, dropout=0.0), [1, 2], 12
    ),
    "batches": lambda: data.get_batch(np.arange(100), 4, 8)[0].tolist(),
}


@pytest.mark.parametrize("name", sorted(RANDOM_DRAWS))
def test_manual_seed_makes_every_random_draw_repeat(name):
    draw = RANDOM_DRAWS[name]
    mt.manual_seed(7)
    first, second = draw(), draw()
    mt.manual_seed(7)
    assert draw() == first and draw() == second
    assert first != second  # the stream moves on between draws
    mt.manual_seed(np.int64(8))  # a NumPy int seeds too, as torch.manual_seed
    assert draw() != first


def test_no_unseeded_generator_in_the_package():
    """Every draw goes through the backends' seeded streams: no module makes a generator of
    fresh entropy (``default_rng()``) or uses NumPy's or Python's global one."""
    import pathlib
    import re

    package = pathlib.Path(mt.__file__).parent
    unseeded = re.compile(
        r"default_rng\(\)|numpy\.random\.(rand|randn|randint|choice|shuffle|seed|random)\b|"
        r"np\.random\.(rand|randn|randint|choice|shuffle|seed|random)\b|^import random|random\.random\("
    )
    found = [
        f"{path.relative_to(package)}:{n}"
        for path in package.rglob("*.py")
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if unseeded.search(line)
    ]
    assert not found, found


# ---- arguments PyTorch accepts or refuses ---------------------------------------------------------
_I = np.int64
_x3 = np.linspace(-1.0, 1.0, 24).reshape(2, 3, 4)
# Calls with NumPy ints (and 0-d integer arrays as sizes) where an int is taken; each is
# written for both libraries: f(lib, F, nn, x) with x a (2, 3, 4) float tensor.
NUMPY_INT_CALLS = {
    "sum": lambda m, F, nn, x: x.sum(_I(1)),
    "sum tuple": lambda m, F, nn, x: x.sum((_I(0), np.int32(2))),
    "softmax": lambda m, F, nn, x: F.softmax(x, _I(1)),
    "log_softmax": lambda m, F, nn, x: F.log_softmax(x, _I(-1)),
    "logsumexp": lambda m, F, nn, x: m.logsumexp(x, _I(1)),
    "reshape": lambda m, F, nn, x: x.reshape(_I(6), np.array(4)),
    "zeros": lambda m, F, nn, x: m.zeros(np.array(2), _I(3)),
    "split": lambda m, F, nn, x: x.split(_I(2), _I(2))[1],
    "split sizes": lambda m, F, nn, x: x.split([_I(1), _I(2)], 1)[1],
    "chunk": lambda m, F, nn, x: x.chunk(_I(2), _I(2))[0],
    "gather": lambda m, F, nn, x: x.gather(_I(1), m.zeros(2, 1, 4, dtype=m.int64)),
    "getitem": lambda m, F, nn, x: x[_I(1), _I(2)],
    "transpose": lambda m, F, nn, x: x.transpose(_I(0), _I(2)),
    "unsqueeze": lambda m, F, nn, x: x.unsqueeze(_I(0)),
    "flatten": lambda m, F, nn, x: x.flatten(_I(1)),
    "layer_norm": lambda m, F, nn, x: F.layer_norm(x, (_I(4),)),
    "cross_entropy": lambda m, F, nn, x: F.cross_entropy(x[0], m.tensor([0, 1, 2]), ignore_index=_I(1)),
    "nll_loss": lambda m, F, nn, x: F.nll_loss(x[0], m.tensor([0, 1, 2]), ignore_index=_I(1)),
    "embedding": lambda m, F, nn, x: F.embedding(m.tensor([0, 1]), x[0], padding_idx=_I(0)),
    "LayerNorm": lambda m, F, nn, x: nn.LayerNorm(_I(4))(x.float()).double(),
    "RMSNorm": lambda m, F, nn, x: nn.RMSNorm(_I(4))(x.float()).double(),
    "Embedding": lambda m, F, nn, x: nn.Embedding(_I(3), _I(2), padding_idx=_I(0)).weight[0],
    "Linear": lambda m, F, nn, x: nn.Linear(_I(4), _I(2)).weight.shape[0] + m.zeros(1),
}


def _torch_modules(torch):
    return torch, torch.nn.functional, torch.nn


@pytest.mark.parametrize("name", sorted(NUMPY_INT_CALLS))
def test_numpy_ints_are_taken_wherever_an_int_is(name):
    mt.manual_seed(0)
    out = NUMPY_INT_CALLS[name](mt, F, nn, mt.tensor(_x3, dtype="float64"))
    assert isinstance(out, mt.Tensor)


@pytest.mark.parametrize("name", sorted(NUMPY_INT_CALLS))
def test_numpy_ints_give_what_pytorch_gives(torch, name):
    if name in ("Embedding", "Linear"):
        pytest.skip("random initial weights: shapes only, tested above")
    if name == "split":
        pytest.skip("torch.split refuses a NumPy int split_size (its Python wrapper checks for int); we take it")
    ours = NUMPY_INT_CALLS[name](mt, F, nn, mt.tensor(_x3, dtype="float64"))
    theirs = NUMPY_INT_CALLS[name](*_torch_modules(torch), torch.tensor(_x3))
    float32 = name in ("LayerNorm", "RMSNorm")
    tolerance = 1e-6 if float32 else 1e-12
    np.testing.assert_allclose(ours.numpy(), theirs.detach().numpy(), rtol=tolerance, atol=tolerance)


def test_numpy_ints_in_seed_and_thread_count():
    mt.manual_seed(np.int64(3))
    before = mt.get_num_threads()
    try:
        mt.set_num_threads(np.int64(1))
        assert mt.get_num_threads() == 1
    finally:
        mt.set_num_threads(before)


@pytest.mark.parametrize(
    "call",
    [
        lambda x: x.sum(1, keepdim=1),
        lambda x: mt.mean(x, 1, keepdim=None),
        lambda x: x.max(1, keepdim="no"),
        lambda x: mt.var(x, 1, keepdim=np.bool_(True)),
        lambda x: mt.amin(x, 1, keepdim=0),
        lambda x: mt.logsumexp(x, 1, keepdim=1),
        lambda x: x.argmax(1, keepdim=1),
        lambda x: mt.std(x, 1, keepdim=1),
    ],
)
def test_keepdim_must_be_a_bool_as_pytorch_checks_it(call):
    with pytest.raises(TypeError, match="keepdim must be True or False, got"):
        call(mt.ones(2, 3))


@pytest.mark.parametrize("mode", [1, None, "eval", np.bool_(True)])
def test_module_train_mode_must_be_a_bool(mode):
    with pytest.raises(ValueError, match="training mode is expected to be boolean"):
        nn.Linear(2, 2).train(mode)


def test_flags_pytorch_reads_by_truth_are_read_so():
    assert nn.Linear(2, 2, bias=0).bias is None  # as torch.nn.Linear(2, 2, bias=0)
    x = mt.ones(3)
    assert F.dropout(x, 0.5, training=False, inplace=1) is x


@pytest.mark.parametrize("p", [0.0, 1.0])
def test_dropout_probability_0_and_1_are_taken_everywhere(p):
    x = mt.ones(2, 4, 8)
    expected = np.ones((2, 4, 8)) * (1.0 - p)
    np.testing.assert_array_equal(F.dropout(x, p).numpy(), expected)
    np.testing.assert_array_equal(nn.Dropout(p)(x).numpy(), expected)
    q = mt.tensor(_QKV)
    for attention in (F.scaled_dot_product_attention, F.flash_attention):
        out = attention(q, q, q, dropout_p=p).numpy()
        assert (out == 0).all() if p == 1 else (out != 0).any()
    for module in (
        nn.MultiHeadAttention(8, 2, dropout=p),
        nn.GPT(11, d_model=8, num_heads=2, num_layers=1, max_seq_len=4, dropout=p),
        nn.TransformerEncoder(11, 8, 2, 16, 1, max_seq_len=4, dropout=p),
    ):
        module.train()
        inputs = [mt.randn(1, 4, 8)] * 3 if isinstance(module, nn.MultiHeadAttention) else [mt.tensor([[1, 2, 3]])]
        out = module(*inputs)
        assert (out[0] if isinstance(out, tuple) else out).shape[0] == 1


def test_dropout_in_place_writes_into_its_input():
    x = mt.ones(1000)
    out = F.dropout(x, 0.5, inplace=True)
    assert out is x and set(np.unique(x.numpy())) == {0.0, 2.0}
    y = mt.ones(10)
    assert nn.Dropout(1.0, inplace=True)(y) is y and y.tolist() == [0.0] * 10


def test_full_and_arange_take_their_dtype_from_the_values_as_pytorch():
    assert mt.full((2,), 3).dtype == "int64" and mt.full((2,), np.int64(3)).dtype == "int64"
    assert mt.full((2,), True).dtype == "bool" and mt.full((2,), 0.5).dtype == "float32"
    assert mt.full((2,), 3, dtype="float64").dtype == "float64"
    assert mt.arange(np.int64(5)).dtype == "int64" and mt.arange(5.0).dtype == "float32"


def test_full_matches_torch(torch):
    for value in (3, np.int64(3), True, 0.5):
        assert mt.full((2,), value).dtype == str(torch.full((2,), value).dtype).replace("torch.", "")


def test_a_0d_array_as_a_dim_is_refused_with_a_clear_message():
    with pytest.raises(TypeError, match=r"dim must be an int or a tuple of ints, got array\(1\)"):
        mt.ones(2, 3).sum(np.array(1))
