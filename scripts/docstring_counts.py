"""Docstring counts for issue 57's targets: how much of the code is prose, and whether Args sections render.

Usage: ``python -m scripts.docstring_counts [root]`` (default: the repository). Prints, for the packages and then for
all ``.py`` files outside ``tests/``: the lines in all; public functions and methods whose docstring is longer than
their body (and the share of all public ones); Args (and classes' Attributes) entries that pack several names (``a, b:
...`` or a second ``x:`` inside one entry); Args sections that leave a parameter out; module docstrings' lines (the
longest, how many exceed 12, and the total).
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

MODULE_DOC_MAX = 12
_SECTION = re.compile(r"^\s*(Args|Arguments|Parameters|Returns|Yields|Raises|Attributes|Example|Examples|Note|Notes"
                      r"|References|See Also|Warns|Warning|Todo):\s*$")


PACKAGES = ("bench", "mechanisms", "attacks", "reports")


def _files(root: Path, packages_only: bool) -> list[Path]:
    skip = {"tests", ".git", ".venv", "build", "_build", "node_modules"}
    return sorted(p for p in root.rglob("*.py") if not skip & set(p.relative_to(root).parts)
                  and (not packages_only or p.relative_to(root).parts[0] in PACKAGES))


def _doc_lines(node: ast.AST) -> int:
    body = getattr(node, "body", [])
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        return body[0].end_lineno - body[0].lineno + 1
    return 0


def _args_entries(doc: str, titles: tuple[str, ...] = ("Args:", "Arguments:")) -> list[str] | None:
    """The lines of the docstring's sections titled ``titles`` (one after another), or None when it has none.

    Args:
        doc: the docstring, cleaned (``ast.get_docstring``).
        titles: the section titles to read.
    """
    lines = doc.expandtabs().splitlines()
    out: list[str] | None = None
    for i, line in enumerate(lines):
        if line.strip() in titles:
            out = out or []
            indent = len(line) - len(line.lstrip())
            for nxt in lines[i + 1:]:
                if nxt.strip() and (len(nxt) - len(nxt.lstrip()) <= indent or _SECTION.match(nxt)):
                    break
                out.append(nxt)
    return out


def _params(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    a = fn.args
    names = [x.arg for x in a.posonlyargs + a.args + a.kwonlyargs]
    names += [x.arg for x in (a.vararg, a.kwarg) if x is not None]
    return [n for n in names if n not in ("self", "cls")]


def _check_args(node: ast.AST) -> tuple[int, bool]:
    """(packed entries, whether an Args section leaves a parameter out) of a function's or a class's docstring.

    A class's Args and Attributes sections are read for packed entries (its fields and ``__init__``'s parameters are
    its names); only a function's Args section is checked for completeness.

    Args:
        node: a function or class definition.
    """
    doc = ast.get_docstring(node, clean=True)
    is_class = isinstance(node, ast.ClassDef)
    entries = (_args_entries(doc, ("Args:", "Arguments:", "Attributes:") if is_class else ("Args:", "Arguments:"))
               if doc else None)
    if entries is None:
        return 0, False
    if is_class:
        init = [n for n in node.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"]
        fields = [n.target.id for n in node.body if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)]
        fields += [t.id for n in node.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)]
        params = set(fields + (_params(init[0]) if init else []))
    else:
        params = set(_params(node))
    base = min((len(e) - len(e.lstrip()) for e in entries if e.strip()), default=0)
    items: list[str] = []  # one entry each: its first line and its continuation lines
    for e in entries:
        if e.strip() and len(e) - len(e.lstrip()) == base:
            items.append(e)
        elif e.strip() and items:
            items[-1] += " " + e.strip()
    documented, packed = set(), 0
    for item in items:
        m = re.match(r"\s*(\**\w+(?:\s*(?:,|/|\band\b)\s*\**\w+)*)\s*(?:\([^)]*\))?\s*:", item)
        if not m:
            continue
        names = [n.strip().lstrip("*") for n in re.split(r",|/|\band\b", m.group(1))]
        later = [n for n in re.findall(r"(?:^|[.;)]\s)\**(\w+):\s", item[m.end():]) if n in params]
        documented.update(names + later)
        packed += len(names) > 1 or bool(later)
    return packed, not is_class and bool(params - documented)


def counts(root: Path, packages_only: bool = False) -> dict[str, float]:
    """Counts over the files under ``root`` outside tests (see the module docstring).

    Args:
        root: the repository's root.
        packages_only: count only the packages (bench, mechanisms, attacks, reports), not scripts/ or examples/.
    """
    lines = public = longer = longer_text = packed = incomplete = 0
    module_docs: list[int] = []
    for path in _files(root, packages_only):
        text = path.read_text(encoding="utf-8")
        lines += len(text.splitlines())
        tree = ast.parse(text)
        module_docs.append(_doc_lines(tree))
        for node in ast.walk(tree):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            p, inc = _check_args(node)
            packed += p
            incomplete += inc
            if isinstance(node, ast.ClassDef):
                continue
            if node.name.startswith("_"):
                continue
            public += 1
            doc = _doc_lines(node)
            rest = node.body[1:] if doc else node.body
            body = node.end_lineno - rest[0].lineno + 1 if rest else 0
            longer += doc > body
            text = ast.get_docstring(node, clean=True) or ""
            longer_text += sum(1 for line in text.splitlines() if line.strip()) > body
    return {"lines outside tests": lines, "public functions": public,
            "docstring longer than body": longer,
            "docstring longer than body %": round(100 * longer / max(public, 1), 1),
            "docstring text (blank and closing-quote lines left out) longer than body %":
                round(100 * longer_text / max(public, 1), 1),
            "packed Args lines": packed, "Args sections leaving a parameter out": incomplete,
            "module docstring lines, max": max(module_docs, default=0),
            f"module docstrings over {MODULE_DOC_MAX} lines": sum(n > MODULE_DOC_MAX for n in module_docs),
            "module docstring lines, total": sum(module_docs)}


def main(argv: list[str]) -> int:
    """Print the counts, one per line."""
    root = Path(argv[0]) if argv else Path(__file__).resolve().parents[1]
    for title, only in (("packages (bench, mechanisms, attacks, reports)", True), ("all outside tests", False)):
        print(f"{title}:")
        for key, value in counts(root, only).items():
            print(f"  {key}: {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
