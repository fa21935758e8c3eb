"""Tests for mechanisms.local.mechanism: unit-norm input perturbation with the analytic Gaussian mechanism, labels by
k-ary randomized response (default) or public."""

from __future__ import annotations

import math

import pytest
import torch
from scipy.optimize import brentq
from scipy.stats import binom, norm

from bench.core.training import evaluate
from bench.core.types import TrainedModel
from mechanisms import MECHANISMS
from mechanisms.accounting.gaussian import gaussian_sigma, local_record_epsilon
from mechanisms.local.mechanism import L2Normalize, LocalGaussian, perturb, randomize_labels

CPU = torch.device("cpu")
DELTA = 1e-5
# labels public: the image channel alone, as the source released it (the default protects labels too: below)
SPEC = LocalGaussian.spec(model="mlp", epochs=10, batch_size=32, lr=0.1, momentum=0.9, params={"labels": "public"})
RECORD = LocalGaussian.spec(model="mlp", epochs=10, batch_size=32, lr=0.1, momentum=0.9)
HIGH, LOW = 1e4, 0.5


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _fit(split, eps, spec=SPEC) -> TrainedModel:
    return MECHANISMS.get("local-gaussian")().fit(split.members, spec, target_epsilon=eps, delta=DELTA, seed=0,
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


def test_perturb_in_place_is_the_straightforward_release_bit_for_bit(digits_split):
    """``perturb`` adds the noise in place; its bits are those of ``L2Normalize()(x) + σ·randn`` with the same
    generator, for float32 images and (summed in their type) float64 ones."""
    for x in (digits_split.members.x, digits_split.members.x.double()):
        plain = L2Normalize()(x) + 0.7 * torch.randn(x.shape, generator=_gen(4))
        out = perturb(x, sigma=0.7, generator=_gen(4))
        assert out.dtype == plain.dtype and torch.equal(out, plain)


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
    assert p.accountant == "analytic-gaussian, image only (labels public)"  # every report prints the accountant
    assert "labels released in the clear" in p.note
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


def test_randomized_response_keeps_and_flips_at_the_stated_rates():
    # k = 10, ε = 1: keep with e/(e + 9) ≈ 0.232, else each of the 9 other labels with 1/(e + 9) ≈ 0.0853;
    # 100,000 labels: every count inside its two-sided 1e-6 binomial band.
    k, eps, n = 10, 1.0, 100_000
    y = torch.arange(n) % k
    out = randomize_labels(y, epsilon=eps, num_classes=k, generator=_gen(3))
    keep = math.e / (math.e + k - 1)
    lo, hi = binom.ppf(5e-7, n, keep), binom.isf(5e-7, n, keep)
    assert lo <= int((out == y).sum()) <= hi
    other = (1 - keep) / (k - 1)
    for shift in range(1, k):
        count = int(((out - y) % k == shift).sum())
        assert binom.ppf(5e-7, n, other) <= count <= binom.isf(5e-7, n, other)


def _exact_record_epsilon(sigma: float, delta: float, eps_y: float, k: int) -> float:
    """ε at δ of (unit-norm image + N(0, σ²) at sensitivity 2) composed with k-ary RR at ε_y, independently of
    dp_accounting: the privacy loss is L_G + L_RR with L_G ~ N(μ²/2, μ²), μ = 2/σ, and L_RR = ε_y, −ε_y, 0 with
    the probabilities of the worst pair of labels; δ(ε) = E[(1 − e^{ε − L})₊] = Σᵢ pᵢ δ_G(ε − lᵢ)."""
    mu = 2 / sigma
    keep = math.exp(eps_y) / (math.exp(eps_y) + k - 1)
    other = (1 - keep) / (k - 1)
    parts = [(keep, eps_y), (other, -eps_y), ((k - 2) * other, 0.0)]

    def delta_g(e: float) -> float:
        return norm.cdf(mu / 2 - e / mu) - math.exp(e) * norm.cdf(-mu / 2 - e / mu)

    return brentq(lambda e: sum(p * delta_g(e - l) for p, l in parts) - delta, 0.0, 100.0, xtol=1e-12)


@pytest.mark.parametrize(("sigma", "eps_y"), [(8.4, 0.25), (1.47, 2.0), (3.0, 0.01), (50.0, 1.0)])
def test_record_epsilon_is_the_exact_composition(sigma, eps_y):
    # dp_accounting's pessimistic PLD may only add, and by little (discretisation 1e-4)
    exact = _exact_record_epsilon(sigma, DELTA, eps_y, 10)
    got = local_record_epsilon(sigma=sigma, delta=DELTA, label_epsilon=eps_y, num_classes=10)
    assert exact - 1e-6 <= got <= exact + 0.005
    # the label channel alone (image noise huge): ε → ε_y; and the composition never exceeds basic composition
    assert got <= eps_y + float(brentq(lambda e: norm.cdf(1 / sigma - e * sigma / 2)
                                       - math.exp(e) * norm.cdf(-1 / sigma - e * sigma / 2) - DELTA, 0, 100)) + 1e-9


@pytest.mark.parametrize("eps", [1.0, 4.0])
def test_default_protects_the_whole_record(digits_split, eps):
    fit = _fit(digits_split, eps, RECORD)
    p, params = fit.privacy, fit.params
    assert params["labels"] == "randomized-response" and params["label_epsilon"] == pytest.approx(0.25 * eps)
    # the composed ε meets the target, tight (σ to 1e-6), and checked against the exact composition
    assert 0.999 * eps <= p.epsilon <= eps
    assert _exact_record_epsilon(params["sigma"], DELTA, params["label_epsilon"], 10) <= eps + 1e-6
    # the image gets less budget than alone: more noise than the labels-public σ
    assert params["sigma"] > gaussian_sigma(epsilon=eps, delta=DELTA, sensitivity=2.0)
    assert p.accountant == "analytic-gaussian + randomized-response (PLD)" and p.relation == "replace-one"
    assert "randomized response" in p.note
    # the release's labels are the randomized ones the model was trained on: 300 labels, keep rate in its band
    keep = math.exp(params["label_epsilon"]) / (math.exp(params["label_epsilon"]) + 9)
    kept = int((fit.release.y == digits_split.members.y).sum())
    assert binom.ppf(1e-6, 300, keep) <= kept <= binom.isf(1e-6, 300, keep)


# ---- the class-means learner ----------------------------------------------------------------------------------


def _class_means(x: torch.Tensor, y: torch.Tensor, k: int) -> torch.Tensor:
    """Plain per-class means of unit-norm images (the quantity the learner estimates from the release)."""
    unit = x.flatten(1) / x.flatten(1).norm(dim=1, keepdim=True)
    return torch.stack([unit[y == j].mean(0) for j in range(k)])


def test_class_means_undo_randomized_response(digits_split):
    """Labels flipped by randomized response (keep 0.4 of 10 classes) pull per-label means towards the overall mean;
    inverting the response matrix removes that bias. The members repeated 20 times (6,000 records, so that the
    flips' sampling noise is small): the inverted estimates land near the true class means, the per-label means
    stay a fixed distance off (no image noise here)."""
    from mechanisms.local.class_means import class_means_from_local_release

    pool = digits_split.members
    x = (pool.x.flatten(1) / pool.x.flatten(1).norm(dim=1, keepdim=True)).repeat(20, 1)
    y = pool.y.repeat(20)
    keep = 0.4
    flipped = randomize_labels(y, epsilon=math.log(keep * 9 / (1 - keep)), num_classes=10, generator=_gen(3))
    true = _class_means(pool.x, pool.y, 10)
    naive = torch.stack([x[flipped == j].mean(0) for j in range(10)])
    inverted = class_means_from_local_release(x, flipped, num_classes=10, label_keep=keep)
    err_naive, err_inv = (naive - true).norm(dim=1).mean(), (inverted - true).norm(dim=1).mean()
    assert err_inv < 0.5 * err_naive
    clean = class_means_from_local_release(x, y, num_classes=10, label_keep=None)  # public labels: plain means
    assert torch.allclose(clean, true, atol=1e-5)


def test_class_means_learner_at_negligible_noise_is_nearest_class_mean(digits_split):
    """At ε = 10⁶ (σ ≈ 10⁻⁵, labels public) the learner is a nearest-class-mean classifier by inner product on
    unit-norm images: its test predictions equal those computed here from the members' own class means."""
    spec = LocalGaussian.spec(model="linear", epochs=1, batch_size=32, lr=0.1,
                              params={"labels": "public", "learner": "class-means"})
    trained = _fit(digits_split, 1e6, spec)
    test = digits_split.test
    unit = test.x.flatten(1) / test.x.flatten(1).norm(dim=1, keepdim=True)
    expected = (unit @ _class_means(digits_split.members.x, digits_split.members.y, 10).T).argmax(1)
    with torch.no_grad():
        got = trained.model(test.x).argmax(1)
    assert (got == expected).float().mean() > 0.99
    assert evaluate(trained.model, test.x, test.y, device=CPU)["accuracy"] > 0.85
    assert trained.params["learner"] == "class-means"


def test_class_means_learner_needs_the_linear_model():
    from bench.config.validation import training_spec
    from bench.core.errors import ConfigError

    with pytest.raises(ConfigError, match="class-means.*needs model 'linear'"):
        training_spec("local-gaussian", {"model": "mlp", "epochs": 1, "batch_size": 8, "lr": 0.1,
                                         "params": {"learner": "class-means"}}, n_members=100)
