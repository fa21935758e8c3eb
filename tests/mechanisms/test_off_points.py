"""Each mechanism's ε = ∞ point (``Mechanism.fit_privacy_off``) is its recipe with privacy turned off, on real
digits: DP-SGD without clipping or noise, local noise and DPMix without noise (labels in the clear), weight noise
at std 0 — the same weights as the mechanism run by hand with σ = 0, and ε = ∞ stated as such."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from bench.config.run import build_config
from bench.core.training import make_optimizer, seed_everything
from bench.core.types import PrivacySpent
from mechanisms import MECHANISMS
from mechanisms.base import Mechanism
from mechanisms.dpmix.mechanism import class_means_from_release
from mechanisms.dpmix.mixing import mix_release
from mechanisms.dpsgd.fast import fit_fast
from mechanisms.local.mechanism import L2Normalize

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py
CPU = torch.device("cpu")


def _spec(mechanism: str, **training):
    cfg = build_config({"training": {mechanism: training}} if training else {},
                       {"profile": "smoke", "mechanisms": mechanism})
    return cfg.spec_for(mechanism)


def _off(mechanism: str, data, spec, seed: int = 3):
    return MECHANISMS.get(mechanism)().fit_privacy_off(data, spec, delta=1e-5, seed=seed, device=CPU)


def _same(a: torch.nn.Module, b: torch.nn.Module, atol: float = 0.0) -> bool:
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(torch.allclose(sa[k].float(), sb[k].float(), atol=atol, rtol=0) for k in sa)


def test_dpsgd_off_point_is_sgd_on_poisson_batches_without_clipping_or_noise(digits_split):
    data = digits_split.members
    spec = _spec("dpsgd", epochs=3, params={"max_grad_norm": 0.1, "noise_multiplier": 2.0})  # both must be ignored
    trained = _off("dpsgd", data, spec)
    mech = MECHANISMS.get("dpsgd")()
    batches = -(-len(data) // spec.batch_size)

    def by_hand(clip: float):
        gen = seed_everything(3)
        model = mech.build(data.input_shape, data.num_classes, spec)
        fit_fast(model, make_optimizer(model.parameters(), spec), data, spec, mode="bk", noise_multiplier=0.0,
                 max_grad_norm=clip, generator=gen, device=CPU)
        return model

    assert _same(trained.model, by_hand(1e12), atol=1e-6)  # σ = 0 and a clipping norm no gradient reaches
    assert not _same(trained.model, by_hand(0.1), atol=1e-3)  # the recipe's clipping is really off
    assert trained.params["noise_multiplier"] == 0.0 and math.isinf(trained.params["max_grad_norm"])
    assert trained.params["steps"] == 3 * batches


def test_local_gaussian_off_point_learns_from_the_clean_members_and_true_labels(digits_split):
    data = digits_split.members
    spec = _spec("local-gaussian", model="linear", epochs=1, params={"learner": "class-means"})
    trained = _off("local-gaussian", data, spec)
    unit = L2Normalize()(data.x).flatten(1)
    assert torch.allclose(trained.release.x.flatten(1), unit, atol=0, rtol=0)  # no noise at all
    assert torch.equal(trained.release.y, data.y)  # labels in the clear: no randomized response
    means = torch.stack([unit[data.y == k].mean(0) for k in range(data.num_classes)])
    assert torch.allclose(trained.model[-1][-1].weight, means, atol=1e-6)
    assert trained.params["sigma"] == 0.0 and trained.params["label_epsilon"] is None


def test_dpmix_off_point_is_the_noiseless_release_and_its_class_means(digits_split):
    data = digits_split.members
    spec = _spec("dpmix", model="linear", epochs=1,
                 params={"mixture_degree": 4, "num_samples": 600, "learner": "class-means"})
    trained = _off("dpmix", data, spec)
    gen = seed_everything(3)  # as DPMix.fit draws its release: the same subsets, with σ = 0
    k = data.num_classes
    rx, ry, _ = mix_release(data.x.flatten(1), F.one_hot(data.y, k).float(), mixture_degree=4, num_samples=600,
                            sigma=0.0, sigma_y=0.0, generator=gen)
    assert torch.equal(trained.release.x.flatten(1), rx) and torch.equal(trained.release.y, ry)
    means, err = class_means_from_release(rx, ry, mixture_degree=4, num_records=len(data))
    assert torch.allclose(trained.model[-1].weight, means, atol=1e-6)
    assert trained.params["sigma"] == 0.0  # exactly the noiseless mixtures, no calibration at ε = ∞


def test_weight_noise_off_point_equals_the_mechanism_at_std_zero(digits_split):
    data = digits_split.members
    spec = _spec("weight-noise", epochs=2, params={"ae_epochs": 2})
    trained = _off("weight-noise", data, spec)
    zero = _spec("weight-noise", epochs=2, params={"ae_epochs": 2, "weight_noise_std": 0.0})
    by_hand = MECHANISMS.get("weight-noise")().fit(data, zero, target_epsilon=None, delta=1e-5, seed=3, device=CPU)
    assert _same(trained.model, by_hand.model)
    assert trained.params["weight_noise_std"] == 0.0


@pytest.mark.parametrize("mechanism", ["dpsgd", "dpmix", "local-gaussian", "weight-noise"])
def test_off_points_state_infinite_epsilon_never_no_guarantee(mechanism, digits_split):
    mech = MECHANISMS.get(mechanism)
    assert mech.needs_epsilon and mech.off_point
    trained = _off(mechanism, digits_split.members, _spec(mechanism, epochs=1))
    p = trained.privacy
    assert p.off and p.epsilon is None and p.guarantee == "none" and p.claimed_epsilon is None
    assert p.describe() == "ε = ∞ (privacy off)"
    assert mechanism in p.note and "privacy turned off" in p.note


def test_privacy_off_is_only_without_a_guarantee():
    with pytest.raises(ValueError, match="privacy turned off"):
        PrivacySpent(1.0, 1e-5, "x", "central-dp", relation="replace-one", off=True)
    with pytest.raises(ValueError, match="has no ε = ∞ point"):
        Mechanism().fit_privacy_off(None, None, delta=1e-5, seed=0, device=CPU)  # type: ignore[arg-type]
