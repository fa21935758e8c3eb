"""The reproduction table: each reference system's published figure next to our reproduction and, where the
source's privacy claim was wrong, the ε that holds under correct accounting. Reads the optional top-level
``reproduction`` list of results.json, as ``bench.runner.reproduce`` writes it (shape in ``docs/results-schema.md``:
accuracies in percent, ``corrected_privacy`` an ε with its δ and accountant); no key, no section."""

from __future__ import annotations

from typing import Any

from reports.tables import DASH, format_privacy

REPRODUCTION_HEADERS = (
    "preset (source)", "setting", "published", "reproduced (mean ± std over seeds)", "verdict",
    "source's privacy claim", "privacy that holds (our accountant)", "attacks on the reproduced model", "notes",
)  # fmt: skip
REPRODUCED_WITHIN = 1.5  # points of accuracy: a reproduction this close to the published figure counts as reproduced


def _percent(value: float | None) -> str:
    return DASH if value is None else f"{value:.2f}%"


def _reproduced(rep: dict[str, Any]) -> str:
    mean, std, seeds = rep.get("mean"), rep.get("std"), rep.get("seeds") or []
    if mean is None:
        return "failed"
    text = _percent(mean) + (f" ± {std:.2f}" if std is not None and len(seeds) > 1 else "")
    return text + f" ({len(seeds)} seed{'s' if len(seeds) != 1 else ''})"


def _attacks(attacks: dict[str, Any] | None) -> str:
    """``"lira: AUC 0.55, TPR 0.20% at 0.1% FPR; loss: AUC 0.51, TPR not measurable"``, strongest (AUC) first."""
    parts = []
    for name, a in sorted((attacks or {}).items(), key=lambda kv: -(kv[1].get("auc") or 0.0)):
        tpr = a.get("tpr_at_0.1%_fpr")
        low = "TPR not measurable at 0.1% FPR" if tpr is None else f"TPR {100 * tpr:.2f}% at 0.1% FPR"
        parts.append(f"{name}: AUC {a.get('auc', float('nan')):.3f}, {low}")
    return "; ".join(parts) or DASH


def _privacy(corrected: dict[str, Any] | None) -> str:
    if corrected is None:
        return DASH
    if corrected.get("guarantee") == "none":
        return "no guarantee"
    return format_privacy({**corrected, "guarantee": "central-dp"})


def reproduction_rows(results: dict[str, Any]) -> list[list[str]]:
    """Text rows (``REPRODUCTION_HEADERS``) of ``results["reproduction"]``; empty when the key is absent.

    The privacy that holds goes through ``format_privacy``, so every ε prints with its δ and accountant, and a
    mechanism without one prints "no guarantee". The verdict is the row's ``status`` if given, else
    "reproduced" when |mean − published| ≤ 1.5 points of accuracy; a trend row (``published`` null) shows
    its status as written.
    """
    rows = []
    for e in results.get("reproduction") or []:
        rep = e.get("reproduced") or {}
        verdict = e.get("status")
        if verdict is None and rep.get("mean") is not None and e.get("published") is not None:
            verdict = "reproduced" if abs(rep["mean"] - e["published"]) <= REPRODUCED_WITHIN else "not reproduced"
        published = e.get("published")
        rows.append([
            f"{e.get('preset', DASH)} ({e['source']})" if e.get("source") else str(e.get("preset", DASH)),
            str(e.get("setting", DASH)),
            "trend (no figure)" if published is None else _percent(published), _reproduced(rep),
            verdict or DASH, str(e.get("claimed_privacy") or DASH), _privacy(e.get("corrected_privacy")),
            _attacks(e.get("attacks")), " ".join(str(e.get("notes") or "").split()) or DASH,
        ])  # fmt: skip
    return rows


def reproduction_commands(results: dict[str, Any]) -> list[str]:
    """The distinct commands that produced the reproduction rows, in order (shown under the table)."""
    return list(dict.fromkeys(str(e["command"]) for e in results.get("reproduction") or [] if e.get("command")))
