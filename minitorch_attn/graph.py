"""Draw the autograd graph that ``backward()`` walks.

Every Tensor produced by an operation remembers its ``grad_fn``: the graph node holding the
:class:`~minitorch_attn.Function` that made it and that function's inputs. :func:`draw_graph`
follows those links back from an output, exactly as the engine does, and draws

* one box per Tensor: its parameter name when it is one (``params``), shape and dtype, and
  with ``show_grad=True`` the norm of its gradient after ``backward()``; the output, the
  leaves that receive gradients (parameters, inputs) and the constants (masks, token ids:
  no gradient) each in their own colour, and named on their first line;
* one ellipse per Function call, with the Function's class name;
* arrows in the direction of the forward: input -> Function -> output. A tensor used twice
  by one call (``a + a``) has two arrows into it, and ``backward()`` sums both gradients.

The description is DOT, built with the ``graphviz`` Python package (the ``graph`` extra:
``pip install -e ".[graph]"``). Turning DOT into a picture needs Graphviz's
``dot`` program (``apt-get install graphviz``, ``brew install graphviz``, ``conda install
graphviz``, or https://graphviz.org/download/); without it :func:`draw_graph` writes the
``.dot`` file and says how to render it.
"""

from __future__ import annotations

import math
import os
import warnings
from typing import Any

from .atomic import write_atomically
from .core.tensor import Tensor
from .nn import Module

PICTURE_FORMATS = ("svg", "png", "pdf")
SOURCE_SUFFIXES = (".dot", ".gv")
COLOURS = {
    "output": "#f9c784",
    "parameter": "#a8d5ba",
    "input": "#b5d3f2",
    "constant": "#e0e0e0",
    "intermediate": "#ffffff",
}


def _walk(output):
    """The graph behind ``output``: ``(tensors, calls, edges)``.

    ``tensors`` and ``calls`` are lists in the order found (from the output back);
    ``edges`` are pairs ``(source, target)`` of those objects in the forward direction:
    ``(input tensor, call)`` and ``(call, output tensor)``. An iterative walk, as the engine's.
    """
    tensors, calls, edges = [output], [], []
    seen_tensors, seen_calls = {id(output)}, set()
    pending = [output]
    while pending:
        t = pending.pop()
        call = t.grad_fn
        if call is None:  # a leaf: nothing made it
            continue
        edges.append((call, t))
        if id(call) in seen_calls:  # another output of a call already walked
            continue
        seen_calls.add(id(call))
        calls.append(call)
        for x in call.inputs:
            if not isinstance(x, Tensor):  # numbers, None, options: not part of the graph
                continue
            edges.append((x, call))
            if id(x) not in seen_tensors:
                seen_tensors.add(id(x))
                tensors.append(x)
                pending.append(x)
    return tensors, calls, edges


def _role(t, output):
    if t is output:
        return "output"
    if t.grad_fn is not None:
        return "intermediate"
    return "input" if t.requires_grad else "constant"


def _tensor_label(t, role, name, show_grad):
    lines = [f"{role} {name}" if name else role] if role != "intermediate" else ([name] if name else [])
    lines.append(f"{t.shape} {t.dtype}")
    if show_grad and t._grad is not None:  # a leaf's, or a retained one (no warning to read)
        g = t._grad.numpy().astype("float64")
        lines.append(f"|grad| = {math.sqrt(float((g * g).sum())):.3g}")
    return "\n".join(lines)


def draw_graph(
    output: Tensor, path: str | None = None, show_grad: bool = False, params: Module | dict[str, Tensor] | None = None
) -> Any:
    """Draw the autograd graph of ``output``: what ``output.backward()`` differentiates.

    Args:
        output: a Tensor, usually a loss or a module's output.
        path: None to only build the graph; a ``.svg``, ``.png`` or ``.pdf`` file to render
            it (needs Graphviz's ``dot`` program; without it the ``.dot`` file is written
            beside, with a warning that says how to render it); a ``.dot`` or ``.gv`` file
            to write the DOT source. Written atomically.
        show_grad: add ``|grad|``, the norm of each leaf's gradient (after ``backward()``),
            and of each intermediate's that ``retain_grad()`` kept.
        params: names for the boxes: a :class:`~minitorch_attn.nn.Module` (its
            ``named_parameters()``) or a dict ``{name: Tensor}``. A leaf found there is
            drawn as a parameter with its name.
    Returns:
        with ``path=None``, the ``graphviz.Digraph`` (displayed inline by Jupyter when
        ``dot`` is installed; ``.source`` is the DOT text); otherwise the path of the file
        written (the picture, or the ``.dot`` file when ``dot`` is missing).
    Raises:
        ImportError: if the ``graphviz`` Python package is missing (names the extra).
        TypeError: if ``output`` is not a Tensor or ``params`` is neither a Module nor a dict
            of Tensors.
        ValueError: if ``path`` has another suffix than those above.
    """
    try:
        import graphviz
    except ImportError:
        raise ImportError('draw_graph builds DOT with the graphviz package: pip install -e ".[graph]"') from None
    if not isinstance(output, Tensor):
        raise TypeError(f"draw_graph: expected a Tensor, got {type(output).__name__}")
    if isinstance(params, Module):
        params = dict(params.named_parameters())
    if params is not None and (not isinstance(params, dict) or not all(isinstance(p, Tensor) for p in params.values())):
        raise TypeError(
            "draw_graph: params must be a Module or a dict {name: Tensor}, e.g. dict(model.named_parameters())"
        )
    suffix = "" if path is None else os.path.splitext(os.fspath(path))[1].lower()
    if path is not None and suffix not in SOURCE_SUFFIXES and suffix[1:] not in PICTURE_FORMATS:
        raise ValueError(f"draw_graph: path must end in .svg, .png, .pdf, .dot or .gv, got {os.fspath(path)!r}")

    names = {id(p): name for name, p in (params or {}).items()}
    tensors, calls, edges = _walk(output)
    key = {id(obj): f"{prefix}{i}" for prefix, objs in (("t", tensors), ("f", calls)) for i, obj in enumerate(objs)}
    graph = graphviz.Digraph(
        "autograd", graph_attr={"rankdir": "TB"}, node_attr={"fontname": "Helvetica", "fontsize": "10"}
    )
    for t in tensors:
        role = _role(t, output)
        name = names.get(id(t))
        if name is not None and role in ("input", "constant"):
            role = "parameter"
        graph.node(
            key[id(t)],
            _tensor_label(t, role, name, show_grad),
            shape="box",
            style="filled,rounded",
            fillcolor=COLOURS[role],
            penwidth="2" if role == "output" else "1",
        )
    for call in calls:
        graph.node(key[id(call)], call.function.__name__, shape="ellipse", style="filled", fillcolor="#dddddd")
    for source, target in edges:
        graph.edge(key[id(source)], key[id(target)])
    if path is None:
        return graph
    return _write(graph, os.fspath(path), suffix)


def _write(graph, path, suffix):
    """Write ``graph`` as DOT or render it; fall back to DOT when ``dot`` is missing."""
    import graphviz

    if suffix in SOURCE_SUFFIXES:
        write_atomically(path, graph.source.encode("utf-8"))
        return path
    try:
        picture = graph.pipe(format=suffix[1:])
    except graphviz.ExecutableNotFound:
        source = os.path.splitext(path)[0] + ".dot"
        write_atomically(source, graph.source.encode("utf-8"))
        warnings.warn(
            f"Graphviz's dot program is not installed, so {path} was not drawn; wrote {source}. "
            f"Render it with: dot -T{suffix[1:]} {source} -o {path} (install dot with "
            f"apt-get install graphviz, brew install graphviz or conda install graphviz)",
            stacklevel=3,
        )
        return source
    write_atomically(path, picture)
    return path
