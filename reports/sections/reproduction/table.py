"""The reproduction table: each reference system's published figure next to our reproduction.

Where the source's privacy claim was wrong, the table also gives the ε that holds under correct accounting. Reads the
optional ``reproduction`` rows of a ``bench.results.Results`` (``ReproductionRow``: accuracies in percent,
``corrected_privacy`` an ε with its δ, accountant and, where known, relation); no rows, no section.
"""

from __future__ import annotations

from typing import Any

from bench.results import REPRODUCED_WITHIN, PrivacyRecord, ReproducedValues, ReproductionRow, Results
from reports.common import DASH, format_privacy, one_line

REPRODUCTION_HEADERS = (
    "preset (source)", "setting", "published", "reproduced (mean ± std over seeds)", "verdict",
    "source's privacy claim", "privacy that holds (our accountant)", "attacks on the reproduced model", "notes",
)  # fmt: skip


def _percent(value: float | None) -> str:
    return DASH if value is None else f"{value:.2f}%"


def _reproduced(rep: ReproducedValues) -> str:
    if rep.mean is None:
        return "failed"
    text = _percent(rep.mean) + (f" ± {rep.std:.2f}" if rep.std is not None and len(rep.seeds) > 1 else "")
    return text + f" ({len(rep.seeds)} seed{'s' if len(rep.seeds) != 1 else ''})"


def _attacks(attacks: dict[str, dict[str, float | None]]) -> str:
    """``"lira: AUC 0.55, TPR 0.20% at 0.1% FPR; loss: AUC 0.51, TPR not measurable"``, strongest (AUC) first."""
    parts = []
    for name, a in sorted(attacks.items(), key=lambda kv: -(kv[1].get("auc") or 0.0)):
        tpr, auc = a.get("tpr_at_0.1%_fpr"), a.get("auc")
        low = "TPR not measurable at 0.1% FPR" if tpr is None else f"TPR {100 * tpr:.2f}% at 0.1% FPR"
        parts.append(f"{name}: AUC {float('nan') if auc is None else auc:.3f}, {low}")
    return "; ".join(parts) or DASH


def _privacy(corrected: dict[str, Any] | None) -> str:
    """The free-form ``corrected_privacy`` as a ``format_privacy`` cell (central DP unless it says "none")."""
    if corrected is None:
        return DASH
    if corrected.get("guarantee") == "none":
        return "no guarantee"
    return format_privacy(PrivacyRecord(
        epsilon=corrected.get("epsilon"), delta=corrected.get("delta"), accountant=str(corrected.get("accountant")),
        guarantee="central-dp", relation=corrected.get("relation"), weak_delta=bool(corrected.get("weak_delta"))))


def _verdict(e: ReproductionRow) -> str:
    """The row's ``status``; where it is empty, "reproduced" when |mean − published| ≤ ``REPRODUCED_WITHIN``."""
    if e.status:
        return e.status
    if e.reproduced.mean is None or e.published is None:
        return DASH
    return "reproduced" if abs(e.reproduced.mean - e.published) <= REPRODUCED_WITHIN else "not reproduced"


def reproduction_rows(results: Results) -> list[list[str]]:
    """Text rows (``REPRODUCTION_HEADERS``) of ``results.reproduction``; empty when there is none.

    The privacy that holds goes through ``format_privacy``, so every ε prints with its δ, accountant and
    relation, and a mechanism without a guarantee prints "no guarantee". A trend row (``published`` null) shows
    its status as written.
    """
    return [[
        f"{e.preset} ({e.source})" if e.source else e.preset, e.setting,
        "trend (no figure)" if e.published is None else _percent(e.published), _reproduced(e.reproduced),
        _verdict(e), e.claimed_privacy or DASH, _privacy(e.corrected_privacy), _attacks(e.attacks),
        one_line(e.notes, DASH),
    ] for e in results.reproduction or []]  # fmt: skip


def reproduction_commands(results: Results) -> list[str]:
    """The distinct commands that produced the reproduction rows, in order (shown under the table)."""
    return list(dict.fromkeys(e.command for e in results.reproduction or [] if e.command))
