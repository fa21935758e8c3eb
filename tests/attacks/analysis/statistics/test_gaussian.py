"""The Gaussian maths of attacks.analysis: the hockey-stick divergence of two 1-D Gaussians against numerical
integration, the pair's ε against Gaussian DP (Dong, Roth, Su 2022, Cor. 2.13) and dp_accounting's PLD accountant for
the Gaussian mechanism, the cap, the confidence box of the Gaussian pair against textbook intervals and an independent
minimiser, and the GDP fit (Nasr et al. 2023) against exact Beta quantiles."""

from __future__ import annotations

import math

import dp_accounting
import numpy as np
import pytest
from scipy.integrate import quad
from scipy.optimize import minimize
from scipy.stats import beta, binom, chi2, norm
from scipy.stats import t as student_t

from attacks.analysis import gdp_epsilon, gdp_fit_epsilon, pair_bound, pair_epsilon
from attacks.analysis.statistics.fdp import EPSILON_CAP, gdp_delta
from attacks.analysis.statistics.gaussian import hockey_stick


def _integral(p: tuple[float, float], q: tuple[float, float], eps: float) -> float:
    """∫ max(0, p(x) − e^ε q(x)) dx by adaptive quadrature over ±14 sd of both, split at many points."""
    (m1, s1), (m0, s0) = p, q
    lo, hi = min(m1 - 14 * s1, m0 - 14 * s0), max(m1 + 14 * s1, m0 + 14 * s0)

    def f(x: float) -> float:
        return max(0.0, norm.pdf(x, m1, s1) - math.exp(eps) * norm.pdf(x, m0, s0))
    return quad(f, lo, hi, points=np.linspace(lo, hi, 60)[1:-1], limit=1000, epsabs=1e-13, epsrel=1e-10)[0]


def _pld_epsilon(mu: float, delta: float) -> float:
    """dp_accounting's ε of one Gaussian mechanism of sensitivity 1 and noise 1/μ (its privacy-loss distribution,
    discretised at 1e-3: pessimistic, within ~1e-5 relative here)."""
    accountant = dp_accounting.pld.PLDAccountant(value_discretization_interval=1e-3)
    accountant.compose(dp_accounting.GaussianDpEvent(noise_multiplier=1 / mu))
    return accountant.get_epsilon(delta)


@pytest.mark.parametrize("p, q, eps", [((3, 1.3), (0, 1), 1.0), ((0, 1), (3, 1.3), 1.0), ((1, 0.5), (0, 1), 0.3),
                                       ((0, 2), (0, 1), 0.2), ((0, 1), (0, 2), 0.2), ((0.5, 1), (0, 3), 0.0),
                                       ((2, 1), (0, 1 + 1e-7), 0.5), ((5, 1), (0, 1.01), 4.0),
                                       ((-2, 0.7), (1, 0.9), 2.5)])
def test_hockey_stick_equals_numerical_integration(p, q, eps):
    assert hockey_stick(p, q, eps) == pytest.approx(_integral(p, q, eps), rel=1e-7, abs=1e-11)


def test_hockey_stick_is_continuous_at_equal_variances():
    # variances 1e-13 apart take the quadratic branch; its far root is huge and the near one must not lose digits
    for eps in (0.5, 3.0):
        for sd in (1 + 1e-13, 1 - 1e-13, 1 + 1e-10):
            assert hockey_stick((2, 1), (0, sd), eps) == pytest.approx(hockey_stick((2, 1), (0, 1), eps), rel=1e-9)
            assert hockey_stick((0, sd), (2, 1), eps) == pytest.approx(hockey_stick((0, 1), (2, 1), eps), rel=1e-9)


def test_hockey_stick_reference_vectors_and_total_variation():
    assert hockey_stick((3, 1.3), (0, 1), 1.0) == pytest.approx(0.724540, abs=1e-6)
    assert hockey_stick((3, 1), (0, 1), 1.0) == pytest.approx(0.787601, abs=1e-6)
    # ε = 0: total variation; between N(Δ, 1) and N(0, 1) it is 2Φ(Δ/2) − 1
    for gap in (0.1, 1.0, 4.0):
        assert hockey_stick((gap, 1), (0, 1), 0.0) == pytest.approx(2 * norm.cdf(gap / 2) - 1, rel=1e-12)
    assert hockey_stick((1, 2), (1, 2), 0.0) == 0.0  # identical distributions
    assert hockey_stick((0, 1), (0, 4), 0.0) == pytest.approx(_integral((0, 1), (0, 4), 0.0), rel=1e-8)


@pytest.mark.parametrize("mu, eps", [(1.0, 4.0), (2.0, 9.0), (4.0, 24.0), (6.0, 40.0)])
def test_hockey_stick_keeps_its_precision_far_in_the_tails(mu, eps):
    # equal variances: δ(ε) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2), here in logs so no term loses digits; at large ε
    # the second mass is ~1e-16 and weighted by e^ε, which a mass taken as 1 − Φ(z) rounds away
    exact = math.exp(norm.logcdf(-eps / mu + mu / 2)) - math.exp(eps + norm.logcdf(-eps / mu - mu / 2))
    assert hockey_stick((mu * 3, 3), (0, 3), eps) == pytest.approx(exact, rel=1e-7)


@pytest.mark.parametrize("mu", [0.25, 0.5, 1.0, 2.0, 4.0])
def test_equal_variance_pair_is_the_gaussian_mechanism(mu):
    for delta in (1e-5, 1e-3):
        eps = pair_epsilon((0.5 + 2 * mu, 2.0), (0.5, 2.0), delta)  # any location and scale: only the gap/sd
        assert eps == pytest.approx(gdp_epsilon(mu, delta), abs=1e-7)
        assert eps == pytest.approx(_pld_epsilon(mu, delta), rel=1e-4)  # PLD: pessimistic discretisation
    # the published GDP conversion: μ = 0.25, 0.5, 1, 2 give 0.926, 1.993, 4.377, 9.997 at δ = 1e-5
    published = {0.25: 0.926, 0.5: 1.993, 1.0: 4.377, 2.0: 9.997}
    if mu in published:
        assert gdp_epsilon(mu, 1e-5) == pytest.approx(published[mu], abs=1e-3)


def test_pair_epsilon_is_symmetric_and_grows_with_the_gap():
    p, q = (1.0, 1.3), (0.0, 1.0)
    assert pair_epsilon(p, q, 1e-5) == pytest.approx(pair_epsilon(q, p, 1e-5), abs=1e-9)
    for a, b in [(1.0, 1.0), (1.3, 1.0), (0.8, 1.5)]:
        values = [pair_epsilon((g, a), (0, b), 1e-5) for g in np.linspace(0, 4, 9)]
        assert all(x < y for x, y in zip(values, values[1:], strict=False))
    # unequal variances leak even without a gap: δ_{P‖Q}(ε) crosses 1e-5 at a positive ε
    assert pair_epsilon((0, 1.3), (0, 1), 1e-5) > 0
    assert max(hockey_stick((0, 1.3), (0, 1), pair_epsilon((0, 1.3), (0, 1), 1e-5)),
               hockey_stick((0, 1), (0, 1.3), pair_epsilon((0, 1.3), (0, 1), 1e-5))) == pytest.approx(1e-5, rel=1e-4)


def test_gdp_delta_and_epsilon_are_inverse_and_monotone():
    for mu in (0.3, 1.0, 3.0):
        for delta in (1e-8, 1e-5, 1e-2):
            eps = gdp_epsilon(mu, delta)
            assert gdp_delta(mu, eps) == pytest.approx(delta, rel=1e-6)
        deltas = [gdp_delta(mu, e) for e in np.linspace(0, 10, 21)]
        assert all(x > y for x, y in zip(deltas, deltas[1:], strict=False))  # δ(ε) decreasing
    assert [gdp_epsilon(mu, 1e-5) for mu in (0.5, 1, 2)] == sorted(gdp_epsilon(mu, 1e-5) for mu in (0.5, 1, 2))
    # δ(0) = Φ(μ/2) − Φ(−μ/2) = 2Φ(μ/2) − 1 (total variation): 0.3829 at μ = 1, so ε(0.4) = 0 < ε(0.38)
    assert gdp_delta(1.0, 0.0) == pytest.approx(2 * norm.cdf(0.5) - 1, rel=1e-12)
    assert gdp_epsilon(1.0, 0.4) == 0.0 < gdp_epsilon(1.0, 0.38)
    assert gdp_epsilon(0.0, 1e-5) == 0.0


def test_epsilon_cap():
    # μ = 60: ε(1e-5) is about μ²/2 = 1800; every conversion stops at the cap (still a valid lower bound)
    assert EPSILON_CAP == 100.0
    assert gdp_epsilon(60.0, 1e-5) == EPSILON_CAP
    # the cap binds exactly when δ(100) > δ: μ = 10 (δ(100) ≈ 1.9e-7) is below it, μ = 11 (δ(100) ≈ 1.2e-4) above
    assert gdp_delta(10.0, EPSILON_CAP) < 1e-5 < gdp_delta(11.0, EPSILON_CAP)
    assert gdp_epsilon(10.0, 1e-5) < EPSILON_CAP == gdp_epsilon(11.0, 1e-5)
    assert pair_epsilon((1000.0, 1.0), (0.0, 1.0), 1e-5) == EPSILON_CAP
    assert pair_epsilon((0.0, 1.0), (0.0, 1e-3), 1e-5) == EPSILON_CAP  # variances 10⁶ apart


# ---- the Gaussian pair's confidence box --------------------------------------------------------------------


def _box(n: int, mean: float, sd: float, level: float):
    """Textbook intervals of a normal sample at ``level``: Student t for the mean, χ² for the sd."""
    lo, hi = student_t.interval(level, n - 1, loc=mean, scale=sd / math.sqrt(n))
    a = 1 - level
    return (lo, hi), (sd * math.sqrt((n - 1) / chi2.ppf(1 - a / 2, n - 1)),
                      sd * math.sqrt((n - 1) / chi2.ppf(a / 2, n - 1)))


def _box_minimum(fit: dict, delta: float, confidence: float) -> float:
    """The smallest pair ε over the box: a 25 × 25 grid of the two sds at the smallest gap, then each of the best
    five points polished by Nelder-Mead inside the box (clipped)."""
    level = 1 - (1 - confidence) / 4
    (mi, si), (mo, so) = (_box(fit[f"n_{g}"], fit[f"mean_{g}"], fit[f"sd_{g}"], level) for g in ("in", "out"))
    gap = max(0.0, mi[0] - mo[1], mo[0] - mi[1])

    def f(x: np.ndarray) -> float:
        return pair_epsilon((gap, float(np.clip(x[0], *si))), (0.0, float(np.clip(x[1], *so))), delta)
    grid = [(f(np.array([a, b])), a, b) for a in np.linspace(*si, 25) for b in np.linspace(*so, 25)]
    best = sorted(grid)[:5]
    polished = [minimize(f, [a, b], method="Nelder-Mead", options={"xatol": 1e-7, "fatol": 1e-9}).fun
                for _, a, b in best]
    return min(min(polished), best[0][0])


@pytest.mark.parametrize("fit", [
    {"n_in": 100, "mean_in": 2.0, "sd_in": 1.0, "n_out": 100, "mean_out": 0.0, "sd_out": 1.1},
    {"n_in": 10, "mean_in": 5.0, "sd_in": 1.0, "n_out": 10, "mean_out": 0.0, "sd_out": 1.5},
    {"n_in": 5000, "mean_in": 1.0, "sd_in": 1.02, "n_out": 5000, "mean_out": 0.0, "sd_out": 1.0},
    {"n_in": 40, "mean_in": -3.0, "sd_in": 2.0, "n_out": 60, "mean_out": 0.0, "sd_out": 0.7}])
def test_pair_bound_is_the_minimum_over_its_confidence_box(fit):
    got, independent = pair_bound(fit, delta=1e-5, confidence=0.95), _box_minimum(fit, 1e-5, 0.95)
    assert got <= independent + 1e-6  # never above the box's minimum (else not a bound at its confidence)
    assert got == pytest.approx(independent, abs=2e-3)


def test_pair_bound_without_variation_or_gap():
    fit = {"n_in": 50, "mean_in": 1.0, "sd_in": 0.0, "n_out": 50, "mean_out": 0.0, "sd_out": 1.0}
    assert pair_bound(fit, delta=1e-5, confidence=0.95) == 0.0
    same = {"n_in": 5000, "mean_in": 0.0, "sd_in": 1.0, "n_out": 5000, "mean_out": 0.0, "sd_out": 1.0}
    assert pair_bound(same, delta=1e-5, confidence=0.95) == 0.0  # equal groups: the box holds ε = 0


def test_pair_box_is_the_textbook_intervals_and_covers_for_small_samples():
    from attacks.analysis.statistics.gaussian import _box as code_box

    for n, mean, sd, level in [(5, 1.0, 2.0, 0.95), (40, -3.0, 0.5, 0.9875), (5000, 0.2, 1.0, 0.99)]:
        ours, theirs = code_box(n, mean, sd, 1 - level), _box(n, mean, sd, level)
        np.testing.assert_allclose(np.ravel(ours), np.ravel(theirs), rtol=1e-10)
    # n = 5: each interval misses the true mean (sd) of a normal sample at most 5 % of the time (a mean interval from
    # the normal quantile with the estimated sd would miss ~12 %)
    rng = np.random.default_rng(0)
    reps = 1000
    x = rng.normal(0.0, 1.0, (reps, 5))
    boxes = [code_box(5, float(row.mean()), float(row.std(ddof=1)), 0.05) for row in x]
    miss_mean = sum(not lo <= 0.0 <= hi for (lo, hi), _ in boxes)
    miss_sd = sum(not lo <= 1.0 <= hi for _, (lo, hi) in boxes)
    for misses in (miss_mean, miss_sd):
        assert binom.sf(misses - 1, reps, 0.05) > 1e-3, misses


# ---- the GDP fit -----------------------------------------------------------------------------------------


def test_gdp_fit_by_hand():
    # FP = 2/100, FN = 30/100 at one threshold, one-sided 95 % each (confidence 0.9 over 2 bounds):
    # FPR_u = Beta⁻¹(0.95; 3, 98) = 0.0616, FNR_u = Beta⁻¹(0.95; 31, 70) = 0.3842,
    # μ = Φ⁻¹(1 − 0.0616) − Φ⁻¹(0.3842) = 1.5413 + 0.2944 = 1.8357, ε(1e-5) ≈ 9.0 (the research notes' example)
    fpr_u, fnr_u = beta.ppf(0.95, 3, 98), beta.ppf(0.95, 31, 70)
    mu = norm.ppf(1 - fpr_u) - norm.ppf(fnr_u)
    assert mu == pytest.approx(1.8357, abs=1e-4)
    got = gdp_fit_epsilon([[70, 30, 2, 98]], delta=1e-5, confidence=0.9)
    assert got == pytest.approx(_pld_epsilon(mu, 1e-5), rel=1e-4)
    assert got == pytest.approx(9.0, abs=0.05)
    # two thresholds: Bonferroni over 2·2 bounds, each at 1 − 0.1/4; the better one counts
    fpr_u, fnr_u = beta.ppf(0.975, 3, 98), beta.ppf(0.975, 31, 70)
    mu2 = norm.ppf(1 - fpr_u) - norm.ppf(fnr_u)
    assert gdp_fit_epsilon([[70, 30, 2, 98], [50, 50, 50, 50]], delta=1e-5, confidence=0.9) == pytest.approx(
        gdp_epsilon(mu2, 1e-5), rel=1e-9)
    assert gdp_fit_epsilon([[50, 50, 50, 50]], delta=1e-5) == 0.0 and gdp_fit_epsilon([], delta=1e-5) == 0.0
