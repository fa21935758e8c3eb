"""The "Empirical privacy" table and privacy-bug lines: for every model, the accountant's ε next to the ε
lower bound of every membership attack (Jagielski et al. 2020) and the one-run canary audit's ε̂
(Steinke et al. 2023). Reads the ``audit`` blocks and ``privacy_bugs`` of a ``bench.results.Results``."""

from __future__ import annotations

import math

from bench.results import PrivacyBug, Results, RunResult
from reports.common import DASH, format_privacy, has_guarantee, is_failed, relation_text, target_text

BUG_MARK = "PRIVACY BUG"


def _audited(results: Results) -> list[RunResult]:
    return [r for r in results.results if not is_failed(r) and r.attacks]


def audit_attack_names(results: Results) -> list[str]:
    """Attacks with an ε lower bound in any result (canary runs excluded: they get the ε̂ column)."""
    names = {n for r in _audited(results) for n, a in r.attacks.items() if a.audit.one_run is None}
    return sorted(names)


def _same_model(b: PrivacyBug, r: RunResult) -> bool:
    return (b.mechanism, b.target_epsilon, b.seed) == (r.mechanism, r.target_epsilon, r.seed)


def bugs_for(results: Results, r: RunResult) -> dict[tuple[str, str], PrivacyBug]:
    """The run-level privacy bugs of one RunResult, keyed by ``(attack, "epsilon_lb" | "epsilon_hat")``."""
    return {(b.attack, b.bound): b for b in results.privacy_bugs if _same_model(b, r)}


def _cell(value: float | None, reference: float | None, bug: PrivacyBug | None, claimed: bool) -> str:
    if value is None:
        return DASH
    text = f"{value:.2f}"
    if bug is not None:
        return f"{text} {BUG_MARK}: {bug.lower_bound:.2f} > ε at {100 * bug.confidence:.3g}%"
    if claimed and reference is not None and value > reference:
        return f"{text} (> claimed ε: the claim is false)"
    return text


def _audit_cells(results: Results, r: RunResult, names: list[str]) -> list[str]:
    """The ``ε_LB <attack>`` cells of one model, then its ``ε̂ one-run`` cell."""
    p = r.privacy
    guaranteed = has_guarantee(p)
    reference = None if p is None else p.epsilon if guaranteed else p.claimed_epsilon
    bugs = bugs_for(results, r)
    cells = []
    for n in names:
        value = r.attacks[n].audit.epsilon_lb if n in r.attacks else None
        cells.append(_cell(value, reference, bugs.get((n, "epsilon_lb")), not guaranteed))
    one_run = [(n, a.audit.one_run) for n, a in sorted(r.attacks.items()) if a.audit.one_run is not None]
    cells.append("; ".join(_cell(o.epsilon_hat, reference, bugs.get((n, "epsilon_hat")), not guaranteed)
                           + ("" if n == "canary" else f" ({n})") for n, o in one_run) or DASH)
    return cells


def empirical_rows(results: Results) -> tuple[list[str], list[list[str]], list[bool]]:
    """Headers, text rows and a per-row "has a privacy bug" flag of the Empirical privacy table.

    Columns: dataset, mechanism, target ε, the accountant's ε (with δ, accountant and relation, or "no
    guarantee"), one ``ε_LB <attack>`` column per attack (95 %, best of a Bonferroni-corrected threshold family),
    and ``ε̂ one-run`` (the canary audit, 95 %). A bound flagged by the run-level check says so in its cell.
    """
    names = audit_attack_names(results)
    headers = ["dataset", "mechanism", "target ε", "accountant ε (δ, accountant, relation)"]
    headers += [f"ε_LB {n}" for n in names] + ["ε̂ one-run (canary)"]
    rows, flags = [], []
    for r in _audited(results):
        rows.append([r.dataset, r.mechanism, target_text(r.target_epsilon), format_privacy(r.privacy)]
                    + _audit_cells(results, r, names))
        flags.append(bool(bugs_for(results, r)))
    return headers, rows, flags


def _bug_relation(results: Results, b: PrivacyBug) -> str:
    """The neighbouring relation of the model a privacy bug was found on (``", add/remove"``), or ``""``."""
    for r in results.results:
        if _same_model(b, r) and r.privacy is not None:
            relation = relation_text(r.privacy.relation)
            return f", {relation}" if relation else ""
    return ""


def privacy_bug_lines(results: Results) -> list[str]:
    """One line per privacy bug found by the run-level check (empty when there is none)."""
    lines = []
    for b in results.privacy_bugs:
        eps = b.epsilon
        eps_txt = "∞" if eps is None or math.isinf(eps) else f"{eps:.3g}"
        kind = "one-run ε̂" if b.bound == "epsilon_hat" else "ε lower bound"
        lines.append(
            f"{BUG_MARK}: {b.mechanism} (target ε {target_text(b.target_epsilon)}, seed {b.seed}): "
            f"{kind} of attack {b.attack} = {b.lower_bound:.3f} exceeds the accountant's "
            f"ε = {eps_txt} (δ = {b.delta}, {b.accountant}{_bug_relation(results, b)}) at "
            f"{100 * b.confidence:.4g}% confidence, Bonferroni-corrected over the run")
    return lines


def audit_note(results: Results) -> str:
    """One sentence on how the bounds were computed and how many comparisons the run-level check made."""
    comparisons = results.audit.comparisons if results.audit is not None else 0
    text = ("ε_LB: Jagielski et al. (2020) lower bound from one-sided Clopper-Pearson bounds on TPR and FPR, the "
            "best of a fixed family of thresholds (Bonferroni-corrected), 95% confidence; ε̂: one-run canary "
            "audit (Steinke, Nasr, Jagielski 2023), 95%. Each lower bound is a valid lower bound on the ε of "
            "the mechanism at the row's δ; it says nothing about mechanisms it does not exceed.")
    if comparisons:
        text += (f" The run-level check compared {comparisons} bounds with their accountant's ε at "
                 f"{100 * (1 - 0.05 / comparisons):.4g}% each (Bonferroni over the run).")
    return text
