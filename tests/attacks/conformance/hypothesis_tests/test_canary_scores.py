"""The white-box canaries' exact score test (``attacks.conformance.hypothesis_tests.canary_scores``): its law agrees
with a simulation of the canary model and with the Gaussian closed form at q = 1; correct mechanisms whose clipped
contribution depends on the past (the case a central limit gets wrong) are not rejected beyond the test's level; a
contribution above C is."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import norm

from attacks.conformance.hypothesis_tests.canary_scores import canary_score_test, llr_cdf


def _scores(rng, *, sigma, q, steps, n, contribution=lambda past: np.ones_like(past), true_sigma=None):
    """n canaries' summed log-likelihood ratios at the certified σ, q; contribution(past observations sum) ∈ [0, c]."""
    past, total = np.zeros(n), np.zeros(n)
    for _ in range(steps):
        x = (rng.random(n) < q) * contribution(past) + rng.normal(0.0, true_sigma or sigma, n)
        past += x
        u = (2 * x - 1) / (2 * sigma**2)
        total += np.logaddexp(math.log1p(-q), math.log(q) + u) if q < 1 else u
    return total


@pytest.mark.parametrize("sigma,q,steps", [(2.0, 1 / 3, 120), (0.9, 1 / 3, 60), (4.0, 0.05, 200)])
def test_the_law_matches_a_simulation_of_the_canary_model(sigma, q, steps):
    rng = np.random.default_rng(7)
    s = _scores(rng, sigma=sigma, q=q, steps=steps, n=40_000)
    f, mean = llr_cdf(sigma=sigma, sample_rate=q, steps=steps)
    levels = np.array([0.01, 0.1, 0.5, 0.9, 0.99])
    assert np.abs(f(np.quantile(s, levels)) - levels).max() < 0.01  # Monte Carlo error ≈ 0.0025 at 40,000
    assert mean == pytest.approx(s.mean(), abs=5 * s.std() / math.sqrt(s.size) + 0.02 * s.std())
    grid = np.quantile(s, np.linspace(0.001, 0.999, 200))
    exact_ish = np.searchsorted(np.sort(s), grid, side="right") / s.size
    assert np.all(f(grid) <= exact_ish + 0.01)  # rounded up: never above the true CDF beyond Monte Carlo error


def test_q_one_is_the_gaussian_closed_form():
    f, mean = llr_cdf(sigma=1.5, sample_rate=1.0, steps=30)
    mu, sd = 30 * 1 / (2 * 1.5**2), math.sqrt(30) / 1.5
    s = np.array([mu - sd, mu, mu + 2 * sd])
    assert f(s) == pytest.approx(norm.cdf((s - mu) / sd)) and mean == pytest.approx(mu)


def test_state_dependent_contributions_of_a_correct_mechanism_are_not_rejected():
    """Contributions that fall as the canary's past observations grow (what a clipped gradient of a fitted record
    does): included scores with a smaller spread than the law's, which a Gaussian fit reads as a larger μ."""
    rng = np.random.default_rng(11)
    def shrinking(past):
        return np.clip(1.0 - np.abs(past) / 8.0, 0.0, 1.0)

    p = [canary_score_test(_scores(rng, sigma=1.0, q=1 / 3, steps=60, n=500, contribution=shrinking), sigma=1.0,
                           sample_rate=1 / 3, steps=60)["p_value"] for _ in range(20)]
    assert min(p) > 0.05 / 20  # none rejected at a family of 20


def test_the_correct_mechanism_is_rejected_at_about_its_level():
    rng = np.random.default_rng(3)
    p = np.array([canary_score_test(_scores(rng, sigma=2.0, q=1 / 3, steps=40, n=400), sigma=2.0,
                                    sample_rate=1 / 3, steps=40)["p_value"] for _ in range(60)])
    assert (p < 0.05).sum() <= 8  # ≤ 5 % expected (binomial(60, 0.05) ≥ 9 with probability < 1.5 %)


def test_a_contribution_above_the_clip_bound_is_rejected():
    rng = np.random.default_rng(5)
    record = canary_score_test(_scores(rng, sigma=2.0, q=1 / 3, steps=120, n=500,
                                       contribution=lambda past: np.full_like(past, 1.5)),
                               sigma=2.0, sample_rate=1 / 3, steps=120)
    assert record["p_value"] < 1e-6 and record["measured"] > record["certified"]
    assert record["validity"] == "exact" and record["alternative"] == "greater"


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="at least 2 finite scores"):
        canary_score_test([1.0], sigma=1.0, sample_rate=0.5, steps=3)
    with pytest.raises(ValueError, match="σ > 0"):
        llr_cdf(sigma=0.0, sample_rate=0.5, steps=3)
