"""Membership attacks on a DPMix release: near-perfect without noise or mixing, chance under huge noise, the
likelihood ratio ahead of the correlation, the candidate cap, and only on a DPMix release."""

from __future__ import annotations

import math

import pytest
from helpers import dpmix_target, run_attack

from attacks import ATTACKS
from attacks.analysis.statistics.metrics import membership_metrics
from bench.core.types import PrivacySpent, Release, TrainedModel

HUGE = 1e3


def _auc(res) -> float:
    return membership_metrics(res.scores, res.labels)["auc"]


def _auc_null_sd(n1: int, n0: int) -> float:
    """Standard deviation of the AUC (Mann-Whitney U / n1·n0) of uninformative scores."""
    return math.sqrt((n1 + n0 + 1) / (12 * n1 * n0))


@pytest.mark.parametrize("name", ["dpmix-mia-corr", "dpmix-mia-lr"])
def test_dpmix_membership_is_perfect_without_noise_or_mixing(digits_split, name):
    # ℓ = 1, σ = 0: the release is the records themselves; T = 10·n, so every member is in it.
    res = run_attack(name, dpmix_target(digits_split, ell=1, num_samples=3000, sigma=0.0), digits_split)
    assert _auc(res) > 0.99 and res.labels.sum() == len(res.labels) // 2 == 300


def test_dpmix_likelihood_ratio_uses_what_it_knows(digits_split):
    # ℓ = 2, σ = 0: knowing ℓ and σ, the likelihood ratio separates members almost perfectly; the
    # correlation attack, which knows neither, does much worse.
    target = dpmix_target(digits_split, ell=2, num_samples=3000, sigma=0.0)
    lr, corr = (_auc(run_attack(n, target, digits_split)) for n in ("dpmix-mia-lr", "dpmix-mia-corr"))
    assert lr > 0.95 and lr > corr + 0.1


@pytest.mark.parametrize("name", ["dpmix-mia-corr", "dpmix-mia-lr"])
def test_dpmix_membership_is_chance_under_huge_noise(digits_split, name):
    res = run_attack(name, dpmix_target(digits_split, ell=8, num_samples=2000, sigma=HUGE), digits_split)
    n1 = int(res.labels.sum())
    metrics = membership_metrics(res.scores, res.labels)
    assert abs(metrics["auc"] - 0.5) < 4 * _auc_null_sd(n1, len(res.labels) - n1)
    assert metrics["tpr_at_fpr"]["0.01"]["measurable"] is False  # 1% of 300 non-members < 10 events


def test_dpmix_membership_respects_max_candidates(digits_split):
    target = dpmix_target(digits_split, ell=4, num_samples=500, sigma=0.1)
    res = run_attack("dpmix-mia-lr", target, digits_split, max_per_side=200, max_candidates=50)
    assert len(res.labels) == len(res.scores) == 100 and res.labels.sum() == 50
    # the run's cap alone: 200 members and 200 non-members
    assert len(run_attack("dpmix-mia-lr", target, digits_split, max_per_side=200).labels) == 400


@pytest.mark.parametrize("name", ["dpmix-mia-corr", "dpmix-mia-lr"])
def test_release_membership_applies_only_to_a_dpmix_release(digits_split, name):
    attack = ATTACKS.get(name)(ATTACKS.get(name).Params())
    assert attack.applies_to(dpmix_target(digits_split, ell=2, num_samples=50, sigma=0.1))
    assert not attack.applies_to(TrainedModel(None, PrivacySpent.no_guarantee()))  # no release at all
    m = digits_split.members
    local = Release(m.x, m.y, "local-gaussian", {"sigma": 0.1, "sensitivity": 2.0})
    assert not attack.applies_to(TrainedModel(None, PrivacySpent.no_guarantee(), release=local))  # another release
