"""Coverage and power of the ε lower bounds on scores simulated from mechanisms whose ε is known exactly:

- one-run designs: randomized response at ε (pure ε-DP; the one-run binomial test is exact for it) and the Gaussian
  mechanism at μ (μ-GDP, one independent Gaussian per canary, so the whole release is μ-GDP in each canary's coin);
- multi-run designs: the Gaussian mechanism, scores N(μ, 1) with the canary and N(0, 1) without.

A valid 95 % bound may exceed the true ε in at most 5 % of independent audits; each check is a one-sided binomial test
at level 0.001 on the seeded repetitions (not flaky: the seeds are fixed, and a correct bound fails it with
probability < 0.001). The true ε(δ) of μ-GDP is Dong, Roth, Su's (checked against dp_accounting in
test_gaussian.py); of randomized response, ε itself.

Where a bound is the largest ε its test rejects, "bound > ε_true" is the event "the test rejects ε_true" (the tests
are monotone in ε: test_one_run.py); the one-run checks count that event, which costs one test per guessing
rule instead of a bisection, and check the equivalence on the first repetitions."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import expit
from scipy.stats import binom, binomtest

from attacks.analysis import (
    NORMALITY_LEVEL,
    best_one_run_epsilon,
    fdp_epsilon,
    fdp_gdp_epsilon,
    gdp_epsilon,
    membership_audit,
    one_run_epsilon,
    one_run_guesses,
    one_run_p_value,
)
from attacks.analysis.statistics.fdp import eps_delta_inverse, gdp_delta, gdp_inverse, profile_rejected, rejects
from attacks.analysis.statistics.gaussian import gaussian_pair_epsilon
from bench.core.design import AuditDesign

DELTA = 1e-5


def _not_above(exceed: int, reps: int, level: float = 0.05) -> bool:
    """One-sided binomial test: ``exceed`` of ``reps`` is not significantly above ``level`` (at 0.001)."""
    return binom.sf(exceed - 1, reps, level) > 1e-3


def _randomized_response(rng: np.random.Generator, m: int, eps: float) -> tuple[np.ndarray, np.ndarray]:
    """m fair coins, each released through ε-randomized response (kept with probability e^ε/(1 + e^ε)); the score is
    the release plus a tie-breaking jitter independent of the coins."""
    coins = rng.random(m) < 0.5
    released = coins ^ (rng.random(m) >= expit(eps))
    return released + 0.1 * rng.random(m), coins.astype(int)


def _gaussian_one_run(rng: np.random.Generator, m: int, mu: float) -> tuple[np.ndarray, np.ndarray]:
    coins = rng.random(m) < 0.5
    return mu * coins + rng.normal(0, 1, m), coins.astype(int)


def test_one_run_bounds_cover_randomized_response():
    eps, m, reps = 1.5, 200, 200
    rng = np.random.default_rng(0)
    exceed = {"one-run": 0, "f-dp": 0}
    for i in range(reps):
        rules = one_run_guesses(*_randomized_response(rng, m, eps))
        tau = 0.05 / len(rules)
        steinke = any(one_run_p_value(m, r, v, epsilon=eps, delta=DELTA) < tau for _, _, r, v in rules)
        fdp = any(rejects(eps_delta_inverse(eps, DELTA), m, r, v, tau=tau) for _, _, r, v in rules)
        exceed["one-run"] += steinke
        exceed["f-dp"] += fdp
        if i < 15:  # the counted event is the bound's
            assert (best_one_run_epsilon(m, rules, delta=DELTA) > eps) == steinke
            assert (fdp_epsilon(m, rules, delta=DELTA, confidence=0.95) > eps) == fdp
            if i < 3:
                assert 0.4 * eps < fdp_epsilon(m, rules, delta=DELTA, confidence=0.95)  # and they are not trivial
    assert all(_not_above(n, reps) for n in exceed.values()), exceed


def test_one_rule_false_alarm_rate_is_the_binomial_tail():
    # One rule fixed in advance (the top k scores guessed "included"), δ = 0: under randomized response the k guesses
    # are right independently with probability q, so V ~ Binomial(k, q) and the bound exceeds ε exactly when
    # P[Binomial(k, q) >= V] < α. Its probability is Σ_v pmf(v) · 1[sf(v − 1) < α]: the simulated rate must match it.
    eps, m, k, reps = 1.0, 400, 60, 400
    q = expit(eps)
    v = np.arange(k + 1)
    expected = float(binom.pmf(v, k, q)[binom.sf(v - 1, k, q) < 0.05].sum())
    assert 0.01 < expected < 0.05
    rng = np.random.default_rng(1)
    exceed = 0
    for _ in range(reps):
        _, _, r, correct = one_run_guesses(*_randomized_response(rng, m, eps), fractions=(k / m,))[0]
        assert r == k
        exceed += one_run_epsilon(m, r, correct, delta=0.0) > eps
    assert binomtest(exceed, reps, expected).pvalue > 1e-3, (exceed, expected)


def test_one_run_gaussian_mechanism_bounds_cover_and_are_not_trivial():
    mu, m, reps = 2.0, 1000, 200
    true = gdp_epsilon(mu, DELTA)  # 9.997
    rng = np.random.default_rng(2)
    exceed = {"one-run": 0, "f-dp": 0, "f-dp-gaussian": 0}
    for _ in range(reps):
        rules = one_run_guesses(*_gaussian_one_run(rng, m, mu))
        tau = 0.05 / len(rules)
        exceed["one-run"] += any(one_run_p_value(m, r, v, epsilon=true, delta=DELTA) < tau for _, _, r, v in rules)
        exceed["f-dp"] += any(rejects(eps_delta_inverse(true, DELTA), m, r, v, tau=tau) for _, _, r, v in rules)
        # f-dp-gaussian > ε(μ) exactly when the largest rejected μ-GDP curve is above μ
        exceed["f-dp-gaussian"] += any(rejects(gdp_inverse(mu), m, r, v, tau=tau) for _, _, r, v in rules)
    assert all(_not_above(n, reps) for n in exceed.values()), exceed
    rules = one_run_guesses(*_gaussian_one_run(np.random.default_rng(3), m, mu))
    gaussian = fdp_gdp_epsilon(m, rules, delta=DELTA, confidence=0.95)
    assert 0.3 * true < gaussian < true  # the Gaussian curve's shape buys more than the (ε, δ) curves
    assert gaussian > fdp_epsilon(m, rules, delta=DELTA, confidence=0.95)


def test_profile_rejection_keeps_the_true_curve_and_rejects_an_optimistic_one():
    mu, m, reps = 1.0, 2000, 100
    grid = np.linspace(0, 2 * gdp_epsilon(mu, DELTA), 41)
    true = [[e, gdp_delta(mu, e)] for e in grid]  # the mechanism's whole privacy profile
    optimistic = [[e, gdp_delta(0.4, e)] for e in np.linspace(0, 2 * gdp_epsilon(0.4, DELTA), 41)]
    rng = np.random.default_rng(4)
    rejected = {"true": 0, "optimistic": 0}
    for _ in range(reps):
        rules = one_run_guesses(*_gaussian_one_run(rng, m, mu))
        rejected["true"] += profile_rejected(m, rules, true, confidence=0.95)
        rejected["optimistic"] += profile_rejected(m, rules, optimistic, confidence=0.95)
    assert _not_above(rejected["true"], reps), rejected
    assert rejected["optimistic"] >= 0.9 * reps, rejected
    # randomized response at ε = 1.5: its own (ε, 0) point is kept, a claim of ε = 0.5 is refuted
    rng = np.random.default_rng(5)
    rejected = {"own": 0, "claim": 0}
    for _ in range(50):
        rules = one_run_guesses(*_randomized_response(rng, 1000, 1.5))
        rejected["own"] += profile_rejected(1000, rules, [[1.5, 0.0]], confidence=0.95)
        rejected["claim"] += profile_rejected(1000, rules, [[0.5, 0.0]], confidence=0.95)
    assert _not_above(rejected["own"], 50) and rejected["claim"] >= 45, rejected


def test_multi_run_gaussian_bounds_cover_the_gaussian_mechanism():
    mu, n, reps = 1.0, 1000, 100
    true = gdp_epsilon(mu, DELTA)  # 4.377
    rng = np.random.default_rng(6)
    labels = np.repeat([1, 0], n)
    design = AuditDesign(kind="multi-run", threat_model="black-box", gaussian=True, relation="add-remove")
    values: dict[str, list[float]] = {}
    normal = 0
    for _ in range(reps):
        block = membership_audit(np.concatenate([rng.normal(mu, 1, n), rng.normal(0, 1, n)]), labels, delta=DELTA,
                                 design=design)
        for b in block["bounds"]:
            values.setdefault(b["method"], []).append(b["epsilon_lb"])
        # Clopper-Pearson is the only valid bound and the audit's number; the Gaussian ones are estimates even here
        assert [b["method"] for b in block["bounds"] if b["valid"]] == ["clopper-pearson"] == [block["method"]]
        pair = next(b for b in block["bounds"] if b["method"] == "gaussian-pair")
        normal += pair["fit"]["normality_p"] >= NORMALITY_LEVEL
    assert set(values) == {"clopper-pearson", "gdp-fit", "gaussian-pair"}
    assert normal >= 0.9 * reps  # normality (at 1 % per group) rarely rejects Gaussian scores
    for method, vals in values.items():
        assert _not_above(sum(v > true for v in vals), reps), method
    assert np.median(values["clopper-pearson"]) > 0.2 * true
    assert np.median(values["gdp-fit"]) > 0.6 * true and np.median(values["gaussian-pair"]) > 0.6 * true


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_gaussian_pair_recovers_most_of_epsilon_at_m_20000(seed):
    mu = 1.0
    rng = np.random.default_rng(10 + seed)
    scores = np.concatenate([rng.normal(mu, 1, 10_000), rng.normal(0, 1, 10_000)])
    got = gaussian_pair_epsilon(scores, np.repeat([1, 0], 10_000), delta=DELTA)["epsilon_lb"]
    assert 0.8 * gdp_epsilon(mu, DELTA) <= got <= gdp_epsilon(mu, DELTA)


def test_gaussian_pair_covers_at_a_low_confidence():
    # at confidence 0.5 the bound is close to the point estimate: it may exceed the true ε in at most half the audits
    mu, n, reps = 1.0, 200, 150
    true = gdp_epsilon(mu, DELTA)
    rng = np.random.default_rng(7)
    labels = np.repeat([1, 0], n)
    values = [gaussian_pair_epsilon(np.concatenate([rng.normal(mu, 1, n), rng.normal(0, 1, n)]), labels,
                                    delta=DELTA, confidence=0.5)["epsilon_lb"] for _ in range(reps)]
    assert _not_above(sum(v > true for v in values), reps, level=0.5)
    assert np.median(values) > 0.7 * true
