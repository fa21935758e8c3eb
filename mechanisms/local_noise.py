"""Local DP by input perturbation: every image scaled to unit L2 norm and perturbed by the analytic
Gaussian mechanism before any training (the `local-gaussian` reference system, corrected)."""

from __future__ import annotations

import math
from typing import Any, ClassVar, Literal

import torch
from torch import nn

from bench.core.data import ArrayDataset
from bench.core.training import EpochCallback, fit_supervised, seed_everything
from bench.core.types import PrivacySpent, Release, TrainedModel, TrainSpec
from mechanisms.accounting import classic_gaussian_sigma, gaussian_epsilon, gaussian_sigma, privacy_profile
from mechanisms.base import ModelParams
from mechanisms.baseline import Baseline

# Replacing one person's unit-norm image by another moves it by up to ||a - b|| <= 2.
SENSITIVITY = 2.0


class L2Normalize(nn.Module):
    """``(N, C, H, W)`` -> each image divided by its L2 norm, times ``scale`` (a fixed public constant)."""

    def __init__(self, scale: float = 1.0) -> None:
        super().__init__()
        self.register_buffer("scale", torch.tensor(float(scale)))  # saved with the weights

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        flat = x.flatten(1)
        return (flat / flat.norm(dim=1, keepdim=True).clamp_min(1e-12) * self.scale).view_as(x)


def perturb(x: torch.Tensor, *, sigma: float, generator: torch.Generator) -> torch.Tensor:
    """The local release: ``(N, C, H, W)`` images -> unit-L2-norm images + N(0, σ²) on every pixel."""
    return L2Normalize()(x) + sigma * torch.randn(x.shape, generator=generator)



class LocalGaussianParams(ModelParams):
    """Local Gaussian noise's settings.

    Attributes:
        calibration: ``analytic`` (Balle & Wang 2018, sensitivity 2) or ``classic`` (the source's
            σ = √(2 ln(1.25/δ))/ε at "sensitivity 1", kept to reproduce it; ε is then what that σ really buys).
    """

    calibration: Literal["analytic", "classic"] = "analytic"


_CNN = {"model": "cnn-small", "optimizer": "sgd", "momentum": 0.9}


class LocalGaussian(Baseline):
    """Each person releases ``x/||x||₂ + N(0, σ² I)`` with σ from the analytic Gaussian mechanism
    (Balle & Wang, ICML 2018) at replace-one sensitivity 2: (ε, δ) local DP per image. The learner
    trains ``spec.model`` on the noisy images only, multiplied by the public constant
    s = 1/√(1/d + σ²) so that pixels have unit-order variance whatever σ; at test time real images get
    the same normalisation and the same s.

    Settings: ``LocalGaussianParams``; with ``calibration: classic`` the target is only ``claimed_epsilon``.
    The ε holds for the replace-one relation (one person's image replaced by any other)."""

    name = "local-gaussian"
    guarantee = "local-dp"
    needs_epsilon = True
    audits = frozenset({"release"})
    reference_epsilons = (150.0, 2000.0)  # the source system's own ε (README, "Presets")
    Params = LocalGaussianParams
    recipes: ClassVar[dict[str, dict[str, Any]]] = {
        "smoke": {"model": "mlp", "epochs": 20, "batch_size": 32, "lr": 0.02, "optimizer": "sgd", "momentum": 0.9},
        "default": {**_CNN, "epochs": 5, "batch_size": 64, "lr": 0.02},
        "full": {**_CNN, "epochs": 10, "batch_size": 64, "lr": 0.02},
    }

    def build(self, input_shape: tuple[int, ...], num_classes: int, spec: TrainSpec) -> nn.Module:
        return nn.Sequential(L2Normalize(), super().build(input_shape, num_classes, spec))

    def release(self, data: ArrayDataset, spec: TrainSpec, *, target_epsilon: float | None, delta: float,
                seed: int) -> tuple[Release, PrivacySpent]:
        """The local release of ``data`` alone (what each person publishes), as ``fit`` makes it with ``seed``; audits
        call it on their canaries. Raises ValueError for a target ε <= 0."""
        return self._release(data, spec, target_epsilon=target_epsilon, delta=delta, generator=seed_everything(seed))

    def _release(self, data: ArrayDataset, spec: TrainSpec, *, target_epsilon: float | None, delta: float,
                 generator: torch.Generator) -> tuple[Release, PrivacySpent]:
        if target_epsilon is None or target_epsilon <= 0:
            raise ValueError(f"local-gaussian needs a target epsilon > 0, got {target_epsilon}")
        if spec.params.calibration == "analytic":
            sigma = gaussian_sigma(epsilon=target_epsilon, delta=delta, sensitivity=SENSITIVITY)
        else:
            sigma = classic_gaussian_sigma(epsilon=target_epsilon, delta=delta)
        noisy = perturb(data.x, sigma=sigma, generator=generator)
        release = Release(noisy, data.y, "local-gaussian", {"sigma": sigma, "sensitivity": SENSITIVITY},
                          display="minmax")
        claimed = None if spec.params.calibration == "analytic" else target_epsilon
        note = "" if claimed is None else "source's σ: classic formula, sensitivity 1; ε is what it really buys"
        profile = privacy_profile(lambda d: gaussian_epsilon(sigma=sigma, delta=d, sensitivity=SENSITIVITY), delta)
        privacy = PrivacySpent(gaussian_epsilon(sigma=sigma, delta=delta, sensitivity=SENSITIVITY), delta,
                               "analytic-gaussian", "local-dp", claimed_epsilon=claimed, note=note,
                               relation="replace-one", profile=profile)
        return release, privacy

    def fit(self, train: ArrayDataset, spec: TrainSpec, *, target_epsilon: float | None, delta: float,
            seed: int, device: torch.device, on_epoch: EpochCallback | None = None) -> TrainedModel:
        gen = seed_everything(seed)
        release, privacy = self._release(train, spec, target_epsilon=target_epsilon, delta=delta, generator=gen)
        sigma = release.params["sigma"]
        model = self.build(train.input_shape, train.num_classes, spec)
        scale = 1.0 / math.sqrt(1.0 / math.prod(train.input_shape) + sigma**2)
        model[0].scale.fill_(scale)
        hist, seen, secs = fit_supervised(model[1], release.x * scale, train.y, spec, generator=gen,
                                          device=device, on_epoch=on_epoch)
        params = {"sigma": sigma, "sensitivity": SENSITIVITY,
                  "classic_sigma_sensitivity_1": classic_gaussian_sigma(epsilon=target_epsilon, delta=delta)}
        return TrainedModel(model, privacy, params=params, release=release, train_seconds=secs,
                            samples_per_s=seen / secs, history=hist)
