"""The last-iterate heuristic ε (Steinke et al. 2025) against independent computations: dp_accounting's PLD of the
same mixture pair (add/remove), direct quadrature of ∫ (p − e^ε q)_+ on a fine grid (replace-one and add/remove), and
the analytic Gaussian mechanism at q = 1 (Balle & Wang 2018)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.optimize import brentq
from scipy.stats import binom, norm

from mechanisms.accounting.gaussian import gaussian_epsilon
from mechanisms.accounting.last_iterate import last_iterate_delta, last_iterate_epsilon


def pld_epsilon_of_pair(sigma: float, q: float, steps: int, delta: float) -> float:
    """dp_accounting's PLD of P = K + N(0, σ²T) vs N(0, σ²T), K ~ Binomial(T, q): its ``MixtureOfGaussiansDpEvent``
    under add/remove (both directions), built from the same pair but none of our code."""
    from dp_accounting import dp_event, pld
    from dp_accounting.privacy_accountant import NeighboringRelation

    k = np.arange(steps + 1)
    w = binom.pmf(k, steps, q)
    keep = w > 1e-30
    event = dp_event.MixtureOfGaussiansDpEvent(sigma * math.sqrt(steps), list(k[keep].astype(float)),
                                               list(w[keep] / w[keep].sum()))
    acct = pld.PLDAccountant(NeighboringRelation.ADD_OR_REMOVE_ONE, value_discretization_interval=1e-3)
    acct.compose(event)
    return float(acct.get_epsilon(delta))


def quadrature_epsilon(sigma: float, q: float, steps: int, delta: float, relation: str) -> float:
    """ε at δ from ∫ (p − e^ε q)_+ dx and ∫ (q − e^ε p)_+ dx by Simpson's rule on 400,001 points over ±(T + 14σ√T):
    the densities written out directly, no crossing point."""
    from scipy.integrate import simpson

    k = np.arange(steps + 1)
    w = binom.pmf(k, steps, q)
    s = sigma * math.sqrt(steps)
    x = np.linspace(-steps - 14 * s, steps + 14 * s, 400_001)
    p = norm.pdf(x[:, None], k[None, :], s) @ w
    qd = norm.pdf(x[:, None], -k[None, :], s) @ w if relation == "replace-one" else norm.pdf(x, 0.0, s)

    def excess(eps: float) -> float:
        a = math.exp(eps)
        return max(simpson(np.clip(p - a * qd, 0, None), x=x), simpson(np.clip(qd - a * p, 0, None), x=x)) - delta

    return float(brentq(excess, 0.0, 30.0, xtol=1e-9))


@pytest.mark.parametrize(("sigma", "q", "steps"), [(10.145, 1 / 3, 120), (2.0, 0.5, 10), (1.0, 0.05, 60)])
def test_add_remove_equals_dp_accounting_pld_of_the_pair(sigma, q, steps):
    ours = last_iterate_epsilon(phases=((sigma, q, steps),), delta=1e-5, relation="add-remove")
    assert ours == pytest.approx(pld_epsilon_of_pair(sigma, q, steps, 1e-5), rel=1e-3)


@pytest.mark.parametrize("relation", ["add-remove", "replace-one"])
def test_equals_quadrature_of_the_densities(relation):
    sigma, q, steps, delta = 1.5, 0.3, 8, 1e-3
    ours = last_iterate_epsilon(phases=((sigma, q, steps),), delta=delta, relation=relation)
    assert ours == pytest.approx(quadrature_epsilon(sigma, q, steps, delta, relation), rel=1e-3)


@pytest.mark.parametrize(("sigma", "steps"), [(1.0, 1), (5.0, 10), (20.0, 100), (0.7, 3)])
@pytest.mark.parametrize(("relation", "factor"), [("add-remove", 1.0), ("replace-one", 2.0)])
def test_q_one_is_the_analytic_gaussian_mechanism(sigma, steps, relation, factor):
    ours = last_iterate_epsilon(phases=((sigma, 1.0, steps),), delta=1e-5, relation=relation)
    exact = gaussian_epsilon(sigma=sigma, delta=1e-5, sensitivity=factor * math.sqrt(steps))
    assert ours == pytest.approx(exact, rel=1e-9)


def test_main_job_recipes_as_the_issue_states():
    """q = 1/3, T = 120 (batch 4,096 of 10,000 members, 40 epochs), σ from the replace-one PLD calibration at ε = 1,
    3, 8 (δ = 1e-5): the heuristic sits just under the add/remove accountant's 0.481 / 1.41 / 3.71."""
    from mechanisms.accounting.gaussian import pld_noise_multiplier

    got = [last_iterate_epsilon(phases=((pld_noise_multiplier(target_epsilon=e, delta=1e-5, sample_rate=1 / 3,
                                                               steps=120, relation="replace-one"), 1 / 3, 120),),
                                delta=1e-5) for e in (1, 3, 8)]
    assert got == pytest.approx([0.47, 1.40, 3.68], abs=0.006)


def test_replace_one_dominates_add_remove_and_phases_compose():
    one = ((3.0, 0.2, 30),)
    assert last_iterate_epsilon(phases=one, delta=1e-5, relation="replace-one") > \
        last_iterate_epsilon(phases=one, delta=1e-5, relation="add-remove")
    # two phases of 15 steps at the same σ and q are the one phase of 30
    split = ((3.0, 0.2, 15), (3.0, 0.2, 15))
    assert last_iterate_epsilon(phases=split, delta=1e-5) == pytest.approx(
        last_iterate_epsilon(phases=one, delta=1e-5), rel=1e-9)


def test_delta_falls_with_epsilon_and_bad_input_is_refused():
    ph = ((2.0, 0.3, 20),)
    deltas = [last_iterate_delta(phases=ph, epsilon=e) for e in (0.0, 0.5, 1.0, 2.0, 4.0)]
    assert all(a > b for a, b in zip(deltas, deltas[1:], strict=False)) and deltas[0] < 1
    with pytest.raises(ValueError, match="σ > 0"):
        last_iterate_epsilon(phases=((0.0, 0.3, 20),), delta=1e-5)
    with pytest.raises(ValueError, match="relation"):
        last_iterate_epsilon(phases=ph, delta=1e-5, relation="replace-one-same-class")
    with pytest.raises(ValueError, match="δ must be"):
        last_iterate_epsilon(phases=ph, delta=1.5)


def test_a_dpsgd_run_records_the_heuristic_beside_its_accountants_under_both_relations():
    """``certify`` (every DP-SGD model, built-in and presets): the heuristic under replace-one and add/remove, labelled
    as not a bound, at the run's δ, a little under the accountant's ε of the same relation; results.json keeps it."""
    from bench.core.types import TrainSpec
    from bench.results import PrivacyRecord
    from mechanisms.dpsgd.mechanism import DPSGDParams
    from mechanisms.dpsgd.privacy import certify

    spec = TrainSpec(model="linear", epochs=40, batch_size=4096, lr=8.0, params=DPSGDParams(relation="replace-one"))
    spent = certify(sigma=10.145, sample_rate=1 / 3, steps=120, delta=1e-5, spec=spec)
    assert [h.relation for h in spent.heuristics] == ["replace-one", "add-remove"]
    for h in spent.heuristics:
        assert h.label == "last-iterate heuristic (Steinke et al. 2025): not a bound" and h.delta == 1e-5
        assert h.epsilon == last_iterate_epsilon(phases=((10.145, 1 / 3, 120),), delta=1e-5, relation=h.relation)
        accountant = spent.under(h.relation)
        assert accountant is not None and 0.95 * accountant.epsilon < h.epsilon < accountant.epsilon
    stored = PrivacyRecord.model_validate_json(PrivacyRecord(**spent.model_dump()).model_dump_json())
    assert stored.heuristic("add-remove") == spent.heuristic("add-remove")
    assert "not a bound" in stored.heuristic("add-remove").describe()


def test_an_observed_opacus_loop_gets_the_heuristic_of_its_phases():
    from bench.core.privacy import PrivacySpent
    from mechanisms.accounting.last_iterate import with_observed_phases

    claimed = PrivacySpent(2.0, 1e-5, "opacus-prv", "central-dp", relation="add-remove")
    got = with_observed_phases(claimed, [[1.2, 0.05, 40], [2.0, 0.1, 20]])
    (h,) = got.heuristics
    assert h.relation == "add-remove" and "observed DPOptimizer phases" in h.basis
    assert h.epsilon == last_iterate_epsilon(phases=((1.2, 0.05, 40), (2.0, 0.1, 20)), delta=1e-5)
    assert with_observed_phases(claimed, None) is claimed
    assert with_observed_phases(PrivacySpent.no_guarantee(), [[1.2, 0.05, 40]]).heuristics == ()
