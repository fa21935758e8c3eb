"""Per-epoch records of training runs.

The training loss and accuracy of every epoch and, with a probe set, the released model's test loss and accuracy at the
end of each (``EpochRecorder``), collected from every training loop run inside ``recording_epochs``
(``bench.core.training.train_loop``, ``mechanisms.dpsgd.fast``).
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from bench.core.evaluation import predict_logits

PROBE_MAX = 2000
"""At most this many held-out images are evaluated at the end of every epoch (``EpochRecorder``): cheap next to an
epoch of training (one forward pass in eval mode, no gradient)."""


class EpochRecorder:
    """Per-epoch records of training runs.

    For every loop (``bench.core.training.train_loop``, ``mechanisms.dpsgd.fast.train_fast``) the mean training loss and
    training accuracy of each epoch, and, with a probe set, the test loss and accuracy of the released model at the end
    of each epoch.

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
        """Open a new loop's list of epoch records (empty, appended to ``loops``; ``record_epoch`` fills it)."""
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
        """Copies of the records of the last loop whose ``train_loss`` values equal ``history`` (NaN equal NaN), or [].

        ``history`` is the released model's per-epoch mean training losses (nats), so a weight-noise autoencoder's loop
        is told apart from the classifier's.
        """
        for loop in reversed(self.loops):
            losses = [r["train_loss"] for r in loop]
            if len(losses) == len(history) and all(
                    a == b or (a != a and b != b) for a, b in zip(losses, history, strict=True)):
                return [dict(r) for r in loop]
        return []


_RECORDER: contextvars.ContextVar[EpochRecorder | None] = contextvars.ContextVar("epoch_recorder", default=None)


@contextlib.contextmanager
def recording_epochs(recorder: EpochRecorder) -> Iterator[EpochRecorder]:
    """Within the block (which gets ``recorder``) every training loop of this thread of control records into it."""
    token = _RECORDER.set(recorder)
    try:
        yield recorder
    finally:
        _RECORDER.reset(token)


def current_recorder() -> EpochRecorder | None:
    """The recorder of the enclosing ``recording_epochs`` block in this thread of control, or None outside one."""
    return _RECORDER.get()


def batch_correct(out: torch.Tensor, y: torch.Tensor) -> int | None:
    """Rows of logits ``out`` ``(B, K)`` whose argmax is the label ``y`` ``(B,)`` (soft ``(B, K)``: their argmax).

    None when ``out`` is not one score per class (e.g. an autoencoder's reconstructions).
    """
    if out.ndim != 2 or not len(out):
        return None if out.ndim != 2 else 0
    labels = y.argmax(1) if y.ndim == 2 else y
    if y.ndim == 2 and y.shape[1] != out.shape[1] or y.ndim == 1 and y.dtype.is_floating_point:
        return None
    return int((out.detach().argmax(1) == labels).sum())


def record_epoch(records: list[dict[str, Any]] | None, recorder: EpochRecorder | None, *, epoch: int, loss: float,
                 correct: int | None, count: int, model: nn.Module, device: torch.device) -> None:
    """Append epoch ``epoch`` (1-based) to ``records``: ``train_loss``, ``train_accuracy`` and the probe's test metrics.

    ``loss`` is the epoch's mean training loss (nats); ``correct`` of ``count`` examples right (None: unknown);
    ``model`` is probed after the epoch (``EpochRecorder.probe``). No-op without ``records`` or ``recorder``.
    """
    if records is None or recorder is None:
        return
    records.append({"epoch": epoch, "train_loss": loss,
                    "train_accuracy": None if correct is None or not count else correct / count,
                    **recorder.probe(model, device)})

