"""The audit section's table of white-box canary audits pooled across seeds.

(results.json ``audit.pooled``, ``attacks.analysis.audits.pooled``.) Per configuration (dataset, mechanism, target ε),
the seeds pooled, the canaries, the pooled μ-GDP ε estimate at 95 % (it assumes the summed log-likelihood ratios
Gaussian: never a bound) and its ratio to the accountant's ε of the audit's own relation, with that ε's δ and
accountant.
"""

from __future__ import annotations

from bench.results import Results
from bench.results.audit_summary import PooledAudit
from reports.common import DASH, relation_text, target_text

POOLED_HEADERS = ("mechanism", "target ε", "audit", "seeds pooled", "canaries", "pooled estimate (method, 95 %)",
                  "accountant ε (δ, accountant, relation)", "estimate / ε", "assumption's test")
POOLED_NOTE = ("Every run's white-box canaries are independent draws from one pair of score distributions (the same "
               "public σ, q and T), so the runs of one configuration are pooled into one μ-GDP analysis of their "
               "summed log-likelihood ratios; which runs are pooled is fixed by the run's seeds before any score is "
               "seen. The pooled number is an estimate: it assumes those sums Gaussian (a central limit over the "
               "steps), so it is never an \"ε ≥\" and never decides a privacy bug. 'rejected': the runs' shape test "
               "of their excluded canaries rejects that shape.")


def _accountant(results: Results, p: PooledAudit) -> str:
    """The accountant of the runs' ε under the pool's relation (the first run of the pool that states it)."""
    for r in results.results:
        if (r.dataset, r.mechanism, r.target_epsilon, r.row) != (p.dataset, p.mechanism, p.target_epsilon, p.row) \
                or r.seed not in p.seeds or r.privacy is None:
            continue
        stated = r.privacy.under(p.relation)
        if stated is not None and stated.accountant:
            return stated.accountant
    return DASH


def pooled_rows(results: Results) -> list[list[str]]:
    """One row per pooled audit of the run (``results.audit.pooled``); empty without one."""
    pooled = results.audit.pooled if results.audit is not None else []
    rows = []
    for p in pooled:
        ratio = f"{p.epsilon_lb / p.epsilon:.3g}" if p.epsilon > 0 else DASH
        rows.append([p.mechanism, target_text(p.target_epsilon), p.attack, ", ".join(map(str, p.seeds)),
                     f"{p.size:,}", f"{p.epsilon_lb:.3g} ({p.method}, 95 %)",
                     f"ε = {p.epsilon:.3g} (δ = {p.delta:.0e}, {_accountant(results, p)}, {relation_text(p.relation)})",
                     ratio, "passed" if p.valid else "rejected"])
    return rows
