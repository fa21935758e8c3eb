"""Non-private training: the utility ceiling and the attacks' easiest target."""

from __future__ import annotations

from typing import Any, ClassVar

import torch
from torch import nn

from bench.core.data import ArrayDataset
from bench.core.training import EpochCallback, fit_supervised, seed_everything
from bench.core.types import PrivacySpent, TrainedModel, TrainSpec
from mechanisms.base import Mechanism

_CNN = {"model": "cnn-small", "optimizer": "sgd", "momentum": 0.9}


class Baseline(Mechanism):
    """Ordinary (non-private) training of ``spec.model``; guarantee "none"."""

    name = "baseline"
    guarantee = "none"
    needs_epsilon = False
    # the recipes built on this class add noise to it; with none (target ε = ∞) each is its own non-private point.
    # Those that do more (DP-SGD clips) say so; the baseline itself never gets an ε = ∞ cell (needs_epsilon False)
    off_point = "no noise"
    recipes: ClassVar[dict[str, dict[str, Any]]] = {
        "smoke": {"model": "mlp", "epochs": 30, "batch_size": 32, "lr": 0.05, "optimizer": "sgd", "momentum": 0.9},
        "default": {**_CNN, "epochs": 8, "batch_size": 64, "lr": 0.05},
        "full": {**_CNN, "epochs": 10, "batch_size": 64, "lr": 0.05},
    }

    def fit(self, train: ArrayDataset, spec: TrainSpec, *, target_epsilon: float | None, delta: float,
            seed: int, device: torch.device, on_epoch: EpochCallback | None = None) -> TrainedModel:
        """``Mechanism.fit`` without privacy: ``spec.model`` trained on ``train`` (``target_epsilon`` unused); ε = ∞."""
        gen = seed_everything(seed)
        model = self.build(train.input_shape, train.num_classes, spec)
        hist, seen, secs = fit_supervised(model, train.x, train.y, spec, generator=gen, device=device,
                                          on_epoch=on_epoch)
        return self.trained_model(model, history=hist, seen=seen, seconds=secs)

    @staticmethod
    def trained_model(model: nn.Module, *, history: list[float], seen: int, seconds: float) -> TrainedModel:
        """``fit``'s ``TrainedModel``: ε = ∞, throughput ``seen``/``seconds`` samples/s, ``history`` (loss, nats)."""
        return TrainedModel(model, PrivacySpent.privacy_off(note="non-private baseline"),
                            train_seconds=seconds, samples_per_s=seen / seconds, history=history)
