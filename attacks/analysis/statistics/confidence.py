"""Exact confidence limits the audits and the conformance tests share.

Clopper-Pearson limits of a binomial rate and the χ² upper limit of a Gaussian noise's sd. Pure SciPy (no torch).

References:
    Clopper & Pearson (1934), "The use of confidence or fiducial limits illustrated in the case of the binomial"
    (Biometrika) -- exact binomial intervals.
"""

from __future__ import annotations

import functools
import math
from typing import overload

import numpy as np
from scipy.stats import beta, chi2

_SIDES = ("two", "lower", "upper")


def clopper_pearson_lower(k: int, n: int, alpha: float) -> float:
    """Exact lower limit of a binomial rate k / n at level 1 − α: ``beta.ppf(α, k, n − k + 1)``, 0 at k = 0."""
    return 0.0 if k == 0 else float(beta.ppf(alpha, k, n - k + 1))


@overload
def clopper_pearson_upper(k: int, n: int, alpha: float) -> float: ...
@overload
def clopper_pearson_upper(k: np.ndarray, n: int, alpha: float) -> np.ndarray: ...
def clopper_pearson_upper(k: int | np.ndarray, n: int, alpha: float) -> float | np.ndarray:
    """Exact one-sided upper limit of a binomial rate k / n at level 1 − α, 1 at k = n (``k`` an int or ``(M,)`` array).

    ``beta.isf(α, k + 1, n − k)``: the survival function's inverse keeps a limit near 0 precise. Counts not checked.
    """
    if isinstance(k, np.ndarray):
        out = np.ones(k.shape, dtype=float)
        below = k < n
        out[below] = beta.isf(alpha, k[below] + 1, n - k[below])
        return out
    return 1.0 if k == n else float(beta.isf(alpha, k + 1, n - k))


def clopper_pearson(k: int, n: int, *, confidence: float = 0.95, sided: str = "two") -> tuple[float, float]:
    """Exact (Clopper-Pearson 1934) confidence interval ``(lower, upper)`` for a binomial proportion k / n.

    The one-sided limits at α/2 each (``binomtest(k, n).proportion_ci(method="exact")``
    without its root finding); ``sided`` ``"lower"`` gives ``(lo, 1.0)``, ``"upper"`` ``(0.0, hi)``: the matching end of
    the two-sided interval at level 2c − 1. The bound at k = 0 (lower) or k = n (upper) is exact.

    Raises:
        ValueError: non-integer counts, k outside [0, n], n < 1, confidence outside (0, 1) (one-sided: outside
            (0.5, 1)) or an unknown ``sided``.
    """
    if sided not in _SIDES:
        raise ValueError(f"sided must be one of {_SIDES}, got {sided!r}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    if float(k) != int(k) or float(n) != int(n):
        raise ValueError(f"k and n must be integers, got k={k!r}, n={n!r}")
    k, n = int(k), int(n)
    if n < 1 or not 0 <= k <= n:
        raise ValueError(f"need n >= 1 and 0 <= k <= n, got k={k}, n={n}")
    if sided == "two":
        return _exact_interval(k, n, confidence)
    if confidence <= 0.5:
        raise ValueError(f"a one-sided bound needs confidence > 0.5, got {confidence!r}")
    lower, upper = _exact_interval(k, n, 2.0 * confidence - 1.0)
    return (lower, 1.0) if sided == "lower" else (0.0, upper)


@functools.lru_cache(maxsize=65536)
def _exact_interval(k: int, n: int, level: float) -> tuple[float, float]:
    """The exact two-sided interval at ``level`` (cached: audits re-evaluate the same counts)."""
    a = (1.0 - level) / 2
    return clopper_pearson_lower(k, n, a), clopper_pearson_upper(k, n, a)


def sd_upper(sum_squares: float, n: int, alpha: float) -> float:
    """Exact one-sided upper limit at 1 − α of zero-mean Gaussian noise's sd from Σx² of n draws: √(Σx² / χ²_n(α))."""
    return math.sqrt(sum_squares / max(float(chi2.ppf(alpha, n)), 1e-300))
