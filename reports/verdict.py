"""The verdict: which mechanism to ship. One table per dataset (accuracy, the strongest attack at 0.1 % FPR,
the empirical ε lower bound next to the accountant's ε, throughput, guarantee), the privacy-utility Pareto
frontier, and plain-language notes computed from those numbers. Reads results.json only.

The strongest attack at a low FPR is the one with the highest TPR there (Carlini et al. 2022, "Membership
Inference Attacks From First Principles"); the ε lower bounds are those of ``attacks/audit.py`` (Jagielski et
al. 2020; Steinke, Nasr, Jagielski 2023).
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from reports.empirical import BUG_MARK, bugs_for
from reports.tables import (
    DASH,
    GUARANTEE_WORDS,
    MAIN_LEVEL,
    format_tpr,
    fpr_levels,
    is_failed,
    level_label,
    strongest_at_level,
    strongest_attack,
    summary_rows,
)

GUARANTEE_SHORT = {"central-dp": "central DP", "local-dp": "local DP", "dp-release": "DP of the release",
                   "none": "none"}  # fmt: skip
VERDICT_HEADERS = (
    "mechanism", "target ε", "guarantee", "accountant ε (δ, accountant)", "empirical ε lower bound (attack)",
    "test acc.", "TPR @ 0.1% FPR (attack)", "train samples/s", "Pareto",
)  # fmt: skip
Run = dict[str, Any]


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

    def value(self, r: Run) -> tuple[float, float | None, float | None, str] | None:
        """``(value, lower, upper, attack)`` for one RunResult: TPR in percent with its 95 % Clopper-Pearson
        interval, or the AUC (no interval); ``None`` without an attack."""
        if self.level is None:
            best = strongest_attack(r)
            return (best[1]["metrics"]["auc"], None, None, best[0]) if best else None
        found = strongest_at_level(r, self.level)
        if found is None:
            return None
        name, e = found
        return 100 * e["tpr"], 100 * e["lower"], 100 * e["upper"], name


def leakage_axis(runs: list[Run]) -> LeakageAxis:
    """The ``LeakageAxis`` of a list of successful RunResults of one dataset (see the class)."""
    attacked = [r for r in runs if r.get("attacks")]
    larger = sorted(lv for lv in fpr_levels({"results": attacked}) if lv > MAIN_LEVEL)
    for level in [MAIN_LEVEL, *larger]:
        if attacked and all(strongest_at_level(r, level) for r in attacked):
            return LeakageAxis(level, f"TPR at {level_label(level)} FPR of the strongest attack (%)")
    n = max((a.get("n_non_members") or 0 for r in attacked for a in r["attacks"].values()), default=0)
    return LeakageAxis(None, "AUC of the strongest attack",
                       f"TPR at ≤ 1% FPR is not measurable with {n} non-members per attack")


def pareto_optimal(points: list[tuple[float, float] | None]) -> list[bool | None]:
    """Which ``(accuracy, leakage)`` points no other point beats on both (higher accuracy, lower leakage).

    Args:
        points: one ``(accuracy, leakage)`` per model, ``None`` for a model without both numbers.

    Returns:
        ``True`` / ``False`` per point (``None`` where the point is ``None``).
    """
    real = [p for p in points if p is not None]

    def dominated(p: tuple[float, float]) -> bool:
        return any(q[0] >= p[0] and q[1] <= p[1] and q != p for q in real)

    return [None if p is None else not dominated(p) for p in points]


def _by_dataset(results: dict[str, Any]) -> dict[str, list[tuple[Run, dict[str, Any]]]]:
    """``{dataset: [(RunResult, summary row), ...]}`` in document order."""
    groups: dict[str, list[tuple[Run, dict[str, Any]]]] = defaultdict(list)
    for r, row in zip(results.get("results") or [], summary_rows(results), strict=True):
        groups[str(row["dataset"])].append((r, row))
    return groups


def _frontier(pairs: list[tuple[Run, dict[str, Any]]], axis: LeakageAxis) -> list[bool | None]:
    points = []
    for r, row in pairs:
        leak = None if is_failed(r) else axis.value(r)
        acc = row["test_accuracy"]
        points.append(None if leak is None or acc is None else (100 * acc, leak[0]))
    return pareto_optimal(points)


def _lower_bound_cell(results: dict[str, Any], r: Run, row: dict[str, Any]) -> str:
    if row["epsilon_lb"] is None:
        return DASH
    # a bound of 0 certifies nothing: naming "its" attack would only name the last one tried
    text = f"{row['epsilon_lb']:.2f}" + (f" ({row['epsilon_lb_attack']})" if row["epsilon_lb"] > 0 else "")
    if bugs_for(results, r):
        return f"{text} — {BUG_MARK}: see Privacy bugs"
    claimed = (r.get("privacy") or {}).get("claimed_epsilon")
    if row["epsilon"] is None and claimed is not None and row["epsilon_lb"] > claimed:
        return f"{text} > claimed ε: the claim is false"
    return text


def verdict_tables(results: dict[str, Any]) -> list[dict[str, Any]]:
    """One verdict table per dataset.

    Returns:
        ``[{"dataset", "axis": LeakageAxis, "rows": [{"cells": [str] (``VERDICT_HEADERS``), "failed": bool,
        "bug": bool, "frontier": bool | None}]}]``. A failed cell keeps its reason in the guarantee column.
    """
    seeds = len({row["seed"] for pairs in _by_dataset(results).values() for _, row in pairs}) > 1
    tables = []
    for dataset, pairs in _by_dataset(results).items():
        axis = leakage_axis([r for r, _ in pairs if not is_failed(r)])
        rows = []
        for (r, row), front in zip(pairs, _frontier(pairs, axis), strict=True):
            mech = str(row["mechanism"]) + (f" (seed {row['seed']})" if seeds else "")
            target = DASH if row["target_epsilon"] is None else f"{row['target_epsilon']:g}"
            if is_failed(r):
                reason = " ".join(str(row.get("error") or "unknown error").split())
                cells = [mech, target, f"failed: {reason}"] + [DASH] * (len(VERDICT_HEADERS) - 3)
                rows.append({"cells": cells, "failed": True, "bug": False, "frontier": None})
                continue
            acc, sps = row["test_accuracy"], row["samples_per_s"]
            tpr = row["tpr_at_0.1%_fpr"] + ("" if row["tpr_attack"] is None else f" ({row['tpr_attack']})")
            cells = [
                mech, target, GUARANTEE_SHORT.get(str(row["guarantee"]), str(row["guarantee"])), row["privacy"],
                _lower_bound_cell(results, r, row), DASH if acc is None else f"{100 * acc:.2f}%", tpr,
                DASH if sps is None else f"{sps:,.0f}", DASH if front is None else ("yes" if front else "no"),
            ]  # fmt: skip
            rows.append({"cells": cells, "failed": False, "bug": bool(bugs_for(results, r)), "frontier": front})
        tables.append({"dataset": dataset, "axis": axis, "rows": rows})
    return tables


def _at(target: float | None) -> str:
    return "" if target is None else f" at target ε {target:g}"


def _ship_note(rows: list[dict[str, Any]]) -> list[str]:
    """Per target ε, the guaranteed mechanisms ranked by test accuracy (mean over seeds), and the baseline."""
    acc: dict[tuple[float, str], list[float]] = defaultdict(list)
    kinds: dict[str, str] = {}
    baseline = [row["test_accuracy"] for row in rows if row["guarantee"] == "none" and row["target_epsilon"] is None]
    for row in rows:
        if row["epsilon"] is not None and row["target_epsilon"] is not None and row["test_accuracy"] is not None:
            acc[(row["target_epsilon"], row["mechanism"])].append(row["test_accuracy"])
            kinds[row["mechanism"]] = GUARANTEE_SHORT.get(row["guarantee"], row["guarantee"])
    notes = []
    for target in sorted({t for t, _ in acc}):
        ranked = sorted(((sum(v) / len(v), m) for (t, m), v in acc.items() if t == target), reverse=True)
        listing = ", ".join(f"{m} {100 * a:.1f}% ({kinds[m]})" for a, m in ranked)
        notes.append(f"At target ε {target:g}, by test accuracy: {listing}.")
    if baseline and notes:
        notes.append(f"Without privacy the baseline reaches {100 * sum(baseline) / len(baseline):.1f}%. The "
                     "guarantees differ in kind: central DP protects the training set from whoever sees the model, "
                     "DP of the release from whoever sees the released data, local DP each record even from the "
                     "trainer.")  # fmt: skip
    return notes


def _attack_sentence(pairs: list[tuple[Run, dict[str, Any]]]) -> str:
    best = [(strongest_at_level(r), row) for r, row in pairs]
    best = [(found, row) for found, row in best if found]
    if best:
        (name, e), row = max(best, key=lambda fr: (fr[0][1]["tpr"], fr[0][1]["lower"] or 0.0))
        where = _at(row["target_epsilon"])
        if (e.get("lower") or 0.0) > MAIN_LEVEL:
            return (f"{name} recovers membership at TPR {format_tpr(e)} at 0.1% FPR{where}, "
                    f"{e['tpr'] / MAIN_LEVEL:.0f}× chance")  # fmt: skip
        return f"no attack beats chance (0.1%) at 0.1% FPR; the best, {name}{where}, reaches TPR {format_tpr(e)}"
    by_auc = [(strongest_attack(r), row) for r, row in pairs]
    by_auc = [(b, row) for b, row in by_auc if b]
    if not by_auc:
        return "no membership attack ran"
    n = max(a.get("n_non_members") or 0 for r, _ in pairs for a in (r.get("attacks") or {}).values())
    (name, a), row = max(by_auc, key=lambda br: br[0][1]["metrics"]["auc"])
    return (f"TPR at 0.1% FPR is not measurable with {n} non-members (needs {math.ceil(10 / MAIN_LEVEL):,}); "
            f"the strongest attack by AUC is {name} (AUC {a['metrics']['auc']:.3f}{_at(row['target_epsilon'])})")


def _bound_sentence(results: dict[str, Any], pairs: list[tuple[Run, dict[str, Any]]]) -> str:
    bounded = [(r, row) for r, row in pairs if row["epsilon_lb"] is not None]
    if not bounded:
        return ""
    r, row = max(bounded, key=lambda rr: rr[1]["epsilon_lb"])
    lb, who = row["epsilon_lb"], f"{row['epsilon_lb_attack']}{_at(row['target_epsilon'])}"
    claimed = [(r2, row2) for r2, row2 in bounded if row2["epsilon"] is None
               and (r2.get("privacy") or {}).get("claimed_epsilon") is not None
               and row2["epsilon_lb"] > r2["privacy"]["claimed_epsilon"]]  # fmt: skip
    if any(bugs_for(results, r2) for r2, _ in bounded):
        return f"an empirical ε lower bound exceeds the accountant's ε significantly: {BUG_MARK} (see Privacy bugs)"
    if claimed:
        _, row2 = claimed[0]
        return (f"the empirical ε lower bound {row2['epsilon_lb']:.2f} ({row2['epsilon_lb_attack']}"
                f"{_at(row2['target_epsilon'])}) exceeds the claimed ε: that claim is false")
    if lb <= 0:
        return "no attack certifies any leakage (every empirical ε lower bound is 0)"
    if row["epsilon"] is None:
        return f"the largest empirical ε lower bound is {lb:.2f} ({who}), with no guarantee to hold it to"
    over = [row2 for r2, row2 in bounded if row2["epsilon"] is not None and row2["epsilon_lb"] > row2["epsilon"]]
    if over:
        return (f"the largest empirical ε lower bound, {lb:.2f} ({who}), is above an accountant's ε but not "
                "significantly after the Bonferroni correction over the run")
    return f"empirical ε lower bounds reach {lb:.2f} ({who}), below the accountant's ε of every model"


def _mechanism_note(results: dict[str, Any], mech: str, pairs: list[tuple[Run, dict[str, Any]]]) -> str:
    ok = sorted(((r, row) for r, row in pairs if not is_failed(r)),
                key=lambda rr: (rr[1]["target_epsilon"] is not None, rr[1]["target_epsilon"] or 0.0))
    first = ok[0][1]
    guarantee = GUARANTEE_WORDS.get(str(first["guarantee"]), str(first["guarantee"]))
    if first["accountant"]:
        guarantee += f" ({first['accountant']} accountant, δ = {first['delta']:.2g})"
    elif any((r.get("privacy") or {}).get("claimed_epsilon") is not None for r, _ in ok):
        guarantee += " (the ε its source claims is not one)"
    accs = [(row["test_accuracy"], row["target_epsilon"]) for _, row in ok if row["test_accuracy"] is not None]
    if len(accs) == 1:
        accuracy = f"test accuracy {100 * accs[0][0]:.1f}%"
    elif accs:
        accuracy = (f"test accuracy {100 * accs[0][0]:.1f}%{_at(accs[0][1])} to "
                    f"{100 * accs[-1][0]:.1f}%{_at(accs[-1][1])}")  # fmt: skip
    else:
        accuracy = "no test accuracy"
    parts = [accuracy, _attack_sentence(ok), _bound_sentence(results, ok)]
    failed = len(pairs) - len(ok)
    if failed:
        parts.append(f"{failed} model(s) failed")
    return f"{mech}: {guarantee}; " + "; ".join(p for p in parts if p) + "."


def verdict_notes(results: dict[str, Any]) -> dict[str, list[str]]:
    """Plain-language notes per dataset, computed from the numbers: the guaranteed mechanisms ranked by
    accuracy at each target ε, then one sentence per mechanism (guarantee, accuracy range, what the strongest
    attack achieves at 0.1 % FPR against chance, and how the empirical ε lower bounds compare with the
    accountant's or the claimed ε). Every ε printed with "=" comes with its δ and accountant elsewhere; here
    ε appears only as "target ε" or "claimed ε" values."""
    notes = {}
    for dataset, pairs in _by_dataset(results).items():
        rows = [row for r, row in pairs if not is_failed(r)]
        lines = _ship_note(rows)
        by_mech: dict[str, list[tuple[Run, dict[str, Any]]]] = defaultdict(list)
        for r, row in pairs:
            by_mech[str(row["mechanism"])].append((r, row))
        for mech, mine in by_mech.items():
            if any(not is_failed(r) for r, _ in mine):
                lines.append(_mechanism_note(results, mech, mine))
            else:
                lines.append(f"{mech}: every model failed (see Failed cells).")
        notes[dataset] = lines
    return notes


def verdict_headline(results: dict[str, Any]) -> dict[str, list[str]]:
    """Per dataset, the two or three sentences a reader needs first: which mechanism with a formal guarantee is
    the most accurate at the target ε values tried (against the non-private baseline), whether any attack beats
    chance at 0.1 % FPR, and which claimed ε values the attacks refute or which accountant ε a privacy bug breaks.
    """
    out = {}
    for dataset, pairs in _by_dataset(results).items():
        ok = [(r, row) for r, row in pairs if not is_failed(r)]
        best: dict[float, tuple[float, str]] = {}
        competing: dict[float, set[str]] = defaultdict(set)
        for _, row in ok:
            if row["epsilon"] is not None and row["target_epsilon"] is not None and row["test_accuracy"] is not None:
                t = row["target_epsilon"]
                best[t] = max(best.get(t, (-1.0, "")), (row["test_accuracy"], str(row["mechanism"])))
                competing[t].add(str(row["mechanism"]))
        alone = {t: best[t][1] for t in best if len(competing[t]) == 1}
        if len(alone) < len(best):  # compare where mechanisms compete (reference ε values run for one only)
            best = {t: v for t, v in best.items() if t not in alone}
        else:
            alone = {}
        winners = {m for _, m in best.values()}
        if not best:
            lines = ["No mechanism in this run has a formal guarantee."]
        elif len(winners) == 1:
            accs = [100 * a for a, _ in best.values()]
            span = f"{min(accs):.1f}%" if len(accs) == 1 else f"{min(accs):.1f}–{max(accs):.1f}%"
            targets = ", ".join(f"{t:g}" for t in sorted(best))
            lines = [f"With a formal guarantee, {winners.pop()} is the most accurate mechanism at every target ε "
                     f"compared ({targets}): {span} test accuracy."]  # fmt: skip
        else:
            lines = ["Most accurate with a formal guarantee: "
                     + "; ".join(f"{m} at target ε {t:g} ({100 * a:.1f}%)" for t, (a, m) in sorted(best.items())) + "."]
        baseline = [row["test_accuracy"] for _, row in ok if row["guarantee"] == "none"
                    and row["target_epsilon"] is None and row["test_accuracy"] is not None]  # fmt: skip
        if alone:
            lines[0] += (" Run for one mechanism only: "
                         + ", ".join(f"{m} at target ε {t:g}" for t, m in sorted(alone.items())) + ".")
        if baseline:
            lines[0] += f" The non-private baseline reaches {100 * max(baseline):.1f}%."
        leaks = [(row, found) for r, row in ok if (found := strongest_at_level(r))]
        beating = [f"{row['mechanism']}{_at(row['target_epsilon'])} ({found[0]}, TPR {format_tpr(found[1])})"
                   for row, found in leaks if (found[1].get("lower") or 0.0) > MAIN_LEVEL]  # fmt: skip
        if beating:
            lines.append("Membership attacks beat chance at 0.1% FPR on: " + "; ".join(beating) + ".")
        elif leaks:
            lines.append("No membership attack beats chance at 0.1% FPR on any model (95% intervals).")
        else:
            lines.append("TPR at 0.1% FPR is not measurable in this run (too few non-members); see the AUCs below.")
        refuted = [f"{row['mechanism']}'s claimed ε {r['privacy']['claimed_epsilon']:g} (lower bound "
                   f"{row['epsilon_lb']:.2f}, {row['epsilon_lb_attack']})" for r, row in ok
                   if row["epsilon"] is None and row["epsilon_lb"] is not None
                   and (r.get("privacy") or {}).get("claimed_epsilon") is not None
                   and row["epsilon_lb"] > r["privacy"]["claimed_epsilon"]]  # fmt: skip
        if refuted:
            lines.append("Refuted by the audits: " + "; ".join(refuted) + ".")
        bugs = sum(bool(bugs_for(results, r)) for r, _ in ok)
        if bugs:
            lines.append(f"{BUG_MARK}: {bugs} model(s) with an empirical ε lower bound significantly above the "
                         "accountant's ε (red lines above).")
        out[dataset] = lines
    return out
