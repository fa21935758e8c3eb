"""Parametric audits that read the shape of the scores, not only how many guesses were right.

Both are lower bounds only under their assumption, which every report names beside the number.
``gaussian_pair_epsilon`` (Agrawal, Wei, Singh, Magdon-Ismail, Zikas 2026, "Let's Ask Gauss", arXiv 2606.12733): the
included and excluded canaries' scores as two Gaussians, ε from their hockey-stick divergence minimised over a
confidence box of their means and variances; assumes Gaussian scores, independent across canaries. ``gdp_fit_epsilon``
(Nasr et al. 2023, "Tight Auditing of Differentially Private Machine Learning"): μ_LB = Φ⁻¹(1 − FPR_upper) −
Φ⁻¹(FNR_upper) from independent runs' Clopper-Pearson counts, converted to ε; assumes a Gaussian trade-off. Pure NumPy
/ SciPy (no torch).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from scipy.optimize import brentq
from scipy.special import ndtr, ndtri
from scipy.stats import chi2
from scipy.stats import t as student_t

from attacks.analysis.statistics.confidence import clopper_pearson
from attacks.analysis.statistics.fdp import EPSILON_CAP, gdp_epsilon
from attacks.analysis.statistics.metrics import validate_scores

GRID = 9  # points per edge of the variance box searched for the smallest ε (besides the equal-variance points)


def _region_mass(mean: float, sd: float, lo: float | None, hi: float | None, outside: bool) -> float:
    """P[X in (lo, hi)] (or outside it) for X ~ N(mean, sd²); ``lo``/``hi`` None for ±∞.

    Each tail is taken as Φ of a negative argument (never 1 − Φ), so masses far in a tail keep their relative precision:
    at large ε the hockey-stick weighs them by e^ε.
    """
    a = -math.inf if lo is None else (lo - mean) / sd
    b = math.inf if hi is None else (hi - mean) / sd
    if outside:
        return float(ndtr(a) + ndtr(-b))
    return float(ndtr(-a) - ndtr(-b)) if a > 0 else float(ndtr(b) - ndtr(a))


def hockey_stick(p: tuple[float, float], q: tuple[float, float], epsilon: float) -> float:
    """δ_{P‖Q}(ε) = sup_S P(S) − e^ε Q(S) for P = N(m₁, s₁²), Q = N(m₀, s₀²) in one dimension.

    The set where log p − log q > ε is an interval or its complement: a quadratic inequality, solved in closed form.

    Args:
        p: (m₁, s₁), P's mean and standard deviation (s₁ > 0), in score units.
        q: (m₀, s₀), Q's mean and standard deviation (s₀ > 0).
        epsilon: ε (unitless).

    Returns:
        δ, a probability (>= 0).
    """
    (m1, s1), (m0, s0) = p, q
    a = 1 / (2 * s0**2) - 1 / (2 * s1**2)
    b = m1 / s1**2 - m0 / s0**2
    c = m0**2 / (2 * s0**2) - m1**2 / (2 * s1**2) + math.log(s0 / s1) - epsilon
    if abs(a) < 1e-14:  # equal variances: a half-line
        if b == 0:
            return max(0.0, (1.0 if c > 0 else 0.0) * (1 - math.exp(epsilon)))
        x = -c / b
        lo, hi = (x, None) if b > 0 else (None, x)
        return max(0.0, _region_mass(m1, s1, lo, hi, False) - math.exp(epsilon) * _region_mass(m0, s0, lo, hi, False))
    disc = b * b - 4 * a * c
    if disc <= 0:  # the quadratic never changes sign: everything (a > 0) or nothing (a < 0)
        return max(0.0, 1 - math.exp(epsilon)) if a > 0 else 0.0
    half = -0.5 * (b + math.copysign(math.sqrt(disc), b))  # the roots without cancellation, also for tiny a
    r1, r2 = sorted((half / a, c / half))
    outside = a > 0  # a > 0: the region is outside the roots; a < 0: between them
    pm, qm = _region_mass(m1, s1, r1, r2, outside), _region_mass(m0, s0, r1, r2, outside)
    return max(0.0, pm - math.exp(epsilon) * qm)


def pair_epsilon(p: tuple[float, float], q: tuple[float, float], delta: float) -> float:
    """The smallest ε ≤ ``EPSILON_CAP`` with max(δ_{P‖Q}(ε), δ_{Q‖P}(ε)) <= δ, Gaussians ``p``, ``q`` = (mean, sd)."""
    def excess(e: float) -> float:
        return max(hockey_stick(p, q, e), hockey_stick(q, p, e)) - delta

    if excess(0.0) <= 0:
        return 0.0
    if excess(EPSILON_CAP) > 0:
        return EPSILON_CAP
    return float(brentq(excess, 0.0, EPSILON_CAP, xtol=1e-9))


def _box(n: int, mean: float, sd: float, alpha: float) -> tuple[tuple[float, float], tuple[float, float]]:
    """Confidence intervals of a normal sample's mean and standard deviation.

    Confidence intervals (each at level 1 − α) of a normal sample's mean (Student t: the sd is estimated) and
    standard deviation (χ²).
    """
    half = float(student_t.isf(alpha / 2, n - 1)) * sd / math.sqrt(n)
    lo_sd = sd * math.sqrt((n - 1) / float(chi2.isf(alpha / 2, n - 1)))
    hi_sd = sd * math.sqrt((n - 1) / float(chi2.ppf(alpha / 2, n - 1)))
    return (mean - half, mean + half), (lo_sd, hi_sd)


def pair_bound(fit: dict[str, Any], *, delta: float, confidence: float) -> float:
    """The Gaussian pair's ε lower bound from its summary: the smallest ε over a confidence box (Agrawal et al. 2026).

    ``fit``: ``n_``, ``mean_``, ``sd_`` ``in`` and ``out`` of the two groups' scores. The box of the four confidence
    intervals (each at 1 − (1 − confidence)/4, jointly at ``confidence``), at its smallest mean gap. Adding the same
    independent Gaussian noise to both sides is post-processing, so ε only falls as both sds grow: the box's smallest ε
    lies on the edges where one is at its upper end, smallest where the two are equal (or the end nearest to that);
    those points and ``GRID`` points of each edge are searched. 0 when a group's scores do not vary.
    """
    alpha = (1.0 - confidence) / 4
    (m_in, sd_in), (m_out, sd_out) = (_box(fit[f"n_{g}"], fit[f"mean_{g}"], fit[f"sd_{g}"], alpha)
                                      for g in ("in", "out"))
    if min(sd_in[0], sd_out[0]) <= 0:
        return 0.0
    gap = max(0.0, max(m_in[0] - m_out[1], m_out[0] - m_in[1]))  # the smallest |mean gap| in the box
    edges = [(sd_in[1], float(np.clip(sd_in[1], *sd_out))), (float(np.clip(sd_out[1], *sd_in)), sd_out[1])]
    edges += [(sd_in[1], b) for b in np.linspace(*sd_out, GRID)] + [(a, sd_out[1]) for a in np.linspace(*sd_in, GRID)]
    return float(min(pair_epsilon((gap, a), (0.0, b), delta) for a, b in edges))


def gaussian_pair_epsilon(scores: ArrayLike, labels: ArrayLike, *, delta: float,
                          confidence: float = 0.95) -> dict[str, Any]:
    """ε_LB of the Gaussian pair fitted to included (1) and excluded (0) canaries' ``(N,)`` scores (``pair_bound``).

    Returns ``{"epsilon_lb", "mean_in", "sd_in", "mean_out", "sd_out", "n_in", "n_out", "normality_p"}``, the last the
    smaller D'Agostino-Pearson / Shapiro-Wilk p-value of the groups (a check of the assumption).

    Raises:
        ValueError: fewer than 3 scores in a group, or invalid scores / labels.
    """
    s, y = validate_scores(scores, labels)
    groups = [s[y == 1], s[y == 0]]
    if min(g.size for g in groups) < 3:
        raise ValueError("the Gaussian pair needs at least 3 scores in each group")
    fit = {"mean_in": float(groups[0].mean()), "sd_in": float(groups[0].std(ddof=1)),
           "mean_out": float(groups[1].mean()), "sd_out": float(groups[1].std(ddof=1)),
           "n_in": int(groups[0].size), "n_out": int(groups[1].size), "normality_p": _normality(groups)}
    return {"epsilon_lb": pair_bound(fit, delta=delta, confidence=confidence), **fit}


def _normality(groups: Sequence[np.ndarray]) -> float:
    """The smaller normality-test p-value of the groups (D'Agostino-Pearson from 20 scores, else Shapiro-Wilk)."""
    from scipy.stats import normaltest, shapiro

    if any(g.std() == 0 for g in groups):
        return 0.0
    p = min((normaltest(g).pvalue if g.size >= 20 else shapiro(g).pvalue) for g in groups)
    return float(p) if math.isfinite(p) else 0.0


def gdp_fit_mu(counts: Sequence[Sequence[int]], *, confidence: float = 0.95) -> float:
    """Nasr et al.'s (2023) μ_LB >= 0 over a family of thresholds of independent runs (0 for an empty family).

    max Φ⁻¹(1 − FPR_upper) − Φ⁻¹(FNR_upper) over ``counts`` rows ``[tp, fn, fp, tn]``, each one-sided Clopper-Pearson
    bound at 1 − (1 − confidence)/(2 · rows) (Bonferroni). With probability >= ``confidence`` the runs' mechanism is
    not μ-GDP for any μ < μ_LB, whatever it is (the bounds are exact).
    """
    if not counts:
        return 0.0
    level = 1.0 - (1.0 - confidence) / (2 * len(counts))
    best = 0.0
    for tp, fn, fp, tn in counts:
        fpr_u = clopper_pearson(fp, fp + tn, confidence=level, sided="upper")[1]
        fnr_u = clopper_pearson(fn, tp + fn, confidence=level, sided="upper")[1]
        best = max(best, float(ndtri(1 - fpr_u) - ndtri(fnr_u)) if 0 < fpr_u < 1 and 0 < fnr_u < 1 else 0.0)
    return best


def gdp_fit_epsilon(counts: Sequence[Sequence[int]], *, delta: float, confidence: float = 0.95) -> float:
    """Nasr et al.'s (2023) GDP fit: ``gdp_fit_mu`` as ε at ``delta``, an ε_LB only where the trade-off is Gaussian."""
    return gdp_epsilon(gdp_fit_mu(counts, confidence=confidence), delta)
