"""Typed settings of every plug-in: a ``Params`` model per mechanism, attack and model, validated by pydantic.

A plug-in declares its settings once, as a subclass of ``Params`` (typed fields, defaults, ranges, a docstring with
units); configuration files, presets and the command line are checked against it before any work starts, with one
line naming the bad key or value and what is allowed. Values are strict: ``"false"`` is not a boolean, ``"100"`` is
not an integer, ``.inf`` is not a finite number, and an unknown key is an error (never silently ignored).
No torch import.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError, create_model

from bench.core.errors import ConfigError


class Params(BaseModel):
    """Base of every plug-in's settings: frozen, strict, finite, no unknown keys. Subclasses add fields."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, allow_inf_nan=False,
                              validate_default=True)

    def to_json(self) -> dict[str, Any]:
        """The settings with every default filled in, as JSON types (what a cache key and results.json record)."""
        return self.model_dump(mode="json")


class NoParams(Params):
    """Settings of a plug-in that has none."""


def _location(where: str, loc: tuple) -> str:
    """``where`` followed by pydantic's error location: names as ``.name``, list positions as ``[i]``."""
    out = where
    for item in loc:
        out += f"[{item}]" if isinstance(item, int) else (f".{item}" if out else str(item))
    return out


def describe(exc: ValidationError, where: str, allowed: list[str] | None = None) -> str:
    """One line for the first error of ``exc``: ``where.key = value: what is allowed``, or, for an unknown key,
    ``where has unknown key 'k'; allowed: ...``."""
    err = exc.errors(include_url=False)[0]
    loc = tuple(err.get("loc") or ())
    if err["type"] == "extra_forbidden":
        head = _location(where, loc[:-1])
        known = ", ".join(allowed) if allowed is not None else "see the documentation"
        return f"{head} has unknown key {loc[-1]!r}; allowed: {known or 'none'}"
    message = err["msg"][0].lower() + err["msg"][1:]
    if "input" in err and err["type"] != "missing":
        return f"{_location(where, loc)} = {err['input']!r}: {message}"
    return f"{_location(where, loc)}: {message}"


def parse(cls: type[Params], values: Any, where: str) -> Params:
    """``cls`` from a mapping of settings (``None``: the defaults).

    Args:
        cls: the plug-in's ``Params`` class. values: a mapping, e.g. read from YAML. where: the config path of
            ``values`` for messages (e.g. ``"training.dpsgd.params"``).

    Raises:
        ConfigError: not a mapping, an unknown key, a value of the wrong type or out of range (one line).
    """
    if values is None:
        values = {}
    if isinstance(values, cls):
        return values
    if not isinstance(values, Mapping):
        raise ConfigError(f"{where} must be a mapping of settings, got {values!r}")
    try:
        return cls.model_validate(dict(values))
    except ValidationError as exc:
        raise ConfigError(describe(exc, where, sorted(cls.model_fields))) from None


def signature_params(fn: Callable[..., Any], *, skip: int) -> type[Params]:
    """A ``Params`` class from the keyword parameters of ``fn`` (a model factory), skipping its first ``skip``
    positional ones; each field keeps the annotation and default of its parameter (unannotated: any type)."""
    fields: dict[str, Any] = {}
    hints = inspect.get_annotations(fn, eval_str=True)
    for i, (name, p) in enumerate(inspect.signature(fn).parameters.items()):
        if i < skip or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        default = ... if p.default is p.empty else p.default
        fields[name] = (hints.get(name, Any), default)
    return create_model(f"{fn.__name__}_kwargs", __base__=Params, **fields)
