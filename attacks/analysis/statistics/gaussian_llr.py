"""The Gaussian (μ-GDP) analysis of white-box DP-SGD canaries' summed log-likelihood ratios.

Dirac canaries (``mechanisms.dpsgd.canaries``; Nasr et al. 2023, "Tight Auditing of Differentially Private Machine
Learning") scored S_i = Σ_t log(1 − q + q·exp((2x_t − 1)/(2σ̂²))), independent trials by construction. Assumption (the
only one): their laws P (included) and Q (excluded) are Gaussian, a μ-GDP pair (Dong, Roth, Su 2022, Def. 2.6; the CLT
for DP-SGD, Bu et al. 2020). μ_LB = (gap lower bound)/(the larger sd upper bound), as ε at δ by μ-GDP (Cor. 2.13). The
excluded scores' skewness and kurtosis are tested against the exact ones (``llr_fit``); a rejection at
``attacks.analysis.NORMALITY_LEVEL`` makes the bound not valid. Why, and how far the CLT is from exact:
docs/design-notes.md. Pure NumPy / SciPy (no torch).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from scipy.stats import chi2
from scipy.stats import t as student_t

from attacks.analysis.statistics.fdp import gdp_epsilon
from attacks.analysis.statistics.gaussian_llr_ideal import exact_llr_cumulants
from attacks.analysis.statistics.metrics import validate_scores

METHOD = "gaussian-llr"


def llr_fit(scores: ArrayLike, labels: ArrayLike, model: Sequence[float] | None = None) -> dict[str, Any]:
    """The summary the analysis needs: each group's size, mean and sd, and tests of the groups' shape.

    - ``model`` = (σ̂, q, T) given: the standardised scores y mapped by the Cornish-Fisher expansion of the exact
      skewness γ₁ and excess kurtosis γ₂ of a sum of T per-step log-likelihood ratios under N(0, σ̂²) noise
      (``exact_llr_cumulants``), z = y − γ₁(y² − 1)/6 − γ₂(y³ − 3y)/24 + γ₁²(4y³ − 7y)/36 (Cornish & Fisher 1938),
      then D'Agostino-Pearson's test of z: the CLT's known skew is no failure (level 1.3–1.7 % of 300 simulated
      runs at 1 %, down to 500 scores); noise not Gaussian, not independent across steps, or not at σ̂ is.
    - no model: D'Agostino-Pearson normality (from 20 scores, else Shapiro-Wilk).

    Args:
        scores: ``(m,)`` summed log-likelihood ratios (larger: included).
        labels: ``(m,)`` coins in {0, 1}.
        model: (σ̂, q, T) of the run (σ̂ in units of C), or None.

    Returns:
        ``n_in``, ``mean_in``, ``sd_in``, ``n_out``, ``mean_out``, ``sd_out``, ``shape_excluded_p`` (the run's own
        noise), ``shape_included_p``, ``shape_p`` (``shape_p`` of the two) and ``shape_test`` (which test ran).

    Raises:
        ValueError: fewer than 3 scores in a group, or invalid scores / labels.
    """
    from scipy.stats import normaltest, shapiro

    s, y = validate_scores(scores, labels)
    inc, exc = s[y == 1], s[y == 0]
    if min(inc.size, exc.size) < 3:
        raise ValueError(f"the Gaussian LLR analysis needs at least 3 scores in each group, got {inc.size}, {exc.size}")
    def shape(group: np.ndarray, contribution: float | None) -> tuple[float, str]:
        if group.std() == 0:
            return 0.0, "none"
        if model is not None and group.size >= 20 and model[0] > 0:
            cum = exact_llr_cumulants(sigma=float(model[0]), sample_rate=float(model[1]), steps=int(model[2]),
                                      contribution=contribution)
            g1, g2 = cum["skew"], cum["excess_kurtosis"]
            y = (group - group.mean()) / group.std()
            z = y - g1 * (y**2 - 1) / 6 - g2 * (y**3 - 3 * y) / 24 + g1**2 * (4 * y**3 - 7 * y) / 36
            return float(normaltest(z).pvalue), "model skewness and kurtosis"
        return float((normaltest(group) if group.size >= 20 else shapiro(group)).pvalue), "normality"

    (p_out, test), (p_in, _) = shape(exc, None), shape(inc, 1.0)
    p_out, p_in = (p if math.isfinite(p) else 0.0 for p in (p_out, p_in))
    return {"n_in": int(inc.size), "mean_in": float(inc.mean()), "sd_in": float(inc.std(ddof=1)),
            "n_out": int(exc.size), "mean_out": float(exc.mean()), "sd_out": float(exc.std(ddof=1)),
            "shape_excluded_p": p_out, "shape_included_p": p_in, "shape_p": shape_p(p_out, p_in),
            "shape_test": test}


def shape_p(excluded: float, included: float) -> float:
    """The two groups' shape tests as one p-value: 2 × the smaller, at most 1 (Bonferroni; the family is unchanged)."""
    return min(1.0, 2.0 * min(excluded, included))


def gdp_mu_lower(fit: dict[str, Any], *, confidence: float) -> float:
    """μ_LB at ``confidence`` of an ``llr_fit`` summary: (mean gap − t·SE)/max(sd upper bounds), 0 if not positive.

    The gap's one-sided Student-t bound at (1 − confidence)/2 (Welch's SE, the smaller group's degrees of freedom),
    each sd's one-sided χ² bound at (1 − confidence)/4: jointly at ``confidence`` (union bound).

    Raises:
        ValueError: confidence outside (0, 1) or a group of fewer than 2 scores.
    """
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    n_in, n_out = int(fit["n_in"]), int(fit["n_out"])
    if min(n_in, n_out) < 2:
        raise ValueError(f"each group needs at least 2 scores, got {n_in}, {n_out}")
    alpha = 1.0 - confidence
    se = math.sqrt(fit["sd_in"] ** 2 / n_in + fit["sd_out"] ** 2 / n_out)
    gap = fit["mean_in"] - fit["mean_out"] - float(student_t.isf(alpha / 2, min(n_in, n_out) - 1)) * se
    sd_hi = max(fit[f"sd_{g}"] * math.sqrt((n - 1) / float(chi2.ppf(alpha / 4, n - 1)))
                for g, n in (("in", n_in), ("out", n_out)))
    if gap <= 0 or sd_hi <= 0:
        return 0.0
    return float(gap / sd_hi)


def llr_gdp_bound(fit: dict[str, Any], *, delta: float, confidence: float) -> float:
    """ε_LB: μ-GDP's ε at δ of ``gdp_mu_lower`` (valid when the summed log-likelihood ratios are Gaussian)."""
    return gdp_epsilon(gdp_mu_lower(fit, confidence=confidence), delta)


def llr_valid(fit: dict[str, Any] | None, level: float) -> bool:
    """Whether the bound may decide: the ``llr_fit`` summary's ``shape_p`` (or excluded group's) >= ``level``."""
    return fit is not None and float(fit.get("shape_p", fit.get("shape_excluded_p", 0.0))) >= level


def pool_llr_fits(fits: list[dict[str, Any]]) -> dict[str, Any]:
    """The ``llr_fit`` summary of several runs' canaries pooled, exactly (sizes add; means and sds from sums).

    Valid only for runs of one mechanism with the same public σ, q and T; shape p-values by ``combined_shape_p``.

    Args:
        fits: ``llr_fit`` summaries, one a run.

    Returns:
        The pooled summary (``shape_included_p`` and ``shape_p`` only where every fit has an included test).

    Raises:
        ValueError: no fits.
    """
    if not fits:
        raise ValueError("pool_llr_fits needs at least one fit")
    out: dict[str, Any] = {"shape_excluded_p": combined_shape_p([float(f["shape_excluded_p"]) for f in fits]),
                           "shape_test": f"Fisher's combination of {len(fits)} runs' tests"}
    if all("shape_included_p" in f for f in fits):
        out["shape_included_p"] = combined_shape_p([float(f["shape_included_p"]) for f in fits])
        out["shape_p"] = shape_p(out["shape_excluded_p"], out["shape_included_p"])
    for g in ("in", "out"):
        n = np.array([f[f"n_{g}"] for f in fits], dtype=np.float64)
        mean = np.array([f[f"mean_{g}"] for f in fits])
        sd = np.array([f[f"sd_{g}"] for f in fits])
        total = n.sum()
        pooled_mean = float((n * mean).sum() / total)
        squares = ((n - 1) * sd**2 + n * (mean - pooled_mean) ** 2).sum()
        out.update({f"n_{g}": int(total), f"mean_{g}": pooled_mean, f"sd_{g}": float(math.sqrt(squares / (total - 1)))})
    return out


def combined_shape_p(p_values: Sequence[float]) -> float:
    """Fisher's combination of R independent p-values: P(χ²_{2R} ≥ −2·Σ log p_i) (Fisher 1932, §21.1), 0 if a p_i is 0.

    Raises:
        ValueError: no p-values, or one outside [0, 1].
    """
    p = np.asarray(p_values, dtype=np.float64)
    if p.size == 0 or not np.all((p >= 0) & (p <= 1)):
        raise ValueError(f"combined_shape_p needs p-values in [0, 1], got {list(p_values)!r}")
    if np.any(p == 0):
        return 0.0
    return float(chi2.sf(-2.0 * np.log(p).sum(), 2 * p.size))
