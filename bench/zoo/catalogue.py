"""Loading the zoo's catalogue.

Every module of ``bench.zoo.bugs`` and ``bench.zoo.auditors`` (each registers its bugs or auditor when imported;
importing patches nothing), then a user's own modules (``--plugins`` of ``zoo run``, or ``PRIVBENCH_ZOO_PLUGINS``:
comma-separated module names). ``find`` names one bug: a registered one, or an instance of the parametrised σ × F bug
(``bench.zoo.bugs.scaled_noise``: ``dpsgd-noise-x0.67``).
"""

from __future__ import annotations

import importlib
import os
import pkgutil

from bench.zoo.api import AUDITORS, BUGS, Bug

PLUGINS_ENV = "PRIVBENCH_ZOO_PLUGINS"
BUG_ENV = "PRIVBENCH_ZOO_BUG"
"""The bug a run applies in every process (``bench.zoo.apply``, a ``--plugins`` module): a name ``find`` knows."""
_loaded: set[str] = set()


def load(plugins: tuple[str, ...] = ()) -> None:
    """Import the built-in bugs and auditors and the ``plugins`` modules (and those in ``PRIVBENCH_ZOO_PLUGINS``).

    Each once per process.

    Raises:
        ModuleNotFoundError: a plug-in module that cannot be imported.
    """
    import bench.zoo.auditors as auditors
    import bench.zoo.bugs as bugs

    names = [f"{pkg.__name__}.{m.name}" for pkg in (bugs, auditors) for m in pkgutil.iter_modules(pkg.__path__)
             if not m.name.startswith("_")]
    names += [p for p in os.environ.get(PLUGINS_ENV, "").split(",") if p] + list(plugins)
    for name in names:
        if name not in _loaded:
            importlib.import_module(name)
            _loaded.add(name)


def find(name: str) -> Bug:
    """The bug called ``name``: a registered one (``dpsgd-half-noise``), else the σ × F instance of that name.

    ``MECHANISM-noise-xF``, ``bench.zoo.bugs.scaled_noise.parse``. Loads the catalogue.

    Raises:
        ValueError: neither (the message lists the registered names and the σ × F form).
    """
    load()
    if name in BUGS.names():
        return BUGS.get(name)
    from bench.zoo.bugs.scaled_noise import parse

    bug = parse(name)
    if bug is None:
        raise ValueError(f"unknown bug {name!r}; allowed: {', '.join(BUGS.names())}, or MECHANISM-noise-xF (σ × F, "
                         "e.g. dpsgd-noise-x0.67)")
    return bug


LABEL_BUGS = {"local-gaussian": "local-labels-in-clear", "dpmix": "dpmix-labels-in-clear"}
"""The zoo bug that releases each mechanism's label channel in the clear (the detection-power table's ``labels``)."""


def table_bug(mechanism: str, key: str) -> str | None:
    """The zoo bug of the detection-power table's (and the null test's) bug key for ``mechanism``.

    ``"0.5"`` (σ × 0.5) names the σ × F instance ``MECHANISM-noise-x0.5``, ``"labels"`` the mechanism's
    labels-in-the-clear bug, ``"1"`` (the correct mechanism) None.

    Raises:
        ValueError: ``labels`` for a mechanism without a label channel, or a key that is neither F nor ``labels``.
    """
    if key == "1":
        return None
    if key == "labels":
        if mechanism not in LABEL_BUGS:
            raise ValueError(f"{mechanism} releases no labels; allowed with labels: {', '.join(LABEL_BUGS)}")
        return LABEL_BUGS[mechanism]
    try:
        factor = float(key)
    except ValueError:
        raise ValueError(f"bug {key!r}; allowed: a factor F (σ × F), labels, or 1 (no bug)") from None
    return f"{mechanism}-noise-x{factor:g}"


__all__ = ["AUDITORS", "BUGS", "BUG_ENV", "LABEL_BUGS", "PLUGINS_ENV", "find", "load", "table_bug"]
