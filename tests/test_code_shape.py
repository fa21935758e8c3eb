"""Code shape (the design card): a module is at most 300 lines of code and a function at most 60, so that each does
one thing its name says. Docstrings, comments and blank lines are not code: they are not counted, so a module is never
split, nor its documentation cut, for the cap's sake. The few exceptions are listed with the reason they are longer."""

from __future__ import annotations

import ast
import io
import tokenize
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("bench", "mechanisms", "attacks", "reports")
MAX_MODULE, MAX_FUNCTION = 300, 60
LONGER: dict[str, str] = {}  # "path" or "path::function" -> why it is longer
_NOT_CODE = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENCODING,
             tokenize.ENDMARKER}


def code_lines(source: str) -> set[int]:
    """The numbers of the lines of ``source`` that hold code: not blank, not only a comment, not in a docstring (any
    statement that is a bare string: module, class, function and attribute docstrings)."""
    lines: set[int] = set()
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type not in _NOT_CODE:
            lines.update(range(tok.start[0], tok.end[0] + 1))
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            lines.difference_update(range(node.lineno, node.end_lineno + 1))
    return lines


def long_modules_and_functions(source: str, name: str) -> dict[str, int]:
    """``{name: code lines}`` for a module over ``MAX_MODULE`` and ``{name::function: code lines}`` for each function
    over ``MAX_FUNCTION``."""
    code = code_lines(source)
    long = {name: len(code)} if len(code) > MAX_MODULE else {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            n = len(code.intersection(range(node.lineno, node.end_lineno + 1)))
            if n > MAX_FUNCTION:
                long[f"{name}::{node.name}"] = n
    return long


def _modules() -> list[Path]:
    return sorted(p for pkg in PACKAGES for p in (REPO / pkg).rglob("*.py"))


def test_modules_and_functions_are_short():
    long = {}
    for p in _modules():
        long.update(long_modules_and_functions(p.read_text(encoding="utf-8"), str(p.relative_to(REPO))))
    assert {k: v for k, v in long.items() if k not in LONGER} == {}


def test_the_cap_counts_code_not_docstrings_or_comments():
    """The counter itself, on synthetic modules: prose does not count, code does, wherever it sits."""
    doc = '"""A module docstring,\n\nover several lines.\n"""\n'
    function = ('def f(x):\n    """What f does.\n\n    Args:\n        x: a number.\n    """\n'
                + "".join(f"    x = x + {i}  # a comment\n    # a comment line\n\n" for i in range(59))
                + "    return x\n")
    assert long_modules_and_functions(doc + function, "m.py") == {"m.py::f": MAX_FUNCTION + 1}
    assert long_modules_and_functions(function.replace("    x = x + 0  # a comment\n", ""), "m.py") == {}

    statements = "".join(f"v{i} = {i}\n" for i in range(MAX_MODULE))  # exactly at the cap
    prose = "".join(f"# comment {i}\n\n" for i in range(200))
    attribute_docs = "class C:\n    a: int\n    \"\"\"The attribute's docstring.\"\"\"\n"
    at_cap = doc + prose + statements + prose
    assert len(code_lines(at_cap)) == MAX_MODULE
    assert long_modules_and_functions(at_cap, "m.py") == {}
    assert long_modules_and_functions(at_cap + "extra = 1\n", "m.py") == {"m.py": MAX_MODULE + 1}
    assert long_modules_and_functions(at_cap + "x = (\n    1,\n)\n", "m.py") == {"m.py": MAX_MODULE + 3}
    assert len(code_lines(attribute_docs)) == 2


def test_reports_import_at_module_level():
    """``reports/`` imports no heavy library late (there is none to defer: it never imports torch), so an import
    inside a function there would only hide a cycle."""
    late = [f"{p.name}::{node.name}" for p in sorted((REPO / "reports").rglob("*.py"))
            for node in ast.walk(ast.parse(p.read_text(encoding="utf-8")))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and any(isinstance(n, (ast.Import, ast.ImportFrom)) for n in ast.walk(node))]
    assert late == []


def test_list_and_the_configuration_never_import_torch():
    """``bench list`` and loading the run configuration stay light (the registries name plug-ins without importing
    them); ``bench report`` is checked the same way in tests/bench/runner/test_end_to_end.py."""
    import subprocess
    import sys

    code = ("import contextlib, io, sys; import bench.config.run; from bench.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()): rc = main(['list'])\n"
            "heavy = [m for m in sys.modules if m.split('.')[0] in ('torch', 'torchvision', 'opacus')]\n"
            "assert rc == 0 and not heavy, heavy[:5]")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
