"""Every module of the package imports with none of the optional packages installed.

The documentation site's API reference imports every module (Sphinx autodoc) in a venv
that holds only the ``docs`` extra, and a user who installed only the package imports
what they need: an optional package (pytest, matplotlib, torch, ...) is imported where it
is used, inside the function that needs it, never at a module's top.
"""

import json
import pathlib
import subprocess
import sys
import textwrap

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "minitorch_attn"
OPTIONAL = [
    "pytest",
    "_pytest",
    "pluggy",
    "matplotlib",
    "torch",
    "graphviz",
    "safetensors",
    "cupy",
    "cupyx",
    "array_api_strict",
    "hypothesis",
    "jupytext",
    "nbclient",
    "ipykernel",
    "transformers",
    "tokenizers",
    "playwright",
    "expecttest",
    "xdist",
]
PYTORCH_CODE = {"minitorch_attn.app.torch_gpt"}  # PyTorch code itself: without torch it says what to install


def package_modules():
    names = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__main__":  # runs a command when imported
            continue
        if parts[-1] == "__init__":
            parts.pop()
        names.append(".".join(parts))
    return names


def _import_all_without_optional_packages(names):
    """Import ``names`` in a fresh interpreter where every optional package is unimportable
    (``sys.modules[name] = None`` makes ``import name`` raise ImportError); return the
    ``{module: error}`` of those that failed."""
    script = textwrap.dedent(f"""
        import importlib, json, sys
        for name in {OPTIONAL!r}:
            sys.modules[name] = None
        failed = {{}}
        for name in {names!r}:
            try:
                importlib.import_module(name)
            except Exception as error:
                failed[name] = f"{{type(error).__name__}}: {{error}}"
        print(json.dumps(failed))
    """)
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_every_module_imports_without_the_optional_packages():
    failed = _import_all_without_optional_packages(package_modules())
    assert set(failed) == PYTORCH_CODE, failed
    assert "pip install torch" in failed["minitorch_attn.app.torch_gpt"]


def test_the_shim_makes_the_optional_packages_unimportable_and_the_package_importable():
    failed = _import_all_without_optional_packages(["pytest", "matplotlib.pyplot", "minitorch_attn"])
    assert set(failed) == {"pytest", "matplotlib.pyplot"}, failed
