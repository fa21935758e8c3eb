"""Code shape (the design card): a module is at most 300 lines and a function at most 60, so that each does one
thing its name says. The few exceptions are listed with the reason they are longer."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("bench", "mechanisms", "attacks", "reports")
MAX_MODULE, MAX_FUNCTION = 300, 60
LONGER: dict[str, str] = {}  # "path" or "path::function" -> why it is longer


def _modules() -> list[Path]:
    return sorted(p for pkg in PACKAGES for p in (REPO / pkg).rglob("*.py"))


def test_modules_are_short():
    long = {str(p.relative_to(REPO)): n for p in _modules()
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_MODULE}
    assert {k: v for k, v in long.items() if k not in LONGER} == {}


def test_functions_are_short():
    long = {}
    for p in _modules():
        rel = str(p.relative_to(REPO))
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > MAX_FUNCTION and f"{rel}::{node.name}" not in LONGER:
                    long[f"{rel}::{node.name}"] = n
    assert long == {}


def test_reports_import_at_module_level():
    """``reports/`` imports no heavy library late (there is none to defer: it never imports torch), so an import
    inside a function there would only hide a cycle."""
    late = [f"{p.name}::{node.name}" for p in sorted((REPO / "reports").glob("*.py"))
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
