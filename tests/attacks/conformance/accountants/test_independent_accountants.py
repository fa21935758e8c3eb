"""The conformance tests' own accountants (issue 45), each against a hand-computed case or a second method: the
analytic Gaussian's δ(ε) against Φ written with ``math.erf`` and against a numerical integration of the hockey-stick
divergence; its ε against dp_accounting's; k-ary randomized response's exact ε; their exact composition against its
limit without image noise (hand-computed) and against dp_accounting's PLD of the same two events; DPMix's pair at q = 1
against one Gaussian of μ = √(Tc), at T = 1 against the integrated pair, and against dp_accounting's RDP; DP-SGD's
PLD at q = 1 against the analytic Gaussian. Then the declared-ε test: it never fires under the mechanisms' correct
accountants on their grids (``ci`` sizes here; ``default`` sizes in ``scripts/accountant_check.py``), and fires on an
accountant off by more than its tolerance."""

from __future__ import annotations

import math

import pytest
from scipy import integrate, optimize

from attacks.conformance.accountants.analytic_gaussian import (
    gaussian_delta,
    gaussian_epsilon,
    local_delta,
    local_epsilon,
    rr_epsilon,
    rr_keep,
)
from attacks.conformance.accountants.mixing_pair import mixing_epsilon, mixing_shift
from attacks.conformance.accountants.subsampled_gaussian import poisson_gaussian_epsilon
from attacks.conformance.hypothesis_tests.epsilon import DECLARED_TOLERANCE, declared_epsilon_test


def _phi(x: float) -> float:
    return 0.5 * (1 + math.erf(x / math.sqrt(2)))


def _density(x: float, mean: float = 0.0) -> float:
    return math.exp(-((x - mean) ** 2) / 2) / math.sqrt(2 * math.pi)


@pytest.mark.parametrize("mu, eps", [(1.0, 0.0), (2.0, 1.0), (0.5, -0.3), (3.0, 4.0), (0.2, 0.05)])
def test_gaussian_delta_is_balle_wang_theorem_8_and_the_integrated_hockey_stick(mu, eps):
    by_hand = _phi(mu / 2 - eps / mu) - math.exp(eps) * _phi(-mu / 2 - eps / mu)
    integrated = integrate.quad(lambda x: max(0.0, _density(x, mu) - math.exp(eps) * _density(x)), -30, 30,
                                points=[mu / 2 + eps / mu], limit=200)[0]
    assert gaussian_delta(eps, mu) == pytest.approx(by_hand, rel=1e-12, abs=1e-15)
    assert gaussian_delta(eps, mu) == pytest.approx(integrated, rel=1e-7, abs=1e-12)


def test_gaussian_delta_stays_exact_deep_in_the_tail():
    """μ = 0.01, ε = 0.1: Thm. 8's two terms are about 7.6e-24 and differ in their fourth digit; the erfcx form keeps
    their difference, which the hockey-stick integral gives too."""
    mu, eps = 0.01, 0.1
    integrated = integrate.quad(lambda x: max(0.0, _density(x, mu) - math.exp(eps) * _density(x)), 9.0, 20.0,
                                epsabs=0, epsrel=1e-11, limit=400)[0]
    assert 0 < gaussian_delta(eps, mu) == pytest.approx(integrated, rel=1e-9)


@pytest.mark.parametrize("sigma, delta", [(0.5, 1e-5), (2.0, 1e-5), (8.0, 1e-3), (30.0, 1e-5)])
def test_gaussian_epsilon_against_dp_accounting_and_never_above_it_by_more_than_rounding(sigma, delta):
    from dp_accounting import get_epsilon_gaussian

    ours, theirs = gaussian_epsilon(sigma=sigma, sensitivity=2.0, delta=delta), get_epsilon_gaussian(sigma / 2, delta)
    assert ours == pytest.approx(theirs, rel=1e-9)
    assert gaussian_delta(ours, 2 / sigma) >= delta  # the low end of the bracket: δ at ours is still above the target


def test_randomized_response_by_hand():
    assert rr_keep(0.5, 10) == pytest.approx(math.exp(0.5) / (math.exp(0.5) + 9), rel=1e-15)
    assert rr_epsilon(0.2, 10) == pytest.approx(math.log(2.25), rel=1e-15)  # 0.2·9/0.8
    assert rr_epsilon(rr_keep(1.7, 4), 4) == pytest.approx(1.7, rel=1e-12)
    assert rr_epsilon(0.1, 10) == 0.0 and rr_epsilon(0.05, 10) == 0.0 and rr_epsilon(1.0, 10) == math.inf


def test_the_composition_without_image_noise_is_randomized_response_alone_by_hand():
    """σ → ∞: δ(ε) = p·(1 − e^{ε − ε_y}) for ε < ε_y, so ε(δ) = ε_y + ln(1 − δ/p), p the keep rate."""
    eps_y, k, delta = 0.8, 10, 1e-3
    p = math.exp(eps_y) / (math.exp(eps_y) + k - 1)
    got = local_epsilon(sigma=1e7, sensitivity=2.0, delta=delta, label_epsilon=eps_y, num_classes=k)
    assert got == pytest.approx(eps_y + math.log(1 - delta / p), abs=1e-5)


@pytest.mark.parametrize("sigma, eps_y, k", [(8.0, 0.5, 10), (15.0, 0.3, 10), (4.0, 1.0, 2)])
def test_the_exact_composition_against_dp_accountings_pld(sigma, eps_y, k):
    """dp_accounting's PLD (pessimistic, a fine grid) composing GaussianDpEvent(σ) under REPLACE_ONE (shift 2) with
    RandomizedResponseDpEvent: an upper estimate of the same ε, within its discretisation."""
    from dp_accounting import dp_event, pld
    from dp_accounting.privacy_accountant import NeighboringRelation

    noise = k * math.exp(-eps_y) / (1 + (k - 1) * math.exp(-eps_y))  # P(uniform over k): k / (e^ε + k − 1)
    acct = pld.PLDAccountant(NeighboringRelation.REPLACE_ONE, value_discretization_interval=1e-4)
    acct.compose(dp_event.ComposedDpEvent([dp_event.GaussianDpEvent(sigma),
                                           dp_event.RandomizedResponseDpEvent(noise, k)]))
    theirs = acct.get_epsilon(1e-5)
    ours = local_epsilon(sigma=sigma, sensitivity=2.0, delta=1e-5, label_epsilon=eps_y, num_classes=k)
    assert ours <= theirs * (1 + 1e-9) and ours == pytest.approx(theirs, rel=1e-3)
    image = gaussian_epsilon(sigma=sigma, sensitivity=2.0, delta=1e-5)
    assert max(image, 0.0) < ours < image + eps_y  # more than the image alone, less than basic composition
    assert local_delta(ours, mu=2 / sigma, label_epsilon=eps_y, num_classes=k) >= 1e-5


def test_mixing_shift_by_hand():
    """σ_x = 2, σ_y = 0.5, d_x = 64, w = 1/4: c = (1/16)·(64/4 + 2/0.25) = 1.5."""
    assert mixing_shift(sigma_x=2.0, sigma_y=0.5, d_x=64, weight=0.25) == pytest.approx(1.5, rel=1e-15)


@pytest.mark.parametrize("c, t", [(0.01, 100), (0.5, 10), (2.0, 3)])
def test_the_mixing_pair_at_q_1_is_one_gaussian_of_mu_sqrt_tc(c, t):
    ours = mixing_epsilon(shift_sq=c, rate=1.0, releases=t, delta=1e-5)
    exact = gaussian_epsilon(sigma=1.0, sensitivity=math.sqrt(t * c), delta=1e-5)
    assert exact <= ours <= exact * (1 + 1e-5)  # pessimistic, within its grid


def test_one_release_of_the_mixing_pair_against_its_integrated_hockey_stick():
    """T = 1, q = 0.3, c = 1: δ(ε) = max over the two orders of ∫(P − e^ε Q)_+, P = q·N(1) + (1 − q)·N(0), Q = N(0)."""
    q, c, delta = 0.3, 1.0, 1e-3

    def p(x: float) -> float:
        return q * _density(x, math.sqrt(c)) + (1 - q) * _density(x)

    def hockey(eps: float) -> float:
        one = integrate.quad(lambda x: max(0.0, p(x) - math.exp(eps) * _density(x)), -30, 30, limit=400)[0]
        two = integrate.quad(lambda x: max(0.0, _density(x) - math.exp(eps) * p(x)), -30, 30, limit=400)[0]
        return max(one, two)

    exact = optimize.brentq(lambda eps: math.log(hockey(eps) / delta), 0.5, 3.0, xtol=1e-9)
    ours = mixing_epsilon(shift_sq=c, rate=q, releases=1, delta=delta)
    assert exact * (1 - 1e-6) <= ours <= exact * (1 + 1e-3)  # the integral to quad's precision; ours pessimistic


def test_the_mixing_pair_is_below_dp_accountings_rdp_of_the_same_pair():
    from dp_accounting import dp_event, rdp

    c, q, t = 0.8, 0.01, 2000
    acct = rdp.RdpAccountant()
    acct.compose(dp_event.SelfComposedDpEvent(dp_event.PoissonSampledDpEvent(q, dp_event.GaussianDpEvent(
        1 / math.sqrt(c))), t))
    ours, theirs = mixing_epsilon(shift_sq=c, rate=q, releases=t, delta=1e-5), acct.get_epsilon(1e-5)
    assert 0.6 * theirs < ours < theirs


@pytest.mark.parametrize("relation, factor", [("add-remove", 1.0), ("replace-one", 2.0)])
def test_dpsgds_pld_at_q_1_is_the_analytic_gaussian(relation, factor):
    """T full-batch steps of σ: one Gaussian of μ = √T·Δ/σ, Δ = 1 (add/remove) or 2 (replace-one)."""
    ours = poisson_gaussian_epsilon(noise_multiplier=2.0, sample_rate=1.0, steps=4, delta=1e-5, relation=relation)
    exact = gaussian_epsilon(sigma=2.0, sensitivity=factor * 2.0, delta=1e-5)
    assert exact * (1 - 1e-6) <= ours <= exact * (1 + 1e-3)


def test_the_declared_epsilon_test_rejects_beyond_its_tolerance_only():
    assert declared_epsilon_test("d", declared=1.0, certified=1.0)["p_value"] == 1.0
    assert declared_epsilon_test("d", declared=1.0 + 0.5 * DECLARED_TOLERANCE, certified=1.0)["p_value"] == 1.0
    assert declared_epsilon_test("d", declared=1.0 + 2 * DECLARED_TOLERANCE, certified=1.0)["p_value"] == 0.0
    assert declared_epsilon_test("d", declared=0.5, certified=1.0)["p_value"] == 1.0  # a looser accountant passes


# ---- the declared ε under the mechanisms' own accountants: never above the certified by more than the tolerance ----

@pytest.mark.parametrize("target", [1.0, 8.0, 150.0, 2000.0])
@pytest.mark.parametrize("share", [0.5, None])
def test_declared_local_epsilon_never_exceeds_the_certified(target, share):
    from mechanisms.accounting.gaussian import gaussian_epsilon as certify_image
    from mechanisms.accounting.gaussian import gaussian_sigma, local_record_epsilon, local_record_sigma

    if share is None:  # labels public: the image channel alone
        sigma, label = gaussian_sigma(epsilon=target, delta=1e-5, sensitivity=2.0), None
        certified = certify_image(sigma=sigma, delta=1e-5, sensitivity=2.0)
    else:
        sigma, label = local_record_sigma(target_epsilon=target, delta=1e-5, label_share=share, num_classes=10)
        certified = local_record_epsilon(sigma=sigma, delta=1e-5, label_epsilon=label, num_classes=10)
    declared = local_epsilon(sigma=sigma, sensitivity=2.0, delta=1e-5, label_epsilon=label, num_classes=10)
    assert declared <= certified * (1 + DECLARED_TOLERANCE)
    assert declared >= certified * (1 - 5e-3)  # and near it: the declared test loses nothing a bug would show


@pytest.mark.parametrize("sigma", [0.8, 4.0])  # ε about 8 and 1 at this q and T
@pytest.mark.parametrize("relation", ["replace-one", "add-remove"])
def test_declared_dpsgd_epsilon_never_exceeds_the_certified_at_ci_size(sigma, relation):
    """The ci profile's audit run: n = 700, batch 100 (q = 1/7), 15 epochs (T = 105); replace-one by the mechanism's
    PLD, add/remove by Opacus' PRV (the two the mechanism certifies with), at the σ its calibration would give."""
    from mechanisms.accounting.gaussian import pld_epsilon
    from mechanisms.accounting.opacus_accountants import opacus_epsilon

    q, t = 1 / 7, 105
    certified = pld_epsilon(noise_multiplier=sigma, sample_rate=q, steps=t, delta=1e-5, relation=relation) \
        if relation == "replace-one" else opacus_epsilon(((sigma, q, t),), delta=1e-5, accountant="prv")
    declared = poisson_gaussian_epsilon(noise_multiplier=sigma, sample_rate=q, steps=t, delta=1e-5, relation=relation)
    assert declared <= certified * (1 + DECLARED_TOLERANCE)


@pytest.mark.parametrize("sigma", [0.7, 3.0])
def test_declared_dpmix_epsilon_never_exceeds_the_certified_at_ci_size(sigma):
    """The ci profile's DPMix: digits (d_x = 64, 10 classes), n = 500, ℓ = 4, T = 2000, σ_y/σ_x = √(2/64); σ from
    ε ≈ 15 and ≈ 1."""
    from mechanisms.accounting.dpmix import dpmix_epsilon

    scale = math.sqrt(2 / 64)
    certified = dpmix_epsilon(sigma=sigma, sigma_y=scale * sigma, mixture_degree=4, num_samples=2000,
                              num_records=500, d_x=64, d_y=10, delta=1e-5)
    declared = mixing_epsilon(shift_sq=mixing_shift(sigma_x=sigma, sigma_y=scale * sigma, d_x=64, weight=0.25),
                              rate=4 / 500, releases=2000, delta=1e-5)
    assert declared <= certified * (1 + DECLARED_TOLERANCE)
