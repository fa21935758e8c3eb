"""Seeding and the shared training loop.

Its per-epoch records live in ``bench.core.epochs`` (the two a loop calls, ``current_recorder`` and ``record_epoch``,
imported here), evaluation and per-example losses in ``bench.core.evaluation`` (re-exported here).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from bench.core.epochs import batch_correct, current_recorder, record_epoch
from bench.core.evaluation import evaluate as evaluate
from bench.core.evaluation import logit_confidence as logit_confidence
from bench.core.evaluation import per_example_loss as per_example_loss
from bench.core.evaluation import predict_logits as predict_logits
from bench.core.evaluation import stable_cross_entropy as stable_cross_entropy

if TYPE_CHECKING:  # pragma: no cover
    from bench.core.types import TrainSpec

EpochCallback = Callable[[int, int, float], None]
"""``on_epoch(epoch, epochs, mean_loss)``, called after every epoch (progress bars)."""


class TrainingDiverged(RuntimeError):
    """The training loss became NaN or infinite."""


def seed_everything(seed: int) -> torch.Generator:
    """Seed Python, NumPy (``seed`` mod 2^32) and torch; return a fresh CPU generator seeded with ``seed``."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
    return torch.Generator().manual_seed(seed)


class TensorBatches:
    """Shuffled mini-batches of in-memory tensors; re-iterable, one permutation per epoch.

    Args:
        x: ``(N, ...)`` inputs.
        y: ``(N, ...)`` targets.
        batch_size: rows per batch.
        generator: seeded CPU generator that draws the permutations.
    """

    def __init__(self, x: torch.Tensor, y: torch.Tensor, batch_size: int, generator: torch.Generator):
        self.x, self.y, self.batch_size, self.generator = x, y, batch_size, generator

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        perm = torch.randperm(len(self.x), generator=self.generator)
        for i in range(0, len(perm), self.batch_size):
            idx = perm[i : i + self.batch_size]
            yield self.x[idx], self.y[idx]

    def __len__(self) -> int:
        return -(-len(self.x) // self.batch_size)


def make_optimizer(params: Iterable[nn.Parameter], spec: TrainSpec) -> torch.optim.Optimizer:
    """SGD (with ``spec.momentum``) or Adam at ``spec.lr``, as ``spec.optimizer`` names; ValueError for another."""
    if spec.optimizer == "sgd":
        return torch.optim.SGD(params, lr=spec.lr, momentum=spec.momentum)
    if spec.optimizer == "adam":
        return torch.optim.Adam(params, lr=spec.lr)
    raise ValueError(f"optimizer {spec.optimizer!r} not in ('sgd', 'adam')")


def soft_cross_entropy(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Batch-mean KL(target ‖ softmax(logits)) in nats; ``logits`` and soft labels ``target`` both ``(B, K)``."""
    return F.kl_div(F.log_softmax(logits, dim=1), target, reduction="batchmean")


def train_loop(model: nn.Module, optimizer: torch.optim.Optimizer, batches: Iterable[tuple[torch.Tensor, torch.Tensor]],
               *, epochs: int, device: torch.device,
               loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] = F.cross_entropy,
               scheduler: torch.optim.lr_scheduler.LRScheduler | None = None, on_epoch: EpochCallback | None = None,
               released: nn.Module | None = None) -> tuple[list[float], int, float]:
    """Train ``model`` for ``epochs`` passes over ``batches``.

    Args:
        model: the model to train (in place).
        optimizer: its optimizer.
        batches: re-iterable ``(inputs (B, ...), targets)`` batches, one pass per epoch; an empty batch is a step.
        epochs: passes over ``batches``.
        device: where the model is; each batch is moved there.
        loss_fn: ``loss_fn(outputs, targets)``, a scalar (default: cross-entropy, nats).
        scheduler: stepped after every epoch, or None.
        on_epoch: called after every epoch (``EpochCallback``), or None.
        released: the model that is released, mapping raw images to logits, when it is not ``model`` itself (e.g.
            local noise: the input normalisation followed by ``model``); an active ``EpochRecorder`` evaluates it
            on its probe set after every epoch.

    Returns:
        (per-epoch mean loss, number of examples processed, wall seconds).

    Raises:
        TrainingDiverged: when a batch loss is NaN or infinite.
    """
    model.train()
    history: list[float] = []
    seen = 0
    recorder = current_recorder()
    records = None if recorder is None else recorder.start()
    start = time.perf_counter()
    for epoch in range(epochs):
        total, count, correct = 0.0, 0, 0
        for xb, yb in batches:
            xb, yb = xb.to(device, non_blocking=True), yb.to(device, non_blocking=True)
            optimizer.zero_grad(set_to_none=True)
            out = model(xb)
            # an empty Poisson batch is still a step (zero loss): Opacus' optimizer adds its noise, its accountant
            # counts it, and the update is as observable as any other
            loss = loss_fn(out, yb) if len(xb) else out.sum()
            if not torch.isfinite(loss):
                raise TrainingDiverged(f"training loss became {loss.item()} in epoch {epoch + 1}")
            loss.backward()
            optimizer.step()
            total += loss.item() * len(xb)
            count += len(xb)
            if records is not None and correct is not None:
                hit = batch_correct(out, yb)
                correct = None if hit is None else correct + hit
        seen += count
        history.append(total / max(count, 1))
        record_epoch(records, recorder, epoch=epoch + 1, loss=history[-1], correct=correct, count=count,
                     model=released if released is not None else model, device=device)
        if scheduler is not None:
            scheduler.step()
        if on_epoch is not None:
            on_epoch(epoch + 1, epochs, history[-1])
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return history, seen, time.perf_counter() - start


def fit_supervised(model: nn.Module, x: torch.Tensor, y: torch.Tensor, spec: TrainSpec, *, generator: torch.Generator,
                   device: torch.device, loss_fn=None, scheduler_step: int | None = None,
                   on_epoch: EpochCallback | None = None, released: nn.Module | None = None
                   ) -> tuple[list[float], int, float]:
    """Non-private ``train_loop`` of ``model`` on ``(x, y)`` with ``spec``'s optimizer, batch size and epochs.

    ``y``: ``(N,)`` class indices, or ``(N, K)`` soft labels with ``loss_fn=soft_cross_entropy``; ``generator`` draws
    the batch order; ``scheduler_step`` halves the learning rate every that many epochs; the rest as ``train_loop``.
    """
    model.to(device)
    opt = make_optimizer(model.parameters(), spec)
    sched = torch.optim.lr_scheduler.StepLR(opt, scheduler_step, 0.5) if scheduler_step else None
    kwargs = {"loss_fn": loss_fn} if loss_fn is not None else {}
    return train_loop(model, opt, TensorBatches(x, y, spec.batch_size, generator), epochs=spec.epochs, device=device,
                      scheduler=sched, on_epoch=on_epoch, released=released, **kwargs)
