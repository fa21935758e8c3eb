"""The crafted black-box audit's scores and what is recorded beside its bounds (``attacks.canaries.crafted``).

The anchor's estimator on the same scores, the largest refuted Gaussian curve (``gdp_mu_lb``, valid for μ-GDP; its
ε is the mechanism's only if its curve is Gaussian), the ideal mechanism through the same analysis, and the ideal
mechanism's limit at this R (``attacks.analysis.statistics.limits``). Which number means what: docs/audits.md, "The
final model alone". Pure NumPy / SciPy (no torch).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from attacks.analysis import family, membership_audit
from attacks.analysis.statistics.anchor import anchor_epsilon, simulate
from attacks.analysis.statistics.fdp import gdp_epsilon
from attacks.analysis.statistics.gaussian import gdp_fit_mu
from attacks.analysis.statistics.limits import gaussian_limit
from attacks.analysis.statistics.thresholds import threshold_counts
from bench.core.design import AuditDesign

IDEAL_SEED = 20240514  # the ideal mechanism's simulation: a fixed seed, so the record is a function of (μ, R)


def scores_from_outputs(outputs: ArrayLike, direction: ArrayLike) -> np.ndarray:
    """``(R,)`` float64 scores ⟨logits(canary) − logits(reference), direction⟩ of R runs (no reference: ⟨logits, dir⟩).

    ``outputs``: ``(R, Q, K)`` logits on Q in {1, 2} queries (the canary, then the reference); ValueError otherwise.
    """
    out, v = np.asarray(outputs, dtype=np.float64), np.asarray(direction, dtype=np.float64)
    if out.ndim != 3 or out.shape[1] not in (1, 2) or out.shape[2] != v.size:
        raise ValueError(f"outputs must be (R, 1 or 2, K) with K = {v.size}, got {out.shape}")
    diff = out[:, 0] - out[:, 1] if out.shape[1] == 2 else out[:, 0]
    return np.asarray(diff @ v)


def crafted_summary(scores: ArrayLike, coins: ArrayLike, *, design: AuditDesign, delta: float, ideal_draws: int,
                    confidence: float = 0.95) -> dict[str, Any]:
    """What the crafted audit records beside its bounds (module docstring).

    Args:
        scores: ``(R,)`` the runs' scores (``scores_from_outputs``).
        coins: ``(R,)`` in {0, 1}, 1 where the canary was included.
        design: the audit's design (its family of analyses and certified μ).
        delta: δ, a probability.
        ideal_draws: draws of the ideal mechanism (0: none).
        confidence: the audit's confidence level.

    Returns:
        ``anchor`` ({mu, epsilon}), ``gdp_mu_lb`` and ``refuted_gaussian_epsilon`` (at the design's per-analysis
        confidence), ``mu_hat`` (the scores' standardised mean gap, a point estimate), ``certified_mu`` and, with
        ``ideal_draws`` and a certified μ, ``ideal``: the ideal mechanism's R runs through the same analysis
        (``audit``: its ``epsilon_lb``) and through the anchor's estimator (``anchor``), each ``{median, p10, p90,
        max, draws}``.

    Raises:
        ValueError: from ``anchor_epsilon``: invalid scores or coins, or no run on one side.
    """
    s, y = np.asarray(scores, dtype=np.float64), np.asarray(coins, dtype=np.int64)
    each = 1.0 - (1.0 - confidence) / max(1, len(family(design)))
    mu_lb = gdp_fit_mu(threshold_counts(s, y), confidence=each)
    out: dict[str, Any] = {"anchor": anchor_epsilon(s, y, delta=delta), "gdp_mu_lb": mu_lb,
                           "refuted_gaussian_epsilon": gdp_epsilon(mu_lb, delta), "certified_mu": design.certified_mu,
                           "mu_hat": _mu_hat(s, y)}
    mu = design.certified_mu
    if mu is not None and mu > 0 and 0 < int(y.sum()) < y.size:
        out["ideal_limit"] = gaussian_limit(mu, int(y.size - y.sum()), int(y.sum()), delta=delta, confidence=confidence)
    if ideal_draws and mu is not None:
        def ours(x: np.ndarray, c: np.ndarray) -> float:
            return float(membership_audit(x, c, delta=delta, design=design, confidence=confidence)["epsilon_lb"])

        def theirs(x: np.ndarray, c: np.ndarray) -> float:
            return anchor_epsilon(x, c, delta=delta)["epsilon"]

        out["ideal"] = {name: {k: v for k, v in simulate(f, mu=mu, runs=int(y.size), draws=ideal_draws,
                                                           seed=IDEAL_SEED).items() if k != "values"}
                        for name, f in (("audit", ours), ("anchor", theirs))}
    return out


def _mu_hat(s: np.ndarray, y: np.ndarray) -> float | None:
    """(mean of included − mean of excluded) / sd of excluded; None with fewer than 2 scores a side or no spread."""
    inc, exc = s[y == 1], s[y == 0]
    if inc.size < 2 or exc.size < 2 or exc.std(ddof=1) == 0:
        return None
    return float((inc.mean() - exc.mean()) / exc.std(ddof=1))
