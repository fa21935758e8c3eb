"""Estimates as the reports show them (``attacks.analysis``: analyses that rest on a distributional assumption).

The largest one whose assumption stands its test, and each one's assumption with that test's standing — "estimate
(assumes …)", never a bound, never a verdict.
"""

from __future__ import annotations

from attacks.analysis import METHODS, NORMALITY_LEVEL
from bench.results import RunResult
from reports.bounds import AuditBound, audit_bounds_of, tightest


def normality_p(b: AuditBound) -> float | None:
    """The p-value of a fitted estimate's test of its assumption (normality, or gaussian-llr's shape), or None."""
    fit = b.bound.fit or {}
    p = fit.get("normality_p", fit.get("shape_p", fit.get("shape_excluded_p")))
    return None if p is None else float(p)


def plausible_bounds(r: RunResult) -> tuple[AuditBound | None, float | None]:
    """``(best, rejected_p)``: the largest estimate whose assumption stands its test, the smallest rejected p-value.

    Estimates are never bounds; a test rejects at p < ``NORMALITY_LEVEL``; ``rejected_p`` is None when none is rejected.
    """
    tested = [(b, p) for b in audit_bounds_of(r) if b.bound.parametric and not b.bound.valid
              and (p := normality_p(b)) is not None]
    kept = [b for b, p in tested if p >= NORMALITY_LEVEL]
    rejected = [p for _, p in tested if p < NORMALITY_LEVEL]
    return tightest(kept), min(rejected) if rejected else None


def assumption_text(b: AuditBound) -> str:
    """The assumption of a bound and how it stands, e.g. ``"none (non-parametric)"``.

    Or an estimate's assumption with its test: ``"scores Gaussian … (plausible: normality p = 0.067, level 0.01)"``,
    ``"… (rejected: …)"`` or ``"… (untested)"`` — an estimate either way, never a bound.
    """
    assumption = b.bound.assumption or METHODS.get(b.bound.method, ("", None))[1]
    if not b.bound.parametric or not assumption:
        return "none (non-parametric)"
    p = normality_p(b)
    if p is None:
        return f"{assumption} (untested)"
    verdict = "plausible" if p >= NORMALITY_LEVEL else "rejected"
    return f"{assumption} ({verdict}: normality p = {p:.2g}, level {NORMALITY_LEVEL:g})"
