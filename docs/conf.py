"""Sphinx configuration of the documentation site.

Build it from the project root (the README's command):

    pip install -e ".[docs]" && sphinx-build -W --keep-going -n -b html docs docs/_build/html

``-W --keep-going`` turns every warning (a broken link or reference, a missing picture, a
docstring that is not valid reStructuredText, a demo that raises) into a failed build, after
reporting all of them; ``-n`` (nitpicky) also fails on a cross-reference to an object that
is not documented. The per-operation sections, the table of operations and the tour's
notebooks are generated from the code at build time by ``docs/_ext/catalogue.py``.
"""

import os
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
sys.path.insert(0, str(DOCS / "_ext"))
sys.path.insert(0, str(DOCS.parent))

from catalogue import tour_cache_path  # noqa: E402

import minitorch_attn  # noqa: E402
from minitorch_attn.homework import derive  # noqa: E402

project = "minitorch-attn"
author = "the minitorch-attn developers"
copyright = "the minitorch-attn developers, MIT licence"
release = version = minitorch_attn.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.mathjax",
    "sphinx-mathjax-offline",  # MathJax 3 copied into _static: no CDN at build or view time
    "myst_nb",
    "catalogue",
    "glance",
]

# ---- sources ------------------------------------------------------------------------------------
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store", "**.ipynb_checkpoints", "_ext"]
myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence", "deflist"]
myst_heading_anchors = 3
suppress_warnings = []

# ---- math: MathJax's SVG output needs no web fonts, so it typesets from file:// too ------------
mathjax_path = "mathjax/tex-svg.js"
mathjax3_config = {"svg": {"fontCache": "global"}}

# ---- the tour: every demo executed at build time in quick mode ---------------------------------
os.environ["MINITORCH_ATTN_DEMO_FLAGS"] = "--quick"  # demo_common.demo_argv reads it in the kernel
# Executed notebooks are kept in jupyter-cache, so a second build reuses them; the folder's
# name is a digest of the library's and the demos' code (and of the Python, NumPy and
# matplotlib versions), so that a change there runs every demo again
# (catalogue.tour_cache_path). A clean build (no docs/_build), as CI's, runs them all.
nb_execution_mode = "cache"
nb_execution_cache_path = tour_cache_path(DOCS / "_build" / ".jupyter_cache")
nb_execution_in_temp = True  # each demo's runs/ folder goes to a temporary folder
nb_execution_timeout = 300
nb_execution_raise_on_error = True  # a demo that raises fails the build
nb_execution_show_tb = True
nb_merge_streams = True

# ---- API reference from the docstrings ---------------------------------------------------------
autodoc_default_options = {"members": True, "member-order": "bysource"}
autodoc_typehints = "none"  # the docstrings give shapes and dtypes in words
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_ivar = True
nitpicky = True
nitpick_ignore_regex = [
    # the standard types of the type hints (the site works offline: no intersphinx)
    ("py:class", r"(collections\.abc|typing)\..*"),
    ("py:.*", r"(numpy|cupy|array_api_strict|torch)\..*"),
    # private helpers are named in docstrings for the reader of the code, not documented here
    ("py:.*", r"(.*\.)?_[^_.][^.]*(\..*)?"),
    # a Raises: entry that names two errors or says when ("TypeError / ValueError: ...")
    ("py:exc", r".*[^\w.].*|\d+|(?!.*(Error|Exception|Warning|Exit|Interrupt)$).*"),
    # a Returns: line read as a type ("The position of the next token")
    ("py:class", r".* .*"),
]

# ---- HTML -----------------------------------------------------------------------------------------
html_theme = "furo"
html_title = f"minitorch-attn {release}"
html_static_path = ["_static"]
html_css_files = ["site.css"]
html_show_sourcelink = False
html_copy_source = False
html_last_updated_fmt = None
# Search results without a text summary: the summary is fetched from each page, which a
# browser refuses for pages opened from the file system (the results themselves work there).
html_show_search_summary = False


def _without_derivation_markers(app, what, name, obj, options, lines):
    """The site is the solution manual: it shows every derivation, without the marker and
    hint lines of the derive mode (minitorch_attn/homework/derive.py), which need no blank
    line around them in a docstring."""
    if any(".. derivation" in line or ".. hint" in line for line in lines):
        lines[:] = derive.show("\n".join(lines)).split("\n")


def setup(app):
    app.connect("autodoc-process-docstring", _without_derivation_markers)
    # sphinx-mathjax-offline sets its own mathjax_path (CHTML output, which loads web fonts);
    # after every extension's setup, ours applies: SVG output, no font to fetch
    app.connect("config-inited", lambda app, config: setattr(config, "mathjax_path", mathjax_path))
