"""Conformance tests of a noise and of the sensitivity it is calibrated to (``attacks.conformance.hypothesis_tests``).

The noise's standard deviation (χ², one-sided or two-sided), its Gaussian shape and its independence across steps and
coordinates (two-sided), and a contribution's L2 norm against the clip bound. Pure NumPy / SciPy; no torch.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from scipy import stats

from attacks.analysis.statistics.confidence import sd_upper
from attacks.conformance.hypothesis_tests import conformance_record

SHAPE_SAMPLE = 200_000  # observations the shape test reads at most (an evenly spaced subsample)


def noise_test(name: str, sum_squares: float, n: int, certified_sd: float, *,
               confidence: float = 0.95, alternative: str = "less") -> dict[str, Any]:
    """Exact χ² test of a noise's sd against the certified s > 0 from Σx² (units of the sd) of ``n`` >= 1 observations.

    Under H0 the observations are iid N(0, s²): Σx²/s² ~ χ²_n, small when the mechanism adds less noise than it
    certifies. ``alternative``: ``less`` (only less noise raises ε) or ``two-sided`` (more variance than certified also
    refutes, e.g. DPMix's residual; p = 2·min of the tails). ``measured`` = √(Σx²/n); ``detail``: one-sided limits
    ``sd_lower``, ``sd_upper`` at ``confidence``.

    Raises:
        ValueError: n < 1, a negative sum of squares, certified_sd ≤ 0 or another ``alternative``.
    """
    if n < 1 or sum_squares < 0 or not certified_sd > 0 or alternative not in ("less", "two-sided"):
        raise ValueError(f"noise test: need n >= 1, Σx² >= 0, a certified sd > 0 and alternative less or two-sided, "
                         f"got {n}, {sum_squares}, {certified_sd}, {alternative!r}")
    stat = sum_squares / certified_sd**2
    alpha = 1.0 - confidence
    p = float(stats.chi2.cdf(stat, n))
    if alternative == "two-sided":
        p = min(1.0, 2 * min(p, float(stats.chi2.sf(stat, n))))
    return conformance_record(
        name, "noise sd", certified=certified_sd, measured=math.sqrt(sum_squares / n), n=n, statistic=stat,
        p_value=p, alternative=alternative, validity="exact",
        sd_lower=math.sqrt(sum_squares / stats.chi2.ppf(1 - alpha, n)),
        sd_upper=sd_upper(sum_squares, n, alpha))


def shape_test(name: str, observations: ArrayLike, *, per_column: bool = False) -> dict[str, Any]:
    """Two-sided test that a noise is Gaussian: D'Agostino & Pearson's (1973) K² (scipy's ``normaltest``), any scale.

    On the ``(N,)`` observations (flattened; at most ``SHAPE_SAMPLE``, evenly spaced). Noise of the certified variance
    with heavier or lighter tails (Laplace, uniform) is another mechanism than the accountant's. ``per_column``: ``(R,
    k)`` observations are first divided by each column's root mean square, so that Gaussian noise whose scale differs
    between coordinates is not read as a heavy tail (the kurtosis bias, about −6/R, is below 0.006). ``measured``: the
    excess kurtosis; p = 0 for constant observations (``detail['reason']``).

    Raises:
        ValueError: fewer than 20 observations, or ``per_column`` with fewer than 1,000 rows.
    """
    x = np.asarray(observations, np.float64)
    if per_column:
        if x.ndim != 2 or x.shape[0] < 1000:
            raise ValueError(f"shape test {name!r}: per_column needs (rows >= 1000, k), got {x.shape}")
        rms = np.sqrt(np.mean(x * x, axis=0))
        x = x[:, rms > 0] / rms[rms > 0]
    x = x.ravel()
    if x.size < 20:
        raise ValueError(f"shape test {name!r}: need >= 20 observations, got {x.size}")
    if x.size > SHAPE_SAMPLE:
        x = x[np.linspace(0, x.size - 1, SHAPE_SAMPLE).astype(np.int64)]
    if not np.any(x != x[0]):
        return conformance_record(name, "noise shape", certified=None, measured=None, n=int(x.size), p_value=0.0,
                           alternative="two-sided", validity="simulated", reason="constant observations")
    k2, p = stats.normaltest(x)
    return conformance_record(name, "noise shape", certified=0.0, measured=float(stats.kurtosis(x)), n=int(x.size),
                       statistic=float(k2), p_value=float(p), alternative="two-sided", validity="simulated")


def independence_test(name: str, observations: ArrayLike) -> dict[str, Any]:
    """Two-sided test that a ``(T, k)`` noise (steps × coordinates) is independent across steps and coordinates.

    The lag-1 correlations r = Σ x_i x_{i+1} / Σ x² along both axes, each √N·r ~ N(0, 1) under H0 (iid zero-mean
    noise); the smaller p-value × 2. Noise reused across steps gives r ≈ 1. ``measured``: the larger ``|r|``;
    ``detail``: ``r_steps``, ``r_coordinates``; p = 0 where every observation is 0 (no noise).

    Raises:
        ValueError: fewer than 2 steps or coordinates.
    """
    x = np.asarray(observations, np.float64)
    if x.ndim != 2 or x.shape[0] < 2 or x.shape[1] < 2:
        raise ValueError(f"independence test {name!r}: need (steps, coordinates) >= (2, 2), got {x.shape}")
    total = float((x * x).sum())
    if total <= 0:
        return conformance_record(name, "noise independence", certified=0.0, measured=None, n=int(x.size), p_value=0.0,
                           alternative="two-sided", validity="simulated", reason="no noise")
    rs, ps = [], []
    for lag in (x[1:] * x[:-1], x[:, 1:] * x[:, :-1]):
        r = float(lag.sum()) / total
        rs.append(r)
        ps.append(2 * float(stats.norm.sf(abs(r) * math.sqrt(lag.size))))
    return conformance_record(name, "noise independence", certified=0.0, measured=max(abs(r) for r in rs),
                              n=int(x.size), statistic=rs[int(np.argmin(ps))], p_value=min(1.0, 2 * min(ps)),
                              alternative="two-sided", validity="simulated", r_steps=rs[0], r_coordinates=rs[1])


def clip_test(name: str, largest_norm: float, bound: float, *, tolerance: float = 1e-4) -> dict[str, Any]:
    """Exact test of the ``largest_norm`` (L2) of a contribution against the assumed sensitivity ``bound`` (e.g. C).

    p = 0 where the norm exceeds ``bound``·(1 + ``tolerance``) (float rounding), else 1.
    """
    return conformance_record(name, "clip bound", certified=float(bound), measured=float(largest_norm), n=1,
                       statistic=float(largest_norm),
                       p_value=0.0 if largest_norm > bound * (1 + tolerance) else 1.0, alternative="greater",
                       validity="exact")
