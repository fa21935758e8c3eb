"""Naive output perturbation: Gaussian noise on a trained autoencoder's weights (the `weight-noise` reference system).

There is no accountant for it: it reports "no guarantee" and the attacks judge it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from pydantic import Field
from torch import nn

from bench.core.data import ArrayDataset
from bench.core.models import build_model
from bench.core.training import EpochCallback, fit_supervised, seed_everything
from bench.core.types import PrivacySpent, TrainedModel, TrainSpec
from mechanisms.base import ModelParams
from mechanisms.baseline import Baseline


class ReconstructThenClassify(nn.Module):
    """``(N, C, H, W)`` -> autoencoder reconstruction ``(N, C·H·W)`` -> classifier logits ``(N, K)``.

    Args:
        autoencoder: images ``(N, C, H, W)`` -> reconstructions ``(N, C·H·W)``.
        classifier: reconstructions ``(N, C·H·W)`` -> logits ``(N, K)``.
    """

    def __init__(self, autoencoder: nn.Module, classifier: nn.Module) -> None:
        super().__init__()
        self.autoencoder, self.classifier = autoencoder, classifier

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``(N, K)`` logits of the reconstruction of images ``x (N, C, H, W)``."""
        return self.classifier(self.autoencoder(x))


@torch.no_grad()
def add_weight_noise(module: nn.Module, *, std: float, generator: torch.Generator) -> None:
    """Add N(0, std²) to every parameter of ``module`` in place (the source's output perturbation; no accountant)."""
    for p in module.parameters():
        p.add_(std * torch.randn(p.shape, generator=generator).to(p.device))



class WeightNoiseParams(ModelParams):
    """Weight noise's settings (``model_kwargs`` go to the classifier ``spec.model``).

    Attributes:
        ae_epochs: autoencoder epochs (None: ``spec.epochs``).
        ae_lr: its Adam learning rate (> 0).
        code: the autoencoder's code width (>= 1).
        weight_noise_std: an explicit noise std (>= 0) instead of 1/ε; 0 gives the source's clean reference.
        classifier_before_noise: train the classifier on the clean autoencoder's reconstructions, then add the
            noise (one classifier measured before and after the noise).
    """

    ae_epochs: int | None = Field(None, ge=1)
    ae_lr: float = Field(1e-3, gt=0)
    code: int = Field(64, ge=1)
    weight_noise_std: float | None = Field(None, ge=0)
    classifier_before_noise: bool = False


@dataclass(frozen=True)
class CleanWeights:
    """An audit request: train exactly as ``fit`` does but add no weight noise.

    An audit request: train the autoencoder exactly as ``fit`` does but add no weight noise (and skip the
    classifier), so the auditor holds the clean weights the noise is added to; ``TrainedModel.audit`` records
    ``{"weight_noise_std"}``, the std the mechanism would have added.
    """


_MLP = {"model": "mlp", "batch_size": 64, "lr": 0.05, "optimizer": "sgd", "momentum": 0.9}


class WeightNoise(Baseline):
    """Train a dense autoencoder (784→64→784, MSE, Adam).

    Add Gaussian noise of std = 1/ε to every weight and bias ("std = sensitivity/ε" with sensitivity 1, as the source
    claimed), then train a dense classifier (``spec.model``, default ``mlp``) on the noisy autoencoder's reconstructions
    of the members. The target ε is only the source's *claimed* ε: the guarantee is "none".

    Settings: ``WeightNoiseParams``.
    """

    name = "weight-noise"
    guarantee = "none"
    needs_epsilon = True
    reference_epsilons = (10.0,)  # the source system's own ε (docs/guides/presets.md)
    audits = frozenset({"clean-weights"})
    off_point = "no weight noise (std 1/ε = 0)"
    Params = WeightNoiseParams
    recipes: ClassVar[dict[str, dict[str, Any]]] = {
        "smoke": {**_MLP, "epochs": 30, "batch_size": 32, "params": {"code": 32, "ae_lr": 3e-3}},
        "default": {**_MLP, "epochs": 8, "params": {"ae_epochs": 8}},
        "full": {**_MLP, "epochs": 20, "params": {"ae_epochs": 20}},
    }

    def build(self, input_shape: tuple[int, ...], num_classes: int, spec: TrainSpec) -> nn.Module:
        """The untrained ``ReconstructThenClassify`` (autoencoder of width ``params.code``, then ``spec.model``)."""
        ae = build_model("autoencoder", input_shape, 0, code=spec.params.code)
        flat = (math.prod(input_shape),)
        return ReconstructThenClassify(ae, build_model(spec.model, flat, num_classes, **spec.params.model_kwargs))

    def fit(self, train: ArrayDataset, spec: TrainSpec, *, target_epsilon: float | None, delta: float,
            seed: int, device: torch.device, on_epoch: EpochCallback | None = None,
            audit: CleanWeights | None = None) -> TrainedModel:
        """Train the autoencoder, add its weight noise, train the classifier (``WeightNoise``).

        With ``audit`` (``CleanWeights``) no noise is added and only the autoencoder is trained (what the audit reads).

        Args:
            train: the members, images ``(N, C, H, W)`` in [0, 1] and labels ``(N,)``.
            spec: the training settings (``spec.params`` an instance of ``Params``).
            target_epsilon: the source's claimed ε (noise std 1/ε unless ``params.weight_noise_std``).
            delta: δ.
            seed: seeds every draw.
            device: where to train.
            on_epoch: the progress callback.
            audit: a ``CleanWeights`` request, or None.

        Returns:
            The ``TrainedModel`` (samples/s over both trainings) with "no guarantee" and the claimed ε.

        Raises:
            ValueError: neither a claimed target ε > 0 nor ``params.weight_noise_std``.
        """
        p = spec.params
        std = p.weight_noise_std
        if std is None and (target_epsilon is None or target_epsilon <= 0):
            raise ValueError(f"weight-noise needs a (claimed) target epsilon > 0, got {target_epsilon}")
        std = 1.0 / target_epsilon if std is None else float(std)
        gen = seed_everything(seed)
        model = self.build(train.input_shape, train.num_classes, spec).to(device)
        ae_spec = TrainSpec(model="autoencoder", epochs=p.ae_epochs or spec.epochs, batch_size=spec.batch_size,
                            lr=p.ae_lr, optimizer="adam")
        flat = train.x.flatten(1)
        ae_hist, ae_seen, ae_secs = fit_supervised(model.autoencoder, train.x, flat, ae_spec, generator=gen,
                                                   device=device, loss_fn=F.mse_loss)
        before, noise = p.classifier_before_noise, std if audit is None else 0.0
        if noise > 0 and not before:
            add_weight_noise(model.autoencoder, std=noise, generator=gen)
        model.autoencoder.eval()
        hist, seen, secs = [], 0, 0.0  # an audit run reads only the autoencoder: its classifier stays untrained
        if audit is None:
            with torch.no_grad():
                recon = torch.cat([model.autoencoder(train.x[i : i + 4096].to(device)).cpu()
                                   for i in range(0, len(train), 4096)])
            hist, seen, secs = fit_supervised(model.classifier, recon, train.y, spec, generator=gen,
                                              device=device, on_epoch=on_epoch, released=model)
        if noise > 0 and before:
            add_weight_noise(model.autoencoder, std=noise, generator=gen)
        privacy = PrivacySpent.no_guarantee(
            claimed_epsilon=target_epsilon,
            note=f"Gaussian noise std {std:.3g} on autoencoder weights; no accountant exists")
        params = {"weight_noise_std": std, "autoencoder_final_mse": ae_hist[-1] if ae_hist else None}
        total = ae_secs + secs
        return TrainedModel(model, privacy, params=params, train_seconds=total,
                            samples_per_s=(ae_seen + seen) / total, history=hist,
                            audit=None if audit is None else {"weight_noise_std": std})
