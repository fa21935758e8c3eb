"""Core types shared by mechanisms, attacks and the runner.

What was trained, on what settings, and what privacy it spent. Frozen where they are values; ``TrainedModel`` holds a
live module.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, SerializeAsAny

from bench.core.params import NoParams, Params
from bench.core.privacy import GUARANTEES, RELATIONS, PrivacySpent, RelationEpsilon

if TYPE_CHECKING:  # pragma: no cover
    import torch
    from torch import nn

__all__ = ["GUARANTEES", "RELATIONS", "PrivacySpent", "RelationEpsilon", "Release", "TrainSpec", "TrainedModel"]


class TrainSpec(Params):
    """Everything that determines how a model is trained, apart from the data and privacy.

    Attributes:
        model: registered model name (``bench.core.models.MODELS``).
        epochs: passes over the training data (or over the release for data-release mechanisms), >= 1.
        batch_size: (expected) batch size, >= 1; for DP-SGD the Poisson sample rate is q = 1/ceil(n / batch_size).
        lr: learning rate, > 0.
        optimizer: ``"sgd"`` or ``"adam"``.
        momentum: SGD momentum, >= 0.
        params: the mechanism's own settings, an instance of its ``Params`` (e.g. ``max_grad_norm``).
    """

    model: str
    epochs: int = Field(ge=1)
    batch_size: int = Field(ge=1)
    lr: float = Field(gt=0)
    optimizer: Literal["sgd", "adam"] = "sgd"
    momentum: float = Field(0.0, ge=0)
    params: SerializeAsAny[Params] = NoParams()

    def to_dict(self) -> dict[str, Any]:
        """The spec as JSON data, every default filled in (cache keys, results.json)."""
        return self.to_json()


@dataclass
class Release:
    """A synthetic or perturbed data release, kept for attacks and report examples.

    Attributes:
        x: released features, shape ``(T, C, H, W)``, float32.
        y: released labels, ``(T,)`` int64 class indices or ``(T, K)`` float soft labels.
        kind: what was released (e.g. ``"dpmix"``, ``"local-gaussian"``); release attacks match on it.
        params: mechanism parameters needed to attack it (σ, ℓ, norm scaling, ...).
        display: how report examples map ``x`` to pixels: ``"clip"`` to [0, 1], or ``"minmax"`` per image
            (for releases on another scale, e.g. noisy unit-norm images).
    """

    x: torch.Tensor
    y: torch.Tensor
    kind: str
    params: dict[str, Any] = field(default_factory=dict)
    display: str = "clip"


@dataclass
class TrainedModel:
    """The outcome of ``Mechanism.fit``.

    Attributes:
        model: classifier taking raw images ``(N, C, H, W)`` in [0, 1] and returning logits ``(N, K)``;
            any preprocessing (e.g. L2 normalisation) is part of the module.
        privacy: what was spent and who certified it.
        params: the mechanism's resolved parameters (σ, noise multiplier, q, ℓ, T, ...), JSON-able.
        release: the released data for data-release mechanisms, else ``None``.
        train_seconds: wall time of training (s).
        samples_per_s: training throughput in samples per second (examples processed / train time).
        history: per-epoch training loss.
        epochs: per-epoch records of the loop that produced ``history`` (``bench.core.epochs.EpochRecorder``):
            ``{"epoch", "train_loss", "train_accuracy", "test_loss", "test_accuracy"}``; empty when not recorded.
        audit: an audit run's observations (e.g. white-box canary scores and inclusion coins), JSON-able; else None.
    """

    model: nn.Module
    privacy: PrivacySpent
    params: dict[str, Any] = field(default_factory=dict)
    release: Release | None = None
    train_seconds: float = 0.0
    samples_per_s: float = 0.0
    history: list[float] = field(default_factory=list)
    audit: dict[str, Any] | None = None
    epochs: list[dict[str, Any]] = field(default_factory=list)
