"""Non-private training: the utility ceiling and the attacks' easiest target."""

from __future__ import annotations

import torch
from torch import nn

from bench.core.data import ArrayDataset
from bench.core.models import build_model
from bench.core.training import EpochCallback, TensorBatches, make_optimizer, seed_everything, train_loop
from bench.core.types import PrivacySpent, TrainedModel, TrainSpec


def fit_supervised(
    model: nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    spec: TrainSpec,
    *,
    generator: torch.Generator,
    device: torch.device,
    loss_fn=None,
    scheduler_step: int | None = None,
    on_epoch: EpochCallback | None = None,
) -> tuple[list[float], int, float]:
    """Non-private mini-batch training of ``model`` on ``(x, y)``; shared by every mechanism that
    trains an ordinary model (on real, released or perturbed data).

    Args:
        x: ``(N, ...)`` inputs; y: ``(N,)`` class indices or ``(N, K)`` soft labels (then pass
            ``loss_fn=soft_cross_entropy``). scheduler_step: halve the learning rate every that many epochs.

    Returns:
        (per-epoch loss, examples processed, seconds) from ``bench.core.training.train_loop``.
    """
    model.to(device)
    opt = make_optimizer(model.parameters(), spec)
    sched = torch.optim.lr_scheduler.StepLR(opt, scheduler_step, 0.5) if scheduler_step else None
    kwargs = {"loss_fn": loss_fn} if loss_fn is not None else {}
    return train_loop(
        model, opt, TensorBatches(x, y, spec.batch_size, generator),
        epochs=spec.epochs, device=device, scheduler=sched, on_epoch=on_epoch, **kwargs,
    )



class Baseline:
    """Ordinary (non-private) training of ``spec.model``; guarantee "none"."""

    name = "baseline"
    guarantee = "none"
    needs_epsilon = False
    reference_epsilons: tuple[float, ...] = ()

    def build(self, input_shape: tuple[int, ...], num_classes: int, spec: TrainSpec) -> nn.Module:
        return build_model(spec.model, input_shape, num_classes, **spec.params.get("model_kwargs", {}))

    def fit(self, train: ArrayDataset, spec: TrainSpec, *, target_epsilon: float | None, delta: float,
            seed: int, device: torch.device, on_epoch: EpochCallback | None = None) -> TrainedModel:
        gen = seed_everything(seed)
        model = self.build(train.input_shape, train.num_classes, spec)
        hist, seen, secs = fit_supervised(model, train.x, train.y, spec, generator=gen, device=device,
                                          on_epoch=on_epoch)
        return self.trained_model(model, history=hist, seen=seen, seconds=secs)

    @staticmethod
    def trained_model(model: nn.Module, *, history: list[float], seen: int, seconds: float) -> TrainedModel:
        """What ``fit`` returns for ``model`` after training: no guarantee; ``seen`` examples in ``seconds`` (s)
        (also used by ``bench.runner.ensemble.fit_ensemble`` for models trained as one ensemble)."""
        return TrainedModel(model, PrivacySpent.no_guarantee(note="non-private baseline"),
                            train_seconds=seconds, samples_per_s=seen / seconds, history=history)
