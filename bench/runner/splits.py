"""Splits that cannot drift (issue 40, item 3).

A resumed run re-checks, cell by cell, the split hash its earlier part recorded in results.json
(``RunResult.split_hash``: the index set of the target's training records, ``bench.core.data.ArrayDataset.split_hash``)
against the one this run derives; a cell whose hashes differ is said so in one line and trained again, whatever the
model cache holds. The cache re-checks every model's split hash on its own (``bench.execution.cache.ModelCache.load``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench.runner.cells import PlannedCell

Identity = tuple[Any, ...]


def identity(dataset: str, mechanism: str, seed: int, off: bool, target: float | None, preset: str | None,
             row: str | None) -> Identity:
    """What names one cell in results.json and in a plan alike (a target ε of null for an ε = ∞ point)."""
    return dataset, mechanism, seed, off, None if off else target, preset, row


def cell_identity(pc: PlannedCell) -> Identity:
    """``identity`` of a planned cell."""
    r = pc.recipe
    return identity(r.dataset, r.mechanism, pc.seed, r.off, r.target_epsilon, pc.preset, pc.row)


def recorded_splits(results: Path) -> dict[Identity, str]:
    """The split hash each cell of an earlier run's ``results`` (results.json) recorded.

    {} when there is none or it cannot be read (``bench.runner.outfolder.check_reuse`` has already refused another run's
    document).
    """
    try:
        doc = json.loads(results.read_text(encoding="utf-8"))
        rows = doc["results"]
        return {identity(r["dataset"], r["mechanism"], r["seed"], bool(r.get("off_point")), r.get("target_epsilon"),
                         r.get("preset"), r.get("row")): r["split_hash"]
                for r in rows if isinstance(r, dict) and r.get("split_hash")}
    except (OSError, ValueError, KeyError, TypeError):
        return {}


def mismatch_line(pc: PlannedCell, recorded: str, derived: str) -> str:
    """The one line a resumed run prints for a cell whose recorded split differs from the one it derives."""
    r = pc.recipe
    eps = "" if r.target_epsilon is None else " target ε=∞" if r.off else f" target ε={r.target_epsilon:g}"
    return (f"privbench: {r.mechanism}{eps} seed {pc.seed}: the resumed run recorded split hash {recorded[:12]}, this "
            f"run derives {derived[:12]}; retraining it (its earlier model is not reused)")
