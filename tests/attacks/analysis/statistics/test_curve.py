"""attacks.analysis.statistics.curve (the certified trade-off curve tested on a multi-run design's thresholds) and
attacks.analysis.statistics.anchor (Annamalai & De Cristofaro's estimator, the ideal mechanism's simulation)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import brentq
from scipy.stats import binomtest, norm

from attacks.analysis.statistics.anchor import anchor_epsilon, anchor_mu, ideal_scores, simulate
from attacks.analysis.statistics.curve import certified_tradeoff, curve_rejected, gaussian_tradeoff, profile_tradeoff
from attacks.analysis.statistics.fdp import gdp_delta, gdp_epsilon
from attacks.analysis.statistics.thresholds import threshold_counts

DELTA = 1e-5


def test_gaussian_tradeoff_is_the_gaussian_test():
    f = gaussian_tradeoff(1.3)
    for alpha in (1e-4, 0.05, 0.3, 0.9):  # the best test of N(0,1) vs N(μ,1) at FPR α misses Φ(z_{1-α} − μ)
        assert f(alpha) == pytest.approx(norm.cdf(norm.ppf(1 - alpha) - 1.3))
    assert gaussian_tradeoff(0.0)(0.2) == pytest.approx(0.8)


def test_a_profile_of_the_gaussian_lies_below_its_curve():
    mu = 1.0
    profile = [[brentq(lambda e, d=d: gdp_delta(mu, e) - d, 0, 50), d] for d in (1e-6, 1e-3, 0.05, 0.2)]
    g, p = gaussian_tradeoff(mu), profile_tradeoff(profile)
    alphas = np.linspace(0.001, 0.999, 200)
    assert all(p(a) <= g(a) + 1e-9 for a in alphas)
    assert max(g(a) - p(a) for a in alphas) > 0.01  # conservative, not equal
    assert certified_tradeoff(mu, profile)(0.3) == g(0.3) and certified_tradeoff(None, profile)(0.3) == p(0.3)
    assert certified_tradeoff(None, None) is None


def test_the_curve_test_keeps_its_level_and_catches_half_the_noise():
    """Simulated: R = 1,000 runs at the certified μ (false alarms ≤ 5 %), and at twice it (σ / 2: caught mostly)."""
    rng = np.random.default_rng(0)
    mu, runs, draws = 0.5, 1000, 100
    f = gaussian_tradeoff(mu)
    alarms = sum(curve_rejected(threshold_counts(*ideal_scores(mu, runs, rng)), f) for _ in range(draws))
    caught = sum(curve_rejected(threshold_counts(*ideal_scores(2 * mu, runs, rng)), f) for _ in range(draws))
    assert alarms / draws <= 0.05
    assert caught / draws >= 0.8


def test_the_curve_test_refutes_no_noise_with_few_runs():
    """No noise: the runs' two worlds never overlap. 50 runs refute a certified ε of 2 (μ ≈ 0.5); no ε lower bound
    from 50 runs can reach 2."""
    coins = np.array([0, 1] * 25)
    counts = threshold_counts(coins.astype(float), coins)
    mu = brentq(lambda m: gdp_epsilon(m, DELTA) - 2.0, 0.01, 5)
    assert curve_rejected(counts, gaussian_tradeoff(mu))
    assert not curve_rejected([], gaussian_tradeoff(mu))


def _anchor_by_hand(scores, labels, alpha):
    """Their code path: every unique score as threshold ("member" if >= t), scipy's binomtest intervals."""
    best = 0.0
    for t in np.unique(scores):
        fp = int(((scores >= t) & (labels == 0)).sum())
        fn = int(((scores < t) & (labels == 1)).sum())
        fpr = binomtest(fp, int((labels == 0).sum())).proportion_ci(confidence_level=1 - 2 * alpha).high
        fnr = binomtest(fn, int((labels == 1).sum())).proportion_ci(confidence_level=1 - 2 * alpha).high
        if 0 < fpr < 1 and 0 < fnr < 1:
            best = max(best, norm.ppf(1 - fpr) - norm.ppf(fnr))
    return best


def test_anchor_estimator_matches_their_computation():
    scores, coins = ideal_scores(1.5, 60, np.random.default_rng(4))
    assert anchor_mu(scores, coins, alpha=0.05) == pytest.approx(_anchor_by_hand(scores, coins, 0.05), rel=1e-6)
    out = anchor_epsilon(scores, coins, delta=DELTA)
    assert out["epsilon"] == pytest.approx(gdp_epsilon(out["mu"], DELTA))


def test_anchor_estimator_is_optimistic_on_the_ideal_mechanism():
    """On exact Gaussian scores of true ε = 10 (μ = 2) with R = 200 its threshold, picked on the same scores, lands
    above the truth in some draws: no confidence bound would, beyond 5 %."""
    mu = brentq(lambda m: gdp_epsilon(m, DELTA) - 10.0, 0.1, 5)
    sim = simulate(lambda s, c: anchor_epsilon(s, c, delta=DELTA)["epsilon"], mu=mu, runs=200, draws=60, seed=2)
    assert sim["max"] > 10.0
    assert sum(v > 10.0 for v in sim["values"]) / 60 > 0.05
    assert sim["median"] > 7.0
