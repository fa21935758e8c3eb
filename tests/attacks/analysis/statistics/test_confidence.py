"""Tests for attacks.analysis.statistics.confidence against closed forms and independent implementations (SciPy's
``binomtest``)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import binomtest

from attacks.analysis.statistics.confidence import (
    clopper_pearson,
    clopper_pearson_lower,
    clopper_pearson_upper,
    sd_upper,
)


def test_clopper_pearson_known_values():
    lo, hi = clopper_pearson(0, 10)
    assert lo == 0.0
    assert hi == pytest.approx(1 - 0.025 ** (1 / 10), rel=1e-9)
    assert hi == pytest.approx(0.3085, abs=1e-4)
    lo, hi = clopper_pearson(10, 10)
    assert hi == 1.0 and lo == pytest.approx(0.025 ** (1 / 10), rel=1e-9)
    # one-sided 95 % upper bound at k = 0 ("rule of three"): 1 - 0.05^(1/n)
    assert clopper_pearson(0, 100, sided="upper") == pytest.approx((0.0, 1 - 0.05 ** (1 / 100)))
    lo, hi = clopper_pearson(3, 10, sided="lower", confidence=0.9)
    assert hi == 1.0
    exact = binomtest(3, 10, alternative="greater").proportion_ci(confidence_level=0.9, method="exact")
    assert lo == pytest.approx(exact.low, rel=1e-9)
    exact = binomtest(7, 20).proportion_ci(confidence_level=0.99, method="exact")
    assert clopper_pearson(7, 20, confidence=0.99) == pytest.approx((exact.low, exact.high), rel=1e-9)


@pytest.mark.parametrize(
    "kwargs",
    [dict(k=-1, n=10), dict(k=11, n=10), dict(k=1, n=0), dict(k=1.5, n=10),
     dict(k=1, n=10, confidence=1.0), dict(k=1, n=10, sided="both")],
)
def test_clopper_pearson_rejects_bad_input(kwargs):
    k, n = kwargs.pop("k"), kwargs.pop("n")
    with pytest.raises(ValueError):
        clopper_pearson(k, n, **kwargs)


def test_clopper_pearson_keeps_relative_precision_far_in_the_tail():
    # k = 0 of n: the exact upper end solves (1 - p)^n = a, p = 1 - a^(1/n) = -expm1(log(a) / n) (a = 0.025 each
    # side at 95 %); a root finder with an absolute tolerance (binomtest's) is off by ~1e-7 relative down here
    n, a = 10**6, 0.025
    _, upper = clopper_pearson(0, n, confidence=0.95)
    assert upper == pytest.approx(-np.expm1(np.log(a) / n), rel=1e-12)
    lower, _ = clopper_pearson(n, n, confidence=0.95)  # k = n: the lower end is a^(1/n) by symmetry
    assert lower == pytest.approx(np.exp(np.log(a) / n), rel=1e-12)


def test_one_sided_limits_match_binomtest_and_take_arrays():
    for k, n in [(0, 10), (3, 10), (7, 20), (19, 20), (20, 20)]:
        exact = binomtest(k, n, alternative="less").proportion_ci(confidence_level=0.99, method="exact")
        assert clopper_pearson_upper(k, n, 0.01) == pytest.approx(exact.high, rel=1e-9)
        exact = binomtest(k, n, alternative="greater").proportion_ci(confidence_level=0.99, method="exact")
        assert clopper_pearson_lower(k, n, 0.01) == pytest.approx(exact.low, abs=1e-12)
    k = np.arange(21)
    assert clopper_pearson_upper(k, 20, 0.05).tolist() == [clopper_pearson_upper(int(i), 20, 0.05) for i in k]


def test_sd_upper_is_the_chi2_limit():
    # n = 2: χ²₂'s α-quantile is −2·ln(1 − α), so the limit is √(Σx² / (−2·ln(1 − α)))
    assert sd_upper(8.0, 2, 0.05) == pytest.approx(math.sqrt(8.0 / (-2 * math.log1p(-0.05))), rel=1e-12)
    assert sd_upper(1.0, 100, 0.05) > sd_upper(1.0, 100, 0.5) > math.sqrt(1.0 / 100)
