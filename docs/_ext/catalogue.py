"""Pages generated from the code at build time, so that they cannot drift from it.

Three things are written from the package itself, never by hand:

* ``.. opinfo-ops:: TOPIC`` (optionally ``:only: NAME, NAME``): one section per record of
  the catalogue module ``minitorch_attn/opinfo/TOPIC.py``, each with the op's public names,
  its forward (the public function's docstring), the derivation of its backward (the
  docstring of each :class:`~minitorch_attn.Function` its code applies), its source code,
  its gradient check (the suite run while the page is built: one row per sample, with the
  errors measured) and its homework task from ``minitorch_attn/homework/manifest.json``.
* ``.. opinfo-table::``: the table of operations, one row per record (``opinfo/table.py``),
  each op linked to its section.
* the tour: every demo of ``demos/`` written as a notebook into ``docs/tour/demos/`` (not
  kept in git), which myst-nb executes in quick mode, keeping the executed notebooks in
  jupyter-cache under a key of the code they run (:func:`tour_cache_path`).

A record that no page renders is a warning, and so a failed build (``-W``): a new op is on
the site the day its record exists, or the build says where it is missing. So is a
gradient check that fails while the page is built, and so is a :class:`Function` shown on
the site (in an op's section or by autodoc) whose docstring, which carries the derivation
of its backward, has no typeset math (:func:`untypeset_derivation`).
"""

from __future__ import annotations

import ast
import builtins
import hashlib
import importlib.metadata
import inspect
import re
import shutil
import sys
import textwrap
from pathlib import Path

from docutils import nodes
from docutils.parsers.rst import directives
from docutils.statemachine import StringList
from sphinx.ext.napoleon import Config as NapoleonConfig
from sphinx.ext.napoleon.docstring import GoogleDocstring
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective
from sphinx.util.nodes import nested_parse_with_titles

import minitorch_attn
import minitorch_attn.functional as F
from minitorch_attn import opinfo
from minitorch_attn.core.autograd import Function
from minitorch_attn.core.tensor import Tensor
from minitorch_attn.homework import derive
from minitorch_attn.opinfo.table import table_rows

logger = logging.getLogger(__name__)
ROOT = Path(__file__).resolve().parents[2]
NAPOLEON = NapoleonConfig(napoleon_use_param=False, napoleon_use_rtype=False)
SPACES = {"F": F, "mt": minitorch_attn, "Tensor": Tensor, "Function": Function}


def slug(name):
    """The label of an op's section: ``"unsqueeze/squeeze" -> "op-unsqueeze-squeeze"``,
    ``"add_" -> "op-add-inplace"``."""
    inplace = name.endswith("_") and not name.endswith("__")
    return "op-" + re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") + ("-inplace" if inplace else "")


# ---- what the code says about a record -----------------------------------------------------------
def public_callables(record):
    """The objects behind the record's public names (``F.layer_norm``, ``Tensor.__add__``), once each."""
    found = []
    for name in record.covers:
        space, _, attr = name.partition(".")
        obj = getattr(SPACES.get(space), attr, None)
        obj = obj.fget if isinstance(obj, property) else obj
        if callable(obj) and not any(obj is f for f in found):
            found.append(obj)
    return found


def _names_in(fn):
    """The objects that the names and ``module.attribute`` chains in ``fn``'s code stand for."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    except (OSError, TypeError, SyntaxError):
        return []
    scope = dict(vars(builtins), **getattr(fn, "__globals__", {}))
    objects = []
    for node in ast.walk(tree):
        chain = []
        while isinstance(node, ast.Attribute):
            chain.append(node.attr)
            node = node.value
        if isinstance(node, ast.Name) and node.id in scope:
            obj = scope[node.id]
            for attr in reversed(chain):
                obj = getattr(obj, attr, None)
            objects.append(obj)
    return objects


def has_backward(obj):
    """Whether ``obj`` is a :class:`Function` with a backward of its own or inherited (not the
    base class's, which raises): ``Exp`` (through ``Elementwise``) is, ``Broadcasting`` not."""
    return (
        inspect.isclass(obj)
        and issubclass(obj, Function)
        and obj is not Function
        and getattr(obj, "backward", None) is not Function.backward
    )


def _is_op_function(obj):
    return has_backward(obj) and not obj.__name__.startswith("_")


def functions_of(record):
    """The :class:`Function` s whose ``backward`` the record's public callables run: the ones
    their code names, or else the ones named by the package's helpers they call (one step)."""
    found = []
    for fn in public_callables(record) + [record.op]:
        names = _names_in(fn)
        direct = [obj for obj in names if _is_op_function(obj)]
        if not direct:
            helpers = [
                obj
                for obj in names
                if inspect.isfunction(obj) and obj.__module__.startswith("minitorch_attn.") and obj is not fn
            ]
            direct = [obj for helper in helpers for obj in _names_in(helper) if _is_op_function(obj)]
        for obj in direct:
            if obj not in found:
                found.append(obj)
    return found


# a ``.. math::`` block or a ``:math:`...``` role: what MathJax typesets in a docstring
TYPESET_MATH = re.compile(r"^\s*\.\. math::|:math:`", re.MULTILINE)


def untypeset_derivation(function):
    """Why ``function``'s docstring may not go on the site, or None: a backward carries its
    derivation, and the site shows it typeset, so the docstring must exist and hold a
    ``.. math::`` block or a ``:math:`` role (plain text in ``::`` blocks alone is refused)."""
    name = f"{function.__module__}.{function.__qualname__}"
    doc = inspect.getdoc(function)
    if not doc:
        return f"{name} has no docstring: the derivation of its backward belongs there, typeset"
    if not TYPESET_MATH.search(doc):
        return (
            f"the derivation in the docstring of {name} is not typeset: write its formulas "
            f"with `.. math::` blocks or :math:`...` roles (as LayerNorm's)"
        )
    return None


def rst_docstring(obj, what):
    """``obj``'s docstring as reStructuredText lines (its Google-style sections converted,
    the derive mode's marker and hint lines removed: the site shows every derivation)."""
    doc = derive.show(inspect.getdoc(obj) or "")
    return str(GoogleDocstring(doc, NAPOLEON, what=what, obj=obj)).splitlines()


def where(obj):
    """``(path relative to the project, first line, source lines)`` of a function or class."""
    lines, start = inspect.getsourcelines(obj)
    return Path(inspect.getsourcefile(obj)).resolve().relative_to(ROOT).as_posix(), start, lines


# ---- the gradient checks, run once per build ------------------------------------------------------
def gradcheck_results(app):
    """``{sample name: (max abs error, tolerance, failure or None)}`` for every entry of the
    gradient-check suite on NumPy in float64, run once per build."""
    if getattr(app, "_catalogue_gradcheck", None) is None:
        from minitorch_attn.gradcheck.suite import entries

        results = {}
        for entry in entries():
            try:
                report = entry.run("cpu", "float64", 0)
                results[entry.name] = (report.max_abs_error, report.max_tolerance, report.failure)
            except Exception as exc:  # a crash is a failure, shown like one
                results[entry.name] = (float("nan"), float("nan"), f"{type(exc).__name__}: {exc}")
        app._catalogue_gradcheck = results
    return app._catalogue_gradcheck


# ---- the directives ----------------------------------------------------------------------------------
def _indent(lines, by="   "):
    return [by + line if line.strip() else "" for line in lines]


def _text(text):
    """Plain text for reStructuredText: its markup characters escaped."""
    return re.sub(r"([\\*|`_])", r"\\\1", str(text))


def _literal(text):
    return "``" + text.replace("`", "'") + "``" if text else ""


class OpsDirective(SphinxDirective):
    """``.. opinfo-ops:: TOPIC``: a section for each record of ``opinfo/TOPIC.py``."""

    required_arguments = 1
    option_spec = {"only": directives.unchanged}

    def run(self):
        topic = self.arguments[0]
        module = next((m for m in opinfo.MODULES if m.__name__.rsplit(".", 1)[-1] == topic), None)
        if module is None:
            raise self.error(
                f"opinfo-ops: no catalogue module {topic!r}; known: "
                f"{', '.join(m.__name__.rsplit('.', 1)[-1] for m in opinfo.MODULES)}"
            )
        records = list(module.RECORDS)
        if "only" in self.options:
            wanted = [n.strip() for n in self.options["only"].split(",") if n.strip()]
            unknown = set(wanted) - {r.name for r in records}
            if unknown:
                raise self.error(f"opinfo-ops {topic}: no records {sorted(unknown)} in opinfo/{topic}.py")
            records = [r for r in records if r.name in wanted]
        self.env.note_dependency(str(ROOT / "minitorch_attn/opinfo" / f"{topic}.py"))
        rendered = self.env.__dict__.setdefault("catalogue_rendered", {})
        lines = []
        for record in records:
            rendered[record.name] = self.env.docname
            lines += self.record_lines(record)
        container = nodes.container(classes=["opinfo-ops"])
        nested_parse_with_titles(self.state, StringList(lines, source=f"<opinfo-ops {topic}>"), container)
        return container.children

    def record_lines(self, record):
        title = f"``{record.name}``"
        tasks = opinfo_tasks()
        lines = [f".. _{slug(record.name)}:", "", title, "~" * len(title), ""]
        lines += [
            f":Public names: {', '.join(_literal(c) for c in record.covers)}",
            f":Gradient for: {', '.join(record.differentiable_in)}",
            f":From: {_text(record.source)}",
            f":Record: {_literal(record.module)} (its samples, references and tolerances)",
        ]
        for label, task in (
            ("Homework task (backward)", record.task),
            ("Homework task (forward)", record.forward_task),
        ):
            if task:
                lines.append(f":{label}: :ref:`task {task} <task-{task.replace('.', '-')}>`, {tasks[task][1]['title']}")
        lines.append("")

        public = [fn for fn in public_callables(record) if inspect.getdoc(fn)]
        if public:
            lines += [".. rubric:: Forward", ""]
            for fn in public[:1]:
                lines += [f".. currentmodule:: {fn.__module__}", ""] + rst_docstring(fn, "function") + [""]
        functions = functions_of(record)
        for function in functions:
            problem = untypeset_derivation(function)
            if problem:
                logger.warning(f"opinfo-ops: record {record.name!r}: {problem}", location=self.get_location())
            lines += [
                f".. rubric:: Backward: ``{function.__name__}``",
                "",
                f".. currentmodule:: {function.__module__}",
                "",
            ]
            lines += rst_docstring(function, "class") + [""]
        if not functions and not public:
            logger.warning(
                f"opinfo-ops: record {record.name!r} has neither a documented public name "
                f"nor a Function its code applies",
                location=self.get_location(),
            )

        lines += [".. rubric:: Source", ""]
        shown = set()
        for obj in functions + public_callables(record):
            try:
                path, start, code = where(obj)
            except (OSError, TypeError, ValueError):
                continue
            if (path, start) in shown:
                continue
            shown.add((path, start))
            self.env.note_dependency(str(ROOT / path))
            lines += [f"``{path}``, from line {start}:", "", ".. code-block:: python", f"   :lineno-start: {start}", ""]
            lines += _indent([line.rstrip("\n") for line in code]) + [""]

        lines += self.gradcheck_lines(record)
        return lines

    def gradcheck_lines(self, record):
        results = gradcheck_results(self.env.app)
        checked = [s for s in record.samples if s.gradcheck]
        lines = [".. rubric:: Gradient check", ""]
        if checked:
            only = re.sub(r" \(.*", "", checked[0].name)
            lines += [
                f"Measured while this page was built: central differences in float64 on NumPy, "
                f"under a random upstream gradient, each sample's tolerance derived from the "
                f"differences' own error (:ref:`derived-tolerances`; "
                f'``python -m gradcheck --only "{only}"``).',
                "",
                ".. list-table::",
                "   :header-rows: 1",
                "   :class: gradcheck",
                "",
                "   * - sample",
                "     - max abs error",
                "     - tolerance",
                "     - result",
            ]
            for sample in checked:
                abs_err, tolerance, failure = results.get(sample.name, (float("nan"), float("nan"), "not run"))
                lines += [
                    f"   * - {_literal(sample.name)}",
                    f"     - {abs_err:.1e}",
                    f"     - {tolerance:.1e}",
                    f"     - {'pass' if failure is None else '**FAIL**'}",
                ]
                if failure is not None:
                    logger.warning(f"gradient check {sample.name!r} fails: {failure}", location=self.get_location())
            lines.append("")
        edges = [s for s in record.samples if not s.gradcheck]
        if edges:
            lines += [
                "Checked against the float64 reference (and PyTorch where installed) but not by finite "
                "differences, in ``tests/test_opinfo.py``:",
                "",
            ]
            lines += [f"* {_literal(s.name)}" + (f" ({', '.join(sorted(s.edges))})" if s.edges else "") for s in edges]
            lines.append("")
        return lines


def opinfo_tasks():
    """``{task id: (assignment, task)}`` from the homework manifest."""
    from minitorch_attn.homework.markers import load_manifest, tasks_by_id

    return tasks_by_id(load_manifest())


class TableDirective(SphinxDirective):
    """``.. opinfo-table::``: the table of operations, every op linked to its section."""

    def run(self):
        header = [
            "op",
            "record",
            "forward and backward from",
            "gradient for",
            "task",
            "samples (gradcheck / all)",
            "edge cases",
        ]
        lines = [".. list-table::", "   :header-rows: 1", "", "   * - " + header[0]]
        lines += [f"     - {h}" for h in header[1:]]
        for record, row in zip(opinfo.op_db(), table_rows()):
            cells = [f":ref:`{row[0]} <{slug(record.name)}>`", _literal(row[1])] + [c or "" for c in row[2:]]
            cells = [_text(c) if i > 1 else c for i, c in enumerate(cells)]
            lines.append(f"   * - {cells[0]}")
            lines += [f"     - {c}" for c in cells[1:]]
        for module in opinfo.MODULES:
            self.env.note_dependency(module.__file__)
        container = nodes.container()
        self.state.nested_parse(StringList(lines, source="<opinfo-table>"), self.content_offset, container)
        return container.children


class TasksDirective(SphinxDirective):
    """``.. homework-tasks::``: every assignment of the manifest and its tasks, each with a label
    ``task-N-K``, its points, its test command, its gradient checks and its operations."""

    def run(self):
        from minitorch_attn.homework.markers import MANIFEST_PATH, load_manifest, marker_name

        self.env.note_dependency(str(MANIFEST_PATH))
        lines = []
        for assignment in load_manifest()["assignments"]:
            title = f"Assignment {assignment['number']}: {assignment['title']}"
            lines += [title, "-" * len(title), "", assignment.get("description", ""), ""]
            for task in assignment["tasks"]:
                task_id = task["id"]
                heading = f"Task {task_id}: {task['title']} ({task['points']} points)"
                lines += [f".. _task-{task_id.replace('.', '-')}:", "", heading, "~" * len(heading), ""]
                if task.get("description"):
                    lines += [task["description"], ""]
                lines += [f":Its tests: ``pytest -m {marker_name(task_id)}``"]
                checks = opinfo.gradcheck_names_of_task(task_id)
                if checks:
                    lines.append(f":Its gradient checks: {', '.join(_literal(c) for c in checks)}")
                ops = [r for r in opinfo.op_db() if task_id in (r.task, r.forward_task)]
                if ops:
                    lines.append(f":Its operations: {', '.join(f':ref:`{r.name} <{slug(r.name)}>`' for r in ops)}")
                lines.append("")
        container = nodes.container()
        nested_parse_with_titles(self.state, StringList(lines, source="<homework-tasks>"), container)
        return container.children


# ---- completeness: every record on some page ------------------------------------------------------
def _purge(app, env, docname):
    rendered = env.__dict__.get("catalogue_rendered", {})
    for name in [n for n, doc in rendered.items() if doc == docname]:
        del rendered[name]


def _merge(app, env, docnames, other):
    env.__dict__.setdefault("catalogue_rendered", {}).update(other.__dict__.get("catalogue_rendered", {}))


def _check_autodoc_derivation(app, what, name, obj, options, lines):
    """autodoc's ``autodoc-process-docstring``: a :class:`Function` with a backward that an
    API page documents is held to the rule of the ops' sections (:func:`untypeset_derivation`)."""
    if what == "class" and has_backward(obj):
        problem = untypeset_derivation(obj)
        if problem:
            logger.warning(f"autodoc: {problem}", location=app.env.docname)


def _check_every_record_rendered(app, env):
    rendered = env.__dict__.get("catalogue_rendered", {})
    missing = [r.name for r in opinfo.op_db() if r.name not in rendered]
    if missing:
        logger.warning(f"records on no page (add them to an `.. opinfo-ops::` of docs/engine/): {', '.join(missing)}")


# ---- the tour: the demos as notebooks ------------------------------------------------------------
def write_tour_notebooks(app):
    """Write every demo as ``docs/tour/demos/STEM.ipynb`` (only where it changed, so that an
    unchanged demo is not executed again by an incremental build)."""
    import jupytext

    from minitorch_attn.app import demos_cli

    out = Path(app.srcdir) / "tour" / "demos"
    out.mkdir(parents=True, exist_ok=True)
    demos = demos_cli.available_demos(ROOT / "demos")
    for stem, path in demos.items():
        text = jupytext.writes(demos_cli.notebook(path), fmt="ipynb")
        target = out / f"{stem}.ipynb"
        if not target.exists() or target.read_text(encoding="utf-8") != text:
            target.write_text(text, encoding="utf-8")
    for stale in out.glob("*.ipynb"):
        if stale.stem not in demos:
            stale.unlink()


def code_key(root=ROOT, folders=("minitorch_attn", "demos"), libraries=("numpy", "matplotlib")):
    """A digest of the code the demos run: every file of ``folders``, Python files by their
    syntax tree without docstrings (so neither a docstring nor a comment changes it), any
    other file byte for byte; and the versions of Python and of the ``libraries``."""
    digest = hashlib.sha256(f"{sys.version} ".encode())
    for library in libraries:
        digest.update(f"{library} {importlib.metadata.version(library)} ".encode())
    for folder in folders:
        for path in sorted((root / folder).rglob("*")):
            if not path.is_file() or "__pycache__" in path.parts:
                continue
            digest.update(path.relative_to(root).as_posix().encode() + b"\0")
            if path.suffix == ".py":
                tree = ast.parse(path.read_bytes(), filename=str(path))
                for node in ast.walk(tree):
                    if (
                        isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                        and ast.get_docstring(node, clean=False) is not None
                    ):
                        node.body = node.body[1:]
                digest.update(ast.dump(tree).encode())
            else:
                digest.update(path.read_bytes())
            digest.update(b"\0")
    return digest.hexdigest()[:16]


def tour_cache_path(cache_root):
    """The jupyter-cache folder of the tour's executed notebooks: ``cache_root/KEY``, KEY the
    :func:`code_key` of the package and the demos. jupyter-cache reuses a notebook whose code
    cells are unchanged; the key adds what those cells do not show: a change to the
    library's code, to a demo's helpers or to the versions the key names is a new, empty
    cache, so every demo runs again.
    The caches of other keys are removed (a clean build, with no ``docs/_build``, has none)."""
    cache_root = Path(cache_root)
    path = cache_root / code_key()
    if cache_root.is_dir():
        for stale in cache_root.iterdir():
            if stale == path:
                continue
            if stale.is_dir():
                shutil.rmtree(stale)
            else:
                stale.unlink()
    return str(path)


# ---- cross-references written the way a reader of the code writes them -----------------------------
def _candidates(target, module_name, class_name):
    """Objects that ``target`` (``Function``, ``mt.manual_seed``, ``minitorch_attn.nn.Module``,
    ``ops.Cast``, a method of the class being documented, a sibling module) can mean."""
    import importlib

    first, _, rest = target.partition(".")
    try:  # imported here too: an incremental build resolves pages whose modules it did not import
        module = importlib.import_module(module_name) if module_name else None
    except ImportError:
        module = None
    spaces = []
    if module is not None:
        cls = getattr(module, class_name.split(".")[0], None) if class_name else None
        if cls is not None:
            spaces.append({k: getattr(cls, k) for k in dir(cls)})
        spaces.append(vars(module))
    spaces += [
        dict(SPACES, minitorch_attn=minitorch_attn),
        vars(minitorch_attn),
        vars(F),
        vars(importlib.import_module("minitorch_attn.nn")),
        vars(importlib.import_module("minitorch_attn.core.ops")),
    ]
    for space in spaces:
        if first in space:
            obj = space[first]
            for attr in rest.split(".") if rest else []:
                obj = getattr(obj, attr, None)
            if obj is not None:
                yield obj
    package = module_name if module is not None and hasattr(module, "__path__") else module_name.rpartition(".")[0]
    for base in (module_name, package):
        try:
            yield importlib.import_module(f"{base}.{target}")
        except ImportError:
            pass
        if rest:  # a sibling module's member: ``checkpoint.load`` in minitorch_attn.app.sampling
            try:
                obj = importlib.import_module(f"{base}.{first}")
            except ImportError:
                continue
            for attr in rest.split("."):
                obj = getattr(obj, attr, None)
            if obj is not None:
                yield obj
    try:
        yield importlib.import_module(target)
    except ImportError:
        pass


def _canonical(obj):
    if inspect.ismodule(obj):
        return obj.__name__
    obj = obj.fget if isinstance(obj, property) else obj
    module, qualname = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
    return f"{module}.{qualname}" if module and qualname else None


def resolve_by_import(app, env, node, contnode):
    """Resolve a Python cross-reference written as the code's reader writes it (``Function``,
    ``mt.manual_seed``, ``minitorch_attn.nn.GPT``, ``Module.parameters``, a sibling module)
    to the name it is documented under. A name that exists in the package but is not on
    the site (a private helper, a module constant) becomes plain text; a name that does not
    exist at all (a typo, a renamed function) stays a warning, and so fails the build."""
    if node.get("refdomain") != "py":
        return None
    target = node["reftarget"].lstrip("~.")
    domain = env.get_domain("py")
    found = False
    for obj in _candidates(target, node.get("py:module") or "", node.get("py:class") or ""):
        found = True
        name = _canonical(obj)
        if name is None:
            continue
        if name in domain.objects:
            entry = domain.objects[name]
            role = "mod" if entry.objtype == "module" else entry.objtype
            return domain.resolve_xref(env, node["refdoc"], app.builder, role, name, node, contnode)
    if (
        found
        or target.startswith("minitorch_attn.")
        or any(p.startswith("_") and not p.startswith("__") for p in target.split("."))
    ):
        return contnode
    return None


def setup(app):
    app.connect("missing-reference", resolve_by_import)
    app.connect("autodoc-process-docstring", _check_autodoc_derivation)
    app.add_directive("opinfo-ops", OpsDirective)
    app.add_directive("opinfo-table", TableDirective)
    app.add_directive("homework-tasks", TasksDirective)
    app.connect("builder-inited", write_tour_notebooks)
    app.connect("env-purge-doc", _purge)
    app.connect("env-merge-info", _merge)
    app.connect("env-check-consistency", _check_every_record_rendered)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
