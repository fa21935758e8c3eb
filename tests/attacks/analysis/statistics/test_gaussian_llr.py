"""The μ-GDP analysis of white-box DP-SGD canaries' summed log-likelihood ratios
(``attacks.analysis.statistics.gaussian_llr``): hand-computed bounds, the CLT's distance from the exact ε at the default
profile's q and T, the ideal mechanism simulated through the same analysis (an estimate below the accountant's ε, never
the audit's number; a mechanism with half its noise read above it by the estimate), the normality gate, and the guessing
rule fixed in advance (``attacks.analysis.audits.guess_plan``)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from attacks.analysis import family, membership_audit
from attacks.analysis.audits.guess_plan import PLANNED_FRACTIONS, planned_guess_fraction
from attacks.analysis.statistics.fdp import gdp_delta, gdp_epsilon
from attacks.analysis.statistics.gaussian_llr import (
    combined_shape_p,
    gdp_mu_lower,
    llr_fit,
    llr_gdp_bound,
    llr_valid,
    pool_llr_fits,
)
from attacks.analysis.statistics.gaussian_llr_ideal import exact_llr_moments, simulate_llr_scores
from bench.core.design import AuditDesign
from mechanisms.accounting.gaussian import pld_epsilon

DELTA = 1e-5
WHITE_BOX = AuditDesign(kind="one-run", threat_model="white-box", relation="add-remove")
Q, T = 1 / 3, 120  # the default profile's DP-SGD: 10,500 public records, batch 4,096 (3 batches), 40 epochs
SIGMA_EPS8 = 4.35976  # its σ at replace-one ε = 8, δ = 1e-5 (add/remove ε = 3.70)


def test_hand_computed_mu_lower_bound():
    # gap 1, sd 1, n = 10,001 a side: the gap's bound 1 − t(0.025; 10,000)·√(2/10,001) = 1 − 1.96020·0.0141414
    # = 0.972280; the sd's bound √(10,000/χ²(0.0125; 10,000)), χ² by Wilson-Hilferty:
    # 10,000·(1 − 2/90,000 − 2.24140·√(2/90,000))³ = 9,685.8, so √(10,000/9,685.8) = 1.016089; μ = 0.95689
    fit = {"n_in": 10_001, "n_out": 10_001, "mean_in": 0.5, "mean_out": -0.5, "sd_in": 1.0, "sd_out": 1.0}
    mu = gdp_mu_lower(fit, confidence=0.95)
    assert mu == pytest.approx(0.95689, abs=2e-4)
    eps = llr_gdp_bound(fit, delta=DELTA, confidence=0.95)
    assert gdp_delta(mu, eps) == pytest.approx(DELTA, rel=1e-4)  # ε is μ-GDP's at δ
    # the larger sd counts: sd_in 2 halves μ (to the sd bound's precision)
    assert gdp_mu_lower({**fit, "sd_in": 2.0}, confidence=0.95) < 0.5
    # no positive gap, no bound; a bad confidence is refused
    assert gdp_mu_lower({**fit, "mean_in": -0.5}, confidence=0.95) == 0.0
    with pytest.raises(ValueError, match="confidence"):
        gdp_mu_lower(fit, confidence=1.0)


def test_the_clt_errs_low_at_the_default_q_and_t():
    """μ-GDP's ε of the exact moments against the exact PLD ε of the same T steps (dp_accounting): below it, within
    15 %, from the default's σ at ε = 8 down to half of it (the σ × 0.5 bug)."""
    for sigma in (27.245, 10.145, SIGMA_EPS8, 0.75 * SIGMA_EPS8, 0.5 * SIGMA_EPS8):
        mom = exact_llr_moments(sigma=sigma, sample_rate=Q, steps=T)
        exact = pld_epsilon(noise_multiplier=sigma, sample_rate=Q, steps=T, delta=DELTA, relation="add-remove")
        ratio = gdp_epsilon(mom["mu"], DELTA) / exact
        assert 0.85 < ratio <= 1.0, (sigma, ratio)
    # the quadrature against a direct simulation of the per-step mixture
    rng = np.random.default_rng(0)
    scores, coins = simulate_llr_scores(sigma=SIGMA_EPS8, sample_rate=Q, steps=T, m=20_000, rng=rng)
    mom = exact_llr_moments(sigma=SIGMA_EPS8, sample_rate=Q, steps=T)
    for g, side in ((1, "in"), (0, "out")):
        s = scores[coins == g]
        assert s.mean() == pytest.approx(mom[f"mean_{side}"], abs=4 * math.sqrt(mom[f"var_{side}"] / s.size))
        assert s.var() == pytest.approx(mom[f"var_{side}"], rel=0.05)


@pytest.mark.parametrize("seed", [0, 1])
def test_ideal_mechanism_through_the_analysis(seed):
    """The ideal DP-SGD (default q, T, σ at ε = 8) simulated with 4,000 canaries: the μ-GDP estimate lies below the
    accountant's add/remove ε and above half of it, and it is an estimate (it assumes the summed log-likelihood ratios
    Gaussian): the audit's number is the larger assumption-free bound, one-run or f-dp, below the ε. With half the
    noise drawn the estimate exceeds that ε, and still decides nothing."""
    accountant = pld_epsilon(noise_multiplier=SIGMA_EPS8, sample_rate=Q, steps=T, delta=DELTA, relation="add-remove")
    rng = np.random.default_rng(seed)
    scores, coins = simulate_llr_scores(sigma=SIGMA_EPS8, sample_rate=Q, steps=T, m=4000, rng=rng)
    block = membership_audit(scores, coins, delta=DELTA, design=WHITE_BOX)
    by = {b["method"]: b for b in block["bounds"]}
    llr = by["gaussian-llr"]
    assert llr_valid(llr["fit"], 0.01)  # its shape test passes on the ideal mechanism's scores ...
    assert not llr["valid"] and llr["evidence"] == "estimate"  # ... and it is an estimate all the same
    assert 0.5 * accountant < llr["epsilon_lb"] < accountant
    assert block["method"] in family(WHITE_BOX) and block["epsilon_lb"] < llr["epsilon_lb"]
    assert block["epsilon_lb"] == max(by[m]["epsilon_lb"] for m in family(WHITE_BOX)) < accountant
    assert block["method_confidence"] == pytest.approx(1 - 0.05 / len(family(WHITE_BOX)))
    # half the noise drawn, scored as the tracker scores (with the noise it measures): the estimate exceeds the claim;
    # the valid bound rises with it, and only it is the audit's number
    half = 0.5 * SIGMA_EPS8
    buggy, coins = simulate_llr_scores(sigma=half, sample_rate=Q, steps=T, m=4000, rng=rng)
    worse = membership_audit(buggy, coins, delta=DELTA, design=WHITE_BOX)
    estimate = {b["method"]: b for b in worse["bounds"]}["gaussian-llr"]
    assert estimate["epsilon_lb"] > accountant and estimate["evidence"] == "estimate"
    assert worse["method"] in family(WHITE_BOX) and worse["epsilon_lb"] > 2 * block["epsilon_lb"]


def test_excluded_scores_not_gaussian_decide_nothing():
    rng = np.random.default_rng(3)
    coins = (rng.random(3000) < 0.5).astype(int)
    scores = np.where(coins == 1, 1.0 + rng.normal(size=3000), rng.exponential(size=3000))  # skewed excluded side
    fit = llr_fit(scores, coins)
    assert fit["shape_excluded_p"] < 0.01 and not llr_valid(fit, 0.01)
    block = membership_audit(scores, coins, delta=DELTA, design=WHITE_BOX)
    llr = {b["method"]: b for b in block["bounds"]}["gaussian-llr"]
    assert not llr["valid"] and llr["evidence"] == "estimate" and block["method"] != "gaussian-llr"
    # not in the family, whatever its shape test: the divisor is the two assumption-free analyses'
    assert block["method_confidence"] == pytest.approx(1 - 0.05 / 2)
    with pytest.raises(ValueError, match="at least 3"):
        llr_fit([1.0, 2.0, 3.0, 4.0], [1, 0, 0, 0])


def test_guessing_rule_planned_from_public_parameters():
    """One rule, chosen from (σ, q, T, m) alone: a fraction of the fixed candidates, the same for any scores, and
    the audit then uses that rule only."""
    f = planned_guess_fraction(sigma=SIGMA_EPS8, sample_rate=Q, steps=30, m=2000, delta=DELTA)
    assert f in PLANNED_FRACTIONS
    assert f == planned_guess_fraction(sigma=SIGMA_EPS8, sample_rate=Q, steps=30, m=2000, delta=DELTA)
    rng = np.random.default_rng(4)
    scores, coins = simulate_llr_scores(sigma=SIGMA_EPS8, sample_rate=Q, steps=30, m=2000, rng=rng)
    block = membership_audit(scores, coins, delta=DELTA, design=WHITE_BOX.model_copy(update={"guess_fraction": f}))
    k = max(1, min(1000, round(f * 2000)))
    assert [g[:3] for g in block["one_run"]["guesses"]] == [[k, k, 2 * k]]
    with pytest.raises(ValueError, match="σ > 0"):
        planned_guess_fraction(sigma=0.0, sample_rate=Q, steps=T, m=2000, delta=DELTA)


def test_pooled_fits_equal_the_fit_of_the_pooled_scores():
    rng = np.random.default_rng(5)
    runs = [simulate_llr_scores(sigma=SIGMA_EPS8, sample_rate=Q, steps=20, m=500 + 100 * i, rng=rng) for i in range(3)]
    pooled = pool_llr_fits([llr_fit(s, c) for s, c in runs])
    direct = llr_fit(np.concatenate([s for s, _ in runs]), np.concatenate([c for _, c in runs]))
    for key in ("n_in", "n_out", "mean_in", "mean_out", "sd_in", "sd_out"):
        assert pooled[key] == pytest.approx(direct[key], rel=1e-10), key
    assert pooled["shape_excluded_p"] == pytest.approx(
        combined_shape_p([llr_fit(s, c)["shape_excluded_p"] for s, c in runs]), rel=1e-12)
    # three runs' canaries tighten the bound
    one = llr_gdp_bound(llr_fit(*runs[0]), delta=DELTA, confidence=0.95)
    assert llr_gdp_bound(pooled, delta=DELTA, confidence=0.95) > one


def test_the_shape_test_knows_the_clt_skew_and_rejects_other_noise():
    """Against the model's exact skewness and kurtosis at (σ̂, q, T): the ideal mechanism at ε = 8 passes (a plain
    normality test rejects its known skew at this size in about 40 % of runs); Laplace noise of the same variance
    instead of Gaussian (a mechanism that does not draw what it claims) is rejected."""
    model = (SIGMA_EPS8, Q, T)
    passed = 0
    for seed in range(5):
        scores, coins = simulate_llr_scores(sigma=SIGMA_EPS8, sample_rate=Q, steps=T, m=20_000,
                                            rng=np.random.default_rng(seed))
        fit = llr_fit(scores, coins, model)
        assert fit["shape_test"] == "model skewness and kurtosis"
        passed += llr_valid(fit, 0.01)
    assert passed >= 4
    rng = np.random.default_rng(9)
    coins = (rng.random(20_000) < 0.5).astype(int)
    x = rng.laplace(0, SIGMA_EPS8 / math.sqrt(2), (5, 20_000))  # 5 steps: the sum keeps Laplace's heavy tails
    z = (2 * x - 1) / (2 * SIGMA_EPS8**2)
    scores = np.logaddexp(math.log1p(-Q), math.log(Q) + z).sum(0) + coins * 0.01
    fit = llr_fit(scores, coins, (SIGMA_EPS8, Q, 5))
    assert fit["shape_excluded_p"] < 0.01 and not llr_valid(fit, 0.01)


def test_scores_at_a_measured_sigma_hat():
    """The code scores at the σ̂ it measures on canary-free coordinates, not the true σ: the exact moments and the
    simulation both take that σ̂ (``score_sigma``). Hand case q = 1: ℓ(x) = (2x − 1)/(2σ̂²) is linear, so with
    σ = 2, σ̂ = 3, T = 10 the excluded sum has mean −10/18 and variance 10·4/81, the included mean +10/18, and
    μ = (20/18)/√(40/81) = √10/2, the same as at σ̂ = σ (a linear score's μ does not depend on its scale)."""
    mom = exact_llr_moments(sigma=2.0, sample_rate=1.0, steps=10, score_sigma=3.0)
    assert mom["mean_out"] == pytest.approx(-10 / 18, rel=1e-9)
    assert mom["mean_in"] == pytest.approx(10 / 18, rel=1e-9)
    assert mom["var_out"] == pytest.approx(40 / 81, rel=1e-9)
    assert mom["var_in"] == pytest.approx(40 / 81, rel=1e-9)
    assert mom["mu"] == pytest.approx(math.sqrt(10) / 2, rel=1e-9)
    # at q = 1/3 the simulation scored at σ̂ = 1.1·σ agrees with the quadrature at the same σ̂
    s_hat = 1.1 * SIGMA_EPS8
    exact = exact_llr_moments(sigma=SIGMA_EPS8, sample_rate=Q, steps=30, score_sigma=s_hat)
    scores, coins = simulate_llr_scores(sigma=SIGMA_EPS8, sample_rate=Q, steps=30, m=20_000,
                                        rng=np.random.default_rng(11), score_sigma=s_hat)
    for group, side in ((0, "out"), (1, "in")):
        s = scores[coins == group]
        assert abs(s.mean() - exact[f"mean_{side}"]) < 4 * math.sqrt(exact[f"var_{side}"] / s.size), side
        assert s.std() == pytest.approx(math.sqrt(exact[f"var_{side}"]), rel=0.03), side
    # σ̂ off by 0.4 % (the spread of the default model's 992 references over 120 steps is 0.2 %) costs the score's μ
    # less than 0.01 %: the Neyman-Pearson score is flat in σ̂ at the true σ
    at_sigma = exact_llr_moments(sigma=SIGMA_EPS8, sample_rate=Q, steps=T)["mu"]
    for off in (0.996, 1.004):
        assert exact_llr_moments(sigma=SIGMA_EPS8, sample_rate=Q, steps=T, score_sigma=off * SIGMA_EPS8)["mu"] \
            == pytest.approx(at_sigma, rel=1e-4)
    # no σ̂ given: scored at the true σ, draw for draw
    a = simulate_llr_scores(sigma=SIGMA_EPS8, sample_rate=Q, steps=5, m=50, rng=np.random.default_rng(3))
    b = simulate_llr_scores(sigma=SIGMA_EPS8, sample_rate=Q, steps=5, m=50, rng=np.random.default_rng(3),
                            score_sigma=SIGMA_EPS8)
    assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])
    with pytest.raises(ValueError, match="σ̂ > 0"):
        exact_llr_moments(sigma=SIGMA_EPS8, sample_rate=Q, steps=T, score_sigma=0.0)


def test_pooled_shape_test_is_fishers_combination():
    """Hand cases: one run's p is its own; three runs at p = ½ give −2·Σ log p = 6·log 2 = 4.15888 against χ²₆,
    whose survival function is e^(−x/2)·(1 + x/2 + (x/2)²/2) = 0.125·(1 + 2.07944 + 2.16203) = 0.65518; one run at
    0.005 with two at ½ (the smallest-p rule would reject at 1 %): x = 2·(5.29832 + 1.38629) = 13.36922, χ²₆ tail
    e^(−6.68461)·(1 + 6.68461 + 22.34201) = 0.0012504·30.02662 = 0.03754, so the pool still decides."""
    assert combined_shape_p([0.3]) == pytest.approx(0.3, rel=1e-12)
    assert combined_shape_p([0.5, 0.5, 0.5]) == pytest.approx(0.65518, abs=1e-5)
    assert combined_shape_p([0.005, 0.5, 0.5]) == pytest.approx(0.03754, abs=1e-5)
    assert combined_shape_p([0.0, 0.9]) == 0.0
    with pytest.raises(ValueError, match="p-values in"):
        combined_shape_p([])
    with pytest.raises(ValueError, match="p-values in"):
        combined_shape_p([1.5])
    # correct runs (uniform p-values): three-run pools rejected at the level, 1 %, not at 1 − 0.99³ ≈ 3 % as when
    # every run's test had to pass
    p = np.random.default_rng(12).random((20_000, 3))
    fisher = np.mean([combined_shape_p(row) < 0.01 for row in p])
    assert 0.007 < fisher < 0.013
    assert 0.025 < np.mean(p.min(axis=1) < 0.01) < 0.035
    # Laplace noise in every run (a mechanism that does not draw Gaussian noise): the pool rejects
    rng = np.random.default_rng(13)
    fits = []
    for _ in range(3):
        coins = (rng.random(4000) < 0.5).astype(int)
        x = rng.laplace(0, SIGMA_EPS8 / math.sqrt(2), (5, 4000))
        scores = np.logaddexp(math.log1p(-Q), math.log(Q) + (2 * x - 1) / (2 * SIGMA_EPS8**2)).sum(0)
        fits.append(llr_fit(scores, coins, (SIGMA_EPS8, Q, 5)))
    assert not llr_valid(pool_llr_fits(fits), 0.01)


def test_the_included_group_is_tested_too():
    """A bug that changes only the included canaries' law (5 % of them let through unclipped: 10·C where sampled)
    leaves the excluded group's test passing; the included group's, against the model's exact skewness and kurtosis
    of the per-step mixture, rejects it and the analysis is not valid. Both tests are one validity check
    (Bonferroni), not a new analysis: the design's family is unchanged."""
    model, m = (SIGMA_EPS8, Q, T), 20_000
    rng = np.random.default_rng(11)
    coins = (rng.random(m) < 0.5).astype(int)
    contribution = np.where(rng.random(m) < 0.05, 10.0, 1.0)
    x = rng.standard_normal((T, m)) * SIGMA_EPS8 + ((rng.random((T, m)) < Q) & (coins == 1)) * contribution
    scores = np.logaddexp(math.log1p(-Q), math.log(Q) + (2 * x - 1) / (2 * SIGMA_EPS8**2)).sum(0)
    fit = llr_fit(scores, coins, model)
    assert fit["shape_included_p"] < 1e-6 and fit["shape_p"] == min(1.0, 2 * fit["shape_included_p"])
    assert fit["shape_excluded_p"] > 0.01 and not llr_valid(fit, 0.01)
    block = membership_audit(scores, coins, delta=DELTA, design=WHITE_BOX.model_copy(update={"llr_model": model}))
    assert not {b["method"]: b for b in block["bounds"]}["gaussian-llr"]["valid"]
    assert block["method_confidence"] == pytest.approx(1 - 0.05 / len(family(WHITE_BOX)))
    runs = [simulate_llr_scores(sigma=SIGMA_EPS8, sample_rate=Q, steps=T, m=2000, rng=np.random.default_rng(s))
            for s in (1, 2)]
    fits = [llr_fit(s, c, model) for s, c in runs]
    pooled = pool_llr_fits(fits)
    assert pooled["shape_included_p"] == pytest.approx(combined_shape_p([f["shape_included_p"] for f in fits]))
