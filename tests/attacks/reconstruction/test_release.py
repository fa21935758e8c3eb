"""Attacks on released data: near-perfect without noise, chance under huge noise, not applicable without their
release."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from helpers import context

from attacks import ATTACKS
from attacks.analysis.statistics.confidence import clopper_pearson
from attacks.analysis.statistics.metrics import membership_metrics
from attacks.base.attack import MembershipAttack
from bench.core.types import PrivacySpent, Release, TrainedModel
from mechanisms.dpmix.mixing import mix_release
from mechanisms.local.mechanism import perturb

HUGE = 1e3


def _attack(name: str, **params):
    cls = ATTACKS.get(name)
    return cls(cls.Params(**params))


def _run(name: str, target: TrainedModel, split, *, max_per_side: int | None = None, **params):
    """Attack ``name`` with ``params`` on ``target`` as the runner does it (seed 0): membership scores, or a
    reconstruction."""
    attack = _attack(name, **params)
    assert attack.applies_to(target)
    ctx = context(target, split, seed=0, max_per_side=max_per_side)
    return attack.score(ctx) if isinstance(attack, MembershipAttack) else attack.reconstruct(ctx)


def _auc(res) -> float:
    return membership_metrics(res.scores, res.labels)["auc"]


def _auc_null_sd(n1: int, n0: int) -> float:
    """Standard deviation of the AUC (Mann-Whitney U / n1·n0) of uninformative scores."""
    return math.sqrt((n1 + n0 + 1) / (12 * n1 * n0))


def _dpmix(split, *, ell: int, num_samples: int, sigma: float, seed: int = 1) -> TrainedModel:
    m = split.members
    rx, ry, _ = mix_release(m.x.flatten(1), F.one_hot(m.y, m.num_classes).float(), mixture_degree=ell,
                            num_samples=num_samples, sigma=sigma, generator=torch.Generator().manual_seed(seed))
    release = Release(rx.view(num_samples, *m.input_shape), ry, "dpmix",
                      {"sigma": sigma, "mixture_degree": ell, "num_samples": num_samples})
    return TrainedModel(None, PrivacySpent.no_guarantee(), params={"num_records": len(m)}, release=release)


def _local(split, *, sigma: float) -> TrainedModel:
    m = split.members
    release = Release(perturb(m.x, sigma=sigma, generator=torch.Generator().manual_seed(1)), m.y, "local-gaussian",
                      {"sigma": sigma, "sensitivity": 2.0})
    return TrainedModel(None, PrivacySpent.no_guarantee(), release=release)


@pytest.mark.parametrize("name", ["dpmix-mia-corr", "dpmix-mia-lr"])
def test_dpmix_membership_is_perfect_without_noise_or_mixing(digits_split, name):
    # ℓ = 1, σ = 0: the release is the records themselves; T = 10·n, so every member is in it.
    res = _run(name, _dpmix(digits_split, ell=1, num_samples=3000, sigma=0.0), digits_split)
    assert _auc(res) > 0.99 and res.labels.sum() == len(res.labels) // 2 == 300


def test_dpmix_likelihood_ratio_uses_what_it_knows(digits_split):
    # ℓ = 2, σ = 0: knowing ℓ and σ, the likelihood ratio separates members almost perfectly; the
    # correlation attack, which knows neither, does much worse.
    target = _dpmix(digits_split, ell=2, num_samples=3000, sigma=0.0)
    lr, corr = (_auc(_run(n, target, digits_split)) for n in ("dpmix-mia-lr", "dpmix-mia-corr"))
    assert lr > 0.95 and lr > corr + 0.1


@pytest.mark.parametrize("name", ["dpmix-mia-corr", "dpmix-mia-lr"])
def test_dpmix_membership_is_chance_under_huge_noise(digits_split, name):
    res = _run(name, _dpmix(digits_split, ell=8, num_samples=2000, sigma=HUGE), digits_split)
    n1 = int(res.labels.sum())
    metrics = membership_metrics(res.scores, res.labels)
    assert abs(metrics["auc"] - 0.5) < 4 * _auc_null_sd(n1, len(res.labels) - n1)
    assert metrics["tpr_at_fpr"]["0.01"]["measurable"] is False  # 1% of 300 non-members < 10 events


def test_dpmix_membership_respects_max_candidates(digits_split):
    target = _dpmix(digits_split, ell=4, num_samples=500, sigma=0.1)
    res = _run("dpmix-mia-lr", target, digits_split, max_per_side=200, max_candidates=50)
    assert len(res.labels) == len(res.scores) == 100 and res.labels.sum() == 50
    # the run's cap alone: 200 members and 200 non-members
    assert len(_run("dpmix-mia-lr", target, digits_split, max_per_side=200).labels) == 400


def test_dpmix_reconstruction_zero_and_huge_noise(digits_split):
    exact = _run("dpmix-reconstruct", _dpmix(digits_split, ell=1, num_samples=300, sigma=0.0), digits_split).metrics
    assert exact["closer_to_member"] == 1.0 and exact["member_mse_ratio"] < 1e-6
    assert exact["nearest_member_ssim"] > 0.99
    res = _run("dpmix-reconstruct", _dpmix(digits_split, ell=8, num_samples=2000, sigma=HUGE), digits_split)
    # De-mixing pure noise returns the population mean: no nearer a member than a non-member.
    assert abs(res.metrics["member_mse_ratio"] - 1.0) < 0.1
    assert res.images.shape == (10, 8, 8) and res.metrics["n_reconstructions"] == 1000


def test_local_linkage_tiny_and_huge_noise(digits_split):
    tiny = _run("local-linkage", _local(digits_split, sigma=1e-3), digits_split).metrics
    assert tiny["linkage_accuracy"] > 0.99 and tiny["n_candidates"] == 600
    for use_labels in (False, True):
        m = _run("local-linkage", _local(digits_split, sigma=HUGE), digits_split, use_labels=use_labels).metrics
        hits, n = round(m["linkage_accuracy"] * m["n_queries"]), m["n_queries"]
        lower, upper = clopper_pearson(hits, n, confidence=0.999)
        assert lower <= m["chance"] <= upper, (m, lower, upper)
        if not use_labels:
            assert m["chance"] == pytest.approx(1 / m["n_candidates"])


def test_local_reconstruction_tiny_and_huge_noise(digits_split):
    tiny = _run("local-reconstruct", _local(digits_split, sigma=0.0), digits_split)
    assert tiny.metrics["ssim_to_source"] > 0.95 > tiny.metrics["prior_ssim_to_source"]
    huge = _run("local-reconstruct", _local(digits_split, sigma=HUGE), digits_split).metrics
    # Nothing is learnt from the image: the denoiser returns the class mean, which the label gives alone.
    assert huge["ssim_to_source"] == pytest.approx(huge["prior_ssim_to_source"], abs=0.01)
    assert tiny.images.shape == (10, 8, 8) and sorted(tiny.labels.tolist()) == list(range(10))


@pytest.mark.parametrize("name", ["dpmix-mia-corr", "dpmix-mia-lr", "dpmix-reconstruct", "local-linkage",
                                  "local-reconstruct"])
def test_release_attacks_apply_only_to_targets_with_their_release(digits_split, name):
    attack = _attack(name)
    own, other = _dpmix(digits_split, ell=2, num_samples=50, sigma=0.1), _local(digits_split, sigma=0.1)
    if name.startswith("local"):
        own, other = other, own
    assert attack.applies_to(own)
    assert not attack.applies_to(TrainedModel(None, PrivacySpent.no_guarantee()))  # no release at all
    assert not attack.applies_to(other)  # another mechanism's release
