"""What code and which libraries shape a trained model.

The part of a cache key that makes a cached model stale when the code that trained it changes.

A mechanism's fingerprint covers the import closure of its module inside this checkout (and of any plug-in's own
files): each module's syntax tree, docstrings dropped, so that an edit to a comment or a docstring keeps the cache
while an edit to a constant, a line of training code or a helper it imports invalidates exactly the models of the
mechanisms that import it. Third-party packages reached by that closure (torch, Opacus, dp_accounting, NumPy, SciPy,
...) enter by their installed version; the standard library by Python's major.minor version. No torch import.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import importlib.machinery
import sys
import sysconfig
from importlib import metadata
from pathlib import Path

# Training code every model goes through besides its mechanism's own imports: the vectorised ensemble path trains
# non-private shadow / reference models of any mechanism.
SHARED_TRAINING = ("bench.execution.ensemble",)
_LIBRARY_DIRS = tuple({Path(p).resolve() for p in (sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"],
                                                 sysconfig.get_paths()["stdlib"])})


def _find_spec(top: str) -> importlib.machinery.ModuleSpec | None:
    """Where the import system would find top-level module ``top`` now.

    From ``sys.path`` and the installed finders (an editable install's included), ignoring ``sys.modules``: a module
    imported earlier from a folder no longer on the path (a test's, a plug-in's) does not enter, so the fingerprint
    depends on the code and the path alone.
    """
    for finder in sys.meta_path:
        find = getattr(finder, "find_spec", None)
        if find is None:
            continue
        try:
            spec = find(top, None)
        except (ImportError, ValueError):
            continue
        if spec is not None:
            return spec
    return None


@functools.cache
def _top_origin_on(top: str, path: tuple[str, ...]) -> Path | None:
    spec = _find_spec(top)
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        return None
    return Path(spec.origin).resolve()


def _top_origin(top: str) -> Path | None:
    """The file (module) or ``__init__.py`` (package) of top-level module ``top``, found without importing it.

    On the current ``sys.path`` (cached per path).
    """
    return _top_origin_on(top, tuple(sys.path))


def _origin(name: str) -> Path | None:
    """The source file of module ``name``, located from its top-level package's folder.

    (None: builtin, namespace, or not a module, e.g. a class in ``from X import Class``.) Nothing is imported.
    """
    top, *rest = name.split(".")
    root = _top_origin(top)
    if root is None or not rest:
        return root
    if root.name != "__init__.py":
        return None
    base = root.parent.joinpath(*rest)
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def _is_local(path: Path) -> bool:
    """A file of this checkout or of a plug-in (not installed under site-packages, not the standard library)."""
    return not any(path.is_relative_to(d) for d in _LIBRARY_DIRS) and \
        not {"site-packages", "dist-packages"} & set(path.parts)  # Debian's system packages: dist-packages


def _imports(tree: ast.Module, name: str, is_package: bool) -> set[str]:
    """Absolute names of every module ``tree`` imports anywhere (top level or inside functions).

    Candidate submodules of ``from X import Y`` included (``X.Y``; kept only if it is a module).
    """
    out: set[str] = set()
    package = name if is_package else name.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parent = ".".join(parts[: len(parts) - node.level + 1])
                base = f"{parent}.{base}" if base else parent
            out.add(base)
            out.update(f"{base}.{a.name}" for a in node.names if a.name != "*")
    return {m for m in out if m}


def _strip_docstrings(tree: ast.Module) -> ast.Module:
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and body
                and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)):
            node.body = body[1:] or [ast.Pass()]
    return tree


@functools.cache
def _distributions() -> dict[str, list[str]]:
    return metadata.packages_distributions()


def _distribution_version(top: str) -> str | None:
    dists = _distributions().get(top)
    if not dists:
        return None
    try:
        return f"{dists[0]}=={metadata.version(dists[0])}"
    except metadata.PackageNotFoundError:
        return None


@functools.cache
def _closure(roots: tuple[str, ...], path: tuple[str, ...] = ()) -> tuple[dict[str, str], dict[str, str]]:
    """The modules and libraries reached from ``roots``, each with its fingerprint.

    (local module -> SHA-256 of its docstring-free syntax tree, library -> version) reached from ``roots`` on
    the import path ``path`` (``sys.path`` when it was called: part of the cache key, as the modules found follow
    it).
    """
    code: dict[str, str] = {}
    libraries: dict[str, str] = {}
    todo = list(roots)
    while todo:
        name = todo.pop()
        top = name.partition(".")[0]
        if name in code or top in libraries or top in sys.stdlib_module_names or top == "__future__":
            continue
        path = _origin(name)
        if path is None:
            continue
        if not _is_local(path):
            version = _distribution_version(top)
            if version:
                libraries[top] = version
            continue
        tree = ast.parse(path.read_bytes(), filename=str(path))
        code[name] = hashlib.sha256(ast.dump(_strip_docstrings(tree)).encode()).hexdigest()
        todo.extend(_imports(tree, name, path.name == "__init__.py"))
    return code, libraries


def fingerprint(*modules: str) -> dict[str, object]:
    """The code and library fingerprint of the models trained by ``modules``, for a cache key.

    (e.g. a mechanism class's ``__module__`` and its model's.)

    Returns:
        A dict with keys ``code`` (SHA-256 hex over the import closure's module digests), ``modules`` (the number
        of local modules), ``libraries`` (package -> ``"distribution==version"``) and ``python`` (e.g. ``"3.12"``).
        Cached per process, so a run sees one version of its code.
    """
    code, libraries = _closure(tuple(sorted({*modules, *SHARED_TRAINING})), tuple(sys.path))
    blob = "\n".join(f"{m} {d}" for m, d in sorted(code.items()))
    return {"code": hashlib.sha256(blob.encode()).hexdigest(), "modules": len(code),
            "libraries": dict(sorted(libraries.items())), "python": f"{sys.version_info[0]}.{sys.version_info[1]}"}
