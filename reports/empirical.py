"""The "Empirical privacy" table and privacy-bug lines: for every model, the accountant's ε next to the ε
lower bound of every membership attack (Jagielski et al. 2020) and the one-run canary audit's ε̂
(Steinke et al. 2023). Reads results.json only (the ``audit`` blocks and ``privacy_bugs``)."""

from __future__ import annotations

import math
from typing import Any

from reports.tables import DASH, format_privacy, is_failed

BUG_MARK = "PRIVACY BUG"


def _audited(results: dict[str, Any]) -> list[dict[str, Any]]:
    return [r for r in results.get("results") or [] if not is_failed(r)
            and any((a or {}).get("audit") for a in (r.get("attacks") or {}).values())]


def audit_attack_names(results: dict[str, Any]) -> list[str]:
    """Attacks with an ε lower bound in any result (canary runs excluded: they get the ε̂ column)."""
    names = {n for r in _audited(results) for n, a in (r.get("attacks") or {}).items()
             if (a.get("audit") or {}) and not (a.get("audit") or {}).get("one_run")}
    return sorted(names)


def bugs_for(results: dict[str, Any], r: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    """The run-level privacy bugs of one RunResult, keyed by ``(attack, "epsilon_lb" | "epsilon_hat")``."""
    return {(b["attack"], b["bound"]): b for b in results.get("privacy_bugs") or []
            if (b.get("mechanism"), b.get("target_epsilon"), b.get("seed"))
            == (r.get("mechanism"), r.get("target_epsilon"), r.get("seed"))}


def _cell(value: float | None, reference: float | None, bug: dict[str, Any] | None, claimed: bool) -> str:
    if value is None:
        return DASH
    text = f"{value:.2f}"
    if bug is not None:
        return f"{text} {BUG_MARK}: {bug['lower_bound']:.2f} > ε at {100 * bug['confidence']:.3g}%"
    if claimed and reference is not None and value > reference:
        return f"{text} (> claimed ε: the claim is false)"
    return text


def empirical_rows(results: dict[str, Any]) -> tuple[list[str], list[list[str]], list[bool]]:
    """Headers, text rows and a per-row "has a privacy bug" flag of the Empirical privacy table.

    Columns: dataset, mechanism, target ε, the accountant's ε (with δ and accountant, or "no guarantee"),
    one ``ε_LB <attack>`` column per attack (95 %, best of a Bonferroni-corrected threshold family), and
    ``ε̂ one-run`` (the canary audit, 95 %). A bound flagged by the run-level check says so in its cell.
    """
    names = audit_attack_names(results)
    headers = ["dataset", "mechanism", "target ε", "accountant ε (δ, accountant)"]
    headers += [f"ε_LB {n}" for n in names] + ["ε̂ one-run (canary)"]
    rows, flags = [], []
    for r in _audited(results):
        p = r.get("privacy") or {}
        guaranteed = p.get("guarantee", "none") != "none" and p.get("epsilon") is not None
        reference = p.get("epsilon") if guaranteed else p.get("claimed_epsilon")
        bugs = bugs_for(results, r)
        attacks = r.get("attacks") or {}
        cells = []
        for n in names:
            block = (attacks.get(n) or {}).get("audit") or {}
            cells.append(_cell(block.get("epsilon_lb"), reference, bugs.get((n, "epsilon_lb")), not guaranteed))
        one_run = [(n, a["audit"]["one_run"]) for n, a in sorted(attacks.items())
                   if (a.get("audit") or {}).get("one_run")]
        cells.append("; ".join(_cell(o.get("epsilon_hat"), reference, bugs.get((n, "epsilon_hat")), not guaranteed)
                               + ("" if n == "canary" else f" ({n})") for n, o in one_run) or DASH)
        target = r.get("target_epsilon")
        rows.append([str(r.get("dataset")), str(r.get("mechanism")), DASH if target is None else f"{target:g}",
                     format_privacy(p)] + cells)
        flags.append(bool(bugs))
    return headers, rows, flags


def privacy_bug_lines(results: dict[str, Any]) -> list[str]:
    """One line per privacy bug found by the run-level check (empty when there is none)."""
    lines = []
    for b in results.get("privacy_bugs") or []:
        eps = b.get("epsilon")
        eps_txt = "∞" if eps is None or (isinstance(eps, float) and math.isinf(eps)) else f"{eps:.3g}"
        kind = "one-run ε̂" if b.get("bound") == "epsilon_hat" else "ε lower bound"
        target = DASH if b.get("target_epsilon") is None else f"{b['target_epsilon']:g}"
        lines.append(
            f"{BUG_MARK}: {b.get('mechanism')} (target ε {target}, seed {b.get('seed')}): "
            f"{kind} of attack {b.get('attack')} = {b.get('lower_bound', float('nan')):.3f} exceeds the accountant's "
            f"ε = {eps_txt} (δ = {b.get('delta')}, {b.get('accountant')}) at {100 * b.get('confidence', 0.95):.4g}% "
            f"confidence, Bonferroni-corrected over the run")
    return lines


def audit_note(results: dict[str, Any]) -> str:
    """One sentence on how the bounds were computed and how many comparisons the run-level check made."""
    comparisons = (results.get("audit") or {}).get("comparisons")
    text = ("ε_LB: Jagielski et al. (2020) lower bound from one-sided Clopper-Pearson bounds on TPR and FPR, the "
            "best of a fixed family of thresholds (Bonferroni-corrected), 95% confidence; ε̂: one-run canary "
            "audit (Steinke, Nasr, Jagielski 2023), 95%. Each lower bound is a valid lower bound on the ε of "
            "the mechanism at the row's δ; it says nothing about mechanisms it does not exceed.")
    if comparisons:
        text += (f" The run-level check compared {comparisons} bounds with their accountant's ε at "
                 f"{100 * (1 - 0.05 / comparisons):.4g}% each (Bonferroni over the run).")
    return text
