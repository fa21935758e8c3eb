"""Seeding, the shared training loop and its per-epoch records; evaluation and per-example losses live in
``bench.core.evaluation`` (re-exported here)."""

from __future__ import annotations

import contextlib
import contextvars
import random
import time
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from bench.core.evaluation import evaluate as evaluate
from bench.core.evaluation import logit_confidence as logit_confidence
from bench.core.evaluation import per_example_loss as per_example_loss
from bench.core.evaluation import predict_logits
from bench.core.evaluation import stable_cross_entropy as stable_cross_entropy

if TYPE_CHECKING:  # pragma: no cover
    from bench.core.types import TrainSpec

EpochCallback = Callable[[int, int, float], None]
"""``on_epoch(epoch, epochs, mean_loss)``, called after every epoch (progress bars)."""


class TrainingDiverged(RuntimeError):
    """The training loss became NaN or infinite."""


PROBE_MAX = 2000
"""At most this many held-out images are evaluated at the end of every epoch (``EpochRecorder``): cheap next to an
epoch of training (one forward pass in eval mode, no gradient)."""


class EpochRecorder:
    """Per-epoch records of training runs: for every loop (``train_loop``, ``mechanisms.dpsgd.fast.train_fast``) the
    mean training loss and training accuracy of each epoch, and, with a probe set, the test loss and accuracy of the
    released model at the end of each epoch.

    Training accuracy is the running accuracy over the epoch's batches (the weights change during the epoch, the
    usual "train accuracy" of a training log); for soft labels ``(N, K)`` the label is their argmax. The probe is
    evaluated in eval mode without gradients and draws no random numbers, so recording never changes the weights
    a seed gives.

    Args:
        probe_x: ``(M, C, H, W)`` held-out images in [0, 1] (at most ``PROBE_MAX`` are used), or None.
        probe_y: ``(M,)`` their labels, or None.
    """

    def __init__(self, probe_x: torch.Tensor | None = None, probe_y: torch.Tensor | None = None) -> None:
        self.probe_x = None if probe_x is None else probe_x[:PROBE_MAX]
        self.probe_y = None if probe_y is None else probe_y[:PROBE_MAX]
        self.loops: list[list[dict[str, Any]]] = []

    def start(self) -> list[dict[str, Any]]:
        """A new training loop's list of epoch records (appended to ``loops``)."""
        self.loops.append([])
        return self.loops[-1]

    def probe(self, model: nn.Module, device: torch.device) -> dict[str, float | None]:
        """Test loss and accuracy of ``model`` on the probe set. Restores every submodule's train / eval mode.

        Args:
            model: the released model, raw images ``(M, C, H, W)`` to logits ``(M, K)``.
            device: where the model runs.
        Returns:
            ``{"test_loss": nats, "test_accuracy": fraction in [0, 1]}``; None values without a probe set or when
            the model's outputs are not one logit per class.
        """
        if self.probe_x is None or self.probe_y is None or not len(self.probe_x):
            return {"test_loss": None, "test_accuracy": None}
        modes = {m: m.training for m in model.modules()}
        try:
            logits = predict_logits(model, self.probe_x, device=device)
        finally:
            for m, mode in modes.items():
                m.training = mode
        if logits.ndim != 2 or logits.shape[1] <= int(self.probe_y.max()):
            return {"test_loss": None, "test_accuracy": None}
        return {"test_loss": float(F.cross_entropy(logits, self.probe_y)),
                "test_accuracy": float((logits.argmax(1) == self.probe_y).float().mean())}

    def matching(self, history: list[float]) -> list[dict[str, Any]]:
        """The records of the loop whose per-epoch losses are ``history`` (the loop that trained the released
        classifier; a weight-noise autoencoder's loop is another), the last such loop; [] when none matches."""
        for loop in reversed(self.loops):
            losses = [r["train_loss"] for r in loop]
            if len(losses) == len(history) and all(
                    a == b or (a != a and b != b) for a, b in zip(losses, history, strict=True)):
                return [dict(r) for r in loop]
        return []


_RECORDER: contextvars.ContextVar[EpochRecorder | None] = contextvars.ContextVar("epoch_recorder", default=None)


@contextlib.contextmanager
def recording_epochs(recorder: EpochRecorder) -> Iterator[EpochRecorder]:
    """Within the block every training loop of this thread of control appends its epochs to ``recorder``.

    Args:
        recorder: the recorder to fill.
    Yields:
        ``recorder``.
    """
    token = _RECORDER.set(recorder)
    try:
        yield recorder
    finally:
        _RECORDER.reset(token)


def current_recorder() -> EpochRecorder | None:
    """The active ``EpochRecorder`` (``recording_epochs``), or None."""
    return _RECORDER.get()


def batch_correct(out: torch.Tensor, y: torch.Tensor) -> int | None:
    """How many predictions of a batch are right.

    Args:
        out: the model's outputs, logits ``(B, K)``.
        y: labels ``(B,)``, or soft labels ``(B, K)`` (their argmax is the label).
    Returns:
        The number of rows whose argmax is the label; None when ``out`` is not one score per class (e.g. an
        autoencoder's reconstructions).
    """
    if out.ndim != 2 or not len(out):
        return None if out.ndim != 2 else 0
    labels = y.argmax(1) if y.ndim == 2 else y
    if y.ndim == 2 and y.shape[1] != out.shape[1] or y.ndim == 1 and y.dtype.is_floating_point:
        return None
    return int((out.detach().argmax(1) == labels).sum())


def record_epoch(records: list[dict[str, Any]] | None, recorder: EpochRecorder | None, *, epoch: int, loss: float,
                 correct: int | None, count: int, model: nn.Module, device: torch.device) -> None:
    """Append epoch ``epoch`` (1-based) of one loop to ``records``: ``train_loss`` (nats, the epoch's mean),
    ``train_accuracy`` (fraction, None when unknown) and the probe's ``test_loss`` / ``test_accuracy``. No-op
    without a recorder."""
    if records is None or recorder is None:
        return
    records.append({"epoch": epoch, "train_loss": loss,
                    "train_accuracy": None if correct is None or not count else correct / count,
                    **recorder.probe(model, device)})


def seed_everything(seed: int) -> torch.Generator:
    """Seed Python, NumPy (``seed`` mod 2^32) and torch.

    Args:
        seed: the run's seed.
    Returns:
        A fresh CPU generator seeded with ``seed``.
    """
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
    return torch.Generator().manual_seed(seed)


class TensorBatches:
    """Shuffled mini-batches of in-memory tensors; re-iterable, one permutation per epoch.

    Args:
        x: ``(N, ...)`` inputs. y: ``(N, ...)`` targets. batch_size: rows per batch.
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
    """The optimizer a training spec names.

    Args:
        params: the parameters to optimise.
        spec: its ``optimizer`` (``sgd`` or ``adam``), ``lr`` and ``momentum`` (SGD only).
    Returns:
        SGD with ``spec.momentum``, or Adam, at ``spec.lr``.
    Raises:
        ValueError: another optimizer name.
    """
    if spec.optimizer == "sgd":
        return torch.optim.SGD(params, lr=spec.lr, momentum=spec.momentum)
    if spec.optimizer == "adam":
        return torch.optim.Adam(params, lr=spec.lr)
    raise ValueError(f"optimizer {spec.optimizer!r} not in ('sgd', 'adam')")


def soft_cross_entropy(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """KL divergence between soft label distributions and the model's softmax.

    Args:
        logits: ``(B, K)``.
        target: soft labels ``(B, K)``, each row a distribution.
    Returns:
        The batch mean (nats), a scalar tensor.
    """
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
    """Non-private mini-batch training of ``model`` on ``(x, y)``; shared by every mechanism that
    trains an ordinary model (on real, released or perturbed data).

    Args:
        x: ``(N, ...)`` inputs; y: ``(N,)`` class indices or ``(N, K)`` soft labels (then pass
            ``loss_fn=soft_cross_entropy``). scheduler_step: halve the learning rate every that many epochs.
        released: the released model when it is not ``model`` (``train_loop``).
    Returns:
        (per-epoch loss, examples processed, seconds) from ``bench.core.training.train_loop``.
    """
    model.to(device)
    opt = make_optimizer(model.parameters(), spec)
    sched = torch.optim.lr_scheduler.StepLR(opt, scheduler_step, 0.5) if scheduler_step else None
    kwargs = {"loss_fn": loss_fn} if loss_fn is not None else {}
    return train_loop(model, opt, TensorBatches(x, y, spec.batch_size, generator), epochs=spec.epochs, device=device,
                      scheduler=sched, on_epoch=on_epoch, released=released, **kwargs)
