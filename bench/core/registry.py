"""A tiny name -> factory registry used for mechanisms, attacks, models, datasets and presets.

And the discovery of plug-in modules that pip-installed packages declare in the ``privbench.plugins`` entry-point group.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from importlib import metadata
from typing import Any, Generic, TypeVar

T = TypeVar("T")

PLUGIN_GROUP = "privbench.plugins"


def entry_point_plugins() -> tuple[str, ...]:
    """Modules declared in packages' ``[project.entry-points."privbench.plugins"]``, by entry-point name, each once."""
    eps = sorted(metadata.entry_points(group=PLUGIN_GROUP), key=lambda ep: ep.name)
    return tuple(dict.fromkeys(ep.value.split(":")[0].strip() for ep in eps))


class Registry(Generic[T]):
    """Maps a plug-in's standard name to the object (usually a factory) that builds it.

    Args:
        kind: what the registry holds, used in error messages (e.g. ``"mechanism"``).
        base: ``"package.module:Class"`` every registered object must subclass (its ``name`` class attribute is
            then the registered name), or None for plain factories. A string, so that declaring the registry
            imports nothing heavy; it is resolved when an object is registered or first looked up.

    Raises:
        ValueError: on a duplicate registration, an object that is not a subclass of ``base``, a name that differs
            from the class's own ``name``, or a lookup of an unknown name; the message lists the known names.
    """

    def __init__(self, kind: str, base: str | None = None) -> None:
        self.kind, self.base = kind, base
        self._items: dict[str, T] = {}
        self._lazy: dict[str, str] = {}

    def register(self, name: str | None = None) -> Callable[[T], T]:
        """Decorator: ``@MECHANISMS.register()`` registers a class under its ``name`` (``name`` given: must agree)."""

        def deco(obj: T) -> T:
            self.add(name, obj)
            return obj

        return deco

    def add(self, name: str | T | None, obj: T | None = None) -> None:
        """``add(ToyNoise)``: register a class under its ``name`` attribute; ``add("name", obj)``: under ``name``.

        Raises:
            ValueError: a duplicate name, no name, a class not a subclass of ``base``, or a name not the class's own.
        """
        if obj is None:
            if isinstance(name, str) or name is None:
                raise ValueError(f"{self.kind}: add(name, obj) or add(cls) with a class that has a name")
            name, obj = None, name
        key = self._checked(name if isinstance(name, str) else None, obj)
        if key in self._items or key in self._lazy:
            raise ValueError(f"{self.kind} {key!r} is already registered")
        self._items[key] = obj

    def _checked(self, name: str | None, obj: Any) -> str:
        """The name ``obj`` registers under, after the base-class and name checks (class docstring)."""
        if self.base is None:
            if name is None:
                raise ValueError(f"{self.kind} {obj!r}: a name is required")
            return name
        module, attr = self.base.split(":")
        base = getattr(importlib.import_module(module), attr)
        if not (isinstance(obj, type) and issubclass(obj, base)):
            raise ValueError(f"{self.kind} {name or obj!r} must be a subclass of {module}.{attr}, got {obj!r}")
        own = getattr(obj, "name", "")
        if not own and name is None:
            raise ValueError(f"{self.kind} {obj.__name__} has no name: set its class attribute name = \"...\"")
        if own and name is not None and own != name:
            raise ValueError(f"{self.kind} {obj.__name__} is named {own!r} but registered as {name!r}")
        return str(name or own)

    def add_lazy(self, name: str, target: str) -> None:
        """Register ``"package.module:attribute"``, imported on first ``get``; ValueError if ``name`` is taken."""
        if name in self._items or name in self._lazy:
            raise ValueError(f"{self.kind} {name!r} is already registered")
        self._lazy[name] = target

    def get(self, name: str) -> T:
        """The object (usually a class or a factory) registered under ``name``, importing a lazy one on first use.

        Raises:
            ValueError: an unknown name (the message lists the known ones), or a lazy target that fails the checks.
            ImportError, AttributeError: a lazy target that cannot be imported.
        """
        if name not in self._items and name in self._lazy:
            module, attr = self._lazy[name].split(":")
            obj = getattr(importlib.import_module(module), attr)
            self._checked(name, obj)
            self._items[name] = obj
        try:
            return self._items[name]
        except KeyError:
            raise ValueError(f"unknown {self.kind} {name!r}; known: {', '.join(self.names())}") from None

    def names(self) -> list[str]:
        """Every registered name, eager and lazy, each once, in registration order."""
        return list(dict.fromkeys([*self._items, *self._lazy]))

    def __contains__(self, name: object) -> bool:
        return name in self._items or name in self._lazy

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self.names())
