"""Which zoo folders and documents the zoo's commands refuse up front.

Each in one line (``ConfigError``: the command line prints ``privbench: error: …`` and exits with status 2, having
written nothing): an output path that is a file or lies under one, a folder that cannot be written, a ``zoo.json`` that
cannot be read or is not a zoo document, and one of another configuration (``bench.zoo.resume.configuration``) unless
``--overwrite``. No torch import.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from bench.core.errors import ConfigError

READABLE_SCHEMAS = (1, 2)
"""The zoo.json schemas ``zoo report`` draws (schema 1: before runs were keyed; its rows and summary are the same)."""
ALLOWED = "a zoo.json written by 'privbench zoo run'"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="allow", strict=False)


class _Bug(_Strict):
    mechanism: str
    summary: str
    source: str
    documented: bool
    changes: str
    claims: str
    true_epsilon_text: str


class _Auditor(_Strict):
    threat_model: str
    source: str
    description: str


class _Summary(_Strict):
    case: str
    bug: str | None
    mechanism: str
    auditor: str
    verdicts: int = Field(ge=0)
    caught: int = Field(ge=0)
    errors: int = Field(ge=0)
    missing: str | None = None
    rate: float | None
    lower: float = Field(ge=0, le=1)
    upper: float = Field(ge=0, le=1)
    cpu_s_per_verdict: float | None
    epsilon_ratio: float | Literal["unbounded"] | None


class ZooDocument(_Strict):
    """What ``zoo report`` reads of a zoo.json (``bench.zoo.document.write_document``)."""

    schema_: Literal[READABLE_SCHEMAS] = Field(alias="schema")  # type: ignore[valid-type]
    profile: str
    seeds: int = Field(ge=1)
    target_epsilon: float = Field(gt=0)
    bugs: dict[str, _Bug]
    auditors: dict[str, _Auditor]
    rows: list[dict[str, Any]]
    summary: list[_Summary]

    @model_validator(mode="after")
    def _consistent(self) -> ZooDocument:
        for s in self.summary:
            if s.auditor not in self.auditors:
                raise ValueError(f"summary names auditor {s.auditor!r}, which the document does not describe")
            if s.bug is not None and s.bug not in self.bugs:
                raise ValueError(f"summary names bug {s.bug!r}, which the document does not describe")
            if s.caught > s.verdicts:
                raise ValueError(f"{s.case} × {s.auditor}: caught {s.caught} of {s.verdicts} verdicts")
        return self


def read_document(path: Path) -> dict[str, Any]:
    """The zoo document at ``path``, checked to be one ``zoo report`` can draw.

    Raises:
        ConfigError: no such file, not a file, not JSON, or not a zoo document (one line saying what is wrong).
    """
    if not path.exists():
        raise ConfigError(f"{path.parent}: no zoo.json there; allowed: a folder written by 'privbench zoo run'")
    if not path.is_file():
        raise ConfigError(f"{path} is not a file; allowed: {ALLOWED}")
    try:
        doc = json.loads(path.read_text(encoding="utf-8"), parse_constant=lambda c: math.nan)
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        why = exc.strerror if isinstance(exc, OSError) else f"not valid JSON: {str(exc).splitlines()[0]}"
        raise ConfigError(f"{path} cannot be read ({why}); allowed: {ALLOWED}") from None
    if not isinstance(doc, dict) or "schema" not in doc or "summary" not in doc:
        raise ConfigError(f"{path} is not a zoo document (no schema and summary); allowed: {ALLOWED}")
    try:
        ZooDocument.model_validate(doc)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(x) for x in first["loc"]) or "the document"
        raise ConfigError(f"{path} is not a zoo document privbench can read ({where}: {first['msg']}); allowed: "
                          f"{ALLOWED} (schema {', '.join(map(str, READABLE_SCHEMAS))})") from None
    return dict(doc)


def check_writable_folder(folder: Path, what: str) -> None:
    """Refuse ``folder`` as a place to write.

    A path that is not a folder, or lies under a file, or a folder (or its nearest existing parent) this process cannot
    write to.
    """
    if folder.exists() and not folder.is_dir():
        raise ConfigError(f"{what} {folder} is a file, not a folder; allowed: a folder (new, or written by "
                          "'privbench zoo run')")
    parent = folder
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise ConfigError(f"{what} {folder}: {parent} is a file, so no folder can be made there; allowed: a path "
                          "under a folder")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise ConfigError(f"{what} {folder}: {parent} is not writable; allowed: a folder you can write to")


def check_output(output: Path, configuration: dict[str, Any], *, overwrite: bool) -> None:
    """Refuse ``output`` for a zoo of ``configuration`` (``bench.zoo.resume.configuration``): module docstring.

    A folder holding this configuration's zoo resumes it; ``overwrite`` lets a zoo of another configuration, or a
    zoo.json that cannot be read, be replaced.
    """
    check_writable_folder(output, "--output")
    for name in ("zoo.json", "zoo.md", "zoo_cost.png", "runs"):
        path = output / name
        if path.exists() and path.is_dir() != (name == "runs"):
            raise ConfigError(f"--output {output}: its {name} is a {'file' if name == 'runs' else 'folder'}; "
                              "allowed: a folder written by 'privbench zoo run', or a new one")
    path = output / "zoo.json"
    if not path.exists() or overwrite:
        return
    doc = read_document(path)
    theirs = {"profile": doc.get("profile"), "target_epsilon": doc.get("target_epsilon"),
              "plugins": (doc.get("configuration") or {}).get("plugins", configuration["plugins"])}
    if theirs != configuration:
        raise ConfigError(f"--output {output} holds the zoo of another configuration (profile {theirs['profile']}, "
                          f"target ε {theirs['target_epsilon']}, plug-ins {theirs['plugins'] or 'none'}); pass "
                          "--overwrite to replace it, or choose another --output")
