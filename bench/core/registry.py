"""A tiny name -> factory registry used for mechanisms, attacks, models, datasets and presets."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

T = TypeVar("T")


class Registry(Generic[T]):
    """Maps a plug-in's standard name to the object (usually a factory) that builds it.

    Args:
        kind: what the registry holds, used in error messages (e.g. ``"mechanism"``).

    Raises:
        ValueError: on a duplicate registration or a lookup of an unknown name; the message
            lists the known names.
    """

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._items: dict[str, T] = {}
        self._lazy: dict[str, str] = {}

    def register(self, name: str) -> Callable[[T], T]:
        """Decorator: ``@MECHANISMS.register("dpsgd")`` registers the decorated object under ``name``."""

        def deco(obj: T) -> T:
            self.add(name, obj)
            return obj

        return deco

    def add(self, name: str, obj: T) -> None:
        if name in self._items or name in self._lazy:
            raise ValueError(f"{self.kind} {name!r} is already registered")
        self._items[name] = obj

    def add_lazy(self, name: str, target: str) -> None:
        """Register ``"package.module:attribute"``, imported on first ``get`` (keeps imports light:
        listing or validating names never imports torch)."""
        if name in self._items or name in self._lazy:
            raise ValueError(f"{self.kind} {name!r} is already registered")
        self._lazy[name] = target

    def get(self, name: str) -> T:
        if name not in self._items and name in self._lazy:
            module, attr = self._lazy[name].split(":")
            self._items[name] = getattr(importlib.import_module(module), attr)
        try:
            return self._items[name]
        except KeyError:
            raise ValueError(f"unknown {self.kind} {name!r}; known: {', '.join(self.names())}") from None

    def names(self) -> list[str]:
        return list(dict.fromkeys([*self._items, *self._lazy]))

    def __contains__(self, name: object) -> bool:
        return name in self._items or name in self._lazy

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self.names())
