"""The one-run analyses: Steinke, Nasr, Jagielski (2023) p-value and ε, and Mahloujifar, Melis, Chaudhuri (2024)
Algorithm 3 (f-DP in one run), against hand-computed small cases, independent re-implementations written here (the
Appendix-D loop, Algorithm 3 without any shortcut) and the published test vectors of /tmp/audit_research.md §7
(computed with the authors' reference code, matched to 4e-17)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.special import expit, logit, ndtr
from scipy.stats import binom

from attacks.analysis import best_one_run_epsilon, fdp_epsilon, fdp_gdp_epsilon, one_run_epsilon, one_run_guesses
from attacks.analysis import one_run_p_value as p_value
from attacks.analysis.statistics.fdp import (
    EPSILON_CAP,
    _largest_rejected,
    eps_delta_inverse,
    gdp_inverse,
    profile_inverse,
    profile_rejected,
    rejects,
)


def _pmf(j: int, r: int, q: float) -> float:
    """C(r, j) q^j (1 − q)^(r − j), in logs (math.lgamma) so that large r does not overflow."""
    log = math.lgamma(r + 1) - math.lgamma(j + 1) - math.lgamma(r - j + 1) + j * math.log(q) + (r - j) * math.log1p(-q)
    return math.exp(log)


def _appendix_d(m: int, r: int, v: int, eps: float, delta: float) -> float:
    """Steinke et al.'s Appendix-D p-value, transcribed as its loop (the binomial pmf from log-gamma, not SciPy)."""
    q = 1 / (1 + math.exp(-eps))
    beta = sum(_pmf(j, r, q) for j in range(v, r + 1))
    alpha, total = 0.0, 0.0
    for i in range(1, v + 1):
        total += _pmf(v - i, r, q)
        if total > i * alpha:
            alpha = total / i
    return min(beta + alpha * delta * 2 * m, 1.0)


# ---- Steinke et al. ---------------------------------------------------------------------------------------


def test_p_value_without_delta_is_the_binomial_tail_by_hand():
    # r = 10, v = 8, ε = 1: q = e/(1 + e) = 0.731059; P[Bin(10, q) >= 8] = Σ_{j=8..10} C(10, j) q^j (1 − q)^(10−j)
    # = 45·0.081586·0.072329 + 10·0.059644·0.268941 + 0.043604 = 0.265549 + 0.160408 + 0.043604 = 0.469561
    q = math.e / (1 + math.e)
    tail = 45 * q**8 * (1 - q) ** 2 + 10 * q**9 * (1 - q) + q**10
    assert tail == pytest.approx(0.469561, abs=1e-6)
    assert p_value(100, 10, 8, epsilon=1.0) == pytest.approx(tail, rel=1e-12)
    assert p_value(100, 10, 0, epsilon=1.0) == 1.0  # at least 0 correct: certain
    assert p_value(100, 10, 10, epsilon=0.0) == pytest.approx(0.5**10, rel=1e-12)  # ε = 0: coin flips
    for r, v, eps in [(50, 40, 0.5), (200, 180, 2.0), (7, 7, 3.0)]:
        assert p_value(1000, r, v, epsilon=eps) == pytest.approx(binom.sf(v - 1, r, expit(eps)), rel=1e-10)


@pytest.mark.parametrize("m, r, v, eps, delta", [(1000, 100, 70, 1.0, 1e-5), (1000, 200, 180, 1.8, 1e-5),
                                                 (50, 20, 15, 0.5, 1e-3), (10**5, 1500, 1429, 2.7, 1e-5),
                                                 (1000, 30, 30, 4.0, 1e-2)])
def test_p_value_with_delta_matches_the_appendix_d_loop(m, r, v, eps, delta):
    assert p_value(m, r, v, epsilon=eps, delta=delta) == pytest.approx(_appendix_d(m, r, v, eps, delta), rel=1e-9)
    assert p_value(m, r, v, epsilon=eps, delta=delta) >= p_value(m, r, v, epsilon=eps)  # δ only adds


@pytest.mark.parametrize("m, r, v, delta, expected", [
    (1000, 1000, 1000, 0.0, 5.8091), (1000, 600, 600, 1e-5, 5.2704), (1000, 100, 100, 1e-5, 3.4654),
    (1000, 100, 100, 0.0, 3.4930), (1000, 200, 180, 1e-5, 1.7963), (5000, 1000, 900, 1e-5, 2.0183),
    (10**5, 1500, 1429, 1e-5, 2.6688), (10**5, 1500, 1429, 0.0, 2.7992)])
def test_one_run_epsilon_matches_the_reference_vectors(m, r, v, delta, expected):
    assert one_run_epsilon(m, r, v, delta=delta, confidence=0.95) == pytest.approx(expected, abs=1e-4)


def test_perfect_guesses_match_the_closed_form():
    # all r guesses right, δ = 0: p(ε) = q^r < α  <=>  q < α^(1/r), so ε̂ = logit(α^(1/r))
    for r in (10, 100, 1000):
        assert one_run_epsilon(2000, r, r) == pytest.approx(logit(0.05 ** (1 / r)), abs=1e-8)
    assert one_run_epsilon(2000, 4, 4) == 0.0  # 0.5^4 = 0.0625 >= 0.05: four guesses prove nothing
    # Bonferroni over rules: each at α / (number of rules)
    rules = [[10, 0, 10, 10], [50, 0, 50, 50], [50, 50, 100, 100]]
    assert best_one_run_epsilon(2000, rules, delta=0.0) == pytest.approx(logit((0.05 / 3) ** (1 / 100)), abs=1e-8)
    assert best_one_run_epsilon(2000, [], delta=0.0) == 0.0


def test_epsilon_is_the_largest_rejected_and_monotone():
    for m, r, v, delta in [(1000, 200, 150, 1e-5), (300, 60, 55, 1e-4)]:
        eps = one_run_epsilon(m, r, v, delta=delta)
        assert p_value(m, r, v, epsilon=eps, delta=delta) < 0.05 <= p_value(m, r, v, epsilon=eps + 1e-6, delta=delta)
        assert eps <= one_run_epsilon(m, r, v, delta=0.0)  # δ > 0 can only weaken the bound
        assert one_run_epsilon(m, r, v, delta=delta, confidence=0.99) < eps
    # the δ term grows with m: the same accuracy certifies less among more canaries
    hats = [one_run_epsilon(m, 200, 180, delta=1e-5) for m in (1000, 10**4, 10**5)]
    assert hats == sorted(hats, reverse=True) and hats[0] > hats[-1]
    assert one_run_epsilon(1000, 100, 50) == 0.0  # chance accuracy
    with pytest.raises(ValueError):
        one_run_epsilon(1000, 10, 5, confidence=1.0)
    with pytest.raises(ValueError):
        p_value(10, 20, 5, epsilon=1.0)  # more guesses than canaries


def test_one_run_guesses_count_top_and_bottom_by_hand():
    scores = np.arange(10, dtype=float)  # the canary with score i is ranked 10 − i
    included = np.array([0, 1, 0, 0, 1, 0, 1, 1, 0, 1])
    # k = 2: top two (scores 9, 8) hold 1 included; bottom two (0, 1) hold 1 excluded
    # k = 5: top five (9..5) hold 3 included; bottom five (0..4) hold 3 excluded
    assert one_run_guesses(scores, included, fractions=(0.2, 0.5)) == [
        [2, 0, 2, 1], [2, 2, 4, 2], [5, 0, 5, 3], [5, 5, 10, 6]]
    # k is at least 1 and at most m // 2
    assert [row[0] for row in one_run_guesses(scores, included, fractions=(0.01, 0.9))] == [1, 1, 5, 5]


# ---- Mahloujifar et al., Algorithm 3 ----------------------------------------------------------------------


def _algorithm3(fbar_inverse, m: int, guesses: int, correct: int, tau: float) -> bool:
    """Algorithm 3 as printed (with the appendix code's max), k = 2: the whole recursion, no early exit."""
    r, h = [0.0] * (correct + 1), [0.0] * (correct + 1)
    r[correct], h[correct] = tau * correct / m, tau * (guesses - correct) / m
    for i in range(correct - 1, -1, -1):
        h[i] = max(h[i + 1], fbar_inverse(min(r[i + 1], 1.0)))
        r[i] = r[i + 1] + i / (guesses - i) * (h[i] - h[i + 1])
    return r[0] + h[0] > guesses / m


def test_inverse_curves_by_hand():
    inv = eps_delta_inverse(math.log(2), 0.1)  # f̄(x) = min(1, 0.1 + 2x, 1 − (0.9 − x)/2)
    assert inv(0.5) == pytest.approx(0.2)  # the first branch: (0.5 − 0.1)/2
    assert inv(0.95) == pytest.approx(0.8)  # the second branch: 1 − 0.1 − 2·0.05
    assert inv(0.05) == 0.0
    assert gdp_inverse(1.0)(ndtr(1.0)) == pytest.approx(0.5)  # Φ(Φ⁻¹(Φ(1)) − 1) = Φ(0)
    assert gdp_inverse(0.0)(0.3) == pytest.approx(0.3)  # μ = 0: no privacy loss, the identity
    both = profile_inverse([[math.log(2), 0.1], [math.log(4), 0.0]])
    assert both(0.5) == pytest.approx(max(0.2, 0.5 / 4, 1 - 4 * 0.5))  # the most private curve at each y
    grid = np.linspace(0, 1, 101)
    for f in (inv, gdp_inverse(2.0), both):
        values = [f(y) for y in grid]
        assert values == sorted(values) and all(v <= y + 1e-12 for v, y in zip(values, grid, strict=True))


def test_two_canaries_both_guessed_right_by_hand():
    # m = c' = c = 2, g = f̄⁻¹: r = τ, h = 0; i = 1: h = g(τ), r = τ + g(τ); i = 0: h = g(τ + g(τ)).
    # Reject iff τ + g(τ) + g(τ + g(τ)) > 1. For ε-DP (δ = 0), g(y) = y·e^(−ε) below q = e^ε/(1+e^ε), so the test is
    # τ(1 + e^(−ε))² > 1 <=> q² < τ: exactly the binomial tail P[Bin(2, q) >= 2] = q² < τ.
    for tau in (0.05, 0.3):
        for curve in [eps_delta_inverse(0.2, 0.0), eps_delta_inverse(1.0, 0.01), gdp_inverse(0.1), gdp_inverse(1.5)]:
            g = curve
            assert rejects(curve, 2, 2, 2, tau=tau) == (tau + g(tau) + g(tau + g(tau)) > 1)
        for eps in np.linspace(0.0, 1.0, 21):
            if abs(expit(eps) ** 2 - tau) > 1e-9:
                assert rejects(eps_delta_inverse(eps, 0.0), 2, 2, 2, tau=tau) == (expit(eps) ** 2 < tau)


def test_rejects_matches_algorithm_3_without_shortcuts():
    rng = np.random.default_rng(0)
    for _ in range(150):
        m = int(rng.integers(5, 400))
        guesses = int(rng.integers(1, m + 1))
        correct = int(rng.integers(0, guesses + 1))
        tau = float(rng.choice([0.01, 0.05, 0.2]))
        curve = eps_delta_inverse(rng.uniform(0, 4), float(rng.choice([0.0, 1e-5, 1e-2]))) if rng.random() < 0.5 \
            else gdp_inverse(rng.uniform(0, 3))
        assert rejects(curve, m, guesses, correct, tau=tau) == _algorithm3(curve, m, guesses, correct, tau)


def test_pure_dp_all_correct_is_exactly_the_binomial_test():
    # With every guess right (c = c') and δ = 0, randomized response makes every constraint of Algorithm 3 tight
    # (α_{i+1}/β_i = q/(1 − q) for Binomial(c', q)), and it starts from α_c = τ·c/m, β_c = 0: the recursion
    # rebuilds RR's (α_i, β_i) exactly, so it rejects iff q^c < τ. The largest rejected ε is logit(τ^(1/c)).
    for m, c in [(10, 10), (1000, 100), (1000, 600), (10**5, 1500)]:
        assert fdp_epsilon(m, [[c, 0, c, c]], delta=0.0, confidence=0.95) == pytest.approx(
            logit(0.05 ** (1 / c)), abs=1e-8)
        for eps in (0.5, 2.0, 4.0):
            assert rejects(eps_delta_inverse(eps, 0.0), m, c, c, tau=0.05) == (expit(eps) ** c < 0.05)


@pytest.mark.parametrize("m, guesses, correct", [(10, 10, 9), (100, 100, 80), (1000, 200, 180), (5000, 1000, 900),
                                                 (100, 50, 40)])
def test_pure_dp_is_never_above_the_binomial_test(m, guesses, correct):
    # Randomized response at ε is ε-DP and makes Binomial(c', q) correct guesses, so no valid test of ε-DP can reject
    # where the binomial tail is >= τ: the f-DP bound at δ = 0 is at most Steinke's. With wrong guesses, Algorithm 3
    # starts β_c at τ(c' − c)/m (its eqs. 6-7), slightly loose: within 0.05 nats here.
    fdp = fdp_epsilon(m, [[guesses, 0, guesses, correct]], delta=0.0, confidence=0.95)
    steinke = one_run_epsilon(m, guesses, correct, delta=0.0, confidence=0.95)
    assert steinke - 0.05 < fdp <= steinke + 1e-8


@pytest.mark.parametrize("m, guesses, correct, expected", [
    (1000, 200, 180, 1.7848), (1000, 600, 600, 5.2971), (10**5, 1500, 1429, 2.7867), (5000, 1000, 900, 2.0129)])
def test_fdp_epsilon_delta_matches_the_reference_vectors(m, guesses, correct, expected):
    assert fdp_epsilon(m, [[guesses, 0, guesses, correct]], delta=1e-5, confidence=0.95) == pytest.approx(
        expected, abs=1e-4)


@pytest.mark.parametrize("m, guesses, correct, expected", [
    (10**5, 1500, 1429, 3.2992), (1000, 200, 180, 2.9012), (5000, 1000, 900, 3.0229), (1000, 100, 100, 5.5490),
    (1000, 600, 600, 10.5149)])
def test_fdp_gdp_matches_the_reference_vectors(m, guesses, correct, expected):
    assert fdp_gdp_epsilon(m, [[guesses, 0, guesses, correct]], delta=1e-5, confidence=0.95) == pytest.approx(
        expected, abs=1e-4)


def test_rejection_is_monotone_in_the_hypothesis_and_in_tau():
    m, guesses, correct = 1000, 200, 180
    for family in (lambda x: eps_delta_inverse(x, 1e-5), gdp_inverse):
        verdicts = [rejects(family(x), m, guesses, correct, tau=0.05) for x in np.linspace(0, 4, 41)]
        assert verdicts[0] and not verdicts[-1]
        assert verdicts == sorted(verdicts, reverse=True)  # rejected below a point, not above
    taus = [rejects(gdp_inverse(0.6), m, guesses, correct, tau=t) for t in np.linspace(0.001, 0.5, 50)]
    assert taus == sorted(taus) and not taus[0] and taus[-1]  # a looser test rejects more


def test_fdp_bounds_are_bonferroni_corrected_over_rules():
    rules = [[100, 0, 100, 100]] * 5
    assert fdp_epsilon(1000, rules, delta=0.0, confidence=0.95) == pytest.approx(logit(0.01 ** (1 / 100)), abs=1e-8)
    assert fdp_epsilon(1000, [], delta=0.0, confidence=0.95) == 0.0
    assert fdp_gdp_epsilon(1000, [[0, 0, 0, 0]], delta=1e-5, confidence=0.95) == 0.0  # no guesses: nothing


def test_largest_rejected_never_claims_more_than_it_tested():
    # a test that rejects below 70: the search doubles 1, 2, ..., 64, then must not jump to the cap
    assert _largest_rejected(lambda x: x < 70.0, EPSILON_CAP) == pytest.approx(70.0, abs=1e-9)
    assert _largest_rejected(lambda x: x <= 150.0, EPSILON_CAP) == EPSILON_CAP  # rejected at the cap: capped
    assert _largest_rejected(lambda x: x < 0.3, EPSILON_CAP) == pytest.approx(0.3, abs=1e-12)
    assert _largest_rejected(lambda x: False, EPSILON_CAP) == 0.0


def test_profile_rejected_tests_the_whole_curve():
    m, rules = 1000, [[300, 300, 600, 600]]  # 600 of 600 right: f-DP rejects (ε, 1e-5) up to ε ≈ 5.3
    eps = fdp_epsilon(m, rules, delta=1e-5, confidence=0.95)
    assert eps == pytest.approx(5.2971, abs=1e-4)
    assert profile_rejected(m, rules, [[eps - 0.05, 1e-5]], confidence=0.95)
    assert not profile_rejected(m, rules, [[eps + 0.05, 1e-5]], confidence=0.95)
    # adding a point the data refutes rejects the curve; a point it cannot refute never un-rejects it
    assert profile_rejected(m, rules, [[eps + 0.05, 1e-5], [2.0, 0.01]], confidence=0.95)
    assert profile_rejected(m, rules, [[eps - 0.05, 1e-5], [50.0, 0.5]], confidence=0.95)
    # the test is at the stated confidence: a stricter one rejects less
    assert not profile_rejected(m, rules, [[eps - 0.05, 1e-5]], confidence=0.999)
    # one rejected point: as rejects() on its (ε, δ) curve
    for e, d in [(1.0, 0.1), (3.0, 1e-3), (5.0, 1e-6)]:
        assert profile_rejected(m, rules, [[e, d]], confidence=0.95) == rejects(eps_delta_inverse(e, d), m, 600, 600,
                                                                                 tau=0.05)
