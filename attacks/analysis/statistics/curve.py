"""The certified trade-off curve tested on independent runs.

A multi-run design's (FPR, FNR) points against the curve the accountant certifies (Dong, Roth, Su 2022, "Gaussian
differential privacy"), so that a run inconsistent with its certified mechanism is caught where an ε lower bound is too
weak to exceed the certified ε. Exact for any curve f, with the thresholds of
``attacks.analysis.statistics.thresholds.threshold_counts`` and Bonferroni over the rows and their two bounds. The
curves: ``gaussian_tradeoff(μ)``, G_μ (DP-SGD at q = 1: μ = √T/σ, exactly); ``profile_tradeoff(profile)``, the curve
of a mechanism (εᵢ, δᵢ)-DP at every point of its privacy profile (Kairouz, Oh, Viswanath 2015; conservative). Pure
NumPy / SciPy (no torch).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from scipy.special import ndtr, ndtri

from attacks.analysis.statistics.confidence import clopper_pearson

TradeOff = Callable[[float], float]


def gaussian_tradeoff(mu: float) -> TradeOff:
    """μ-GDP's trade-off curve G_μ(α) = Φ(Φ⁻¹(1 − α) − μ), α clipped to [0, 1] (Dong, Roth, Su 2022)."""
    def f(alpha: float) -> float:
        a = min(max(alpha, 0.0), 1.0)
        return float(ndtr(ndtri(1.0 - a) - mu))
    return f


def profile_tradeoff(profile: Sequence[Sequence[float]]) -> TradeOff:
    """α ↦ max_i max(0, 1 − δᵢ − e^{εᵢ}α, e^{−εᵢ}(1 − δᵢ − α)) of an (εᵢ, δᵢ)-DP ``profile`` (Kairouz et al. 2015)."""
    points = [(float(e), float(d)) for e, d in profile]

    def f(alpha: float) -> float:
        return max((max(0.0, 1 - d - math.exp(min(e, 700.0)) * alpha, math.exp(-e) * (1 - d - alpha))
                    for e, d in points), default=0.0)
    return f


def curve_rejected(counts: Sequence[Sequence[int]], tradeoff: TradeOff, *, confidence: float = 0.95) -> bool:
    """Whether a threshold of the fixed family refutes ``tradeoff`` (FPR ↦ the smallest FNR) at ``confidence``.

    Some ``[tp, fn, fp, tn]`` row with FNR_upper < f(FPR_upper), each one-sided Clopper-Pearson bound at
    1 − (1 − confidence)/(2·rows); rows without a positive or a negative are skipped.
    """
    if not counts:
        return False
    level = 1.0 - (1.0 - confidence) / (2 * len(counts))
    for tp, fn, fp, tn in counts:
        if tp + fn < 1 or fp + tn < 1:
            continue
        fpr_u = clopper_pearson(fp, fp + tn, confidence=level, sided="upper")[1]
        fnr_u = clopper_pearson(fn, tp + fn, confidence=level, sided="upper")[1]
        if fnr_u < tradeoff(fpr_u):
            return True
    return False


def certified_tradeoff(mu: float | None, profile: Sequence[Sequence[float]] | None) -> TradeOff | None:
    """The curve a multi-run design holds its runs to: G_μ (exact), else the profile's (conservative), else None."""
    if mu is not None:
        return gaussian_tradeoff(mu)
    if profile:
        return profile_tradeoff(profile)
    return None
