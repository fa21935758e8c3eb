"""Evaluation and per-example losses of a trained classifier.

Logits, accuracy, the logit confidence φ and a cross-entropy that stays distinct for confidently right examples.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn


@torch.no_grad()
def predict_logits(model: nn.Module, x: torch.Tensor, *, device: torch.device, batch_size: int = 2048):
    """The model's logits on a batch of images, in eval mode, without gradients.

    Args:
        model: a classifier of K classes.
        x: images ``(N, C, H, W)`` (any device).
        device: where the model runs.
        batch_size: images per forward pass.

    Returns:
        Logits ``(N, K)``, float32 on CPU (an empty tensor when N = 0).
    """
    model.eval()
    out = [model(x[i : i + batch_size].to(device)).float().cpu() for i in range(0, len(x), batch_size)]
    return torch.cat(out) if out else torch.empty(0)


def logit_confidence(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """The logit confidence φ = log(p_y / (1 − p_y)) = z_y − logsumexp_{j≠y} z_j, computed without forming p_y.

    So confident outputs stay finite and distinct (Carlini et al. 2022, §IV-B: close to Gaussian across shadow models).

    Args:
        logits: logits or log-probabilities ``(N, K)``.
        y: labels ``(N,)``, int64 in [0, K).

    Returns:
        φ ``(N,)``, float64.
    """
    z = logits.double()
    true = z.gather(1, y.view(-1, 1)).squeeze(1)
    others = z.scatter(1, y.view(-1, 1), float("-inf")).logsumexp(dim=1)
    return true - others


def stable_cross_entropy(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Per-example cross-entropy, accurate for tiny losses: softplus(−φ) with φ the ``logit_confidence``.

    A confidently right example keeps a distinct loss around e^-margin instead of rounding to exactly 0 (which would tie
    members with non-members and make low-FPR membership metrics meaningless).

    Args:
        logits: logits ``(N, K)``.
        y: labels ``(N,)``, int64 in [0, K).

    Returns:
        Losses ``(N,)`` in nats, float64.
    """
    return F.softplus(-logit_confidence(logits, y))


def per_example_loss(model: nn.Module, x: torch.Tensor, y: torch.Tensor, *, device: torch.device) -> np.ndarray:
    """Cross-entropy loss of every example (``stable_cross_entropy`` of the model's logits).

    Args:
        model: a classifier of K classes.
        x: images ``(N, C, H, W)``.
        y: labels ``(N,)``.
        device: where the model runs.

    Returns:
        Losses ``(N,)`` in nats, float64.
    """
    return stable_cross_entropy(predict_logits(model, x, device=device), y).numpy()


def evaluate(model: nn.Module, x: torch.Tensor, y: torch.Tensor, *, device: torch.device) -> dict[str, float]:
    """Accuracy and mean cross-entropy of a classifier on labelled images.

    Args:
        model: a classifier of K classes.
        x: images ``(N, C, H, W)``.
        y: labels ``(N,)``.
        device: where the model runs.

    Returns:
        ``{"accuracy": fraction in [0, 1], "loss": mean cross-entropy in nats}``.
    """
    logits = predict_logits(model, x, device=device)
    return {
        "accuracy": float((logits.argmax(1) == y).float().mean()),
        "loss": float(F.cross_entropy(logits, y)),
    }
