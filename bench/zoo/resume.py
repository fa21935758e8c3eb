"""Resuming a zoo, and never mixing.

What keys a judged run, which kept runs a rerun reuses, and which output folders ``privbench zoo run`` refuses up front.

A run's key (``run_key``) covers everything that shapes its rows: the code version (``code_version``: every module
of privbench's packages, the user's plug-in modules and the example plug-ins the zoo runs, each by its docstring-free
syntax tree, with the installed version of every library they reach — the model cache's fingerprint,
``bench.execution.fingerprint``, over the whole code base — and the profiles' settings), the profile, the target ε,
the case, the seed, the attacks run, the auditors that judge it and the data root. A rerun reuses a kept run
(``zoo-run.json``) only under the same key; any other is run again, its folder emptied first
(``bench.zoo.worker``). No torch import.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import os
from pathlib import Path
from typing import Any

from bench.zoo.options import MECHANISM_RUN, REPO, RunSpec, ZooOptions

PACKAGES = ("bench", "mechanisms", "attacks")
"""The packages whose code shapes a zoo run's rows (``reports`` draws pages from them, and shapes none)."""
SETTINGS = ("bench/config/profiles/*.yaml", "bench/zoo/data/detection_power.json")
"""Files of settings a run reads (a profile's sizes, the detection-power table)."""


def _modules() -> list[str]:
    names = []
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            parts = path.relative_to(REPO).with_suffix("").parts
            names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


def _settings() -> dict[str, Any]:
    import yaml

    out: dict[str, Any] = {}
    for pattern in SETTINGS:
        for path in sorted(REPO.glob(pattern)):
            text = path.read_text(encoding="utf-8")  # parsed: a comment edit keeps the key
            out[str(path.relative_to(REPO))] = yaml.safe_load(text) if path.suffix == ".yaml" else json.loads(text)
    return out


@functools.cache
def code_version(plugins: tuple[str, ...] = ()) -> str:
    """A SHA-256 over the code and settings that shape a zoo run's rows (module docstring), in this process.

    A plug-in module whose source cannot be found enters by its name alone.
    """
    from bench.execution.fingerprint import fingerprint

    fp = fingerprint(*_modules(), *plugins)
    examples = {}
    for _, extra, path in MECHANISM_RUN.values():
        for module in extra:
            file = Path(path or REPO) / f"{module}.py"
            examples[module] = hashlib.sha256(file.read_bytes()).hexdigest() if file.is_file() else None
    blob = json.dumps({"fingerprint": fp, "examples": examples, "settings": _settings()}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


def configuration(options: ZooOptions) -> dict[str, Any]:
    """What a zoo folder holds the rows of.

    The profile, the target ε and the plug-ins (a rerun with another is refused without ``--overwrite``; bugs, auditors
    and seeds may change between reruns into one folder).
    """
    return {"profile": options.profile, "target_epsilon": options.target_epsilon,
            "plugins": sorted(options.plugins)}


def run_key(options: ZooOptions, version: str, case: str, bug: str | None, seed: int, attacks: tuple[str, ...],
            auditors: tuple[str, ...]) -> str:
    """The key of one run (module docstring): a SHA-256, hex."""
    data_root = options.data_root or os.environ.get("PRIVBENCH_DATA") or None
    blob = json.dumps({"version": version, **configuration(options), "case": case, "bug": bug, "seed": seed,
                       "attacks": list(attacks), "auditors": list(auditors), "data_root": data_root}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


_NUMBERS = ("certified_epsilon", "true_epsilon", "value")


def revive(row: dict[str, Any]) -> dict[str, Any]:
    """A row read back from strict JSON: ``"unbounded"`` in its numeric fields as +∞ again."""
    return {k: math.inf if k in _NUMBERS and v == "unbounded" else v for k, v in row.items()}


def kept(spec: RunSpec) -> dict[str, Any] | None:
    """The judged run kept in ``spec``'s folder under ``spec.key`` (its rows revived), or None.

    No record, one of another key, or one that cannot be read (it is run again).
    """
    try:
        record = json.loads(spec.record_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or record.get("key") != spec.key or not isinstance(record.get("rows"), list):
        return None
    if len(record["rows"]) != len(spec.auditors) or not all(isinstance(r, dict) for r in record["rows"]):
        return None
    return {**record, "rows": [revive(r) for r in record["rows"]]}
