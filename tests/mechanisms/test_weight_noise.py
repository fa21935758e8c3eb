"""Tests for mechanisms.weight_noise: Gaussian noise on a trained autoencoder, no formal guarantee."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

import mechanisms.weight_noise as wn
from bench.core.training import evaluate
from mechanisms import MECHANISMS

CPU = torch.device("cpu")
EPS = 2.0
SPEC = wn.WeightNoise.spec(model="mlp", epochs=3, batch_size=32, lr=0.1, momentum=0.9, params={"ae_epochs": 3})


def _flat(module: nn.Module) -> torch.Tensor:
    return torch.cat([p.detach().flatten().clone() for p in module.parameters()])


@pytest.fixture(scope="module")
def recorded(digits_split):
    """Fit once at ε = 2 with ``add_weight_noise`` wrapped to record its arguments and the weights it changed."""
    calls = []
    original = wn.add_weight_noise

    def spy(module, *, std, generator):
        before = _flat(module)
        original(module, std=std, generator=generator)
        calls.append({"module": module, "std": std, "before": before, "after": _flat(module)})

    mp = pytest.MonkeyPatch()
    mp.setattr(wn, "add_weight_noise", spy)
    try:
        fit = MECHANISMS.get("weight-noise")().fit(digits_split.members, SPEC, target_epsilon=EPS, delta=1e-5,
                                                   seed=0, device=CPU)
    finally:
        mp.undo()
    return fit, calls


def test_no_guarantee_with_claimed_epsilon(recorded):
    fit, _ = recorded
    p = fit.privacy
    assert p.guarantee == "none"
    assert p.epsilon is None and p.delta is None
    assert p.claimed_epsilon == EPS
    assert p.describe() == "no guarantee"
    assert fit.params["weight_noise_std"] == pytest.approx(1 / EPS)


def test_noise_is_added_once_to_the_returned_autoencoder(recorded):
    fit, calls = recorded
    assert len(calls) == 1
    call = calls[0]
    assert call["module"] is fit.model.autoencoder
    assert call["std"] == pytest.approx(1 / EPS)  # "std = sensitivity/ε" with sensitivity 1
    # the added perturbation really has std 1/ε: P = 64·64 + 64 + 64·64 + 64 = 8,320 i.i.d. N(0, σ²) values,
    # sample std relative error 1/sqrt(2P) ≈ 0.8 %, mean error σ/sqrt(P); 5-std bands.
    diff = (call["after"] - call["before"]).double()
    p = diff.numel()
    assert p == sum(q.numel() for q in fit.model.autoencoder.parameters())
    assert float(diff.std()) == pytest.approx(1 / EPS, rel=5 / math.sqrt(2 * p))
    assert abs(float(diff.mean())) < 5 * (1 / EPS) / math.sqrt(p)
    # the noise stays on the released model: the autoencoder is not retrained afterwards
    assert torch.equal(_flat(fit.model.autoencoder), call["after"])


def test_add_weight_noise_on_zero_linear():
    layer = nn.Linear(100, 80)
    nn.init.zeros_(layer.weight)
    nn.init.zeros_(layer.bias)
    std = 0.37
    wn.add_weight_noise(layer, std=std, generator=torch.Generator().manual_seed(0))
    w = layer.weight.detach().double().flatten()
    b = layer.bias.detach().double()
    # 8,000 weights: relative std error of the sample std ≈ 1/sqrt(16,000) ≈ 0.8 %; 5-std band.
    assert float(w.std()) == pytest.approx(std, rel=5 / math.sqrt(2 * w.numel()))
    assert abs(float(w.mean())) < 5 * std / math.sqrt(w.numel())
    # the 80 biases get noise too (rel. std error ≈ 8 %, 5-std band)
    assert float(b.std()) == pytest.approx(std, rel=5 / math.sqrt(2 * b.numel()))
    assert layer.weight.is_leaf and layer.weight.requires_grad  # in place under no_grad: still a parameter
    # same generator seed -> the same noise; another seed -> different noise
    again = nn.Linear(100, 80)
    nn.init.zeros_(again.weight)
    nn.init.zeros_(again.bias)
    wn.add_weight_noise(again, std=std, generator=torch.Generator().manual_seed(0))
    assert torch.equal(again.weight, layer.weight)
    other = nn.Linear(100, 80)
    nn.init.zeros_(other.weight)
    wn.add_weight_noise(other, std=std, generator=torch.Generator().manual_seed(1))
    assert not torch.equal(other.weight, layer.weight)


def test_output_shape_and_utility(recorded, digits_split):
    fit, _ = recorded
    fit.model.eval()
    with torch.no_grad():
        out = fit.model(digits_split.test.x[:11])
    assert out.shape == (11, 10)
    assert torch.isfinite(out).all()
    # the model is trained on real labels (of noisy reconstructions): it is at least above chance (0.1;
    # std ≈ 0.015 on 397 test images), the attacks judge its privacy.
    acc = evaluate(fit.model, digits_split.test.x, digits_split.test.y, device=CPU)["accuracy"]
    assert acc > 0.2


@pytest.mark.parametrize("bad", [0.0, -3.0, None])
def test_rejects_non_positive_target(digits_split, bad):
    with pytest.raises(ValueError):
        MECHANISMS.get("weight-noise")().fit(digits_split.members, SPEC, target_epsilon=bad, delta=1e-5, seed=0,
                                             device=CPU)
