"""The verdict: which mechanism to ship.

One table per dataset (accuracy and the cost of privacy against the mechanism's own ε = ∞ point, the strongest attack at
0.1 % FPR, the empirical ε lower bound next to the accountant's ε, throughput, guarantee) and the privacy-utility Pareto
frontier; the plain-language notes computed from those numbers are in ``reports.sections.verdict.notes``. Reads a
``bench.results.Results``.

The strongest attack at a low FPR is the membership attack with the highest TPR there (Carlini et al. 2022,
"Membership Inference Attacks From First Principles"); the ε lower bound is the tightest valid bound of the audits
(``reports.bounds``: one-run canaries or multi-run designs, never the membership attacks' heuristic bounds).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from bench.results import Results, RunResult
from reports.bounds import BUG_MARK, REFUTED_MARK, bugs_for, refuted_for, tightest_text, tightest_valid
from reports.ceiling import cost_text
from reports.common import (
    DASH,
    GUARANTEE_SHORT,
    MAIN_LEVEL,
    degenerate_mark,
    fpr_levels,
    has_guarantee,
    is_failed,
    level_label,
    membership_attacks,
    one_line,
    strongest_at_level,
    strongest_attack,
    target_text,
    with_failed_attacks,
)
from reports.tables import summary_rows

VERDICT_HEADERS = (
    "mechanism", "target ε", "guarantee", "accountant ε (δ, accountant, relation)",
    "audit ε_LB (tightest valid; audit: threat model, design, method, confidence)", "test acc.",
    "cost of privacy (test acc. lost vs its ε = ∞ point)", "TPR @ 0.1% FPR (membership attack)", "train samples/s",
    "Pareto",
)  # fmt: skip
Row = dict[str, Any]  # a summary row (``reports.tables.summary_rows``)
Pair = tuple[RunResult, Row]


@dataclass(frozen=True)
class LeakageAxis:
    """How membership leakage is measured on one dataset's Pareto frontier.

    ``level`` is the FPR at which the strongest attack's TPR is read (0.1 % where every model has a measurable
    TPR there, else the smallest stored level that has one), or ``None`` when no level is measurable on every
    model (too few non-members): then the AUC of the strongest attack stands in.
    """

    level: float | None
    label: str
    reason: str = ""  # why the AUC stands in, when it does

    @property
    def description(self) -> str:
        """The label, followed by the reason where the AUC stands in."""
        return f"{self.label}; {self.reason}" if self.reason else self.label

    def value(self, r: RunResult) -> tuple[float, float | None, float | None, str] | None:
        """``(value, lower, upper, attack)`` for one RunResult.

        TPR in percent with its 95 % Clopper-Pearson interval, or the AUC (no interval); ``None`` without an attack.
        """
        if self.level is None:
            best = strongest_attack(r)
            return (best[1].metrics.auc, None, None, best[0]) if best else None
        found = strongest_at_level(r, self.level)
        if found is None:
            return None
        name, e = found
        assert e.tpr is not None and e.lower is not None and e.upper is not None  # measurable (strongest_at_level)
        return 100 * e.tpr, 100 * e.lower, 100 * e.upper, name


def leakage_axis(runs: list[RunResult]) -> LeakageAxis:
    """The ``LeakageAxis`` of a list of successful RunResults of one dataset (see the class)."""
    attacked = [r for r in runs if membership_attacks(r)]
    larger = sorted(lv for lv in fpr_levels(attacked) if lv > MAIN_LEVEL)
    for level in [MAIN_LEVEL, *larger]:
        if attacked and all(strongest_at_level(r, level) for r in attacked):
            return LeakageAxis(level, f"TPR at {level_label(level)} FPR of the strongest attack (%)")
    n = max((a.n_non_members for r in attacked for a in membership_attacks(r).values()), default=0)
    return LeakageAxis(None, "AUC of the strongest attack",
                       f"TPR at ≤ 1% FPR is not measurable with {n} non-members per attack")


def pareto_optimal(points: list[tuple[float, float] | None]) -> list[bool | None]:
    """Per ``(accuracy, leakage)`` point, whether no other has accuracy ≥ and leakage ≤ its own (None for None)."""
    real = [p for p in points if p is not None]

    def dominated(p: tuple[float, float]) -> bool:
        return any(q[0] >= p[0] and q[1] <= p[1] and q != p for q in real)

    return [None if p is None else not dominated(p) for p in points]


def pairs_by_dataset(results: Results) -> dict[str, list[Pair]]:
    """``{dataset: [(RunResult, summary row), ...]}`` in document order."""
    groups: dict[str, list[Pair]] = defaultdict(list)
    for r, row in zip(results.results, summary_rows(results), strict=True):
        groups[r.dataset].append((r, row))
    return groups


def _frontier(pairs: list[Pair], axis: LeakageAxis) -> list[bool | None]:
    points = []
    for r, row in pairs:
        leak = None if is_failed(r) or r.degenerate else axis.value(r)  # learned nothing: no evidence of privacy
        acc = row["test_accuracy"]
        points.append(None if leak is None or acc is None else (100 * acc, leak[0]))
    return pareto_optimal(points)


def _lower_bound_cell(results: Results, r: RunResult) -> str:
    """The tightest valid audit bound of a model (never a heuristic one).

    Marked where the run-level check found a privacy bug or refuted a claim.
    """
    lower = tightest_valid(r)
    if lower is None:
        return "no audit"
    text = tightest_text(r) or lower.text()
    if bugs_for(results, r):
        return f"{text} — {BUG_MARK}: see Privacy bugs"
    if refuted_for(results, r):
        return f"{text} — {REFUTED_MARK}: the claimed ε is false"
    mismatch = lower.mismatch()
    return f"{text}; not compared: {mismatch}" if mismatch and has_guarantee(lower.privacy) else text


def _verdict_row(results: Results, r: RunResult, row: Row, front: bool | None, seeds: bool) -> dict[str, Any]:
    mech = str(row["mechanism"]) + (f" (seed {row['seed']})" if seeds else "")
    target = target_text(row["target_epsilon"])
    if is_failed(r):
        cells = [mech, target, f"failed: {one_line(row['error'])}"] + [DASH] * (len(VERDICT_HEADERS) - 3)
        return {"cells": cells, "failed": True, "bug": False, "frontier": None, "attack_failed": False}
    acc, sps = row["test_accuracy"], row["samples_per_s"]
    tpr = row["tpr_at_0.1%_fpr"] + ("" if row["tpr_attack"] is None else f" ({row['tpr_attack']})")
    accuracy = DASH if acc is None else f"{100 * acc:.2f}%"
    pareto = DASH if front is None else ("yes" if front else "no")
    if r.degenerate is not None:  # shown, greyed, never counted as evidence of privacy
        mech, accuracy = f"{mech} — {degenerate_mark(r)}", f"{accuracy} — {r.degenerate.text}"
        tpr, pareto = f"{tpr}; not evidence of privacy (learned nothing)", "— (degenerate)"
    cells = [
        mech, target, GUARANTEE_SHORT.get(str(row["guarantee"]), str(row["guarantee"])), row["privacy"],
        _lower_bound_cell(results, r), accuracy, cost_text(results, r), with_failed_attacks(tpr, r),
        DASH if sps is None else f"{sps:,.0f}", pareto,
    ]  # fmt: skip
    return {"cells": cells, "failed": False, "bug": bool(bugs_for(results, r)), "frontier": front,
            "attack_failed": bool(r.attack_errors), "degenerate": r.degenerate is not None}


def verdict_tables(results: Results) -> list[dict[str, Any]]:
    """One verdict table per dataset.

    Returns:
        ``[{"dataset", "axis": LeakageAxis, "rows": [{"cells": [str] (``VERDICT_HEADERS``), "failed": bool,
        "bug": bool, "frontier": bool | None, "attack_failed": bool, "degenerate": bool}]}]``. A failed cell keeps
        its reason in the guarantee column; an attack that failed on a finished model is named in the TPR column; a
        degenerate model (it learned nothing) is marked in the mechanism column, its one line follows its test
        accuracy, its TPR is "not evidence of privacy", and it is never on the Pareto frontier.
    """
    groups = pairs_by_dataset(results)
    seeds = len({row["seed"] for pairs in groups.values() for _, row in pairs}) > 1
    tables = []
    for dataset, pairs in groups.items():
        axis = leakage_axis([r for r, _ in pairs if not is_failed(r)])
        rows = [_verdict_row(results, r, row, front, seeds)
                for (r, row), front in zip(pairs, _frontier(pairs, axis), strict=True)]
        tables.append({"dataset": dataset, "axis": axis, "rows": rows})
    return tables


def row_css(row: dict[str, Any]) -> str:
    """The HTML class of a verdict row.

    Failed, privacy bug, degenerate (greyed), failed attack (on the frontier or not), frontier.
    """
    if row.get("failed"):
        return "failed"
    if row.get("bug"):
        return "bug"
    if row.get("degenerate"):  # greyed: learned nothing
        return "degenerate attack-failed" if row.get("attack_failed") else "degenerate"
    if row.get("attack_failed"):
        return "attack-failed frontier" if row.get("frontier") else "attack-failed"
    return "frontier" if row.get("frontier") else ""
