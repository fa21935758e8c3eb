"""Loading plug-in modules: named by a run or declared by installed packages.

Loading plug-in modules: those a run names (``--plugins``) and those installed packages declare in the
``privbench.plugins`` entry-point group.
"""

from __future__ import annotations

import importlib
from typing import Any

from bench.core.errors import ConfigError
from bench.core.registry import PLUGIN_GROUP, entry_point_plugins


def load_plugins(modules: Any) -> tuple[str, ...]:
    """Import each plug-in module (it registers its mechanisms, attacks, models or datasets on import).

    Those named (``--plugins`` / ``plugins:``), then those installed packages declare in the ``privbench.plugins``
    entry-point group (``bench.core.registry.entry_point_plugins``), so a pip-installed plug-in needs no flag.

    Returns:
        Every module imported, named ones first, each once (training workers import the same).

    Raises:
        ConfigError: not a list of module names, or a module that cannot be imported (one line).
    """
    if isinstance(modules, str):
        modules = [m.strip() for m in modules.split(",") if m.strip()]
    if not isinstance(modules, (list, tuple)) or not all(isinstance(m, str) and m for m in modules):
        raise ConfigError(f"plugins = {modules!r} must be a list of module names")
    installed = entry_point_plugins()
    for name in dict.fromkeys([*modules, *installed]):
        where = "check --plugins / PYTHONPATH" if name in modules else f"an entry point of group {PLUGIN_GROUP!r}"
        try:
            importlib.import_module(name)
        except Exception as exc:  # the plug-in's own error: one line naming the module
            raise ConfigError(f"plugin {name!r} cannot be imported ({type(exc).__name__}: "
                              f"{str(exc).splitlines()[0] if str(exc) else ''}); {where}") from None
    return tuple(dict.fromkeys([*modules, *installed]))
