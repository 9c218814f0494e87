"""draw_graph: the boxes, ellipses and arrows of small expressions, the names of parameters,
gradient norms, the files it writes, and what it says without Graphviz."""

import shutil
import sys

import numpy as np
import pytest

import minitorch_attn as mt
import minitorch_attn.functional as F
from minitorch_attn import nn
from minitorch_attn.speed import rows, threads

graphviz = pytest.importorskip("graphviz")


def parts(graph):
    """``(boxes, ellipses, edges)`` of a drawn graph: labels of the tensors and of the
    Function calls, and ``(source label, target label)`` pairs, read from its DOT body."""
    labels, shapes, edges = {}, {}, []
    for line in graph.body:
        line = line.strip()
        if " -> " in line:
            edges.append(tuple(line.split(" -> ")))
            continue
        key, attributes = line.split(" ", 1)
        label = (
            attributes.split('label="', 1)[1].split('"', 1)[0]
            if 'label="' in attributes
            else attributes.split("label=", 1)[1].split(" ", 1)[0]
        )
        labels[key], shapes[key] = label, "box" if "shape=box" in attributes else "ellipse"
    boxes = [labels[k] for k in labels if shapes[k] == "box"]
    ellipses = [labels[k] for k in labels if shapes[k] == "ellipse"]
    return boxes, ellipses, [(labels[a], labels[b]) for a, b in edges]


def test_a_product_and_a_sum():
    a = mt.randn(3, requires_grad=True)
    b = mt.randn(3, requires_grad=True)
    boxes, ellipses, edges = parts(mt.draw_graph((a * b).sum()))
    assert sorted(ellipses) == ["Mul", "Sum"]
    assert sorted(boxes) == ["(3,) float32", "input\n(3,) float32", "input\n(3,) float32", "output\n() float32"]
    # forward direction: each input into Mul, Mul to its result, that into Sum, Sum to the output
    assert sorted(edges) == sorted(
        [("input\n(3,) float32", "Mul")] * 2
        + [("Mul", "(3,) float32"), ("(3,) float32", "Sum"), ("Sum", "output\n() float32")]
    )


def test_a_tensor_used_twice_has_two_arrows():
    a = mt.randn(2, dtype="float64", requires_grad=True)
    boxes, ellipses, edges = parts(mt.draw_graph(a + a))
    assert ellipses == ["Add"] and len(boxes) == 2
    assert edges.count(("input\n(2,) float64", "Add")) == 2


def test_parameters_constants_and_gradient_norms():
    layer = nn.Linear(4, 2)
    x = mt.randn(5, 4)  # no gradient: a constant
    loss = F.relu(layer(x)).sum()
    loss.backward()
    boxes, ellipses, _ = parts(mt.draw_graph(loss, show_grad=True, params=layer))
    norm = np.linalg.norm(layer.weight.grad.numpy())
    assert f"parameter weight\n(2, 4) float32\n|grad| = {norm:.3g}" in boxes
    assert any(b.startswith("parameter bias\n(2,) float32\n|grad| = ") for b in boxes)
    assert "constant\n(5, 4) float32" in boxes
    assert "Sum" in ellipses and "ReLU" in "".join(ellipses)
    named = parts(mt.draw_graph(loss, params={"W": layer.weight}))[0]
    assert "parameter W\n(2, 4) float32" in named and "input\n(2,) float32" in named


def test_the_fused_layer_norm_is_one_call():
    x = mt.randn(2, 8, requires_grad=True)
    _, ellipses, edges = parts(mt.draw_graph(F.layer_norm(x, (8,))))
    assert ellipses == ["LayerNorm"] and len(edges) == 2


def test_a_gpt_on_two_threads_shows_its_ops_as_on_one(monkeypatch):
    """At 2 threads, with the ops run in chunks of rows on the pool (every threshold at 0),
    the graph of a GPT shows the GELU, attention and LayerNorm nodes a learner called, and
    the same nodes as at one thread."""
    for name in list(rows.SPLITS):
        monkeypatch.setitem(rows.SPLITS, name, rows.Split(0))
    drawn = []
    for count in (1, 2):
        monkeypatch.setattr(threads, "_requested", count)
        mt.manual_seed(0)
        model = nn.GPT(11, d_model=8, num_heads=2, num_layers=2, max_seq_len=6)
        loss = F.cross_entropy(
            model(mt.tensor(np.arange(12).reshape(2, 6) % 11)).reshape(12, 11), mt.tensor(np.arange(12) % 11)
        )
        drawn.append(sorted(parts(mt.draw_graph(loss))[1]))
    assert drawn[1] == drawn[0]
    assert drawn[1].count("GELU") == 2 and drawn[1].count("ScaledDotProductAttention") == 2
    assert drawn[1].count("LayerNorm") == 5 and not any("RowChunks" in e for e in drawn[1])


def test_dot_file_and_bad_arguments(tmp_path):
    a = mt.randn(3, requires_grad=True)
    path = tmp_path / "g.dot"
    assert mt.draw_graph(a.exp(), path) == str(path)
    assert path.read_text().startswith("digraph autograd {") and "Exp" in path.read_text()
    with pytest.raises(ValueError, match=r"must end in \.svg, \.png, \.pdf, \.dot or \.gv"):
        mt.draw_graph(a.exp(), tmp_path / "g.jpeg")
    with pytest.raises(TypeError, match="expected a Tensor"):
        mt.draw_graph([1.0])
    with pytest.raises(TypeError, match="params must be a Module or a dict"):
        mt.draw_graph(a.exp(), params=[a])


@pytest.mark.skipif(shutil.which("dot") is None, reason="needs Graphviz's dot program (apt-get install graphviz)")
@pytest.mark.parametrize("suffix, magic", [(".svg", b"<?xml"), (".png", b"\x89PNG")])
def test_rendering_with_dot(tmp_path, suffix, magic):
    a = mt.randn(3, requires_grad=True)
    path = tmp_path / f"g{suffix}"
    assert mt.draw_graph((a * a).sum(), path) == str(path)
    assert path.read_bytes().startswith(magic)
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # no temporary file left behind


def test_without_dot_the_dot_file_is_written_and_the_warning_says_how_to_render(tmp_path, monkeypatch):
    def missing(*args, **kwargs):
        raise graphviz.ExecutableNotFound(["dot"])

    monkeypatch.setattr(graphviz.Digraph, "pipe", missing)
    a = mt.randn(3, requires_grad=True)
    with pytest.warns(UserWarning, match=r"dot -Tsvg .*g\.dot -o .*g\.svg.*apt-get install graphviz"):
        written = mt.draw_graph(a.exp(), tmp_path / "g.svg")
    assert written == str(tmp_path / "g.dot") and not (tmp_path / "g.svg").exists()
    assert (tmp_path / "g.dot").read_text().startswith("digraph")


def test_without_the_graphviz_package_the_error_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "graphviz", None)
    with pytest.raises(ImportError, match=r'pip install -e "\.\[graph\]"'):
        mt.draw_graph(mt.randn(2, requires_grad=True).exp())
