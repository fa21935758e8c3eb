"""The attack protocol and its result type: every attack has one signature and returns one thing."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    import torch

    from bench.core.data import ArrayDataset, MembershipSplit
    from bench.core.types import TrainedModel


@dataclass
class AttackResult:
    """Scores of one membership attack on one target.

    Attributes:
        attack: registered attack name (e.g. ``"loss"``).
        scores: ``(N,)`` float, larger means "member".
        labels: ``(N,)`` int in {0, 1}, 1 for members.
        metrics: the dictionary returned by ``attacks.metrics.membership_metrics``.
        audit: attack-specific audit counts merged into the stored audit block (the canary run's
            ``{"one_run": {"m", "guesses"}}``); empty for ordinary attacks.
    """

    attack: str
    scores: np.ndarray
    labels: np.ndarray
    metrics: dict[str, Any] = field(default_factory=dict)
    audit: dict[str, Any] = field(default_factory=dict)


@dataclass
class InversionResult:
    """Reconstructions of one model-inversion or release-reconstruction attack.

    Attributes:
        attack: registered attack name (e.g. ``"miface"``).
        images: ``(K, H, W)`` float in [0, 1], one reconstruction per class (or per target record).
        labels: ``(K,)`` int, the class (or record label) each image reconstructs.
        metrics: JSON-able scores (attack accuracy, SSIM / MSE to class means, ...).
    """

    attack: str
    images: np.ndarray
    labels: np.ndarray
    metrics: dict[str, Any] = field(default_factory=dict)


class TrainLikeTarget(Protocol):
    """Trains shadow / reference / canary models exactly as the target was trained (same mechanism, settings,
    target ε and δ) on the attacker's data; results go through the model cache (a cached model is loaded,
    never retrained). ``bench.runner.harness`` implements it; ``OneAtATime`` makes one from a plain function."""

    def __call__(self, data: ArrayDataset, *, seed: int) -> TrainedModel:
        """One model on ``data`` with training seed ``seed``."""
        ...

    def many(self, jobs: Sequence[tuple[ArrayDataset, int]]) -> Iterator[TrainedModel]:
        """One model per independent ``(data, seed)`` job, yielded in the order of ``jobs``. Every job is
        submitted before the first model is yielded, so they can train in parallel (the ``ray`` executor) or
        as one vectorised ensemble (non-private shadows, ``bench.runner.ensemble``)."""
        ...


@dataclass(frozen=True)
class OneAtATime:
    """A ``TrainLikeTarget`` from a plain function ``fn(data, *, seed) -> TrainedModel``: ``many`` calls it
    job after job (tests, notebooks)."""

    fn: Callable[..., TrainedModel]

    def __call__(self, data: ArrayDataset, *, seed: int) -> TrainedModel:
        return self.fn(data, seed=seed)

    def many(self, jobs: Sequence[tuple[ArrayDataset, int]]) -> Iterator[TrainedModel]:
        return (self.fn(data, seed=seed) for data, seed in jobs)


class Attack(Protocol):
    """A membership-inference attack. Attacks never retrain the target.

    Constructed as ``cls(max_per_side=..., **attack_params[name])``; an attack that needs no shadow
    models ignores ``train_like_target``.
    """

    name: str

    def run(
        self, target: TrainedModel, split: MembershipSplit, *, seed: int, device: torch.device,
        train_like_target: TrainLikeTarget,
    ) -> AttackResult | InversionResult | None:
        """Score ``split.members`` and ``split.non_members`` (balanced) against ``target`` (a membership
        attack), or reconstruct data (an inversion attack); ``None`` when the attack does not apply
        (e.g. a release attack on a mechanism that publishes no data)."""
        ...
