"""The anchor's estimator, and the ideal mechanism's scores through any analysis.

``anchor_epsilon``: the empirical ε of Annamalai & De Cristofaro (NeurIPS 2024, "Nearly Tight Black-Box Auditing of
Differentially Private Machine Learning", code spalabucr/bb-audit-dpsgd, ``utils/audit.py``): the largest μ over the
scores' own thresholds, as ε by μ-GDP; chosen on the scores it bounds, it is an estimate, never a valid bound.
``ideal_scores`` / ``simulate``: the ideal mechanism of a multi-run design (exact Gaussian scores N(0, 1) excluded,
N(μ, 1) included, R fair coins) put through a given analysis. Pure NumPy / SciPy (no torch).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from scipy.special import ndtri

from attacks.analysis.statistics.confidence import clopper_pearson_upper
from attacks.analysis.statistics.fdp import gdp_epsilon
from attacks.analysis.statistics.metrics import validate_scores


def anchor_mu(scores: ArrayLike, labels: ArrayLike, *, alpha: float = 0.05) -> float:
    """The anchor's μ (Annamalai & De Cristofaro 2024): the largest Φ⁻¹(1 − FPR_u) − Φ⁻¹(FNR_u) over thresholds, or 0.

    Every threshold t among the ``(N,)`` scores ("member" when score >= t, as their ``compute_eps_lower_from_mia``),
    FPR_u and FNR_u one-sided Clopper-Pearson upper bounds at 1 − ``alpha`` each (their
    ``binomtest(...).proportion_ci(confidence_level=1 − 2α)``); ``labels`` 1: included.

    Raises:
        ValueError: invalid scores or labels (``validate_scores``), or no score on one side.
    """
    s, y = validate_scores(scores, labels)
    pos, neg = np.sort(s[y == 1]), np.sort(s[y == 0])
    if not pos.size or not neg.size:
        raise ValueError("the anchor's estimator needs scores of included and excluded canaries")
    t = np.unique(s)
    fp = neg.size - np.searchsorted(neg, t, side="left")  # excluded scores >= t
    fn = np.searchsorted(pos, t, side="left")  # included scores < t
    fpr_u = clopper_pearson_upper(fp, neg.size, alpha)
    fnr_u = clopper_pearson_upper(fn, pos.size, alpha)
    ok = (fpr_u < 1) & (fnr_u < 1) & (fpr_u > 0) & (fnr_u > 0)
    if not ok.any():
        return 0.0
    mu = ndtri(1 - fpr_u[ok]) - ndtri(fnr_u[ok])
    return float(max(0.0, mu.max()))


def anchor_epsilon(scores: ArrayLike, labels: ArrayLike, *, delta: float, alpha: float = 0.05) -> dict[str, float]:
    """``{"mu", "epsilon"}``: ``anchor_mu`` and its ε at ``delta`` by μ-GDP (Eq. 6); not a confidence bound."""
    mu = anchor_mu(scores, labels, alpha=alpha)
    return {"mu": mu, "epsilon": gdp_epsilon(mu, delta)}


def ideal_scores(mu: float, runs: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """R runs of the ideal mechanism: ``(R,)`` scores N(μ·coin, 1), ``(R,)`` int64 fair coins (both sides; R >= 2)."""
    while True:
        coins = (rng.random(runs) < 0.5).astype(np.int64)
        if 0 < coins.sum() < runs:
            return rng.standard_normal(runs) + mu * coins, coins


def simulate(analysis: Callable[[np.ndarray, np.ndarray], float], *, mu: float, runs: int, draws: int,
             seed: int = 0) -> dict[str, Any]:
    """``analysis(scores, coins)`` for ``draws`` draws of ``ideal_scores(μ, R)``: median, p10, p90, max, all."""
    rng = np.random.default_rng(seed)
    values = np.array([analysis(*ideal_scores(mu, runs, rng)) for _ in range(draws)], dtype=float)
    return {"mu": float(mu), "runs": int(runs), "draws": int(draws), "median": float(np.median(values)),
            "p10": float(np.quantile(values, 0.1)), "p90": float(np.quantile(values, 0.9)),
            "max": float(values.max()), "values": values.tolist()}
