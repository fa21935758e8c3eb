"""Tests for mechanisms.local_noise: unit-norm input perturbation with the analytic Gaussian mechanism."""

from __future__ import annotations

import math

import pytest
import torch
from scipy.stats import norm

from bench.core.training import evaluate
from bench.core.types import TrainedModel
from mechanisms import MECHANISMS
from mechanisms.accounting import gaussian_sigma
from mechanisms.local_noise import LocalGaussian, perturb

CPU = torch.device("cpu")
DELTA = 1e-5
SPEC = LocalGaussian.spec(model="mlp", epochs=10, batch_size=32, lr=0.1, momentum=0.9)
HIGH, LOW = 1e4, 0.5


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _fit(split, eps) -> TrainedModel:
    return MECHANISMS.get("local-gaussian")().fit(split.members, SPEC, target_epsilon=eps, delta=DELTA, seed=0,
                                                  device=CPU)


@pytest.fixture(scope="module")
def fits(digits_split):
    return {HIGH: _fit(digits_split, HIGH), LOW: _fit(digits_split, LOW)}


def test_perturb_without_noise_gives_unit_norm_images(digits_split):
    x = digits_split.members.x
    out = perturb(x, sigma=0.0, generator=_gen(0))
    assert out.shape == x.shape
    norms = out.flatten(1).norm(dim=1)
    assert torch.allclose(norms, torch.ones_like(norms), atol=1e-5)
    # direction is kept: out is a positive multiple of x
    cos = torch.nn.functional.cosine_similarity(out.flatten(1), x.flatten(1), dim=1)
    assert torch.allclose(cos, torch.ones_like(cos), atol=1e-5)


def test_perturb_noise_has_std_sigma(digits_split):
    x = digits_split.members.x
    sigma = 0.7
    out = perturb(x, sigma=sigma, generator=_gen(1))
    unit = x.flatten(1) / x.flatten(1).norm(dim=1, keepdim=True)
    noise = (out.flatten(1) - unit).double().flatten()
    n = noise.numel()  # 300 · 64 = 19,200 i.i.d. N(0, σ²) values
    # relative std of a sample std is 1/sqrt(2N) ≈ 0.5 %; mean has std σ/sqrt(N). 5-std bands.
    assert float(noise.std()) == pytest.approx(sigma, rel=5 / math.sqrt(2 * n))
    assert abs(float(noise.mean())) < 5 * sigma / math.sqrt(n)
    # per pixel as well: every one of the 64 pixels sees the same σ (300 draws each, rel. std ≈ 4 %)
    per_pixel = (out.flatten(1) - unit).double().std(dim=0)
    assert float((per_pixel / sigma - 1).abs().max()) < 5 / math.sqrt(2 * 300)


@pytest.mark.parametrize("eps", [HIGH, LOW])
def test_sigma_is_analytic_gaussian_at_sensitivity_2(fits, eps):
    sigma = fits[eps].params["sigma"]
    assert sigma == pytest.approx(gaussian_sigma(epsilon=eps, delta=DELTA, sensitivity=2.0), rel=1e-12)
    assert sigma == pytest.approx(2 * gaussian_sigma(epsilon=eps, delta=DELTA, sensitivity=1.0), rel=1e-12)
    assert fits[eps].params["sensitivity"] == 2.0
    assert fits[eps].release.params["sigma"] == sigma


def _balle_wang_delta(sigma: float, eps: float, sens: float) -> float:
    """δ(ε) of N(0, σ²) at L2 sensitivity Δ (Balle & Wang 2018, Thm. 8), directly with scipy."""
    a, b = sens / (2 * sigma), eps * sigma / sens
    return norm.cdf(a - b) - math.exp(eps) * norm.cdf(-a - b)


def test_sigma_is_tight_for_replace_one_of_unit_norm_images(fits):
    # Two unit-norm images differ by at most 2 in L2, so Δ = 2. Check independently of the accounting module
    # that σ gives (ε, δ)-DP at Δ = 2 and that 0.1 % less noise would not.
    sigma = fits[LOW].params["sigma"]
    assert _balle_wang_delta(sigma, LOW, 2.0) <= DELTA * (1 + 1e-6)
    assert _balle_wang_delta(sigma * 0.999, LOW, 2.0) > DELTA


@pytest.mark.parametrize("eps", [HIGH, LOW])
def test_privacy_record(fits, eps):
    p = fits[eps].privacy
    assert p.epsilon == pytest.approx(eps, rel=1e-6)
    assert p.delta == DELTA
    assert p.guarantee == "local-dp"
    assert p.accountant == "analytic-gaussian"
    assert p.relation == "replace-one"  # one person's image replaced by any other: sensitivity 2


def test_release_is_the_noisy_members(fits, digits_split):
    rel = fits[LOW].release
    assert rel.kind == "local-gaussian"
    assert rel.display == "minmax"  # unit-norm images plus noise are not on the [0, 1] pixel scale
    assert rel.x.shape == digits_split.members.x.shape
    assert torch.equal(rel.y, digits_split.members.y)
    # the release is the perturbation of the members with the fit's seed (fit seeds a fresh generator)
    assert torch.equal(rel.x, perturb(digits_split.members.x, sigma=fits[LOW].params["sigma"], generator=_gen(0)))


def test_utility_tracks_epsilon(fits, digits_split):
    acc = {e: evaluate(fits[e].model, digits_split.test.x, digits_split.test.y, device=CPU)["accuracy"]
           for e in (HIGH, LOW)}
    # ε = 1e4: σ ≈ 0.015 per pixel against unit-norm images whose 64 pixels are ~0.125 each on average, so the
    # training images are barely disturbed and the MLP learns digits much as the non-private baseline (~0.9).
    assert acc[HIGH] > 0.7
    # ε = 0.5: σ ≈ 14 per pixel, i.e. a noise norm of ~14·8 = 112 per image against a signal of norm 1. A
    # class-mean direction estimated from ~30 such images carries noise of norm ~112/sqrt(30) ≈ 20, so the
    # learned weights are essentially random: accuracy near chance (0.1, std ≈ 0.015 on 397 test images);
    # 0.3 is far above that and far below what any real learning of digits gives.
    assert acc[LOW] < 0.3


def test_model_normalises_its_input(fits, digits_split):
    model = fits[HIGH].model
    model.eval()
    x = digits_split.test.x[:20]
    with torch.no_grad():
        a, b = model(x), model(3 * x)
    assert a.shape == (20, 10)
    assert torch.allclose(a, b, atol=1e-5, rtol=1e-5)


def test_scale_buffer_is_saved_with_the_weights(fits, digits_split):
    fit = fits[LOW]
    sigma = fit.params["sigma"]
    state = fit.model.state_dict()
    scale_keys = [k for k in state if k.endswith("scale")]
    assert len(scale_keys) == 1
    # the public constant s = 1/sqrt(1/d + σ²), d = 64 pixels
    assert float(state[scale_keys[0]]) == pytest.approx(1 / math.sqrt(1 / 64 + sigma**2), rel=1e-6)
    # a fresh architecture holds the default scale 1; loading the state_dict restores s and the logits
    fresh = MECHANISMS.get("local-gaussian")().build(digits_split.members.input_shape, 10, SPEC)
    assert float(fresh.state_dict()[scale_keys[0]]) == 1.0
    fresh.load_state_dict(state)
    fresh.eval()
    fit.model.eval()
    x = digits_split.test.x[:10]
    with torch.no_grad():
        assert torch.equal(fresh(x), fit.model(x))


@pytest.mark.parametrize("bad", [0.0, -1.0, None])
def test_rejects_non_positive_target(digits_split, bad):
    with pytest.raises(ValueError):
        _fit(digits_split, bad)
