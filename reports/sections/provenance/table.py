"""Where every number came from.

The run's facts (created, device, platform, git hash, versions, seeds) and one row per model with its exact training
settings, mechanism parameters and model-cache key. Reads a ``bench.results.Results``.
"""

from __future__ import annotations

import json

from bench.results import Results, RunResult
from reports.common import DASH, target_of, target_text

PROVENANCE_HEADERS = (
    "dataset", "mechanism", "target ε", "seed", "model", "epochs", "batch size", "lr", "optimizer",
    "mechanism parameters (as run)", "train s", "cache key", "from cache",
)  # fmt: skip


def _git(results: Results) -> str:
    commit = results.git_hash
    if not commit:
        return "unknown (not run from a git checkout)"
    if results.git_dirty is None:
        return f"{commit} (working-tree state not recorded)"
    return f"{commit} (uncommitted changes to tracked files)" if results.git_dirty else f"{commit} (clean working tree)"


def run_facts(results: Results) -> list[tuple[str, str]]:
    """``(label, text)`` pairs: run id, status, created, device, platform, git hash (and whether the tree was dirty).

    Seeds, δ, profile, and every recorded package version.
    """
    cfg = results.config
    facts = [
        ("Run id", results.run_id),
        ("Status", results.status),
        ("Created", results.created),
        ("Device", results.device or "unknown"),
        ("Platform", results.platform or "not recorded"),
        ("Git hash", _git(results)),
        ("Profile", str(cfg.get("profile", "unknown"))),
        ("Seeds", ", ".join(str(s) for s in cfg.get("seeds") or []) or "unknown"),
        ("δ (run)", str(cfg.get("delta", "unknown"))),
    ]
    versions = ", ".join(f"{k} {v}" for k, v in results.versions.items())
    return facts + [("Versions", versions or "not recorded")]


def provenance_row(r: RunResult) -> list[str]:
    """The ``PROVENANCE_HEADERS`` cells of one RunResult (its free-form ``spec`` and ``params`` as recorded)."""
    spec = r.spec
    return [
        r.dataset, r.mechanism, target_text(target_of(r)), str(r.seed), r.model or str(spec.get("model", DASH)),
        *(str(spec.get(k, DASH)) for k in ("epochs", "batch_size", "lr", "optimizer")),
        json.dumps(r.params, sort_keys=True, default=str), f"{r.timings.train_s:.1f}",
        (r.cache_key or DASH)[:16], "yes" if r.timings.cached else "no",
    ]  # fmt: skip


def provenance_rows(results: Results) -> list[list[str]]:
    """One text row (``PROVENANCE_HEADERS``) per RunResult, failed ones included."""
    return [provenance_row(r) for r in results.results]
