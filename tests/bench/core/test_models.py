"""The registered architectures that carry more than layer shapes: ScatterNet's fixed front end."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from bench.core.models import FrozenFront, build_model
from bench.core.scatternet import Scattering


def test_scatternet_linear_shapes_and_what_it_trains():
    """Tramèr & Boneh's ScatterNet + linear on 28×28: 81 × 7 × 7 scattering features, a linear head of
    3,969 · 10 + 10 = 39,700 parameters, and nothing trainable before it."""
    model = build_model("scatternet-linear", (1, 28, 28), 10)
    assert isinstance(model, FrozenFront)
    assert model.front[0].out_shape == (81, 7, 7)  # scattering, then the fixed GroupNorm and flattening
    assert sum(p.numel() for p in model.parameters() if p.requires_grad) == 81 * 7 * 7 * 10 + 10
    assert not list(model.front.parameters())
    x = torch.rand(5, 1, 28, 28)
    assert model(x).shape == (5, 10)
    torch.testing.assert_close(model.features(x, torch.device("cpu"), batch_size=2), model.front(x))


def test_bad_shapes_and_trainable_fronts_are_rejected():
    with pytest.raises(ValueError, match="divisible by 4"):
        Scattering((1, 30, 30))
    with pytest.raises(ValueError, match="must divide"):
        build_model("scatternet-linear", (1, 28, 28), 10, groups=10)
    with pytest.raises(ValueError, match="trainable"):
        FrozenFront(nn.Linear(2, 2), nn.Linear(2, 2))


def test_scatternet_passes_input_gradients_for_model_inversion():
    """MI-Face ascends the logits' gradient w.r.t. the image: the fixed front must not cut it."""
    model = build_model("scatternet-linear", (1, 28, 28), 10)
    x = torch.rand(2, 1, 28, 28, requires_grad=True)
    model(x)[:, 3].sum().backward()
    assert x.grad is not None and x.grad.abs().sum() > 0


def test_scattering_features_are_computed_once_per_image():
    """The CPU feature cache gives exactly the transform's features, for any batching of the same images, and a
    second pass computes nothing; an input that needs a gradient (model inversion) bypasses it."""
    from unittest import mock

    from bench.core.models import build_model

    torch.manual_seed(0)
    model = build_model("scatternet-linear", (1, 28, 28), 10)
    x = torch.rand(12, 1, 28, 28)
    scattering = model.front[0]
    direct = scattering.transform(x).reshape(12, *scattering.out_shape)
    with torch.no_grad():
        assert torch.equal(scattering(x[:5]), direct[:5])
        with mock.patch.object(scattering.transform, "forward", side_effect=AssertionError("recomputed")):
            assert torch.equal(scattering(x[2:5]), direct[2:5])  # seen: from the cache
        assert torch.equal(scattering(x), direct)  # 7 new images computed, 5 from the cache
    leaf = x[:2].clone().requires_grad_(True)
    model(leaf).sum().backward()
    assert leaf.grad is not None and leaf.grad.abs().sum() > 0
