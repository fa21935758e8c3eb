"""Sphinx configuration of privbench's manual.

Build it from the repository root: ``sphinx-build -W --keep-going -b html docs OUT`` (the ``docs`` extra:
``pip install -e ".[docs]"``). Pages are Markdown (MyST); the API reference is generated from the docstrings by
autosummary (``reference/api.md``) into ``docs/reference/_generated/`` (git-ignored).
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from sphinx.ext.napoleon import _process_docstring as _napoleon_process_docstring

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
GENERATED = HERE / "reference" / "_generated"  # autosummary's stubs; `:toctree: _generated` in reference/api.md
sys.path.insert(0, str(ROOT))  # the checkout's packages, also without `pip install -e .`

project = "privbench"
author = "the privbench authors"
copyright = "privbench authors, Apache-2.0"

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.napoleon",
]

# .rst first: autosummary writes its generated stubs with the first suffix that reStructuredText parses.
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "gpu", "_templates"]
templates_path = ["_templates"]

# MyST: every heading gets a GitHub-style anchor, so `[text](page.md#a-heading)` resolves, and a link to a heading
# that does not exist is a warning (an error under -W).
myst_heading_anchors = 4
myst_enable_extensions = ["colon_fence", "deflist"]
nitpicky = False  # a missing target of a type annotation is not an error; a broken link in a page is

highlight_language = "none"  # a fence without a language (commands, the layout tree) is shown as written
html_theme = "furo"
html_title = "privbench"

# The API reference: one page per module, recursively, never a `__main__` module (importing
# bench.results.__main__ rewrites docs/results-schema.md; bench.__main__ is the command line). A mocked module is
# skipped by autosummary's recursion, and the module template leaves `__main__` out as well.
autosummary_generate = True
autosummary_imported_members = False
autosummary_mock_imports = ["bench.__main__", "bench.results.__main__"]
autodoc_default_options = {"members": True, "show-inheritance": True, "ignore-module-all": True}
autodoc_member_order = "bysource"
autodoc_typehints = "signature"

# Google-style docstrings (Args / Returns / Raises); "Attributes:" as :ivar: fields, not a second description of
# the attribute autodoc already documents.
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_ivar = True
napoleon_attr_annotations = True
napoleon_custom_sections = [("Class attributes", "Attributes")]  # attacks.base.attack.Attack, mechanisms.base.Mechanism


def _napoleon_except_attributes(app, what, name, obj, options, lines):
    """Napoleon for every docstring but an attribute's or a property's.

    Napoleon reads the first line of an attribute docstring as ``type: description``; ours are prose whose first
    line often holds a colon ("Number of (model, audit, analysis) comparisons in the run: the analyses ..."), and
    the type is the annotation autodoc already shows. So those keep their text as written.
    """
    if what in ("attribute", "property", "data"):
        return
    _napoleon_process_docstring(app, what, name, obj, options, lines)


def _clear_generated(app):
    """Start the API reference from nothing: a module moved or removed leaves no stale page behind."""
    shutil.rmtree(GENERATED, ignore_errors=True)


def setup(app):
    """Sphinx hook: clear the generated pages first, and render Attributes sections our way."""
    app.connect("builder-inited", _clear_generated, priority=100)  # before autosummary writes the stubs (500)
    for listener in list(app.events.listeners.get("autodoc-process-docstring", [])):
        if listener.handler is _napoleon_process_docstring:
            app.disconnect(listener.id)
    app.connect("autodoc-process-docstring", _napoleon_except_attributes)
