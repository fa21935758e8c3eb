"""Attacks on released data: near-perfect without noise, chance under huge noise, not applicable without their
release."""

from __future__ import annotations

import pytest
import torch
from helpers import dpmix_target, run_attack

from attacks import ATTACKS
from attacks.analysis.statistics.confidence import clopper_pearson
from bench.core.types import PrivacySpent, Release, TrainedModel
from mechanisms.local.mechanism import perturb

HUGE = 1e3


def _local(split, *, sigma: float) -> TrainedModel:
    m = split.members
    release = Release(perturb(m.x, sigma=sigma, generator=torch.Generator().manual_seed(1)), m.y, "local-gaussian",
                      {"sigma": sigma, "sensitivity": 2.0})
    return TrainedModel(None, PrivacySpent.no_guarantee(), release=release)


def test_dpmix_reconstruction_zero_and_huge_noise(digits_split):
    exact = run_attack("dpmix-reconstruct", dpmix_target(digits_split, ell=1, num_samples=300, sigma=0.0),
                       digits_split).metrics
    assert exact["closer_to_member"] == 1.0 and exact["member_mse_ratio"] < 1e-6
    assert exact["nearest_member_ssim"] > 0.99
    res = run_attack("dpmix-reconstruct", dpmix_target(digits_split, ell=8, num_samples=2000, sigma=HUGE), digits_split)
    # De-mixing pure noise returns the population mean: no nearer a member than a non-member.
    assert abs(res.metrics["member_mse_ratio"] - 1.0) < 0.1
    assert res.images.shape == (10, 8, 8) and res.metrics["n_reconstructions"] == 1000


def test_local_linkage_tiny_and_huge_noise(digits_split):
    tiny = run_attack("local-linkage", _local(digits_split, sigma=1e-3), digits_split).metrics
    assert tiny["linkage_accuracy"] > 0.99 and tiny["n_candidates"] == 600
    for use_labels in (False, True):
        m = run_attack("local-linkage", _local(digits_split, sigma=HUGE), digits_split, use_labels=use_labels).metrics
        hits, n = round(m["linkage_accuracy"] * m["n_queries"]), m["n_queries"]
        lower, upper = clopper_pearson(hits, n, confidence=0.999)
        assert lower <= m["chance"] <= upper, (m, lower, upper)
        if not use_labels:
            assert m["chance"] == pytest.approx(1 / m["n_candidates"])


def test_local_reconstruction_tiny_and_huge_noise(digits_split):
    tiny = run_attack("local-reconstruct", _local(digits_split, sigma=0.0), digits_split)
    assert tiny.metrics["ssim_to_source"] > 0.95 > tiny.metrics["prior_ssim_to_source"]
    huge = run_attack("local-reconstruct", _local(digits_split, sigma=HUGE), digits_split).metrics
    # Nothing is learnt from the image: the denoiser returns the class mean, which the label gives alone.
    assert huge["ssim_to_source"] == pytest.approx(huge["prior_ssim_to_source"], abs=0.01)
    assert tiny.images.shape == (10, 8, 8) and sorted(tiny.labels.tolist()) == list(range(10))


@pytest.mark.parametrize("name", ["dpmix-reconstruct", "local-linkage", "local-reconstruct"])
def test_release_attacks_apply_only_to_targets_with_their_release(digits_split, name):
    attack = ATTACKS.get(name)(ATTACKS.get(name).Params())
    own, other = dpmix_target(digits_split, ell=2, num_samples=50, sigma=0.1), _local(digits_split, sigma=0.1)
    if name.startswith("local"):
        own, other = other, own
    assert attack.applies_to(own)
    assert not attack.applies_to(TrainedModel(None, PrivacySpent.no_guarantee()))  # no release at all
    assert not attack.applies_to(other)  # another mechanism's release
