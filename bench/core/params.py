"""Typed settings of every plug-in: a ``Params`` model per mechanism, attack and model, validated by pydantic.

A plug-in declares its settings once, as a subclass of ``Params`` (typed fields, defaults, ranges, a docstring with
units); configuration files, presets and the command line are checked against it before any work starts, with one
line naming the bad key or value and what is allowed. Values are strict: ``"false"`` is not a boolean, ``"100"`` is
not an integer, ``.inf`` is not a finite number, and an unknown key is an error (never silently ignored).
No torch import.
"""

from __future__ import annotations

import inspect
import json
import re
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError, create_model

from bench.core.errors import ConfigError


class Params(BaseModel):
    """Base of every plug-in's settings: frozen, strict, finite, no unknown keys. Subclasses add fields."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, allow_inf_nan=False,
                              validate_default=True)

    def to_json(self) -> dict[str, Any]:
        """``{field: value}`` of JSON types, defaults filled in (what a cache key and results.json record)."""
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
    """One line for ``exc``'s first error: ``where.key = value: what is allowed``, or ``where has unknown key 'k'``.

    ``where`` is the settings' config path (e.g. ``"training.dpsgd.params"``); ``allowed``, the known keys listed
    after an unknown one (None: "see the documentation").
    """
    err = exc.errors(include_url=False)[0]
    loc = tuple(err.get("loc") or ())
    if err["type"] == "extra_forbidden":
        head = _location(where, loc[:-1])
        known = ", ".join(allowed) if allowed is not None else "see the documentation"
        return f"{head} has unknown key {loc[-1]!r}; allowed: {known or 'none'}"
    message = err["msg"][0].lower() + err["msg"][1:]
    if loc and isinstance(loc[-1], str) and not loc[-1].isidentifier():  # a union's member tag: every member's rule
        members = [e for e in exc.errors(include_url=False) if tuple(e.get("loc") or ())[:-1] == loc[:-1]]
        message = " or ".join(e["msg"][0].lower() + e["msg"][1:] for e in members)
        loc = loc[:-1]
    if "input" in err and err["type"] != "missing":
        return f"{_location(where, loc)} = {err['input']!r}: {message}"
    return f"{_location(where, loc)}: {message}"


def parse(cls: type[Params], values: Any, where: str) -> Params:
    """``cls`` validated from a mapping ``values`` (None: the defaults; a ``cls`` instance: as is).

    ``where`` is the config path named in messages (e.g. ``"training.dpsgd.params"``).

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
    """A ``Params`` subclass ``<fn>_kwargs`` of a model factory's parameters after the first ``skip``.

    Each field keeps its parameter's annotation (none: any type) and default.
    """
    fields: dict[str, Any] = {}
    hints = inspect.get_annotations(fn, eval_str=True)
    for i, (name, p) in enumerate(inspect.signature(fn).parameters.items()):
        if i < skip or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        default = ... if p.default is p.empty else p.default
        fields[name] = (hints.get(name, Any), default)
    return create_model(f"{fn.__name__}_kwargs", __base__=Params, **fields)


def _attribute_docs(cls: type) -> dict[str, str]:
    """Each field's entry in the ``Attributes:`` sections of ``cls``'s docstrings (its own over its bases')."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        lines = inspect.cleandoc(klass.__dict__.get("__doc__") or "").splitlines()
        start = next((i + 1 for i, line in enumerate(lines) if line.strip() == "Attributes:"), None)
        if start is None:
            continue
        name = None
        for line in lines[start:]:
            if line.strip() and not line.startswith(" "):
                break  # the section ends at the next unindented line
            m = re.match(r"^ {4}(\w+): (.*)$", line)
            if m:
                name, docs[m.group(1)] = m.group(1), m.group(2).strip()
            elif name and line.strip():
                docs[name] += " " + line.strip()
    return docs


def _first_sentence(text: str, width: int = 110) -> str:
    """``text`` up to its first full stop outside parentheses and abbreviations (``e.g.``, ``i.e.``).

    Without reST literals' double backquotes, at most ``width`` characters.
    """
    text, depth = text.replace("``", ""), 0
    for i, ch in enumerate(text):
        depth += (ch == "(") - (ch == ")")
        abbreviation = text[max(0, i - 3) : i + 1] in ("e.g.", "i.e.")
        if ch == "." and depth <= 0 and not abbreviation and (i + 1 == len(text) or text[i + 1] == " "):
            text = text[: i + 1]
            break
    return text if len(text) <= width else text[: width - 1].rstrip() + "…"


def summary(obj: Any, width: int = 140) -> str:
    """The first sentence of ``obj``'s docstring ("" without one), at most ``width`` characters (``bench list``)."""
    paragraph = inspect.cleandoc(obj.__doc__ or "").split("\n\n")[0]
    return _first_sentence(" ".join(paragraph.split()), width)


def _type_name(annotation: Any) -> str:
    origin = typing.get_origin(annotation)
    if origin is Literal:
        return " | ".join(str(a) for a in typing.get_args(annotation))
    if origin is typing.Annotated:
        return _type_name(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        return " | ".join(_type_name(a) for a in typing.get_args(annotation))
    return getattr(annotation, "__name__", None) if typing.get_origin(annotation) is None else \
        str(annotation).replace("typing.", "")


def _range(metadata: list) -> str:
    bounds = {type(m).__name__.lower(): getattr(m, type(m).__name__.lower(), None) for m in metadata}
    lo = f"[{bounds['ge']:g}" if "ge" in bounds else f"({bounds['gt']:g}" if "gt" in bounds else None
    hi = f"{bounds['le']:g}]" if "le" in bounds else f"{bounds['lt']:g})" if "lt" in bounds else None
    return "" if lo is None and hi is None else f"{lo or '(-inf'}, {hi or 'inf)'}"


def field_rows(cls: type[Params]) -> list[tuple[str, str, str, str, str]]:
    """``bench list NAME``'s rows: ``(name, type, default as JSON, range, description)`` per field, in order.

    The range is e.g. ``[10, 250000]`` ("" when unbounded); the description the first sentence of the field's
    ``description`` or of its ``Attributes:`` entry in the class docstring.
    """
    docs = _attribute_docs(cls)
    rows = []
    for name, f in cls.model_fields.items():
        default = "required" if f.is_required() else json.dumps(f.get_default(call_default_factory=True),
                                                                default=str, ensure_ascii=False)
        inner = [m for a in typing.get_args(f.annotation) if typing.get_origin(a) is typing.Annotated
                 for m in a.__metadata__ for m in getattr(m, "metadata", [m])]  # a constrained member of a union
        rows.append((name, _type_name(f.annotation), default, _range(f.metadata or inner),
                     _first_sentence(f.description or docs.get(name, ""))))
    return rows
