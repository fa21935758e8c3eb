"""What the final model alone can leak.

Per DP-SGD model (built-in, presets, a user's Opacus loop whose phases an audit observed) the accountant's ε under both
relations, the last-iterate heuristic ε (Steinke et al., ICLR 2025: not a bound;
``bench.core.privacy.HeuristicEpsilon``) and the tightest valid bound of the audits that see only the final model
(threat models black-box, black-box-crafted and hidden-state), side by side, all of the same run.
"""

from __future__ import annotations

from bench.results import PrivacyRecord, Results, RunResult
from reports.bounds import AuditBound, tightest, valid_bounds, value_text
from reports.common import DASH, delta_text, finished, has_guarantee, num, relation_text, target_text

FINAL_MODEL_THREATS = ("black-box", "black-box-crafted", "hidden-state")
"""The threat models whose attacker sees only the released model."""

LAST_ITERATE_HEADERS = ["mechanism", "target ε", "accountant ε, add/remove", "accountant ε, replace-one",
                        "last-iterate heuristic ε (Steinke et al. 2025): not a bound",
                        "final-model audit ε_LB (valid, 95%)", "ε_LB / heuristic"]

GAP_SENTENCE = (
    "The accountant's ε bounds an attacker who sees every intermediate model, the last-iterate heuristic (Steinke et "
    "al. 2025: not a bound, real losses are not linear) estimates what one who sees only the final model could learn "
    "and upper-bounded every black-box audit of a real model in that paper, so where the heuristic is close to the "
    "accountant's ε hiding the intermediate models buys little, and a valid final-model ε_LB far below the heuristic "
    "is the audit's weakness, not evidence that the final model leaks less."
)


def final_model_bound(r: RunResult) -> AuditBound | None:
    """The tightest comparable valid bound of ``r``'s final-model audits (those with a heuristic ε first), or None."""
    found = [b for tm in FINAL_MODEL_THREATS for b in valid_bounds(r, tm) if b.comparable]
    return tightest([b for b in found if b.privacy is not None and b.privacy.heuristics] or found)


def _accountant(p: PrivacyRecord, relation: str) -> str:
    same = p.under(relation)
    if same is None or same.epsilon is None:
        return DASH
    return f"{num(same.epsilon)} (δ = {delta_text(same.delta or 0.0)}, {same.accountant})"


def last_iterate_row(r: RunResult) -> list[str] | None:
    """One model's row of ``LAST_ITERATE_HEADERS``.

    The three ε of one run (the audit run's when the final-model audit trained its own, else the model's), the heuristic
    in the relation the audit tests (add/remove without one). None where the run records no heuristic ε.

    Args:
        r: one model's result.

    Returns:
        The row's cells, or None.
    """
    b = final_model_bound(r)
    p = b.privacy if b is not None and b.privacy is not None and b.privacy.heuristics else r.privacy
    if p is None or not has_guarantee(p) or not p.heuristics:
        return None
    relation = b.design.relation if b is not None and b.design.relation else "add-remove"
    h = p.heuristic(relation)
    heuristic = DASH if h is None else f"{num(h.epsilon)} ({relation_text(h.relation)}, δ = {delta_text(h.delta)})"
    if b is None:
        audit, ratio = "no final-model audit", DASH
    else:
        audit = f"{value_text(b.value)} ({b.attack}: {b.threat_model}, {b.bound.method})"
        ratio = DASH if h is None or h.epsilon <= 0 else f"{b.value / h.epsilon:.2f}"
    mech = r.mechanism + (f" ({r.preset})" if r.preset else "") + (f" [{r.row}]" if r.row else "")
    return [mech, target_text(r.target_epsilon), _accountant(p, "add-remove"), _accountant(p, "replace-one"),
            heuristic, audit, ratio]


def last_iterate_rows(results: Results, dataset: str | None = None) -> list[list[str]]:
    """``last_iterate_row`` of each finished model (of ``dataset``, if given) with a heuristic ε, in results order."""
    return [row for r in finished(results) if dataset in (None, r.dataset) and (row := last_iterate_row(r))]
