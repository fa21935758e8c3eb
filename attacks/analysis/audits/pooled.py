"""White-box DP-SGD canary audits pooled across a run's seeds (the multi-run use of the one-run design).

The seeds of one (dataset, mechanism, target ε, row) train the same mechanism with the same public σ, q and T, so
every run's Dirac canaries are independent draws from one pair of score distributions (included, excluded): pooling
their ``gaussian-llr`` summaries (``attacks.analysis.statistics.gaussian_llr.pool_llr_fits``) is one μ-GDP analysis of
R·m canaries. Which runs are pooled is fixed by the run's configuration (its seeds) before any score is seen. The pooled
number is an *estimate* (``attacks.analysis``: it assumes the summed log-likelihood ratios Gaussian): shown with the
runs' shape tests of their excluded canaries, combined by Fisher's method
(``attacks.analysis.statistics.gaussian_llr.combined_shape_p``, at ``attacks.analysis.NORMALITY_LEVEL``), never an "ε ≥"
and never a privacy bug.
"""

from __future__ import annotations

from typing import TypeVar

from attacks.analysis import NORMALITY_LEVEL, estimates
from attacks.analysis.statistics.gaussian_llr import llr_gdp_bound, llr_valid, pool_llr_fits
from bench.results import AttackRecord, PooledAudit, PrivacyRecord, RunResult

METHOD = "gaussian-llr"
Member = tuple[RunResult, AttackRecord, PrivacyRecord]


T = TypeVar("T")


def _known(value: T | None, what: str) -> T:
    """``value``, which ``pool_groups`` has made sure of. Raises: ValueError if it is None."""
    if value is None:
        raise ValueError(f"a pooled audit's guarantee has no {what}")
    return value


def group_epsilon(group: list[Member]) -> float:
    """The largest accountant's ε among ``group``'s members; ValueError for a guarantee without one."""
    return max(_known(m[2].epsilon, "ε") for m in group)


def pool_groups(results: list[RunResult]) -> list[list[Member]]:
    """The groups of two or more runs whose white-box canary audits may be pooled.

    One per (dataset, mechanism, target ε, row, audit, public σ, q, T and the accountant's ε and δ); failed runs,
    audits without a ``gaussian-llr`` estimate and guarantees of "none" or without an ε are left out.

    Args:
        results: the runs' results.

    Returns:
        The groups, each member (run, its audit record, the guarantee under the audit's relation).
    """
    groups: dict[tuple[object, ...], list[Member]] = {}
    for r in results:
        if not r.ok:
            continue
        for name, record in sorted(r.attacks.items()):
            design = record.audit.design
            if METHOD not in estimates(design):
                continue
            p = record.audited_privacy or r.privacy
            if p is None or p.guarantee == "none" or p.epsilon is None:
                continue
            p = p.under(design.relation)
            if p is None or p.epsilon is None:
                continue
            public = tuple(record.extra.get(k) for k in ("claimed_sigma", "sample_rate", "steps"))
            key = (r.dataset, r.mechanism, r.target_epsilon, r.row, name, public, p.epsilon, p.delta)
            groups.setdefault(key, []).append((r, record, p))
    return [g for _, g in sorted(groups.items(), key=lambda kv: repr(kv[0])) if len(g) >= 2]


def pooled_bound(group: list[Member], *, confidence: float) -> tuple[float, bool]:
    """``(ε estimate, tested)``: the pooled μ-GDP ε of ``group`` (``pool_llr_fits``, ``llr_gdp_bound``).

    Tested: every run's fit present (else ``(0.0, False)``) and Fisher's combined shape test >= ``NORMALITY_LEVEL``.
    """
    fits = [next((b.fit for b in rec.audit.bounds if b.method == METHOD), None) for _, rec, _ in group]
    present = [f for f in fits if f is not None]
    if len(present) < len(fits):
        return 0.0, False
    pooled = pool_llr_fits(present)
    delta = group[0][1].audit.delta
    return llr_gdp_bound(pooled, delta=delta, confidence=confidence), llr_valid(pooled, NORMALITY_LEVEL)


def pooled_audits(results: list[RunResult], *, confidence: float = 0.95) -> list[PooledAudit]:
    """One ``PooledAudit`` per ``pool_groups`` group: its bound at ``confidence``, largest ε, δ and relation.

    Raises:
        ValueError: a group's guarantee without an ε, a δ or a relation.
    """
    out = []
    for group in pool_groups(results):
        value, valid = pooled_bound(group, confidence=confidence)
        r, _, p = group[0]
        out.append(PooledAudit(dataset=r.dataset, mechanism=r.mechanism, target_epsilon=r.target_epsilon, row=r.row,
                               attack=next(n for n, rec in r.attacks.items() if rec is group[0][1]),
                               seeds=[m[0].seed for m in group], size=sum(m[1].audit.design.size for m in group),
                               epsilon_lb=value, valid=valid, epsilon=group_epsilon(group),
                               delta=_known(p.delta, "δ"), relation=_known(p.relation, "relation")))
    return out
