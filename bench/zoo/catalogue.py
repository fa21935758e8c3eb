"""Loading the zoo's catalogue: every module of ``bench.zoo.bugs`` and ``bench.zoo.auditors`` (each registers one
bug or auditor when imported; importing patches nothing), then a user's own modules (``--plugins`` of ``zoo run``,
or ``PRIVBENCH_ZOO_PLUGINS``: comma-separated module names)."""

from __future__ import annotations

import importlib
import os
import pkgutil

from bench.zoo.api import AUDITORS, BUGS

PLUGINS_ENV = "PRIVBENCH_ZOO_PLUGINS"
_loaded: set[str] = set()


def load(plugins: tuple[str, ...] = ()) -> None:
    """Import the built-in bugs and auditors and the ``plugins`` modules (and those in ``PRIVBENCH_ZOO_PLUGINS``),
    each once per process.

    Raises:
        ModuleNotFoundError: a plug-in module that cannot be imported."""
    import bench.zoo.auditors as auditors
    import bench.zoo.bugs as bugs

    names = [f"{pkg.__name__}.{m.name}" for pkg in (bugs, auditors) for m in pkgutil.iter_modules(pkg.__path__)
             if not m.name.startswith("_")]
    names += [p for p in os.environ.get(PLUGINS_ENV, "").split(",") if p] + list(plugins)
    for name in names:
        if name not in _loaded:
            importlib.import_module(name)
            _loaded.add(name)


__all__ = ["AUDITORS", "BUGS", "PLUGINS_ENV", "load"]
