"""The checks derived from the catalogue of operations (``minitorch_attn/opinfo/``).

Every sample of every record, on every device:

* its forward against the record's float64 NumPy reference, and its backward runs and
  gives each input that requires grad a gradient of its shape and dtype;
* forward and backward against PyTorch in float64, under a random upstream gradient
  (where torch is installed);
* in float32: outputs and gradients stay float32 and agree with the float64 results to
  the record's tolerance (``n_ops`` rounding steps of float32);

and, over the catalogue as a whole: every public differentiable callable has a record,
every record has the edge cases the engine promises, each op's docstring points to its
record, and the documentation site renders every record and the table of operations.

The gradient checks of the samples run in ``tests/test_gradcheck_suite.py``.
"""

import contextlib
import inspect
import pathlib
import re
import warnings

import numpy as np
import pytest

import minitorch_attn as mt
import minitorch_attn.functional as F
from minitorch_attn import opinfo
from minitorch_attn.opinfo.attention import NOT_TORCH
from minitorch_attn.opinfo.held_back import HeldBack
from minitorch_attn.opinfo.record import Inputs
from minitorch_attn.opinfo.table import markdown_table
from tests.conftest import float64_tolerance

RECORDS = opinfo.op_db()
CASES = [
    pytest.param(record, sample, id=f"{record.name}: {sample.name}") for record in RECORDS for sample in record.samples
]
WITH_REFERENCE = [case for case in CASES if case.values[0].ref is not None and case.values[1].fn is None]
WITH_BACKWARD = [case for case in CASES if case.values[0].ref_backward is not None and case.values[1].fn is None]
WITH_TORCH = [case for case in CASES if case.values[0].torch_ref is not None and case.values[1].fn is None]
ROOT = pathlib.Path(__file__).resolve().parents[1]


# ---- running a sample ---------------------------------------------------------------------------
@contextlib.contextmanager
def quiet(sample):
    """Inputs with ±inf or NaN may make NumPy warn (inf - inf); the values are the test."""
    with warnings.catch_warnings():
        if "nonfinite" in sample.edges:
            warnings.simplefilter("ignore", RuntimeWarning)
        yield


def _outputs(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


def run(record, sample, device="cpu", dtype="float64", host_inputs=None):
    """``(inputs, outputs, gradients, upstream)`` of one sample: the op applied, then one backward
    from every float output under a random upstream gradient (seeded: the same numbers on
    every device and dtype). ``host_inputs`` replaces the drawn values (float32 rounding)."""
    inputs = sample.make(Inputs(device, dtype))
    if host_inputs is not None:
        inputs = [
            mt.tensor(h, dtype=dtype, device=device, requires_grad=t.requires_grad)
            if isinstance(t, mt.Tensor) and t.dtype.startswith("float")
            else t
            for t, h in zip(inputs, host_inputs)
        ]
    with quiet(sample):
        outputs = _outputs(sample.call(record.op)(*inputs))
        rng = np.random.default_rng(1)
        upstream = [rng.standard_normal(o.shape) if o.requires_grad else None for o in outputs]
        pairs = [(o, mt.tensor(u, dtype=o.dtype, device=device)) for o, u in zip(outputs, upstream) if u is not None]
        if pairs:
            mt.backward([o for o, _ in pairs], [g for _, g in pairs])
    grads = [t.grad if isinstance(t, mt.Tensor) and t.requires_grad else None for t in inputs]
    return inputs, outputs, grads, upstream


def host(values):
    """NumPy copies: float tensors as float64, other tensors as they are, others unchanged."""
    out = []
    for v in values:
        if isinstance(v, mt.Tensor):
            array = v.numpy()
            out.append(array.astype(np.float64) if array.dtype.kind == "f" else array)
        else:
            out.append(v)
    return out


def assert_close(ours, reference, n_ops, dtype, what):
    """``ours`` equals ``reference`` (float64) to ``n_ops`` roundings of ``dtype`` at its
    magnitude; ±inf and NaN must sit at the same places."""
    reference = np.asarray(reference, dtype=np.float64)
    ours = np.asarray(ours, dtype=np.float64)
    assert ours.shape == reference.shape, f"{what}: shape {ours.shape}, expected {reference.shape}"
    finite = reference[np.isfinite(reference)]
    np.testing.assert_allclose(ours, reference, rtol=0, atol=float64_tolerance(finite, n_ops, dtype), err_msg=what)


@contextlib.contextmanager
def unless_held_back():
    """Skip the test where the reference it needs is a homework answer held back in this
    tree (a student's: ``minitorch_attn/opinfo/held_back.py``)."""
    try:
        yield
    except HeldBack as exc:
        pytest.skip(str(exc))


def reference_outputs(record, sample, inputs):
    with np.errstate(all="ignore"), unless_held_back():
        return raw_reference_outputs(record, sample, inputs)


def raw_reference_outputs(record, sample, inputs):
    with np.errstate(all="ignore"):
        return _outputs(record.ref(*host(inputs), **sample.kwargs))


# ---- the derived checks -----------------------------------------------------------------------
@pytest.mark.parametrize("record, sample", WITH_REFERENCE)
def test_forward_matches_the_numpy_reference(record, sample, device):
    inputs, outputs, grads, _ = run(record, sample, device)
    for i, (ours, expected) in enumerate(zip(outputs, reference_outputs(record, sample, inputs), strict=True)):
        assert_close(ours.numpy(), expected, sample.rounding_steps(record, "float64"), "float64", f"output {i}")
    for i, (t, g) in enumerate(zip(inputs, grads)):
        if g is not None:
            assert g.shape == t.shape and g.dtype == t.dtype, f"gradient of input {i}: {g.shape} {g.dtype}"


def reference_gradients(record, sample, inputs, upstream):
    with unless_held_back():
        return raw_reference_gradients(record, sample, inputs, upstream)


def raw_reference_gradients(record, sample, inputs, upstream):
    with np.errstate(all="ignore"):
        return record.ref_backward([u for u in upstream], *host(inputs), **sample.kwargs)


@pytest.mark.parametrize("record, sample", WITH_BACKWARD)
def test_backward_matches_the_closed_form_numpy_reference(record, sample, device):
    """The backward without PyTorch: against the record's closed-form gradients in float64."""
    inputs, _, grads, upstream = run(record, sample, device)
    expected = reference_gradients(record, sample, inputs, upstream)
    for i, (g, e) in enumerate(zip(grads, expected, strict=True)):
        if g is not None:
            assert e is not None, f"input {i} got a gradient where the reference has none"
            assert_close(
                g.numpy(),
                e,
                sample.rounding_steps(record, "float64", backward=True),
                "float64",
                f"gradient of input {i}",
            )


def _torch_inputs(torch, values):
    """PyTorch tensors (float64, or the index and mask dtypes) for our tensors; others as they are."""
    return [
        torch.tensor(h, requires_grad=v.requires_grad) if isinstance(v, mt.Tensor) else v
        for v, h in zip(values, host(values))
    ]


@pytest.mark.parametrize("record, sample", WITH_TORCH)
def test_forward_and_backward_match_torch(record, sample, torch):
    if sample.torch_wrong:
        pytest.skip(sample.torch_wrong)
    inputs, outputs, grads, upstream = run(record, sample)
    theirs = _torch_inputs(torch, inputs)
    with quiet(sample):
        warnings.simplefilter("ignore", UserWarning)  # PyTorch's notes on empty reductions
        expected = record.torch_ref(torch, *theirs, **sample.kwargs)
        if expected is NOT_TORCH:
            pytest.skip("PyTorch has no such option")
        expected = _outputs(expected)
        pairs = [
            (e, torch.tensor(u, dtype=e.dtype)) for e, u in zip(expected, upstream) if u is not None and e.requires_grad
        ]
        if pairs:
            torch.autograd.backward([e for e, _ in pairs], [g for _, g in pairs])
    steps = sample.rounding_steps(record, "float64")
    for i, (ours, e) in enumerate(zip(outputs, expected, strict=True)):
        assert_close(ours.numpy(), e.detach().numpy(), steps, "float64", f"output {i}")
    for i, (g, t) in enumerate(zip(grads, theirs)):
        if g is not None:
            reference = t.grad.numpy() if t.grad is not None else np.zeros(t.shape)
            assert_close(
                g.numpy(),
                reference,
                sample.rounding_steps(record, "float64", backward=True),
                "float64",
                f"gradient of input {i}",
            )


@pytest.mark.parametrize("record, sample", CASES)
def test_float32_stays_float32_and_agrees_with_float64(record, sample, device):
    inputs, outputs, grads, _ = run(record, sample, device, "float32")
    for i, out in enumerate(outputs):
        if out.dtype.startswith("float") and record.keeps_dtype:
            assert out.dtype == "float32", f"output {i} is {out.dtype}"
    for i, (t, g) in enumerate(zip(inputs, grads)):
        if g is not None:
            assert g.dtype == t.dtype == "float32" and g.shape == t.shape, f"gradient of input {i}"
    if record.ref is None or sample.fn is not None:  # random ops: float32 and float64 draw different masks;
        return  # compositions (x + 100) round where the inputs do not
    rounded = host(inputs)  # the float32 values, exactly, in float64
    _, wide_outputs, wide_grads, _ = run(record, sample, device, "float64", host_inputs=rounded)
    with contextlib.suppress(HeldBack):  # in a student's tree the float64 run stands in for the reference
        wide_outputs = [mt.tensor(r) for r in raw_reference_outputs(record, sample, inputs)]
    steps = sample.rounding_steps(record, "float32")
    for i, (ours, wide) in enumerate(zip(outputs, wide_outputs, strict=True)):
        assert_close(ours.numpy(), wide.numpy(), steps, "float32", f"float32 output {i}")
    for i, (g, wide) in enumerate(zip(grads, wide_grads)):
        if g is not None:
            assert_close(
                g.numpy(),
                wide.numpy(),
                sample.rounding_steps(record, "float32", backward=True),
                "float32",
                f"float32 gradient of input {i}",
            )


# ---- the catalogue as a whole -------------------------------------------------------------------
def test_every_record_has_a_closed_form_backward():
    """Every backward is checked without PyTorch (the grader's machine has none): against its
    record's ``ref_backward`` in ``test_backward_matches_the_closed_form_numpy_reference``."""
    missing = [f"{record.name} ({record.module})" for record in RECORDS if record.ref_backward is None]
    assert not missing, "records without a closed-form ref_backward: " + ", ".join(missing)


# Public callables that are not differentiable operations, and why.
NOT_OPERATIONS = {
    # factories and random numbers: they make tensors, nothing flows back through them
    "mt.arange",
    "mt.full",
    "mt.ones",
    "mt.ones_like",
    "mt.zeros",
    "mt.zeros_like",
    "mt.rand",
    "mt.randint",
    "mt.randn",
    "mt.tensor",
    "mt.manual_seed",
    # the engine and its settings, checked in tests/test_autograd.py and tests/test_threads.py
    "mt.backward",
    "mt.is_grad_enabled",
    "mt.get_default_device",
    "mt.set_default_device",
    "mt.get_num_threads",
    "mt.set_num_threads",
    "mt.dtype_name",
    "mt.draw_graph",
    "mt.gradcheck",
    "mt.check_gradients",
    "mt.get_default_dtype",
    "mt.set_default_dtype",
    "mt.result_dtype",
    # a boolean mask: F.causal_mask builds one, it has no gradient
    "F.causal_mask",
    # Tensor: attributes, conversions, the engine's entry points
    "Tensor.shape",
    "Tensor.ndim",
    "Tensor.dtype",
    "Tensor.device",
    "Tensor.is_leaf",
    "Tensor.size",
    "Tensor.numel",
    "Tensor.dim",
    "Tensor.grad",
    "Tensor.requires_grad",
    "Tensor.requires_grad_",
    "Tensor.backward",
    "Tensor.detach",
    "Tensor.zero_grad",
    "Tensor.numpy",
    "Tensor.tolist",
    "Tensor.item",
    "Tensor.cpu",
    "Tensor.cuda",
    "Tensor.long",
    "Tensor.contiguous",
    # hooks watch gradients, they are no operation (tests/test_hooks.py)
    "Tensor.register_hook",
    "Tensor.retain_grad",
    "Tensor.retains_grad",
    # writes of constants: what they overwrite gets no gradient (tests/test_inplace_versions.py)
    "Tensor.zero_",
    "Tensor.fill_",
    # x[key] = v records no graph: with one involved it raises (minitorch_attn/core/inplace.py)
    "Tensor.__setitem__",
    # comparisons and logic give bool tensors; argmax gives indices: no gradient (as PyTorch)
    "Tensor.argmax",
    "Tensor.argmin",
    "Tensor.__eq__",
    "Tensor.__ne__",
    "Tensor.__lt__",
    "Tensor.__le__",
    "Tensor.__gt__",
    "Tensor.__ge__",
    "Tensor.__invert__",
    "Tensor.__and__",
    "Tensor.__or__",
}
PYTHON_PROTOCOL = {
    "__module__",
    "__doc__",
    "__array_priority__",
    "__hash__",
    "__init__",
    "__len__",
    "__iter__",
    "__repr__",
    "__float__",
    "__int__",
    "__bool__",
    "__dict__",
    "__weakref__",
}


def public_callables():
    """Every public callable of ``F``, of the package's top level, and of :class:`Tensor`."""
    names = {f"F.{n}" for n in F.__all__}
    names |= {
        f"mt.{n}"
        for n in dir(mt)
        if not n.startswith("_") and (inspect.isfunction(getattr(mt, n)) or inspect.isbuiltin(getattr(mt, n)))
    }
    own = {n for cls in mt.Tensor.__mro__ if cls is not object for n in vars(cls)}  # with its base classes'
    names |= {
        f"Tensor.{n}"
        for n in own
        if n not in PYTHON_PROTOCOL and (not n.startswith("_") or (n.startswith("__") and n.endswith("__")))
    }
    return names


def test_every_public_differentiable_callable_has_a_record():
    covered = {name for record in RECORDS for name in record.covers}
    missing = sorted(public_callables() - covered - NOT_OPERATIONS)
    assert not missing, (
        f"no record in the catalogue for {missing}: add one to minitorch_attn/opinfo/<topic>.py "
        f"(the module of its topic), or, if it is not a differentiable operation, to "
        f"NOT_OPERATIONS in tests/test_opinfo.py with the reason"
    )
    stale = sorted((covered | NOT_OPERATIONS) - public_callables() - {"Function.apply"})
    assert not stale, f"the catalogue names callables that do not exist: {stale}"


def test_the_completeness_check_names_a_missing_op(monkeypatch):
    monkeypatch.setattr(F, "__all__", F.__all__ + ["swish"], raising=True)
    monkeypatch.setattr(F, "swish", lambda x: x, raising=False)
    with pytest.raises(AssertionError, match=r"F\.swish.*minitorch_attn/opinfo/"):
        test_every_public_differentiable_callable_has_a_record()


@pytest.mark.parametrize("record", RECORDS, ids=[r.name for r in RECORDS])
def test_every_record_has_the_promised_cases(record):
    edges = {edge for sample in record.samples for edge in sample.edges}
    assert any(s.gradcheck for s in record.samples), f"{record.name}: no sample is gradient-checked"
    assert "empty" in edges or record.no_empty, f"{record.name}: no sample with an empty dim (or say why: no_empty)"
    if record.exponentiates:
        assert "extreme" in edges, f"{record.name} exponentiates: add a sample of extreme logits"
    assert record.source, f"{record.name}: say where its forward and backward come from"
    assert record.task is None or f"task_{record.task.replace('.', '_')}:" in (ROOT / "setup.cfg").read_text(), (
        f"{record.name}: task {record.task} has no marker in setup.cfg"
    )


def test_sample_names_are_unique():
    names = [s.name for r in RECORDS for s in r.samples]
    assert len(names) == len(set(names)), sorted({n for n in names if names.count(n) > 1})


def _documented(name):
    space, attr = name.split(".", 1)
    return getattr({"F": F, "mt": mt}[space], attr, None) if space in ("F", "mt") else None


@pytest.mark.parametrize("record", RECORDS, ids=[r.name for r in RECORDS])
def test_each_op_docstring_points_to_its_record(record):
    for name in record.covers:
        fn = _documented(name)
        if fn is not None:
            assert record.module.split("minitorch_attn/")[1] in (fn.__doc__ or ""), (
                f"{name}: its docstring should name its record's file, {record.module}"
            )


def test_the_table_command_prints_one_row_per_record(capsys):
    from minitorch_attn.opinfo.__main__ import main

    assert main([]) == 0
    out = capsys.readouterr().out
    assert out == markdown_table() and len(out.splitlines()) == 2 + len(RECORDS)


def _rendered_on_the_site():
    """``{record name}`` that the site's ``opinfo-ops`` directives render (read from docs/, no build)."""
    names = set()
    for page in sorted((ROOT / "docs").rglob("*.rst")) + sorted((ROOT / "docs").rglob("*.md")):
        for topic, only in re.findall(r"\.\. opinfo-ops:: (\w+)\n((?:   :only: .*\n)?)", page.read_text()):
            module = next(m for m in opinfo.MODULES if m.__name__.endswith("." + topic))
            wanted = {n.strip() for n in only.split(":only:", 1)[1].split(",")} if only else None
            names |= {r.name for r in module.RECORDS if wanted is None or r.name in wanted}
    return names


def test_the_site_has_a_section_for_every_record_and_the_table_of_operations():
    """The site's op sections and its table are generated from the records at build time (so
    they cannot go stale); what can be forgotten is a record on no page: the build fails on it
    too, and this says so without building."""
    missing = [r.name for r in RECORDS if r.name not in _rendered_on_the_site()]
    assert not missing, f"records on no page of the site (add them to an `.. opinfo-ops::` in docs/engine/): {missing}"
    pages = "".join(p.read_text() for p in (ROOT / "docs").rglob("*.rst"))
    assert ".. opinfo-table::" in pages


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_extreme_scores_overflow_an_unshifted_exp_whatever_the_seed(dtype):
    # the grading draws these with a seed of its own: the largest score must be +limit for
    # every seed (a largest score of -limit left the positive ones small enough for exp, so a
    # flash forward without its running maximum passed for about one seed in a hundred)
    from minitorch_attn.opinfo.attention import extreme_qkv
    from minitorch_attn.opinfo.record import Inputs

    for seed in range(300):
        q, k, _ = (t.numpy().astype(np.float64) for t in extreme_qkv(Inputs(dtype=dtype, seed=seed)))
        scores = q @ np.swapaxes(k, -1, -2) / 2.0
        limit = Inputs.EXTREME[dtype]
        np.testing.assert_allclose(scores.max(), limit, rtol=1e-6)
        assert np.abs(scores).max() <= limit * (1 + 1e-6)


# ---- backward at a glance ----------------------------------------------------------------------------
def test_glance_every_record_has_a_one_line_forward_and_backward_rule():
    """Each record's ``forward`` and ``backward`` are one line of text (the backward a
    held-back stand-in only in a student tree of its task)."""
    from minitorch_attn.opinfo.glance import glance_rows

    rows = glance_rows()
    assert [r[0] for r in rows] == [r.name for r in RECORDS]
    for name, forward, backward in rows:
        for rule in (forward, backward):
            assert rule.strip() and "\n" not in rule and len(rule) <= 110, f"{name}: {rule!r}"


def test_glance_a_record_without_rules_is_refused():
    import dataclasses

    from minitorch_attn.opinfo.glance import glance_rows

    softmax = opinfo.find("softmax")
    with pytest.raises(ValueError, match="'softmax' .*no one-line forward rule"):
        glance_rows([dataclasses.replace(softmax, forward=None)])
    with pytest.raises(ValueError, match="'softmax' .*no one-line backward rule"):
        glance_rows([dataclasses.replace(softmax, backward="")])


def test_glance_a_task_s_backward_rule_is_held_back_with_its_reference_answers():
    """The backward rule of an op whose backward is a homework task is a constant in a
    ``# BEGIN REFERENCE <task>`` region of its record's module, so a student tree of the task
    holds a stand-in there (``markers.hold_back``), and the page says "(task X.Y)" instead."""
    import dataclasses
    import importlib

    from minitorch_attn.homework import markers
    from minitorch_attn.opinfo.glance import glance_rows
    from minitorch_attn.opinfo.held_back import held_back

    for record in RECORDS:
        if record.task is None:
            continue
        path = ROOT / record.module
        module = importlib.import_module(record.module[:-3].replace("/", "."))
        held = [
            name
            for region in markers.find_references(path)
            if region.task == record.task
            for name in markers.defined_names(region)
        ]
        assert any(getattr(module, name) is record.backward for name in held), (
            f"{record.name}: its backward rule is task {record.task}'s answer; define it in a "
            f"# BEGIN REFERENCE {record.task} region of {record.module}"
        )
    softmax = opinfo.find("softmax")
    stand_in = dataclasses.replace(softmax, backward=held_back("2.1", "BACKWARD_SOFTMAX"))
    assert glance_rows([stand_in]) == [("softmax", softmax.forward, "(task 2.1)")]
    text = (ROOT / "minitorch_attn/opinfo/softmax.py").read_text()
    assert "BACKWARD_SOFTMAX = held_back('2.1', 'BACKWARD_SOFTMAX')" in markers.hold_back(
        text, "opinfo/softmax.py", {"2.1"}
    )


def test_glance_the_command_prints_one_line_per_record(capsys):
    from minitorch_attn.opinfo.__main__ import main
    from minitorch_attn.opinfo.glance import glance_text

    assert main(["--glance"]) == 0
    out = capsys.readouterr().out
    assert out == glance_text()
    lines = [line for line in out.splitlines()[1:] if line]
    assert len(lines) == len(RECORDS) and lines[0].split()[:4] == ["add", "y", "=", "a"]


def test_glance_the_site_has_the_page():
    pages = "".join(p.read_text() for p in (ROOT / "docs").rglob("*.rst"))
    assert ".. opinfo-glance::" in pages
