"""Tests for mechanisms.dpmix.mechanism: subset sampling, the mixing release, and the calibrated fit on real digits."""

from __future__ import annotations

import itertools
import math
from collections import Counter

import pytest
import torch
import torch.nn.functional as F
from scipy.stats import chisquare

from bench.core.errors import ConfigError
from bench.core.types import TrainedModel, TrainSpec
from mechanisms import MECHANISMS
from mechanisms.accounting.dpmix import dpmix_epsilon, dpmix_sigma
from mechanisms.dpmix.mechanism import DPMix
from mechanisms.dpmix.mixing import mix_release, sample_subsets

CPU = torch.device("cpu")
DELTA = 1e-5
TARGET = 4.0
ELL, T = 4, 200


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


# --- sample_subsets -------------------------------------------------------------------------------

# (n, size): the first two take the rejection path (size² ≤ 4n), the last two the Gumbel top-k path.
CASES = [(100, 5), (40, 12), (20, 10), (30, 30)]


@pytest.mark.parametrize("n,size", CASES)
def test_subsets_are_distinct_indices_in_range(n, size):
    idx = sample_subsets(n, size, 500, generator=_gen(1))
    assert idx.shape == (500, size)
    assert idx.dtype == torch.int64
    assert int(idx.min()) >= 0 and int(idx.max()) < n
    for row in idx.tolist():
        assert len(set(row)) == size


def test_cases_cover_both_code_paths():
    assert {s * s <= 4 * n for n, s in CASES} == {True, False}


@pytest.mark.parametrize("n,size", [(50, 5), (50, 20)])  # rejection (25 ≤ 200), top-k (400 > 200)
def test_inclusion_frequency_is_uniform(n, size):
    # For a uniform size-subset every index is included with probability p = size/n, so its count over
    # `count` independent rows is Binomial(count, p). A 5-std band per index fails a correct sampler with
    # probability ≤ n·5.7e-7 ≈ 3e-5 (Bonferroni over the n indices).
    count = 20_000
    idx = sample_subsets(n, size, count, generator=_gen(2))
    freq = torch.bincount(idx.flatten(), minlength=n).double()
    p = size / n
    expected, std = count * p, math.sqrt(count * p * (1 - p))
    assert float((freq - expected).abs().max()) < 5 * std


@pytest.mark.parametrize("n,size", [(7, 3), (8, 6)])  # rejection (9 ≤ 28), top-k (36 > 32)
def test_whole_subset_distribution_is_uniform(n, size):
    # Inclusion frequencies alone would not catch e.g. a bias towards adjacent indices, so check the law of
    # the whole (unordered) subset: all C(n, size) subsets equally likely, Pearson χ² goodness of fit.
    # The draws are seeded, so this is deterministic; a correct sampler fails at p < 1e-4 only by bad luck.
    count = 14_000
    idx = sample_subsets(n, size, count, generator=_gen(3))
    seen = Counter(tuple(sorted(r)) for r in idx.tolist())
    every = list(itertools.combinations(range(n), size))
    assert set(seen) <= set(every)
    observed = [seen.get(s, 0) for s in every]
    assert chisquare(observed).pvalue > 1e-4


@pytest.mark.parametrize("size", [0, 11])
def test_subset_size_out_of_range(size):
    with pytest.raises(ValueError):
        sample_subsets(10, size, 3, generator=_gen(0))


# --- mix_release ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def records(digits_split):
    m = digits_split.members
    return m.x.flatten(1), F.one_hot(m.y, 10).float()


def test_noiseless_release_is_exact_mean_of_returned_subsets(records):
    x, y = records
    rx, ry, idx = mix_release(x, y, mixture_degree=7, num_samples=50, sigma=0.0, generator=_gen(4))
    assert rx.shape == (50, x.shape[1]) and ry.shape == (50, 10) and idx.shape == (50, 7)
    for t in range(50):
        rows = idx[t].tolist()
        assert len(set(rows)) == 7
        exp_x = sum(x[i].double() for i in rows) / 7
        exp_y = sum(y[i].double() for i in rows) / 7
        assert torch.allclose(rx[t].double(), exp_x, atol=1e-5)
        assert torch.allclose(ry[t].double(), exp_y, atol=1e-5)


def test_noise_has_the_requested_std(records):
    x, y = records
    sigma, t = 0.3, 400
    rx, ry, idx = mix_release(x, y, mixture_degree=5, num_samples=t, sigma=sigma, generator=_gen(5))
    mean = torch.cat([x[idx].mean(1), y[idx].mean(1)], dim=1).double()
    resid = (torch.cat([rx, ry], dim=1).double() - mean).flatten()
    n = resid.numel()  # 400 · 74 = 29,600 i.i.d. N(0, σ²) values
    # sample std of N normals has relative std 1/sqrt(2N) ≈ 0.4 %; the mean has std σ/sqrt(N). 5-std bands.
    assert float(resid.std()) == pytest.approx(sigma, rel=5 / math.sqrt(2 * n))
    assert abs(float(resid.mean())) < 5 * sigma / math.sqrt(n)
    # features and labels get the same σ
    assert float((rx.double() - mean[:, : x.shape[1]]).std()) == pytest.approx(sigma, rel=0.05)
    assert float((ry.double() - mean[:, x.shape[1] :]).std()) == pytest.approx(sigma, rel=0.05)


def test_release_is_reproducible_from_the_generator_seed(records):
    x, y = records
    kw = dict(mixture_degree=4, num_samples=30, sigma=0.5)
    a = mix_release(x, y, generator=_gen(6), **kw)
    b = mix_release(x, y, generator=_gen(6), **kw)
    c = mix_release(x, y, generator=_gen(7), **kw)
    for u, v in zip(a, b, strict=True):
        assert torch.equal(u, v)
    assert not torch.equal(a[0], c[0])


# --- DPMix.fit ------------------------------------------------------------------------------------


def _spec(**params) -> TrainSpec:
    return DPMix.spec(model="mlp", epochs=2, batch_size=32, lr=1e-2, optimizer="adam",
                      params={"mixture_degree": ELL, "num_samples": T, **params})


def _fit(split, spec: TrainSpec, target=TARGET) -> TrainedModel:
    return MECHANISMS.get("dpmix")().fit(split.members, spec, target_epsilon=target, delta=DELTA, seed=0,
                                         device=CPU)


@pytest.fixture(scope="module")
def closed(digits_split):
    return _fit(digits_split, _spec(accountant="closed_form"))


@pytest.fixture(scope="module")
def tight(digits_split):
    return _fit(digits_split, _spec())


@pytest.fixture(scope="module")
def library(digits_split):
    return _fit(digits_split, _spec(accountant="dp_accounting"))


def _acc_kwargs(split, method: str) -> dict:
    return dict(mixture_degree=ELL, num_samples=T, num_records=len(split.members), d_x=64, d_y=10, delta=DELTA,
                method=method)


def test_fit_privacy(closed):
    p = closed.privacy
    assert p.guarantee == "dp-release"
    assert p.accountant == "dpmix-closed-form"
    assert p.delta == DELTA
    assert p.relation == "replace-one"  # sampling without replacement: one record replaced by another
    assert 0 < p.epsilon <= TARGET


def test_fit_sigma_is_the_calibrated_one(closed, digits_split):
    expected = dpmix_sigma(target_epsilon=TARGET, **_acc_kwargs(digits_split, "closed_form"))
    assert closed.params["sigma"] == pytest.approx(expected, rel=1e-12)
    assert closed.privacy.epsilon == pytest.approx(
        dpmix_epsilon(sigma=expected, **_acc_kwargs(digits_split, "closed_form")), rel=1e-12)
    assert closed.params["mixture_degree"] == ELL and closed.params["num_samples"] == T
    assert closed.params["num_records"] == len(digits_split.members)


def test_fit_release_shapes_and_content(closed, digits_split):
    rel = closed.release
    assert rel.kind == "dpmix" and rel.display == "clip"
    assert rel.x.shape == (T, 1, 8, 8)
    assert rel.y.shape == (T, 10)
    assert rel.params["sigma"] == closed.params["sigma"]
    # The release is exactly the DPMix release of the members drawn with the fit's seed (fit seeds a fresh
    # generator with its seed), so the properties tested on mix_release above hold for it.
    m = digits_split.members
    rx, ry, _ = mix_release(m.x.flatten(1), F.one_hot(m.y, 10).float(), mixture_degree=ELL, num_samples=T,
                            sigma=closed.params["sigma"], generator=_gen(0))
    assert torch.equal(rel.x.flatten(1), rx)
    assert torch.equal(rel.y, ry)


def test_fit_model_outputs_logits(closed, digits_split):
    closed.model.eval()
    with torch.no_grad():
        out = closed.model(digits_split.test.x[:9])
    assert out.shape == (9, 10)
    assert torch.isfinite(out).all()


def test_the_default_accountant_is_the_tight_pld(tight, library, digits_split):
    p = tight.privacy
    assert (p.accountant, p.relation, p.delta, tight.params["accountant"]) == ("dpmix-pld", "replace-one", DELTA, "pld")
    kw = _acc_kwargs(digits_split, "pld")
    assert p.epsilon == pytest.approx(dpmix_epsilon(sigma=tight.params["sigma"], **kw), rel=1e-12)
    assert 0.97 * TARGET <= p.epsilon <= TARGET  # the whole budget is spent, never more
    # tighter accounting reaches the same ε with less noise than RDP, which needs less than the closed form
    assert tight.params["sigma"] < library.params["sigma"]
    assert dict((d, e) for e, d in p.profile)[DELTA] == p.epsilon  # the privacy profile is the same accountant's


def test_dp_accounting_is_named_and_never_looser(library, closed, digits_split):
    p = library.privacy
    assert p.accountant == "dp-accounting-rdp"
    assert p.guarantee == "dp-release"
    assert 0 < p.epsilon <= TARGET
    assert library.params["accountant"] == "dp_accounting"
    # the library's bound is tighter, so it reaches the target with no more noise than the closed form
    assert library.params["sigma"] <= closed.params["sigma"]


def test_rejects_bad_target_and_accountant(digits_split):
    for bad in (0.0, -2.0, None):
        with pytest.raises(ValueError):
            _fit(digits_split, _spec(), target=bad)
    # an unknown accountant is rejected when the spec is built, before any training
    with pytest.raises(ConfigError, match=r"dpmix\.params\.accountant = 'nope'"):
        _spec(accountant="nope")


# --- separate label noise and the class-means learner --------------------------------------------------------------


def test_label_noise_scale_is_released_and_accounted(digits_split):
    scale = math.sqrt(10 / 64)  # √(d_y/d_x): the σ_x·σ_y-minimising split of the noise
    fit = _fit(digits_split, _spec(sigma_y_scale=scale))
    sigma, sigma_y = fit.params["sigma"], fit.params["sigma_y"]
    assert sigma_y == pytest.approx(scale * sigma, rel=1e-12) and fit.release.params["sigma_y"] == sigma_y
    kw = _acc_kwargs(digits_split, "pld")
    assert fit.privacy.epsilon == pytest.approx(dpmix_epsilon(sigma=sigma, sigma_y=sigma_y, **kw), rel=1e-12)
    assert fit.privacy.epsilon <= TARGET < dpmix_epsilon(sigma=0.99 * sigma, sigma_y=0.99 * sigma_y, **kw)
    # the noise on each part has its own std: the release minus the subsets' means
    m = digits_split.members
    rx, ry, idx = mix_release(m.x.flatten(1), F.one_hot(m.y, 10).float(), mixture_degree=ELL, num_samples=T,
                              sigma=sigma, sigma_y=sigma_y, generator=_gen(0))
    assert torch.equal(fit.release.x.flatten(1), rx)
    noise_y = ry - F.one_hot(m.y, 10).float()[idx].mean(1)
    noise_x = rx - m.x.flatten(1)[idx].mean(1)
    assert noise_y.std().item() == pytest.approx(sigma_y, rel=0.05)
    assert noise_x.std().item() == pytest.approx(sigma, rel=0.05)


def test_class_means_estimate_matches_the_members_class_means_within_its_error(digits_split):
    from mechanisms.dpmix.mechanism import class_means_from_release

    m = digits_split.members
    x, y1 = m.x.flatten(1), F.one_hot(m.y, 10).float()
    truth = torch.stack([x[m.y == k].mean(0) for k in range(10)])
    rx, ry, _ = mix_release(x, y1, mixture_degree=8, num_samples=40_000, sigma=0.2, sigma_y=0.02, generator=_gen(3))
    means, err = class_means_from_release(rx, ry, mixture_degree=8, num_records=len(m))
    sq = (means - truth).pow(2).sum(1)
    # err is the expected squared error of each estimate (64 coordinates, so it concentrates): within 2x either way
    assert ((sq > err / 2) & (sq < 2 * err)).float().mean() >= 0.8 and (sq < 3 * err).all()
    # and it is small next to the distances between the class means
    assert err.max() < 0.05 * torch.cdist(truth, truth).pow(2).masked_fill(torch.eye(10, dtype=bool), 1e9).min()
    with pytest.raises(ValueError, match="at least 2"):
        class_means_from_release(rx[:1], ry[:1], mixture_degree=8, num_records=len(m))


def test_class_means_learner_is_a_nearest_class_mean_rule_that_learns(digits_split):
    from mechanisms.dpmix.mechanism import class_means_from_release

    # 300 members are far too few for a useful ε (σ ≈ 10 at ε = 8): a fixed small σ tests the learner itself
    spec = DPMix.spec(model="linear", epochs=1, batch_size=32, lr=1.0, optimizer="sgd",
                      params={"mixture_degree": 8, "num_samples": 40_000, "learner": "class-means", "sigma": 0.02,
                              "sigma_y_scale": math.sqrt(10 / 64)})
    fit = _fit(digits_split, spec)
    assert fit.params["learner"] == "class-means" and fit.params["sigma"] == 0.02
    rel = fit.release
    means, err = class_means_from_release(rel.x.flatten(1), rel.y, mixture_degree=8, num_records=300)
    test = digits_split.test
    with torch.no_grad():
        pred = fit.model(test.x).argmax(1)
    nearest = (torch.cdist(test.x.flatten(1), means).pow(2) - err).argmin(1)
    assert (pred == nearest).float().mean() > 0.99  # the same rule (ties and float rounding aside)
    clean = torch.stack([digits_split.members.x[digits_split.members.y == k].flatten(1).mean(0) for k in range(10)])
    clean_acc = (torch.cdist(test.x.flatten(1), clean).argmin(1) == test.y).float().mean()
    assert (pred == test.y).float().mean() > clean_acc - 0.05  # as good as the members' own class means


def test_class_means_learner_needs_the_linear_model(digits_split):
    # a rule across settings: ``check`` (what validation runs before any work) and ``fit`` both reject it
    spec = _spec(learner="class-means")
    with pytest.raises(ValueError, match="needs model 'linear'"):
        DPMix().check(spec, n_members=len(digits_split.members))
    with pytest.raises(ValueError, match="needs model 'linear'"):
        _fit(digits_split, spec)
    # an unknown learner is rejected when the spec is built
    with pytest.raises(ConfigError, match=r"params\.learner = 'nope'"):
        _spec(learner="nope")


def test_mixture_degree_above_the_members_is_rejected(digits_split):
    n = len(digits_split.members)
    with pytest.raises(ValueError, match=rf"params\.mixture_degree = {n + 1}.*n_members={n}"):
        DPMix().check(_spec(mixture_degree=n + 1), n_members=n)
    DPMix().check(_spec(mixture_degree=n), n_members=n)  # ℓ = n is allowed


@pytest.mark.parametrize(("x", "y", "match"), [
    (torch.tensor([[0.5, 1.5]]), torch.tensor([[1.0, 0.0]]), r"feature 1\.5 of record 0"),
    (torch.tensor([[0.5, float("nan")]]), torch.tensor([[1.0, 0.0]]), "feature nan of record 0"),
    (torch.tensor([[0.5, 0.5], [0.1, 0.2]]), torch.tensor([[1.0, 0.0], [-0.5, 1.5]]), r"label -0\.5 of record 1"),
    (torch.tensor([[0.5, 0.5]]), torch.tensor([[1.0, 1.0]]), r"label sum 2\.0 of record 0"),
])
def test_release_rejects_records_outside_the_accountants_assumption(x, y, match):
    with pytest.raises(ValueError, match=match) as info:
        mix_release(x, y, mixture_degree=1, num_samples=2, sigma=1.0, generator=torch.Generator().manual_seed(0))
    assert "\n" not in str(info.value)
