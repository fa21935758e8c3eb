"""The ideal mechanism's limit of an audit (attacks.analysis.statistics.limits): it is the best single threshold fixed
in advance (checked against a direct computation with SciPy's beta quantiles on another grid), it grows with the audit's
size towards the pair's exact ε and never passes it, and the audits' own analyses land just under it on the ideal
mechanism."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import beta, norm

from attacks.analysis import membership_audit
from attacks.analysis.statistics.fdp import gdp_epsilon
from attacks.analysis.statistics.limits import gaussian_limit, gaussian_mixture_sf, threshold_limit, whitebox_limit
from bench.core.design import AuditDesign
from mechanisms.accounting.gaussian import pld_epsilon

DELTA = 1e-5


def _direct(mu: float, n: int) -> float:
    """The same quantity written out: every threshold of a finer, shifted grid, both Clopper-Pearson ends by beta
    quantiles at 97.5 % each, both directions of the test."""
    best = 0.0
    for t in np.linspace(-7.9, mu + 7.9, 6007):
        fp, tp = round(n * norm.sf(t)), round(n * norm.sf(t - mu))
        fpr_up = 1.0 if fp >= n else beta.ppf(0.975, fp + 1, n - fp)
        tpr_lo = 0.0 if tp <= 0 else beta.ppf(0.025, tp, n - tp + 1)
        for lo, up in ((tpr_lo, fpr_up), (1 - fpr_up, 1 - tpr_lo)):
            if lo - DELTA > 0 and up > 0:
                best = max(best, math.log((lo - DELTA) / up))
    return best


@pytest.mark.parametrize(("mu", "n"), [(2.0, 1000), (0.9, 5000)])
def test_the_gaussian_limit_is_the_best_threshold_computed_directly(mu, n):
    assert gaussian_limit(mu, n, n, delta=DELTA) == pytest.approx(_direct(mu, n), rel=0.01)


def test_the_limit_grows_with_the_size_towards_the_pairs_epsilon_and_never_passes_it():
    epsilon = gdp_epsilon(2.0, DELTA)  # 10.0: the crafted audit's ε
    limits = [gaussian_limit(2.0, n, n, delta=DELTA) for n in (500, 5_000, 50_000, 5_000_000)]
    assert all(a < b for a, b in zip(limits, limits[1:], strict=False)) and limits[-1] < epsilon
    assert 0.25 * epsilon < limits[0] < 0.4 * epsilon  # the physical limit: 0.33 of ε = 10 at R = 2,000


def test_a_mixture_of_one_component_is_the_gaussian_and_bad_laws_are_refused():
    t = np.array([-1.0, 0.0, 2.5])
    np.testing.assert_allclose(gaussian_mixture_sf((0.5,), (1.0,), 2.0)(t), norm.sf((t - 0.5) / 2.0))
    two = gaussian_mixture_sf((0.0, 3.0), (0.25, 0.75), 1.0)(t)
    np.testing.assert_allclose(two, 0.25 * norm.sf(t) + 0.75 * norm.sf(t - 3.0))
    for means, weights, sd in (((0.0,), (0.9,), 1.0), ((0.0, 1.0), (0.5, 0.5), 0.0), ((0.0,), (1.0, 0.0), 1.0)):
        with pytest.raises(ValueError):
            gaussian_mixture_sf(means, weights, sd)
    with pytest.raises(ValueError, match="one trial a side"):
        threshold_limit(norm.sf, norm.sf, (-1.0, 1.0), 0, 10, delta=DELTA)


def test_the_multi_run_analysis_lands_just_under_the_limit_on_the_ideal_mechanism():
    """30 draws of the ideal μ-GDP mechanism at μ = 2 and R = 2,000 through the crafted design: the valid bound's
    median is 0.85–1.0 of the limit (the family's Bonferroni costs a little; luck can pass it, rarely)."""
    design = AuditDesign("multi-run", "black-box-crafted", size=2000, relation="add-remove", certified_mu=2.0)
    rng = np.random.default_rng(0)
    values = []
    for _ in range(30):
        coins = (rng.random(2000) < 0.5).astype(int)
        values.append(membership_audit(rng.normal(2.0 * coins, 1.0), coins, delta=DELTA, design=design)["epsilon_lb"])
    limit = gaussian_limit(2.0, 1000, 1000, delta=DELTA)
    assert 0.85 * limit < np.median(values) <= limit


def test_the_white_box_limit_is_below_the_runs_epsilon_and_refuses_bad_input():
    sigma, q, steps, m = 2.0, 1 / 3, 60, 5000
    design = AuditDesign("one-run", "white-box", size=m, relation="add-remove")
    limit = whitebox_limit(design, sigma=sigma, sample_rate=q, steps=steps, delta=DELTA)
    epsilon = pld_epsilon(noise_multiplier=sigma, sample_rate=q, steps=steps, delta=DELTA, relation="add-remove")
    assert 0.1 * epsilon < limit < epsilon
    with pytest.raises(ValueError, match="σ > 0"):
        whitebox_limit(design, sigma=0.0, sample_rate=q, steps=steps, delta=DELTA)
