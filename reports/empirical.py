"""The membership attacks' heuristic ε lower bounds and the run-level check's lines.

The heuristic ε lower bounds of the membership attacks (one model's natural members: they assume independent
outcomes, so they are shown, never a verdict), and the lines for the run-level check's privacy bugs and refuted
claims (``attacks/analysis/privacy_bugs/check.py``: valid audit bounds only, Bonferroni over the run). Reads a
``bench.results.Results``; the Audit table itself is ``reports.sections.audit.table``.
"""

from __future__ import annotations

from bench.results import PrivacyBug, Results, RunResult
from reports.bounds import (
    BUG_MARK,
    HEURISTIC,
    REFUTED_MARK,
    bug_audit,
    bugs_for,
    conformance_text,
    family_text,
    percent,
    value_text,
)
from reports.common import (
    DASH,
    delta_text,
    format_privacy,
    is_failed,
    membership_attacks,
    model_label,
    relation_text,
    target_of,
    target_text,
)

__all__ = ["BUG_MARK", "HEURISTIC", "REFUTED_MARK", "bug_lines", "bugs_for", "heuristic_note",
           "heuristic_rows", "privacy_bug_lines", "refuted_claim_lines"]


def _heuristic_models(results: Results) -> list[RunResult]:
    return [r for r in results.results if not is_failed(r) and membership_attacks(r)]


def heuristic_attack_names(results: Results) -> list[str]:
    """The membership attacks (heuristic designs) with a bound in any model."""
    return sorted({n for r in _heuristic_models(results) for n in membership_attacks(r)})


def heuristic_rows(results: Results) -> tuple[list[str], list[list[str]]]:
    """Headers and text rows of the heuristic table.

    Per model, the accountant's ε (with δ, accountant and relation, or "no guarantee") and one ``<attack> (heuristic)``
    column per membership attack: its Clopper-Pearson bound over thresholds at 95% (Jagielski et al. 2020), which
    assumes independent outcomes. Never a verdict.
    """
    names = heuristic_attack_names(results)
    headers = ["dataset", "mechanism", "target ε", "accountant ε (δ, accountant, relation)"]
    headers += [f"ε_LB {n} (heuristic)" for n in names]
    rows = []
    for r in _heuristic_models(results):
        attacks = membership_attacks(r)
        cells = [value_text(attacks[n].audit.epsilon_lb) if n in attacks else DASH for n in names]
        rows.append([r.dataset, model_label(r), target_text(target_of(r)), format_privacy(r.privacy)] + cells)
    return headers, rows


def heuristic_note() -> str:
    """How to read the heuristic table."""
    return (f"Every bound here is {HEURISTIC}: the Clopper-Pearson bound over a fixed family of thresholds "
            "(Jagielski et al. 2020, 95%) applied to one model's natural members, whose membership outcomes DP does "
            "not make independent. It is neither evidence of leakage nor of a privacy bug, whatever its size; only "
            "the audits above (canaries in one run, or independent runs) give valid bounds.")


def _model_text(b: PrivacyBug) -> str:
    return f"{b.mechanism} (target ε {target_text(b.target_epsilon)}, seed {b.seed})"


def bug_lines(results: Results) -> list[str]:
    """One line per privacy bug of the run-level check (empty when there is none).

    The audit with its threat model, design and method, its bound (or the rejection of the accountant's whole certified
    (ε, δ) curve), the accountant's ε with δ, accountant and relation, and the Bonferroni-corrected confidence.
    """
    lines = []
    for b in results.privacy_bugs:
        relation = relation_text(b.relation)
        eps = (f"ε = {b.epsilon:.3g} (δ = {delta_text(b.delta) if b.delta is not None else DASH}, {b.accountant}"
               f"{', ' + relation if relation else ''})")
        if b.method == "conformance":
            what = (f"is inconsistent with the certified mechanism of the accountant's {eps}: {conformance_text(b)}")
        elif b.method == "sampling_test":
            what = f"shows the batches are not the Poisson sampling the accountant's {eps} is certified for"
        elif b.lower_bound is None:
            what = f"rejects the accountant's whole certified (ε, δ) curve, of which {eps} is one point"
        else:
            what = f"ε_LB {value_text(b.lower_bound)} exceeds the accountant's {eps}"
        lines.append(f"{BUG_MARK}: {_model_text(b)}: {bug_audit(b)} {what}, at {percent(b.confidence)} "
                     f"({family_text(results)})")
    return lines


def refuted_claim_lines(results: Results) -> list[str]:
    """One line per refuted claim.

    (a mechanism without a guarantee whose source claimed an ε that a valid audit bound exceeds.) Not a privacy bug,
    since there was no guarantee to break.
    """
    return [f"{REFUTED_MARK}: {_model_text(b)}, no guarantee: {bug_audit(b)} "
            f"{'ε_LB ' + value_text(b.lower_bound) if b.lower_bound is not None else 'rejects the claim'} exceeds "
            f"the claimed ε {b.epsilon:g} (the bound at δ = {delta_text(b.delta) if b.delta is not None else DASH}) "
            f"at {percent(b.confidence)} ({family_text(results)}); not a privacy bug: there was no guarantee"
            for b in results.refuted_claims]


def privacy_bug_lines(results: Results) -> list[str]:
    """The lines ``bench`` prints in red: one per privacy bug (exit 3), then one per refuted claim; [] if neither."""
    return bug_lines(results) + refuted_claim_lines(results)
