"""Tests for attacks.audit: ε lower bounds (Jagielski et al. 2020) and the one-run audit (Steinke et al. 2023)
on hand-computed cases, independent implementations and simulated mechanisms with a known ε."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import binom, binomtest, norm

from attacks.audit import (
    audit_bounds,
    best_epsilon,
    epsilon_lower_bound,
    membership_audit,
    one_run_epsilon,
    one_run_guesses,
    one_run_p_value,
    order_statistic_indices,
    privacy_bugs,
    threshold_counts,
)


def _perfect_limit(n: int, confidence: float = 0.95) -> float:
    """By hand: with n/n members found and 0/n non-members called members, the one-sided Clopper-Pearson
    bounds at level 1 − α/2 (α = 1 − confidence) are TPR_lower = (α/2)^(1/n) and FPR_upper = 1 − (α/2)^(1/n)."""
    a = ((1 - confidence) / 2) ** (1 / n)
    return math.log(a / (1 - a))


# ---- one threshold --------------------------------------------------------------------------------------


def test_perfect_single_threshold_matches_the_closed_form():
    # n = 10: 0.025^(1/10) = 0.691503...; ln(0.691503 / 0.308497) = 0.80714...
    assert epsilon_lower_bound(10, 0, 0, 10) == pytest.approx(0.8071, abs=1e-4)
    for n in (10, 100, 10_000):
        assert epsilon_lower_bound(n, 0, 0, n) == pytest.approx(_perfect_limit(n), rel=1e-9)
    assert epsilon_lower_bound(1, 0, 0, 1) == 0.0  # ln(0.025 / 0.975) < 0: one example proves nothing


def test_bound_equals_independent_exact_binomial_intervals():
    # scipy's exact (Clopper-Pearson) two-sided 95% interval has 2.5% in each tail: our one-sided bounds at
    # 97.5% each, i.e. 95% jointly.
    tpr_lo = binomtest(90, 100).proportion_ci(0.95, method="exact").low
    fpr_hi = binomtest(10, 100).proportion_ci(0.95, method="exact").high
    expected = math.log(tpr_lo / fpr_hi)
    assert epsilon_lower_bound(90, 10, 10, 90) == pytest.approx(expected, rel=1e-9)
    # with δ: ln((TPR_lower − δ) / FPR_upper); the mirror direction (TNR vs FNR) gives the same here
    assert epsilon_lower_bound(90, 10, 10, 90, delta=0.1) == pytest.approx(math.log((tpr_lo - 0.1) / fpr_hi))


def test_the_other_direction_counts():
    # few members found, but the attack is sure about non-members: TNR high, FNR low.
    # tp = 50 of 100, fp = 0 of 100: direction 1 gives ln(lo(50/100) / hi(0/100)),
    # direction 2 ln(lo(100/100) / hi(50/100)) = ln(0.9638 / 0.6108); the larger one is reported.
    lo50 = binomtest(50, 100).proportion_ci(0.95, method="exact").low
    hi50 = binomtest(50, 100).proportion_ci(0.95, method="exact").high
    hi0 = 1 - 0.025 ** (1 / 100)
    d1, d2 = math.log(lo50 / hi0), math.log((1 - hi0) / hi50)
    assert epsilon_lower_bound(50, 50, 0, 100) == pytest.approx(max(d1, d2), rel=1e-9)
    # mirror image: members and non-members swapped, predictions inverted
    assert epsilon_lower_bound(100, 0, 50, 50) == pytest.approx(max(d1, d2), rel=1e-9)


def test_no_bound_follows_gives_zero():
    assert epsilon_lower_bound(50, 50, 50, 50) == 0.0  # chance
    assert epsilon_lower_bound(5, 95, 0, 100, delta=0.5) == 0.0  # δ swallows both directions
    assert epsilon_lower_bound(0, 10, 10, 0) == 0.0  # everything wrong


def test_monotone_in_sample_size():
    bounds = [epsilon_lower_bound(9 * k, k, k, 9 * k) for k in (1, 3, 10, 30, 100, 1000)]
    assert all(a < b for a, b in zip(bounds, bounds[1:], strict=False))
    assert bounds[-1] < math.log(9)  # never above the plug-in value ln(0.9 / 0.1)


@pytest.mark.parametrize("bad", [(-1, 1, 1, 1), (1.5, 1, 1, 1), (0, 0, 1, 1), (1, 1, 0, 0)])
def test_invalid_counts_raise(bad):
    with pytest.raises(ValueError):
        epsilon_lower_bound(*bad)


def test_invalid_delta_or_confidence_raise():
    with pytest.raises(ValueError):
        epsilon_lower_bound(1, 1, 1, 1, delta=1.0)
    with pytest.raises(ValueError):
        epsilon_lower_bound(1, 1, 1, 1, confidence=1.0)


# ---- the best of a family of thresholds -----------------------------------------------------------------


def test_family_is_fixed_by_n_and_bonferroni_corrected():
    rng = np.random.default_rng(0)
    scores, labels = rng.normal(size=400), np.repeat([1, 0], 200)
    counts = threshold_counts(scores, labels)
    assert len(counts) == 2 * len(order_statistic_indices(200))
    assert all(sum(c[:2]) == 200 and sum(c[2:]) == 200 for c in counts)
    each = 1 - 0.05 / len(counts)
    assert best_epsilon(counts, delta=0.0) == max(epsilon_lower_bound(*c, confidence=each) for c in counts)


def test_random_attacker_gives_zero():
    rng = np.random.default_rng(1)
    values = []
    for _ in range(20):
        scores = rng.normal(size=2000)
        values.append(membership_audit(scores, np.repeat([1, 0], 1000), delta=1e-5)["epsilon_lb"])
    assert sum(v == 0.0 for v in values) >= 18
    assert max(values) < 0.3


@pytest.mark.parametrize("n", [100, 1000, 10_000])
def test_perfect_attacker_approaches_the_sample_size_limit(n):
    scores = np.concatenate([np.arange(n) + n + 1.0, np.arange(n, dtype=float)])
    labels = np.repeat([1, 0], n)
    got = membership_audit(scores, labels, delta=0.0)["epsilon_lb"]
    limit = _perfect_limit(n)  # the best any single 95% test can certify with n members and n non-members
    # the price of searching 2·12 thresholds (fewer distinct ones at small n): α/2 per bound becomes α/48,
    # i.e. about ln(ln(48/α) / ln(2/α)) = ln(6.87 / 3.69) = 0.62 nats at large n
    family = len(threshold_counts(scores, labels))
    assert family == 2 * len(order_statistic_indices(n)) <= 24
    assert limit - 0.7 < got < limit
    assert got == pytest.approx(_perfect_limit(n, confidence=1 - 0.05 / family), rel=1e-9)


def test_perfect_attacker_bound_grows_with_n_and_its_ratio_to_the_limit_tends_to_one():
    ratios, values = [], []
    for n in (100, 1000, 10_000, 100_000):
        counts = [[n, 0, 0, n]] * 24  # what a perfect attacker's threshold family looks like
        values.append(best_epsilon(counts, delta=0.0))
        ratios.append(values[-1] / _perfect_limit(n))
    assert values == sorted(values) and ratios == sorted(ratios) and ratios[-1] > 0.93


def _gaussian_dp_epsilon(mu: float, delta: float) -> float:
    """The exact ε(δ) of μ-Gaussian DP (Dong, Roth, Su 2019): δ(ε) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2)."""
    lo, hi = 0.0, 50.0
    for _ in range(200):
        eps = (lo + hi) / 2
        d = norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * norm.cdf(-eps / mu - mu / 2)
        lo, hi = (eps, hi) if d > delta else (lo, eps)
    return hi


def test_bounds_hold_for_a_mechanism_with_known_epsilon():
    """Scores of a μ-GDP test (members N(μ, 1), non-members N(0, 1)): the 95% bound exceeds the true ε in at
    most a few of 100 simulated audits, and gets close to it."""
    mu, delta = 2.0, 1e-5
    true_eps = _gaussian_dp_epsilon(mu, delta)
    rng = np.random.default_rng(2)
    labels = np.repeat([1, 0], 5000)
    values = [membership_audit(np.concatenate([rng.normal(mu, 1, 5000), rng.normal(0, 1, 5000)]), labels,
                               delta=delta)["epsilon_lb"] for _ in range(100)]
    assert sum(v > true_eps for v in values) <= 5
    assert np.median(values) > 0.2 * true_eps


def test_stored_counts_recompute_the_bound_at_any_confidence():
    rng = np.random.default_rng(3)
    scores, labels = np.concatenate([rng.normal(1.5, 1, 3000), rng.normal(0, 1, 3000)]), np.repeat([1, 0], 3000)
    block = membership_audit(scores, labels, delta=1e-5)
    assert audit_bounds(block, confidence=0.95)["epsilon_lb"] == pytest.approx(block["epsilon_lb"])
    assert audit_bounds(block, confidence=0.999)["epsilon_lb"] < block["epsilon_lb"]


# ---- one-run audit ----------------------------------------------------------------------------------------


def test_one_run_p_value_is_the_binomial_tail_without_delta():
    q = 1 / (1 + math.exp(-1.0))
    assert one_run_p_value(1000, 100, 70, epsilon=1.0) == pytest.approx(binom.sf(69, 100, q))
    # the δ term (Steinke et al. §5) only adds: 2·m·δ·max_i P[v − i <= Bin < v] / i
    below = [binom.pmf(70 - i, 100, q) for i in range(1, 71)]
    extra = 2 * 1000 * 1e-5 * max(sum(below[:i]) / i for i in range(1, 71))
    assert one_run_p_value(1000, 100, 70, epsilon=1.0, delta=1e-5) == pytest.approx(binom.sf(69, 100, q) + extra)


def test_one_run_perfect_guesses_match_the_closed_form():
    # all r guesses right: p(ε) = q^r, so ε̂ = ln(q / (1 − q)) with q = α^(1/r)
    for r in (10, 100, 1000):
        q = 0.05 ** (1 / r)
        assert one_run_epsilon(2000, r, r) == pytest.approx(math.log(q / (1 - q)), abs=1e-6)


def test_one_run_perfect_versus_random_guesses():
    rng = np.random.default_rng(4)
    included = rng.random(1000) < 0.5
    perfect = membership_audit(included + 0.01 * rng.random(1000), included.astype(int), delta=1e-5,
                               one_run={"m": 1000, "guesses": one_run_guesses(included + 0.01 * rng.random(1000),
                                                                              included.astype(int))})
    assert perfect["one_run"]["epsilon_hat"] > 3.0
    hats = []
    for _ in range(10):
        s = rng.random(1000)
        hats.append(membership_audit(s, included.astype(int), delta=1e-5,
                                     one_run={"m": 1000, "guesses": one_run_guesses(s, included.astype(int))}
                                     )["one_run"]["epsilon_hat"])
    assert sum(h == 0.0 for h in hats) >= 8 and max(hats) < 0.5


def test_one_run_guesses_count_top_and_bottom():
    scores = np.arange(100, dtype=float)
    included = (scores >= 50).astype(int)  # the top half is included: every guess is right
    rows = one_run_guesses(scores, included, fractions=(0.1,))
    assert rows == [[10, 0, 10, 10], [10, 10, 20, 20]]


def test_one_run_epsilon_is_monotone_in_m_with_the_same_accuracy():
    hats = [one_run_epsilon(10 * r, r, int(0.9 * r)) for r in (20, 200, 2000)]
    assert hats == sorted(hats) and hats[0] < hats[-1] < math.log(9)


# ---- the run-level check ----------------------------------------------------------------------------------


def _result(eps, counts, *, guarantee="central-dp", status="ok"):
    return {"mechanism": "dpsgd", "target_epsilon": eps, "seed": 0, "status": status,
            "privacy": {"epsilon": eps if guarantee != "none" else None, "delta": 1e-5, "accountant": "opacus-prv",
                        "guarantee": guarantee},
            "attacks": {"lira": {"audit": {"delta": 1e-5, "confidence": 0.95, "counts": counts}}}}


def test_privacy_bugs_flag_bounds_above_the_accountant_after_bonferroni():
    perfect = [[1000, 0, 0, 1000]] * 24  # ε_LB ≈ 4.9 at 95% family-wise
    chance = [[500, 500, 500, 500]] * 24
    results = [_result(1.0, perfect), _result(8.0, perfect), _result(1.0, chance),
               _result(None, perfect, guarantee="none"), _result(1.0, perfect, status="failed")]
    bugs, comparisons = privacy_bugs(results)
    assert comparisons == 3  # no guarantee and failed cells are not compared
    assert [(b["target_epsilon"], b["attack"], b["bound"]) for b in bugs] == [(1.0, "lira", "epsilon_lb")]
    assert bugs[0]["confidence"] == pytest.approx(1 - 0.05 / 3)
    assert bugs[0]["lower_bound"] == pytest.approx(best_epsilon(perfect, delta=1e-5, confidence=1 - 0.05 / 3))


def test_bonferroni_over_the_run_can_clear_a_marginal_bound():
    counts = [[1000, 0, 0, 1000]] * 24
    marginal = best_epsilon(counts, delta=1e-5) - 0.01  # exceeded at 95%, not after correcting for many
    assert privacy_bugs([_result(marginal, counts)])[0]
    assert not privacy_bugs([_result(marginal, counts)] + [_result(100.0, counts)] * 50)[0]
