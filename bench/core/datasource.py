"""Your own data by path: the ``--dataset`` syntax ``FORMAT:PATH[,KEY=VALUE...]`` and the provenance a run records.

Light (no torch, no numpy): the configuration checks a dataset name with it before any work.

Design notes: docs/design-notes.md.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

from bench.core.errors import ConfigError

FORMATS = ("imagefolder", "npz", "csv")
OPTIONS = {"imagefolder": (), "npz": ("x", "y", "bounds"), "csv": ("label", "bounds")}
FORMS = "imagefolder:DIR, npz:FILE.npz or csv:FILE.csv,label=COLUMN"
_OPTION = re.compile(r"[,?&](?=[A-Za-z_][A-Za-z0-9_]*=)")


@dataclass(frozen=True)
class DataSource:
    """A dataset given by path.

    Attributes:
        spec: the text as given (the dataset's name in results and reports).
        format: ``imagefolder``, ``npz`` or ``csv``.
        path: the file or folder as given (relative to the working directory).
        options: ``label``, ``bounds``, ``x``, ``y`` as given.
    """

    spec: str
    format: str
    path: str
    options: dict[str, str] = field(default_factory=dict)

    def short_name(self) -> str:
        """``<format>-<file stem>``, safe in a folder name (the default run id): not ``[A-Za-z0-9_.-]`` -> ``-``."""
        stem = re.split(r"[\\/]", self.path.rstrip("/\\"))[-1].rsplit(".", 1)[0]
        return f"{self.format}-{re.sub(r'[^A-Za-z0-9_.-]+', '-', stem).strip('-') or 'data'}"


@dataclass(frozen=True)
class DataOrigin:
    """Where a run's records came from and how they were mapped to [0, 1] (results.json ``datasets``).

    Attributes:
        format: ``torchvision``, ``scikit-learn``, ``imagefolder``, ``npz``, ``csv`` or ``plug-in``.
        source: the absolute path of the files read; None for data bundled with a library (digits) or a plug-in.
        kind: ``image`` or ``tabular`` (tabular records are ``(1, 1, D)``; models follow the kind).
        scaling: how values were mapped to [0, 1], in words (always without statistics of the private data).
        classes: the class names in label order (folder names, label values), as text.
        features: tabular feature names in order (empty for images).
        records: records read, pool and test together (0: not counted, e.g. a plug-in).
    """

    format: str
    source: str | None
    kind: str
    scaling: str
    classes: tuple[str, ...] = ()
    features: tuple[str, ...] = ()
    records: int = 0


def is_source(name: Any) -> bool:
    """Whether a ``--dataset`` value (any type: YAML's too) is a string ``FORMAT:...`` with a known format."""
    return isinstance(name, str) and name.partition(":")[0] in FORMATS and ":" in name


def parse_bounds(text: str, where: str) -> tuple[float, float] | str:
    """A source's ``bounds`` option: ``(low, high)`` from ``LOW:HIGH``, else ``text`` as a bounds file's path.

    ``where`` names the source in the error message.

    Raises:
        ConfigError: two numbers that are not LOW < HIGH, or an empty value.
    """
    lo, sep, hi = text.partition(":")
    try:
        low, high = float(lo), float(hi)
    except ValueError:
        if not text:
            raise ConfigError(f"{where}: bounds is empty; give LOW:HIGH or a CSV file feature,low,high") from None
        return text  # a bounds file; LOW:HIGH needs two numbers
    if not sep or not low < high or not math.isfinite(high - low):
        raise ConfigError(f"{where}: bounds = {text!r} must be LOW:HIGH with finite LOW < HIGH")
    return low, high


def parse_source(text: str) -> DataSource:
    """The ``DataSource`` of ``FORMAT:PATH[,KEY=VALUE...]`` (``?`` / ``&`` also separate options).

    Args:
        text: the ``--dataset`` value.

    Returns:
        The parsed source (nothing is read yet).

    Raises:
        ConfigError: unknown format or option, an empty path or value, a repeated option, csv without ``label``,
            malformed ``bounds`` (one line naming the value and what is allowed).
    """
    fmt, _, rest = text.partition(":")
    if fmt not in FORMATS:
        raise ConfigError(f"dataset {text!r}: unknown format {fmt!r}; allowed: {FORMS}")
    path, *opts = _OPTION.split(rest)
    if not path:
        raise ConfigError(f"dataset {text!r} names no path; e.g. {fmt}:{'DIR' if fmt == 'imagefolder' else 'FILE'}")
    options: dict[str, str] = {}
    for opt in opts:
        key, _, value = opt.partition("=")
        if key not in OPTIONS[fmt]:
            allowed = ", ".join(OPTIONS[fmt]) or "none"
            raise ConfigError(f"dataset {text!r}: unknown option {key!r}; allowed for {fmt}: {allowed}")
        if not value or key in options:
            raise ConfigError(f"dataset {text!r}: option {key!r} is {'given twice' if value else 'empty'}")
        options[key] = value
    if fmt == "csv" and "label" not in options:
        raise ConfigError(f"dataset {text!r}: name the label column, e.g. csv:{path},label=COLUMN")
    if "bounds" in options:
        bounds = parse_bounds(options["bounds"], f"dataset {text!r}")
        if fmt == "npz" and isinstance(bounds, str):
            raise ConfigError(f"dataset {text!r}: npz bounds must be LOW:HIGH (one public range for every value)")
    return DataSource(text, fmt, path, options)


def check_dataset_name(name: Any, known: list[str]) -> None:
    """Check that ``name`` (any type: a YAML value) is in ``known`` or a valid ``FORMAT:PATH`` form.

    Raises:
        ConfigError: anything else, one line listing the names and the forms.
    """
    if isinstance(name, str) and name in known:
        return
    if is_source(name):
        parse_source(name)
        return
    raise ConfigError(f"dataset {name!r} is not known; allowed: {', '.join(known)}, or your data as {FORMS}")


def hidden_sizes(value: Any) -> tuple[int, ...]:
    """``tabular_hidden`` (one width or a list) as a tuple: the hidden widths of the MLP that tabular data get.

    Raises:
        ConfigError: not a non-empty list of integers >= 1.
    """
    values = [value] if isinstance(value, int) and not isinstance(value, bool) else value
    if (not isinstance(values, (list, tuple)) or not values
            or any(isinstance(v, bool) or not isinstance(v, int) or v < 1 for v in values)):
        raise ConfigError(f"tabular_hidden = {value!r} must be a non-empty list of integers >= 1 (hidden widths)")
    return tuple(values)
