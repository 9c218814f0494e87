"""The package's layout: imports point down, modules stay readable in one sitting.

The import graph is read from the source (module-level ``import`` statements, parsed with
``ast``), so adding a cycle, a function-local import of the package or a very long module
makes these tests fail before anything runs.
"""

import ast
import pathlib

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "minitorch_attn"
CORE_CYCLE = {
    "minitorch_attn.core.autograd",
    "minitorch_attn.core.tensor",
    "minitorch_attn.core.ops",
    "minitorch_attn.core.minmax",
    "minitorch_attn.core.shape_ops",
    "minitorch_attn.core.reductions",
    "minitorch_attn.core.power",
    "minitorch_attn.core.indexing",
}  # Tensor <-> engine <-> operations, said so in core/
MAX_LINES = 520


def module_name(path):
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules():
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _resolve(importer, node, known):
    """The package modules a ``from ... import`` or ``import`` statement loads."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names if a.name in known]
    if node.level:
        base = importer.split(".")
        is_package = known[importer].name == "__init__.py"
        base = base[: len(base) - node.level + (1 if is_package else 0)]
        source = ".".join(base + ([node.module] if node.module else []))
    else:
        source = node.module or ""
    targets = []
    for alias in node.names:
        child = f"{source}.{alias.name}"
        if child in known:
            targets.append(child)  # from pkg import submodule
        elif source in known:
            targets.append(source)  # from module import name
    return targets


def import_graph(known):
    """``{module: {modules it imports at module level}}`` within the package."""
    graph = {}
    for name, path in known.items():
        tree = ast.parse(path.read_text())
        edges = set()
        for node in tree.body:  # module level only (also inside module-level if/try)
            for sub in ast.walk(node) if not isinstance(node, (ast.FunctionDef, ast.ClassDef)) else ():
                if isinstance(sub, (ast.Import, ast.ImportFrom)):
                    edges.update(_resolve(name, sub, known))
        edges.discard(name)
        graph[name] = edges
    return graph


def cycles(graph):
    """The strongly connected components with more than one module (Tarjan's algorithm)."""
    index, low, on_stack, stack, found, counter = {}, {}, set(), [], [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(component)

    for v in graph:
        if v not in index:
            visit(v)
    return found


def test_no_import_cycle_leaves_core():
    for component in cycles(import_graph(modules())):
        assert component <= CORE_CYCLE, f"import cycle outside core/: {sorted(component)}"


def test_the_cycle_check_finds_a_planted_cycle():
    graph = import_graph(modules())
    graph["minitorch_attn.functional.softmax"].add("minitorch_attn.nn.layers")  # nn -> F -> nn
    assert any("minitorch_attn.nn.layers" in c for c in cycles(graph))


def test_no_function_imports_the_package():
    """Imports of the package sit at the top of each module, where a reader sees them."""
    found = []
    for path in modules().values():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for sub in ast.walk(node):
                    if isinstance(sub, ast.ImportFrom) and (
                        sub.level or (sub.module or "").startswith("minitorch_attn")
                    ):
                        found.append(f"{path.name}:{sub.lineno}")
                    if isinstance(sub, ast.Import) and any(a.name.startswith("minitorch_attn") for a in sub.names):
                        found.append(f"{path.name}:{sub.lineno}")
    assert not found, f"function-local imports of the package: {found}"


@pytest.mark.parametrize("name", sorted(modules()))
def test_every_module_reads_in_one_sitting(name):
    lines = modules()[name].read_text().count("\n")
    assert lines <= MAX_LINES, f"{name} has {lines} lines; split it by topic"


def test_no_sys_path_edits_in_the_package_demos_or_gradcheck():
    root = PACKAGE.parent
    for folder in ("minitorch_attn", "demos", "gradcheck", "benchmarks"):
        for path in (root / folder).rglob("*.py"):
            assert "sys.path" not in path.read_text(), f"{path.relative_to(root)} edits sys.path"


# ---- the speed layer: below the course, reached only through its public names ------------------------
SPEED = "minitorch_attn.speed"


def speed_public_names():
    """``minitorch_attn.speed.__all__``, read from the source."""
    tree = ast.parse((PACKAGE / "speed" / "__init__.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__all__" for t in node.targets):
            return set(ast.literal_eval(node.value))
    raise AssertionError("minitorch_attn/speed/__init__.py has no __all__")


def _in_speed(module):
    return module == SPEED or module.startswith(SPEED + ".")


def speed_layer_breaches(known, sources):
    """``[(module, what)]``: every way a module outside ``speed/`` reaches the speed layer
    other than a public name of ``minitorch_attn.speed``, and every import of the package
    from inside ``speed/`` that leaves it. ``sources`` maps module names to their text."""
    public, found = speed_public_names(), []
    for name, text in sources.items():
        bound = set()  # local names bound to the speed package itself
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ImportFrom):
                source = _source_of(name, node, known)
                for alias in node.names:
                    target = f"{source}.{alias.name}" if f"{source}.{alias.name}" in known else source
                    if _in_speed(name):
                        if target in known and not _in_speed(target):
                            found.append((name, f"imports {target}"))
                    elif target == SPEED and source == SPEED and alias.name not in public:
                        found.append((name, f"imports {alias.name} from {SPEED}, not one of its public names"))
                    elif _in_speed(target) and target != SPEED:
                        found.append((name, f"imports {target}, a module inside the speed layer"))
                    elif target == SPEED and source != SPEED:
                        bound.add(alias.asname or alias.name)
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if _in_speed(name) and alias.name in known and not _in_speed(alias.name):
                        found.append((name, f"imports {alias.name}"))
                    elif not _in_speed(name) and _in_speed(alias.name) and alias.name != SPEED:
                        found.append((name, f"imports {alias.name}, a module inside the speed layer"))
        for node in ast.walk(ast.parse(text)):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in bound
                and node.attr not in public
            ):
                found.append((name, f"uses {node.value.id}.{node.attr}, not one of {SPEED}'s public names"))
    return found


def _source_of(importer, node, known):
    """The module a ``from ... import`` statement of ``importer`` imports from."""
    if not node.level:
        return node.module or ""
    base = importer.split(".")
    is_package = known[importer].name == "__init__.py"
    base = base[: len(base) - node.level + (1 if is_package else 0)]
    return ".".join(base + ([node.module] if node.module else []))


def test_the_course_reaches_the_speed_layer_only_through_its_public_names():
    """Nothing in ``speed/`` imports the rest of the package (it is below the course, and
    changes no formula), and everything else uses ``minitorch_attn.speed``'s ``__all__``."""
    known = modules()
    breaches = speed_layer_breaches(known, {name: path.read_text() for name, path in known.items()})
    assert not breaches, f"the speed layer is reached around its public names: {breaches}"


@pytest.mark.parametrize(
    "planted, module",
    [
        ("from ..speed.pool import run_on_threads\n", "minitorch_attn.functional.flash"),
        ("from ..speed import _run_each\n", "minitorch_attn.functional.flash"),
        ("from .. import speed\nspeed.pool\n", "minitorch_attn.functional.flash"),
        ("import minitorch_attn.speed.rows\n", "minitorch_attn.optim"),
        ("from ..core.tensor import Tensor\n", "minitorch_attn.speed.rows"),
    ],
)
def test_the_speed_layer_check_finds_a_planted_breach(planted, module):
    known = modules()
    sources = {name: path.read_text() for name, path in known.items()}
    sources[module] += "\n" + planted
    assert [b for b in speed_layer_breaches(known, sources) if b[0] == module]


# ---- the map: every module has a row ----------------------------------------------------------------
def test_every_module_is_on_the_map():
    """``docs/map.md`` names every module of the package (its path, or its name in the row
    of its folder), so that a reader finds each one."""
    text = (PACKAGE.parent / "docs" / "map.md").read_text()
    missing = [
        str(path.relative_to(PACKAGE.parent))
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.name != "__init__.py" and not _on_the_map(path, text)
    ]
    assert not missing, f"modules with no row in docs/map.md: {missing}"


def _on_the_map(path, text):
    relative = path.relative_to(PACKAGE.parent)
    folder = relative.parent.as_posix()
    return (
        f"`{relative.as_posix()}`" in text
        or f"`{relative.relative_to('minitorch_attn').as_posix()}`" in text
        or any(f"`{path.name}`" in row and f"`{folder}/" in row for row in text.splitlines())
    )


# ---- the engine on one page -------------------------------------------------------------------------
ENGINE = PACKAGE / "core" / "autograd.py"
ENGINE_LINES = 400


def test_the_engine_fits_on_one_page():
    """The module of ``run_backward`` is the engine and nothing else: at most 400 lines, and
    the version counting of in-place writes lives with them (``core/inplace.py``); the engine
    only calls ``record_versions`` and ``check_versions``."""
    text = ENGINE.read_text()
    assert text.count("\n") <= ENGINE_LINES, f"core/autograd.py has {text.count(chr(10))} lines; the engine fits in 400"
    defined = {node.name for node in ast.parse(text).body if isinstance(node, (ast.FunctionDef, ast.ClassDef))}
    assert "run_backward" in defined
    assert not defined & {"record_versions", "check_versions"}, "version counting belongs in core/inplace.py"
    inplace = {
        node.name
        for node in ast.parse((PACKAGE / "core" / "inplace.py").read_text()).body
        if isinstance(node, ast.FunctionDef)
    }
    assert {"record_versions", "check_versions"} <= inplace


# ---- the parts of the package: course, speed layer, support, application, homework ---------------------
APP = "minitorch_attn.app"
LAYERS = {
    "course": (
        "minitorch_attn.core",
        "minitorch_attn.functional",
        "minitorch_attn.nn",
        "minitorch_attn.optim",
        "minitorch_attn.graph",
        "minitorch_attn.gradcheck",
        "minitorch_attn.opinfo",
        "minitorch_attn.tensor_methods",
    ),
    "speed layer": (SPEED,),
    "support": ("minitorch_attn.argtypes", "minitorch_attn.atomic", "minitorch_attn.stopping"),
    "application": (APP,),
    "homework": ("minitorch_attn.homework",),
}


def _within(module, package):
    return module == package or module.startswith(package + ".")


def layer_of(module):
    """The part of the package ``module`` belongs to (see ``docs/map.md``), or None."""
    if module == "minitorch_attn":
        return "package"
    return next((layer for layer, packages in LAYERS.items() if any(_within(module, p) for p in packages)), None)


def test_every_module_belongs_to_one_part_of_the_package():
    """A new module goes into the course, the speed layer, support, ``app/`` or ``homework/``,
    and the map and this table say which: the layout shows the architecture."""
    unplaced = [name for name in modules() if layer_of(name) is None]
    assert not unplaced, (
        f"modules in no part of the package (put them in a package of tests/test_layout.py's "
        f"LAYERS, application code in minitorch_attn/app/): {unplaced}"
    )


def application_breaches(known, sources):
    """``[(module, what)]``: every import of the application (``minitorch_attn.app``, at module
    level or inside a function) by a module outside it."""
    found = []
    for name, text in sources.items():
        if _within(name, APP):
            continue
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ImportFrom):
                source = _source_of(name, node, known)
                targets = [source] + [f"{source}.{alias.name}" for alias in node.names]
                if any(_within(target, APP) for target in targets):
                    found.append((name, f"imports from {source}: {', '.join(a.name for a in node.names)}"))
            elif isinstance(node, ast.Import):
                found += [(name, f"imports {alias.name}") for alias in node.names if _within(alias.name, APP)]
    return found


def test_nothing_outside_the_application_imports_it():
    """The course (and the speed layer, support and the homework) never imports ``app/``:
    the application is built on the course, never the other way round."""
    known = modules()
    breaches = application_breaches(known, {name: path.read_text() for name, path in known.items()})
    assert not breaches, f"the application is imported from below it: {breaches}"


@pytest.mark.parametrize(
    "planted, module",
    [
        ("from ..app import checkpoint\n", "minitorch_attn.nn.layers"),
        ("from ..app.train import train\n", "minitorch_attn.gradcheck.command"),
        ("import minitorch_attn.app.data\n", "minitorch_attn.optim"),
        ("def f():\n    from .app import cli\n", "minitorch_attn.graph"),
    ],
)
def test_the_application_check_finds_a_planted_import(planted, module):
    known = modules()
    sources = {name: path.read_text() for name, path in known.items()}
    sources[module] += "\n" + planted
    assert [b for b in application_breaches(known, sources) if b[0] == module]
