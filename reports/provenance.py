"""Where every number came from: the run's facts (created, device, platform, git hash, versions, seeds) and one
row per model with its exact training settings, mechanism parameters and model-cache key. Reads results.json."""

from __future__ import annotations

import json
from typing import Any

from reports.tables import DASH

PROVENANCE_HEADERS = (
    "dataset", "mechanism", "target ε", "seed", "model", "epochs", "batch size", "lr", "optimizer",
    "mechanism parameters (as run)", "train s", "cache key", "from cache",
)  # fmt: skip


def _git(results: dict[str, Any]) -> str:
    commit = results.get("git_hash")
    if not commit:
        return "unknown (not run from a git checkout)"
    dirty = results.get("git_dirty")
    if dirty is None:
        return f"{commit} (working-tree state not recorded)"
    return f"{commit} (uncommitted changes to tracked files)" if dirty else f"{commit} (clean working tree)"


def run_facts(results: dict[str, Any]) -> list[tuple[str, str]]:
    """``(label, text)`` pairs: run id, status, created, device, platform, git hash (and whether the tree was
    dirty), seeds, δ, profile, and every recorded package version."""
    cfg = results.get("config") or {}
    versions = results.get("versions") or {}
    facts = [
        ("Run id", str(results.get("run_id", "unnamed run"))),
        ("Status", str(results.get("status", "unknown"))),
        ("Created", str(results.get("created", "unknown"))),
        ("Device", str(results.get("device", "unknown"))),
        ("Platform", str(results.get("platform") or "not recorded")),
        ("Git hash", _git(results)),
        ("Profile", str(cfg.get("profile", "unknown"))),
        ("Seeds", ", ".join(str(s) for s in cfg.get("seeds") or []) or "unknown"),
        ("δ (run)", str(cfg.get("delta", "unknown"))),
    ]
    return facts + [("Versions", ", ".join(f"{k} {v}" for k, v in versions.items()) or "not recorded")]


def provenance_rows(results: dict[str, Any]) -> list[list[str]]:
    """One text row (``PROVENANCE_HEADERS``) per RunResult, failed ones included."""
    rows = []
    for r in results.get("results") or []:
        spec, timings = r.get("spec") or {}, r.get("timings") or {}
        target = r.get("target_epsilon")
        train_s = timings.get("train_s")
        cached = timings.get("cached")
        rows.append([
            str(r.get("dataset")), str(r.get("mechanism")), DASH if target is None else f"{target:g}",
            str(r.get("seed")), str(r.get("model") or spec.get("model") or DASH),
            *(str(spec.get(k, DASH)) for k in ("epochs", "batch_size", "lr", "optimizer")),
            json.dumps(r.get("params") or {}, sort_keys=True, default=str),
            DASH if train_s is None else f"{train_s:.1f}", str(r.get("cache_key") or DASH)[:16],
            DASH if cached is None else ("yes" if cached else "no"),
        ])  # fmt: skip
    return rows
