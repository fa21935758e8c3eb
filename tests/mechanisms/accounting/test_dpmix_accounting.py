"""DPMix's tight accountant and its sensitivity (mechanisms.accounting.dpmix): every expected number is computed here
independently — the sensitivity from the mechanism's own mixing code, ε by numerical integration of the dominating
pair's hockey-stick divergence, and by Opacus' PRV accountant (Gopi, Lee, Wutschitz 2021) with its error bounds."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import integrate, optimize
from scipy.stats import norm

from mechanisms.accounting.dpmix import dpmix_epsilon, dpmix_profile, dpmix_sigma, label_sensitivity
from mechanisms.dpmix.mixing import check_records, mean_of_rows, sample_subsets

# The default profile's recipe: n = 10,000 members, ℓ = 16, T = 10,000, 784 pixels, 10 classes.
DEFAULT = dict(mixture_degree=16, num_samples=10_000, num_records=10_000, d_x=784, d_y=10, delta=1e-5)


def _whitened_shift(z: torch.Tensor, z2: torch.Tensor, others: torch.Tensor, d_x: int, sx: float, sy: float) -> float:
    """‖mean(S ∪ {z}) − mean(S ∪ {z'})‖ whitened by (σ_x, σ_y), with the mechanism's own ``mean_of_rows``."""
    ell = len(others) + 1
    data = torch.cat([others, z[None], z2[None]])
    idx = torch.cat([torch.arange(ell - 1), torch.tensor([ell - 1])])[None]
    idx2 = torch.cat([torch.arange(ell - 1), torch.tensor([ell])])[None]
    diff = (mean_of_rows(data.float(), idx) - mean_of_rows(data.float(), idx2))[0].double()
    return float(torch.sqrt((diff[:d_x] / sx).pow(2).sum() + (diff[d_x:] / sy).pow(2).sum()))


def _pairs(form: str, d_x: int, k: int, gen: torch.Generator, count: int):
    """Record pairs (z, z'): the adversarial extremes first, then random ones, with labels of ``form``."""
    def label(n: int) -> torch.Tensor:
        if form == "distribution":
            return torch.distributions.Dirichlet(torch.full((k,), 0.3)).sample((n,))
        return torch.rand(n, k, generator=gen)

    ones, zeros = torch.ones(d_x), torch.zeros(d_x)
    e = F.one_hot(torch.tensor([0, 1]), k).float()
    lab = (e[0], e[1]) if form == "distribution" else (torch.zeros(k), torch.ones(k))
    yield torch.cat([zeros, lab[0]]), torch.cat([ones, lab[1]])
    for _ in range(count):
        yield torch.cat([torch.rand(d_x, generator=gen), label(1)[0]]), torch.cat([torch.rand(d_x, generator=gen),
                                                                                  label(1)[0]])


@pytest.mark.parametrize("form", ["distribution", "box"])
@pytest.mark.parametrize(("sx", "sy"), [(1.0, 1.0), (2.0, 0.1), (0.5, 3.0)])
def test_replacing_one_record_moves_the_mean_by_at_most_the_stated_sensitivity(form, sx, sy):
    """Δ/ℓ bounds the whitened move of the noiseless mean for every pair, and the extreme pair attains it."""
    d_x, k, ell = 12, 10, 5
    gen = torch.Generator().manual_seed(0)
    bound = math.sqrt(d_x / sx**2 + label_sensitivity(form, k) ** 2 / sy**2) / ell
    shifts = []
    for z, z2 in _pairs(form, d_x, k, gen, 200):
        others = torch.cat([torch.rand(ell - 1, d_x, generator=gen), F.one_hot(torch.arange(ell - 1) % k, k)], 1)
        shifts.append(_whitened_shift(z, z2, others.float(), d_x, sx, sy))
    assert max(shifts) <= bound * (1 + 1e-6)
    assert shifts[0] == pytest.approx(bound, rel=1e-5)  # the 0-image / 1-image pair with the farthest labels


def test_the_mechanism_refuses_labels_the_distribution_sensitivity_does_not_cover():
    """Δ_y = √2 holds because ``mix_release`` only takes label rows that are distributions; a box label (all ones)
    moves by √10 and must be refused before any release."""
    x = torch.zeros(3, 4)
    with pytest.raises(ValueError, match="label sum"):
        check_records(x, torch.ones(3, 10))
    assert label_sensitivity("distribution", 10) == math.sqrt(2) and label_sensitivity("box", 10) == math.sqrt(10)
    assert label_sensitivity("none", 10) == 0.0


def test_each_record_is_in_a_release_with_probability_ell_over_n():
    """The accountant's q = ℓ/n is the mechanism's: inclusion frequency of every record over 20,000 subsets."""
    n, ell, t = 50, 5, 20_000
    idx = sample_subsets(n, ell, t, generator=torch.Generator().manual_seed(1))
    assert all(len(set(row.tolist())) == ell for row in idx[:500])  # without replacement
    freq = torch.bincount(idx.flatten(), minlength=n).double() / t
    # 4.5 binomial standard errors (Bonferroni over 50 records at 1e-4 two-sided)
    assert (freq - ell / n).abs().max() < 4.5 * math.sqrt(0.1 * 0.9 / t)


def _pair_delta(eps: float, mu: float, q: float) -> float:
    """max over both directions of the hockey-stick divergence of (q·N(μ,1) + (1−q)·N(0,1), N(0,1)), by quadrature."""
    def p(x):
        return q * norm.pdf(x, mu) + (1 - q) * norm.pdf(x)

    e = math.exp(eps)
    lo, hi = -12.0, mu + 12.0
    fwd = integrate.quad(lambda x: max(p(x) - e * norm.pdf(x), 0.0), lo, hi, points=[mu / 2], limit=400)[0]
    rev = integrate.quad(lambda x: max(norm.pdf(x) - e * p(x), 0.0), lo, hi, points=[mu / 2], limit=400)[0]
    return max(fwd, rev)


def _pair_delta_two(eps: float, mu: float, q: float) -> float:
    """The same for the 2-fold composition: δ(ε) = E_P[(1 − e^{ε − L₁ − L₂})₊], on a fine 2-D grid."""
    x = np.linspace(-10, mu + 10, 3001)
    w = np.gradient(x)
    p = q * norm.pdf(x, mu) + (1 - q) * norm.pdf(x)
    loss = np.log(p / norm.pdf(x))
    out = []
    for dens, sign in ((p, 1.0), (norm.pdf(x), -1.0)):
        total = sign * (loss[:, None] + loss[None, :])
        out.append(float(((dens * w)[:, None] * (dens * w)[None, :] * np.clip(1 - np.exp(eps - total), 0, None)).sum()))
    return max(out)


@pytest.mark.parametrize(("sigma", "t", "delta"), [(1.5, 1, 1e-3), (3.0, 1, 1e-5), (1.5, 2, 1e-3), (2.5, 2, 1e-4)])
def test_pld_equals_the_direct_hockey_stick_of_the_dominating_pair(sigma, t, delta):
    kw = dict(mixture_degree=4, num_samples=t, num_records=20, d_x=8, d_y=3, delta=delta)
    mu = math.sqrt(8 / sigma**2 + 2 / sigma**2) / 4
    delta_of = _pair_delta if t == 1 else _pair_delta_two
    exact = optimize.brentq(lambda e: delta_of(e, mu, 0.2) - delta, 1e-6, 30.0, xtol=1e-7)
    got = dpmix_epsilon(sigma=sigma, **kw)
    assert exact * (1 - 1e-4) - 1e-4 <= got <= exact * 1.005 + 1e-3  # pessimistic discretisation: never below


@pytest.mark.parametrize("target", [1.0, 3.0, 8.0])
def test_pld_agrees_with_opacus_prv_error_bounds_at_the_default_recipe(target):
    """At σ calibrated for the target, the PLD's ε lies in the PRV accountant's bracket (upper end + 1 %): the
    discretisation error is bounded by an independent accountant."""
    from opacus.accountants import PRVAccountant

    sigma = dpmix_sigma(target_epsilon=target, sigma_y_scale=math.sqrt(2 / 784), **DEFAULT)
    sy = sigma * math.sqrt(2 / 784)
    got = dpmix_epsilon(sigma=sigma, sigma_y=sy, **DEFAULT)
    assert got <= target
    acct = PRVAccountant()
    nm = 16 / math.sqrt(784 / sigma**2 + 2 / sy**2)
    acct.history = [(nm, 16 / 10_000, 10_000)]
    lower, _, upper = acct._get_dprv(eps_error=0.01, delta_error=1e-8).compute_epsilon(1e-5, 1e-8, 0.01)
    assert lower <= got <= upper * 1.01
    assert got >= 0.97 * target  # the calibration spends the budget: σ is not over-noised


@pytest.mark.parametrize(("sigma", "setting"), [
    (1.0, dict(DEFAULT)), (3.0, dict(DEFAULT)), (0.6, dict(DEFAULT, num_samples=2_000)),
    (2.0, dict(mixture_degree=8, num_samples=500, num_records=500, d_x=64, d_y=10, delta=1e-5)),
])
def test_pld_never_above_rdp_or_the_closed_form(sigma, setting):
    pld = dpmix_epsilon(sigma=sigma, **setting)
    rdp = dpmix_epsilon(sigma=sigma, method="dp_accounting", **setting)
    closed = dpmix_epsilon(sigma=sigma, method="closed_form", **setting)
    assert 0 <= pld <= rdp <= closed * (1 + 1e-9)
    assert pld < 0.9 * rdp  # and materially tighter


SMALL = dict(mixture_degree=8, num_records=400, d_x=16, d_y=10, delta=1e-5)


@settings(max_examples=8, deadline=None)
@given(sigma=st.floats(min_value=0.3, max_value=5.0), factor=st.floats(min_value=1.05, max_value=3.0),
       t=st.integers(min_value=1, max_value=300))
def test_pld_is_monotone_in_sigma_t_and_the_sampling_rate(sigma, factor, t):
    base = dpmix_epsilon(sigma=sigma, num_samples=t, **SMALL)
    assert dpmix_epsilon(sigma=sigma * factor, num_samples=t, **SMALL) <= base + 1e-9
    assert dpmix_epsilon(sigma=sigma, num_samples=t + 10, **SMALL) >= base - 1e-9
    assert dpmix_epsilon(sigma=sigma, num_samples=t, **dict(SMALL, num_records=800)) <= base + 1e-9  # q = ℓ/n halved


def test_privacy_profile_is_the_pld_curve():
    sigma, sy = 1.3, 1.3 * math.sqrt(2 / 784)
    profile = dpmix_profile(sigma=sigma, sigma_y=sy, **{k: v for k, v in DEFAULT.items() if k != "delta"},
                            delta=1e-5)
    deltas = [d for _, d in profile]
    eps = [e for e, _ in profile]
    assert 1e-5 in deltas and deltas == sorted(deltas)
    assert all(a >= b for a, b in zip(eps[:-1], eps[1:], strict=True))  # ε falls as δ grows
    kw = {k: v for k, v in DEFAULT.items() if k != "delta"}
    assert dict((d, e) for e, d in profile)[1e-5] == dpmix_epsilon(sigma=sigma, sigma_y=sy, delta=1e-5, **kw)


def test_noise_far_below_the_sensitivity_is_infinite_not_a_crash():
    assert dpmix_epsilon(sigma=1e-4, **DEFAULT) == math.inf
    assert math.isfinite(dpmix_epsilon(sigma=0.05, **DEFAULT))
