"""Tests for mechanisms.accounting.gaussian: every expected number is computed here, independently of the code."""

from __future__ import annotations

import itertools
import math

import mpmath
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import norm

from mechanisms.accounting.dpmix import dpmix_epsilon, dpmix_sigma
from mechanisms.accounting.dpmix_closed_form import MAX_ORDER
from mechanisms.accounting.gaussian import classic_gaussian_sigma, gaussian_delta, gaussian_epsilon, gaussian_sigma

MNIST = dict(mixture_degree=256, num_samples=10_000, num_records=60_000, d_x=784, d_y=10, delta=1 / 60_000)
SMALL = dict(mixture_degree=5, num_samples=10, num_records=100, d_x=4, d_y=2, delta=1e-5)


def _cf(**kw):
    """Lee et al.'s closed form as REFERENCE.md §2 states it: labels anywhere in [0, 1]^d_y (Δ_y² = d_y)."""
    return dpmix_epsilon(method="closed_form", label_form="box", **kw)


def _brute_force_epsilon(*, sigma, sigma_y, mixture_degree, num_samples, num_records, d_x, d_y, delta, dps):
    """REFERENCE.md §2 written out literally in mpmath (orders 2..MAX_ORDER).

    The alternating sums B(k) are taken at ``dps`` digits; everything after them is a sum of positive
    terms, so 40 digits suffice there.
    """
    with mpmath.workdps(dps):
        c = (mpmath.mpf(d_x) / mpmath.mpf(sigma) ** 2 + mpmath.mpf(d_y) / mpmath.mpf(sigma_y) ** 2) / (
            mpmath.mpf(mixture_degree) ** 2
        )
        e = [mpmath.exp(i * (i - 1) * c / 2) for i in range(MAX_ORDER + 1)]
        b = {k: mpmath.fsum((-1) ** i * math.comb(k, i) * e[i] for i in range(k + 1))
             for k in range(2, MAX_ORDER + 1, 2)}  # fmt: skip
        b_top = b[MAX_ORDER]
    with mpmath.workdps(40):
        b = {k: +v for k, v in b.items()}
        c = +c
        q = mpmath.mpf(mixture_degree) / num_records
        root = {j: mpmath.sqrt(b[2 * (j // 2)] * b[2 * ((j + 1) // 2)]) for j in range(3, MAX_ORDER + 1)}
        best = mpmath.inf
        for a in range(2, MAX_ORDER + 1):
            g = mpmath.fsum(q**j * math.comb(a, j) * root[j] for j in range(3, a + 1))
            inner = 1 + q**2 * math.comb(a, 2) * min(4 * (mpmath.exp(c) - 1), 2 * mpmath.exp(c)) + 4 * g
            eps = num_samples * mpmath.log(inner) / (a - 1) + mpmath.log(1 / mpmath.mpf(delta)) / (a - 1)
            best = min(best, eps)
        return best, b_top


@pytest.mark.parametrize(("sigma", "sigma_y"), [(1.0, 1.0), (3.0, 3.0), (2.0, 4.0)])
def test_closed_form_matches_high_precision_brute_force(sigma, sigma_y):
    c = (SMALL["d_x"] / sigma**2 + SMALL["d_y"] / sigma_y**2) / SMALL["mixture_degree"] ** 2
    dps = int((MAX_ORDER * (MAX_ORDER - 1) / 2 * c + MAX_ORDER * math.log(2)) / math.log(10)) + 60
    ref, b_top = _brute_force_epsilon(sigma=sigma, sigma_y=sigma_y, dps=dps, **SMALL)
    with mpmath.workdps(dps + 40):  # the worst-conditioned B(k) is stable under 40 more digits
        c_hi = (mpmath.mpf(SMALL["d_x"]) / sigma**2 + mpmath.mpf(SMALL["d_y"]) / sigma_y**2) / 25
        b_check = mpmath.fsum(
            (-1) ** i * math.comb(MAX_ORDER, i) * mpmath.exp(i * (i - 1) * c_hi / 2) for i in range(MAX_ORDER + 1)
        )
        assert abs(b_check - b_top) <= abs(b_check) * mpmath.mpf(10) ** -30
    got = _cf(sigma=sigma, sigma_y=sigma_y, **SMALL)
    assert got == pytest.approx(float(ref), rel=1e-9)


@pytest.mark.parametrize("sigma", [0.05, 1e3])
def test_closed_form_finite_in_extreme_regimes(sigma):
    eps = _cf(sigma=sigma, **MNIST)
    assert math.isfinite(eps) and eps > 0
    # σ → ∞ can never beat the α = MAX_ORDER tail term log(1/δ)/(MAX_ORDER − 1).
    assert eps >= math.log(60_000) / (MAX_ORDER - 1) * (1 - 1e-12)


def test_closed_form_large_sigma_limit():
    # For σ → ∞ the RDP term vanishes, so ε → min_α log(1/δ)/(α−1) = log(1/δ)/(MAX_ORDER − 1).
    eps = _cf(sigma=1e6, **MNIST)
    assert eps == pytest.approx(math.log(60_000) / (MAX_ORDER - 1), rel=1e-3)


_SETTING = dict(mixture_degree=16, num_records=1000, d_x=16, d_y=4, delta=1e-5)


@settings(max_examples=15, deadline=None)
@given(
    sigma=st.floats(min_value=0.05, max_value=50.0),
    factor=st.floats(min_value=1.01, max_value=10.0),
)
def test_closed_form_decreases_with_sigma(sigma, factor):
    lo = _cf(sigma=sigma, num_samples=100, **_SETTING)
    hi = _cf(sigma=sigma * factor, num_samples=100, **_SETTING)
    assert hi <= lo * (1 + 1e-12)
    assert hi < lo or lo == pytest.approx(math.log(1e5) / (MAX_ORDER - 1), rel=1e-2)


@settings(max_examples=10, deadline=None)
@given(sigma=st.floats(min_value=0.1, max_value=20.0), t=st.integers(min_value=1, max_value=5000))
def test_closed_form_increases_with_num_samples(sigma, t):
    assert _cf(sigma=sigma, num_samples=t + 1, **_SETTING) > _cf(
        sigma=sigma, num_samples=t, **_SETTING
    )


@pytest.mark.parametrize(
    ("setting", "sigma"),
    [(SMALL, 0.3), (SMALL, 3.0), (MNIST, 0.07), (MNIST, 1.0), (MNIST, 30.0),
     (dict(_SETTING, num_samples=200), 0.5), (dict(SMALL, delta=1e-2), 10.0)],
)  # fmt: skip
def test_dp_accounting_never_exceeds_closed_form(setting, sigma):
    closed = dpmix_epsilon(sigma=sigma, method="closed_form", **setting)
    lib = dpmix_epsilon(sigma=sigma, method="dp_accounting", **setting)
    assert 0 <= lib <= closed * (1 + 1e-9)


def test_dp_accounting_without_sampling_is_the_gaussian_mechanism():
    # ℓ = n, one release: the mean of all records plus noise is a Gaussian mechanism with σ/Δ_mean = ℓ/Δ,
    # i.e. RDP αΔ²/(2ℓ²) — this pins down the noise multiplier handed to dp_accounting.
    kw = dict(mixture_degree=4, num_samples=1, num_records=4, d_x=3, d_y=1, delta=1e-5, label_form="box")
    c = 4 / 16  # Δ²/ℓ² at σ = 1
    lib = dpmix_epsilon(sigma=1.0, method="dp_accounting", **kw)
    # The improved RDP→DP conversion (Canonne-Kamath-Steinke 2020) on integer orders 2..63 (all accounted).
    conv = min(a * c / 2 + math.log1p(-1 / a) - math.log(1e-5 * a) / (a - 1) for a in range(2, 64))
    assert lib <= conv + 1e-9
    # No RDP accountant beats the exact ε of that Gaussian mechanism (sensitivity √c = Δ/ℓ, σ = 1).
    exact = gaussian_epsilon(sigma=1.0, delta=1e-5, sensitivity=math.sqrt(c))
    assert lib >= exact - 1e-9
    # The PLD accountant at q = 1 is that Gaussian mechanism itself, to its discretisation.
    assert dpmix_epsilon(sigma=1.0, method="pld", **kw) == pytest.approx(exact, rel=2e-3)


def test_dpmix_sigma_round_trip():
    target = 15.0
    sigma = dpmix_sigma(target_epsilon=target, **MNIST)
    assert dpmix_epsilon(sigma=sigma, **MNIST) <= target
    assert dpmix_epsilon(sigma=sigma * 0.99, **MNIST) > target


def test_dpmix_sigma_unreachable_names_target_and_reached_epsilon():
    with pytest.raises(ValueError, match=r"0\.01.*ε="):
        dpmix_sigma(target_epsilon=0.01, sigma_max=10.0, **MNIST)


def _exact_delta(sigma, epsilon, sensitivity=1.0):
    a = sensitivity / (2 * sigma) - epsilon * sigma / sensitivity
    b = -sensitivity / (2 * sigma) - epsilon * sigma / sensitivity
    return norm.cdf(a) - math.exp(epsilon) * norm.cdf(b)


@pytest.mark.parametrize("epsilon", [1e-3, 0.1, 0.5, 1.0, 3.0, 8.0, 50.0, 150.0])
@pytest.mark.parametrize("delta", [1e-5, 1 / 784**2])
def test_gaussian_sigma_hits_exact_delta(epsilon, delta):
    sigma = gaussian_sigma(epsilon=epsilon, delta=delta)
    assert _exact_delta(sigma, epsilon) == pytest.approx(delta, rel=1e-6)
    assert _exact_delta(sigma, epsilon) <= delta * (1 + 1e-9)
    assert gaussian_delta(sigma=sigma, epsilon=epsilon) == pytest.approx(delta, rel=1e-6)
    assert gaussian_epsilon(sigma=sigma, delta=delta) == pytest.approx(epsilon, rel=1e-6)


@pytest.mark.parametrize("epsilon", [1e-3, 0.1, 0.5, 0.99])
def test_analytic_sigma_beats_classic_below_one(epsilon):
    assert gaussian_sigma(epsilon=epsilon, delta=1e-5) < classic_gaussian_sigma(epsilon=epsilon, delta=1e-5)


def test_classic_sigma_formula():
    assert classic_gaussian_sigma(epsilon=0.5, delta=1e-5, sensitivity=2.0) == pytest.approx(
        2.0 * math.sqrt(2 * math.log(1.25e5)) / 0.5
    )


def test_gaussian_sigma_any_epsilon_finite_and_decreasing():
    eps = [1e-3, 0.5, 1.0, 8.0, 150.0, 2000.0, 5000.0, 200_000.0]
    sig = [gaussian_sigma(epsilon=e, delta=1 / 784**2) for e in eps]
    assert all(math.isfinite(s) and s > 0 for s in sig)
    assert all(a > b for a, b in itertools.pairwise(sig))
    # Large ε: δ still met (the classic σ there is far too small and does not give the claimed ε).
    for e, s in zip(eps, sig, strict=True):
        assert gaussian_delta(sigma=s, epsilon=e) == pytest.approx(1 / 784**2, rel=1e-5)
    assert gaussian_epsilon(sigma=classic_gaussian_sigma(epsilon=2000.0, delta=1 / 784**2), delta=1 / 784**2) > 2000


def test_gaussian_sigma_matches_dp_accounting_pld():
    from dp_accounting import dp_event
    from dp_accounting.pld import pld_privacy_accountant

    sigma = gaussian_sigma(epsilon=1.0, delta=1e-5, sensitivity=3.0)
    accountant = pld_privacy_accountant.PLDAccountant()
    accountant.compose(dp_event.GaussianDpEvent(noise_multiplier=sigma / 3.0))
    assert accountant.get_epsilon(1e-5) == pytest.approx(1.0, rel=1e-2)


def test_gaussian_sigma_scales_with_sensitivity():
    for e in [0.3, 1.0, 8.0, 2000.0]:
        assert gaussian_sigma(epsilon=e, delta=1e-5, sensitivity=2.0) == pytest.approx(
            2.0 * gaussian_sigma(epsilon=e, delta=1e-5, sensitivity=1.0), rel=1e-12
        )


def test_gaussian_epsilon_zero_when_noise_is_huge():
    # δ(0) = 2Φ(Δ/(2σ)) − 1 ≤ δ for σ large enough.
    assert gaussian_epsilon(sigma=1e6, delta=1e-5) == 0.0


@pytest.mark.parametrize(
    ("kwargs", "bad"),
    [
        (dict(sigma=-1.0), "-1.0"),
        (dict(sigma=0.0), "0.0"),
        (dict(mixture_degree=0), "0"),
        (dict(mixture_degree=60_001), "60001"),
        (dict(num_samples=0), "0"),
        (dict(delta=1.5), "1.5"),
        (dict(delta=0.0), "0.0"),
        (dict(d_x=0), "d_x=0"),
        (dict(d_y=0), "d_y=0"),
        (dict(sigma_y=-2.0), "-2.0"),
        (dict(method="moments"), "moments"),
        (dict(label_form="bits"), "bits"),
    ],
)
def test_dpmix_invalid_inputs(kwargs, bad):
    args = dict(MNIST, sigma=1.0)
    args.update(kwargs)
    with pytest.raises(ValueError, match=bad):
        dpmix_epsilon(**args)


@pytest.mark.parametrize(
    ("fn", "kwargs", "bad"),
    [
        (gaussian_sigma, dict(epsilon=-1.0, delta=1e-5), "-1.0"),
        (gaussian_sigma, dict(epsilon=1.0, delta=2.0), "2.0"),
        (gaussian_sigma, dict(epsilon=1.0, delta=1e-5, sensitivity=0.0), "0.0"),
        (gaussian_delta, dict(sigma=1.0, epsilon=-0.5), "-0.5"),
        (gaussian_delta, dict(sigma=-3.0, epsilon=0.5), "-3.0"),
        (gaussian_epsilon, dict(sigma=1.0, delta=0.0), "0.0"),
        (classic_gaussian_sigma, dict(epsilon=0.0, delta=1e-5), "0.0"),
        (dpmix_sigma, dict(target_epsilon=-2.0, **MNIST), "-2.0"),
    ],
)
def test_gaussian_invalid_inputs(fn, kwargs, bad):
    with pytest.raises(ValueError, match=bad):
        fn(**kwargs)


@pytest.mark.parametrize(("sigma", "steps"), [(1.0, 1), (2.0, 4), (5.0, 9)])
def test_dpsgd_pld_without_sampling_is_the_gaussian_mechanism(sigma, steps):
    # q = 1: every step uses every record, so k steps are one Gaussian mechanism of sensitivity √k·C under add/remove
    # and 2·√k·C under replace-one (a replaced record moves the clipped sum by up to 2C). The exact ε of that
    # Gaussian (closed form, _exact_delta) pins down the relation handed to dp_accounting; its pessimistic PLD
    # discretisation (1e-3) may only add.
    from mechanisms.accounting.gaussian import pld_epsilon

    for relation, factor in (("add-remove", 1.0), ("replace-one", 2.0)):
        sens = factor * math.sqrt(steps)
        exact = gaussian_epsilon(sigma=sigma, delta=1e-5, sensitivity=sens)
        assert _exact_delta(sigma, exact, sens) == pytest.approx(1e-5, rel=1e-6)
        lib = pld_epsilon(noise_multiplier=sigma, sample_rate=1.0, steps=steps, delta=1e-5, relation=relation)
        assert exact - 1e-6 <= lib <= exact + 0.02


def test_dpsgd_calibration_bounded_and_one_line():
    # a target ε that even σ = 0.25 meets is refused at once (an unbounded σ search ran for minutes at ε = 1,000)
    from mechanisms.accounting.gaussian import SIGMA_SEARCH, pld_noise_multiplier

    kw = dict(delta=1e-5, sample_rate=0.01, steps=1000, relation="replace-one")
    with pytest.raises(ValueError, match=r"target ε = 1e\+09 .* met even at σ = 0.25; allowed: ε < ") as err:
        pld_noise_multiplier(target_epsilon=1e9, **kw)
    assert "\n" not in str(err.value) and SIGMA_SEARCH[0] == 0.25
    with pytest.raises(ValueError, match=r"needs σ > 10000"):
        pld_noise_multiplier(target_epsilon=1e-4, **kw)
    sigma = pld_noise_multiplier(target_epsilon=2.0, **kw)
    from mechanisms.accounting.gaussian import pld_epsilon

    assert pld_epsilon(noise_multiplier=sigma, **kw) <= 2.0 < pld_epsilon(noise_multiplier=sigma * 0.999, **kw)


def test_local_record_sigma_at_a_huge_label_epsilon():
    """ε = 2,000 with half of it on the label (ε_label = 1,000: e^ε_label overflows a float) is still calibrated, and
    the composed ε meets the target."""
    from mechanisms.accounting.gaussian import local_record_epsilon, local_record_sigma

    sigma, label_eps = local_record_sigma(target_epsilon=2000.0, delta=1e-5, label_share=0.5, num_classes=10)
    assert label_eps == 1000.0 and 0 < sigma < 1
    assert local_record_epsilon(sigma=sigma, delta=1e-5, label_epsilon=label_eps, num_classes=10) <= 2000.0 * (1 + 1e-9)
