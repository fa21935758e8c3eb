"""Per-class DPMix (reused subset), the source-σ options of DPMix / DP-SGD / weight noise, and EMA — on real data."""

from __future__ import annotations

import math

import pytest
import torch

from bench.core.errors import ConfigError
from bench.core.training import evaluate
from mechanisms.accounting.dpmix import dpmix_epsilon, dpmix_sigma
from mechanisms.dpmix.per_class import DPMixPerClass, per_class_release, reused_subset_epsilon
from mechanisms.dpsgd.mechanism import DPSGD

CPU = torch.device("cpu")


def _composed_gaussian_epsilon(noise_multiplier: float, count: int, delta: float) -> float:
    """ε of ``count`` Gaussian mechanisms (σ/Δ = noise_multiplier) from Google's PLD accountant (independent)."""
    from dp_accounting import dp_event
    from dp_accounting.pld import pld_privacy_accountant

    acct = pld_privacy_accountant.PLDAccountant(value_discretization_interval=1e-4)
    acct.compose(dp_event.SelfComposedDpEvent(dp_event.GaussianDpEvent(noise_multiplier), count))
    return acct.get_epsilon(delta)


@pytest.mark.parametrize("ell, sigma", [(128, 0.7), (32, 3.0)])
def test_reused_subset_epsilon_matches_composition_then_one_subsampling(ell, sigma):
    t_c, n_c, d, delta = 1200, 6000, 784, 1e-5
    q = ell / n_c
    eps0 = _composed_gaussian_epsilon(sigma / (math.sqrt(d) / ell), t_c, delta / q)
    expected = math.log1p(q * math.expm1(eps0)) if eps0 < 700 else eps0 + math.log(q)
    got = reused_subset_epsilon(sigma=sigma, mixture_degree=ell, samples_per_class=t_c, class_size=n_c, d_x=d,
                                delta=delta)
    # the PLD of the dominating pair is exact: never above composition-then-(ε, δ)-amplification, and close to it
    # here (one subsampling step, so the (ε, δ) route loses little)
    assert expected * (1 - 5e-3) <= got <= expected * (1 + 1e-3)
    # the source's amplified bound assumes a fresh subset per sample: far smaller than what holds
    claimed = dpmix_epsilon(sigma=sigma, mixture_degree=ell, num_samples=t_c, num_records=n_c, d_x=d, d_y=1,
                            delta=delta, method="closed_form", label_form="none")
    assert claimed < got


def test_per_class_release_reuses_one_subset_per_class(digits_split):
    train = digits_split.members
    gen = torch.Generator().manual_seed(0)
    x, y = per_class_release(train, mixture_degree=5, samples_per_class=7, sigma=1e-9, reuse_subset=True,
                             generator=gen)
    assert x.shape == (70, *train.input_shape) and torch.equal(y, torch.arange(10).repeat_interleave(7))
    for c in range(10):
        rows = x[y == c].flatten(1)
        assert torch.allclose(rows, rows[0].expand_as(rows), atol=1e-6)  # the same mean, only noise differs
        ell_mean = rows[0]
        class_mean = train.x[train.y == c].flatten(1).mean(0)
        assert not torch.allclose(ell_mean, class_mean, atol=1e-3)  # a mean of 5 records, not of the class
    fresh, _ = per_class_release(train, mixture_degree=5, samples_per_class=7, sigma=1e-9, reuse_subset=False,
                                 generator=torch.Generator().manual_seed(0))
    rows = fresh[:7].flatten(1)
    assert not torch.allclose(rows, rows[0].expand_as(rows), atol=1e-3)


def test_dpmix_per_class_learns_and_reports_the_epsilon_that_holds(digits_split):
    spec = DPMixPerClass.spec(model="mlp", epochs=10, batch_size=32, lr=3e-3, optimizer="adam",
                              params={"mixture_degree": 4, "samples_per_class": 60, "sigma": 0.1})
    tm = DPMixPerClass().fit(digits_split.members, spec, target_epsilon=None, delta=1e-5, seed=0, device=CPU)
    acc = evaluate(tm.model, digits_split.test.x, digits_split.test.y, device=CPU)["accuracy"]
    assert acc > 0.5  # class means of 4 digits + small noise are learnable
    assert tm.privacy.guarantee == "dp-release" and tm.privacy.accountant == "dpmix-pld"
    assert tm.privacy.relation == "replace-one-same-class"
    smallest_class = int(torch.bincount(digits_split.members.y).min())
    assert tm.privacy.epsilon == reused_subset_epsilon(sigma=0.1, mixture_degree=4, samples_per_class=60,
                                                       class_size=smallest_class, d_x=64, delta=1e-5)
    assert tm.privacy.claimed_epsilon == dpmix_epsilon(sigma=0.1, mixture_degree=4, num_samples=60, d_x=64, d_y=1,
                                                       num_records=smallest_class, delta=1e-5, method="closed_form",
                                                       label_form="none")
    again = DPMixPerClass().fit(digits_split.members, spec, target_epsilon=None, delta=1e-5, seed=0, device=CPU)
    assert all(torch.equal(a, b) for a, b in zip(tm.model.state_dict().values(), again.model.state_dict().values(),
                                                 strict=True))


def test_source_dpmix_formula_understates_epsilon():
    kw = dict(mixture_degree=256, num_samples=10_000, num_records=60_000, d_x=784, d_y=10, delta=1 / 60_000)
    # the source's formula: Lee et al.'s closed form as stated (labels anywhere in [0, 1]^10) with 1/n for ℓ/n
    source = dpmix_sigma(target_epsilon=15.0, sample_rate=1 / 60_000, method="closed_form", label_form="box", **kw)
    correct = dpmix_sigma(target_epsilon=15.0, **kw)  # the tight accountant, one-hot labels
    assert source < correct
    assert dpmix_epsilon(sigma=source, **kw) > 15.0 >= dpmix_epsilon(sigma=correct, **kw)
    with pytest.raises(ValueError, match="closed-form"):
        dpmix_epsilon(sigma=1.0, method="dp_accounting", sample_rate=0.1, **kw)


def test_dpsgd_with_a_fixed_noise_multiplier_reports_its_epsilon(digits_split):
    from opacus.accountants import RDPAccountant

    spec = DPSGD.spec(model="mlp", epochs=2, batch_size=100, lr=0.5,
                      params={"noise_multiplier": 1.3, "accountant": "rdp", "grad_sample_mode": "bk",
                              "relation": "add-remove"})
    tm = DPSGD().fit(digits_split.members, spec, target_epsilon=None, delta=1e-5, seed=0, device=CPU)
    assert tm.params["noise_multiplier"] == 1.3
    acct = RDPAccountant()
    acct.history = [(1.3, tm.params["sample_rate"], tm.params["steps"])]
    assert tm.privacy.epsilon == pytest.approx(acct.get_epsilon(1e-5), rel=1e-6)


def test_ema_of_weights_is_the_last_iterate_at_decay_zero_and_differs_otherwise(digits_split):
    base = {"noise_multiplier": 1.0, "grad_sample_mode": "bk"}

    def weights(**extra):
        spec = DPSGD.spec(model="mlp", epochs=3, batch_size=100, lr=0.5, params={**base, **extra})
        tm = DPSGD().fit(digits_split.members, spec, target_epsilon=None, delta=1e-5, seed=0, device=CPU)
        return torch.cat([p.detach().flatten() for p in tm.model.parameters()])

    plain = weights()
    assert torch.allclose(weights(ema_decay=1e-12), plain, atol=1e-6)
    averaged = weights(ema_decay=0.9)
    assert not torch.allclose(averaged, plain, atol=1e-4)
    assert torch.equal(averaged, weights(ema_decay=0.9))


def test_ema_needs_a_fast_clipper_and_a_decay_below_one():
    spec = DPSGD.spec(model="mlp", epochs=1, batch_size=100, lr=0.5,
                      params={"ema_decay": 0.9, "grad_sample_mode": "hooks"})
    with pytest.raises(ValueError, match=r"params\.ema_decay = 0\.9 needs grad_sample_mode in \('bk', 'vmap'\)"):
        DPSGD().check(spec, n_members=300)
    with pytest.raises(ConfigError, match=r"params\.ema_decay = 1\.0"):
        DPSGD.spec(model="mlp", epochs=1, batch_size=100, lr=0.5, params={"ema_decay": 1.0})
