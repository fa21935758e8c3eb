"""White-box Dirac canaries' scores against their exact distribution under the certified DP-SGD.

A test of the certificate that is exact, not a central limit (Nasr et al. 2023, "Tight Auditing of Differentially
Private Machine Learning", Dirac canaries): a one-sided Kolmogorov-Smirnov test of the included canaries' scores
S = Σ_t ℓ(x_t), ℓ(x) = log(1 − q + q·exp((2x − 1)/(2σ²))) at the certified σ and q, against the law P of S with every
clipped contribution at its bound, computed on a grid (each cell's mass at its upper end) convolved T times by FFT.
Conservative under every correct mechanism, dependent canaries included (docs/design-notes.md). Pure NumPy / SciPy.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, cast

import numpy as np
from numpy.typing import ArrayLike
from scipy.stats import kstest, norm

from attacks.conformance.hypothesis_tests import conformance_record

NAME = "canary scores ≤ the certified mechanism's (exact)"
GRID = 0.01  # h = GRID · (one step's sd)/√T: the grid's rounding up shifts the sum by at most 1 % of its sd
MAX_POINTS = 1 << 23  # the FFT's length at most (a coarser grid beyond: still conservative)
TAIL_SDS = 14.0  # the grid spans the sum's mean ± this many sds (its mass beyond: below 1e-40)


def _step_law(sigma: float, q: float, steps: int, contribution: float) -> tuple[float, float, float, np.ndarray]:
    """One step's ℓ(x) on its grid.

    (log(1 − q), the grid's width h, the span the sum needs, the CDF at the grid's cells' upper ends with a leading 0 (ℓ
    > log(1 − q))).
    """
    s2 = sigma**2
    lo = math.log1p(-q)  # ℓ > log(1 − q)

    def x_of(a: np.ndarray) -> np.ndarray:  # ℓ⁻¹: the x with ℓ(x) = a (a > lo)
        return np.asarray(s2 * np.log((np.exp(a) - (1 - q)) / q) + 0.5, np.float64)

    def x_cdf(x: np.ndarray) -> np.ndarray:
        return np.asarray((1 - q) * norm.cdf(x / sigma) + q * norm.cdf((x - contribution) / sigma), np.float64)

    top = float(np.log(1 - q + q * np.exp((2 * (contribution + 12 * sigma) - 1) / (2 * s2))))
    z, w = np.polynomial.hermite_e.hermegauss(80)
    w = w / w.sum()
    pts = np.concatenate([np.logaddexp(lo, math.log(q) + (2 * sigma * z - 1) / (2 * s2)),
                          np.logaddexp(lo, math.log(q) + (2 * (contribution + sigma * z) - 1) / (2 * s2))])
    wts = np.concatenate([(1 - q) * w, q * w])
    sd1 = math.sqrt(max(float(wts @ pts**2) - float(wts @ pts) ** 2, 1e-300))
    h = GRID * sd1 / math.sqrt(steps)
    span = steps * (float(wts @ pts) - lo) + TAIL_SDS * math.sqrt(steps) * sd1 + (top - lo)
    h = max(h, span / (MAX_POINTS - 2))
    edges = lo + h * np.arange(1, int(math.ceil((top - lo) / h)) + 2)
    cdf = np.concatenate([[0.0], x_cdf(x_of(edges))])
    cdf[-1] = 1.0  # the mass beyond x = c + 12σ (below 1e-32) at the top cell
    return lo, h, span, cdf


def llr_cdf(*, sigma: float, sample_rate: float, steps: int, contribution: float = 1.0
            ) -> tuple[Callable[[ArrayLike], np.ndarray], float]:
    """The CDF of S = Σ_t ℓ(x_t) under DP-SGD's canary model, stochastically no smaller than the exact one.

    Args:
        sigma: σ, the noise multiplier (units of C, > 0).
        sample_rate: q, in (0, 1].
        steps: T ≥ 1.
        contribution: c, the included canary's contribution when sampled (units of C).

    Returns:
        ``(F, mean)``: a callable mapping scores ``(n,)`` to F(s) ``(n,)``, at most the exact CDF by the grid's
        rounding up, and S's mean under it.

    Raises:
        ValueError: σ ≤ 0, q outside (0, 1] or T < 1.
    """
    if not sigma > 0 or not 0 < sample_rate <= 1 or steps < 1:
        raise ValueError(f"llr_cdf needs σ > 0, q in (0, 1], T ≥ 1; got {sigma}, {sample_rate}, {steps}")
    q, s2 = float(sample_rate), float(sigma) ** 2
    if q == 1.0:  # ℓ(x) = (2x − 1)/(2σ²) is Gaussian: S ~ N(T(2c − 1)/(2σ²), T/σ²) exactly
        mean, sd = steps * (2 * contribution - 1) / (2 * s2), math.sqrt(steps) / sigma
        def gaussian(s: ArrayLike) -> np.ndarray:
            return np.asarray(norm.cdf((np.asarray(s, np.float64) - mean) / sd), np.float64)

        return gaussian, mean
    lo, h, span, cdf = _step_law(sigma, q, steps, contribution)
    mass = np.diff(cdf)  # cell k holds (lo + k·h, lo + (k+1)·h], moved to lo + (k+1)·h
    mean = float(mass @ (h * np.arange(1, mass.size + 1)))
    n = 1 << int(math.ceil(math.log2(span / h + 2)))
    step = np.zeros(n)
    step[1: mass.size + 1] = mass
    total = np.fft.irfft(np.fft.rfft(step) ** steps, n)
    cum = np.cumsum(np.clip(total, 0.0, None))
    cum /= cum[-1]
    origin = steps * lo

    def f(s: ArrayLike) -> np.ndarray:
        k = np.floor((np.asarray(s, np.float64) - origin) / h + 1e-9).astype(np.int64)
        return np.asarray(np.where(k < 0, 0.0, cum[np.clip(k, 0, n - 1)]), np.float64)

    return f, float(origin + steps * mean)


def canary_score_test(scores: ArrayLike, *, sigma: float, sample_rate: float, steps: int) -> dict[str, Any]:
    """One-sided KS test of the included canaries' scores against their exact law P under the certified mechanism.

    H0 "the scores are stochastically at most P" (module docstring), rejected where they lie above it. ``measured``:
    the scores' mean, ``certified``: P's, statistic D⁻, validity ``exact`` (conservative).

    Raises:
        ValueError: fewer than 2 scores, or a parameter ``llr_cdf`` refuses.
    """
    s = np.asarray(scores, np.float64)
    if s.size < 2 or not np.all(np.isfinite(s)):
        raise ValueError(f"the canary score test needs at least 2 finite scores, got {s.size}")
    f, certified_mean = llr_cdf(sigma=sigma, sample_rate=sample_rate, steps=steps)
    res = kstest(s, cast(Any, f), alternative="less")  # f maps arrays to arrays
    return conformance_record(NAME, "canary scores", certified=float(certified_mean), measured=float(s.mean()),
                              n=s.size, p_value=float(min(max(res.pvalue, 0.0), 1.0)), alternative="greater",
                              validity="exact", statistic=float(res.statistic), sigma=sigma, sample_rate=sample_rate,
                              steps=steps)
