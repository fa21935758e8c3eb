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
    """χ² test of a noise's standard deviation.

    n observations iid N(0, s²) under H0 with s the certified sd; Σx²/s² ~ χ²_n, small when the mechanism adds less
    noise than it certifies. Exact.

    Args:
        name: the test's name (e.g. ``noise σ, tensor 2``).
        sum_squares: Σx² of the ``n`` observations (units of the sd).
        n: the number of observations (≥ 1).
        certified_sd: s > 0 (e.g. the noise multiplier σ when the observations are in units of C).
        confidence: of the interval ``sd_lower`` / ``sd_upper`` stored beside (each one-sided).
        alternative: ``less`` (one-sided: only less noise raises ε) or ``two-sided`` (where more than the certified
            variance also says the release is not the certified mechanism: a residual that holds more than the noise,
            DPMix's release − the mean of its recorded subset; p = 2·min of the two tails).

    Returns:
        The record, ``measured`` = √(Σx²/n), ``detail`` with ``sd_lower`` and ``sd_upper``.

    Raises:
        ValueError: n < 1, a negative sum of squares or certified_sd ≤ 0.
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
    """Two-sided test that a noise is Gaussian.

    D'Agostino and Pearson's K² (skewness and kurtosis; scipy's ``normaltest``) on the observations ``(N,)`` (at most
    ``SHAPE_SAMPLE``, evenly spaced), any scale. A noise of the certified variance but heavier or lighter tails
    (Laplace, uniform) is a different mechanism than the accountant's. ``per_column``: observations ``(R, k)`` (rows ×
    coordinates, R ≥ 1,000) are first divided by each column's root mean square, so that Gaussian noise whose scale
    differs between coordinates (each coordinate's scale is what the noise tests judge) is not read as a heavy tail; the
    bias this adds to the kurtosis, about −6/R, is below 0.006. (D'Agostino & Pearson 1973, "Tests for departure from
    normality".)

    Args:
        name: the test's name.
        observations: ``(N,)`` noise draws (any shape, flattened), or ``(R, k)`` with ``per_column``.
        per_column: rescale each column to unit root mean square first.

    Returns:
        The ``conformance_record``: ``measured`` the excess kurtosis (0 for a Gaussian), ``statistic`` K²; p = 0 for
        constant observations (``detail['reason']``).

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
    """Two-sided test that a noise is independent across steps and across coordinates.

    The lag-1 correlations of the observations ``(T, k)`` (steps × coordinates) along both axes, r = Σ x_i x_{i+1} / Σ
    x², each √N·r ~ N(0, 1) under H0 (iid zero-mean noise); the smaller of the two p-values, × 2. Noise reused across
    steps (a generator re-seeded every step) gives r ≈ 1.

    Args:
        name: the test's name.
        observations: ``(T, k)`` noise draws, steps × coordinates.

    Returns:
        The ``conformance_record``: ``measured`` the larger ``|r|``, ``detail`` with ``r_steps`` and
        ``r_coordinates``; p = 0 where every observation is 0 (no noise).

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
    """A contribution's L2 norm against the sensitivity the accountant assumes (DP-SGD's clip bound C); exact.

    Args:
        name: the test's name.
        largest_norm: the largest L2 norm observed (units of the contribution).
        bound: the assumed sensitivity (e.g. C, or a release's input norm).
        tolerance: relative float rounding allowed above ``bound``.

    Returns:
        The ``conformance_record``: p = 0 where the norm exceeds ``bound``·(1 + ``tolerance``), else 1.
    """
    return conformance_record(name, "clip bound", certified=float(bound), measured=float(largest_norm), n=1,
                       statistic=float(largest_norm),
                       p_value=0.0 if largest_norm > bound * (1 + tolerance) else 1.0, alternative="greater",
                       validity="exact")
