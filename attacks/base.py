"""The attack protocol and its result type: every attack has one signature and returns one thing."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    import torch

    from bench.data import MembershipSplit
    from mechanisms.base import TrainedModel


@dataclass
class AttackResult:
    """Scores of one membership attack on one target.

    Attributes:
        attack: registered attack name (e.g. ``"loss"``).
        scores: ``(N,)`` float, larger means "member".
        labels: ``(N,)`` int in {0, 1}, 1 for members.
        metrics: the dictionary returned by ``attacks.metrics.membership_metrics``.
    """

    attack: str
    scores: np.ndarray
    labels: np.ndarray
    metrics: dict[str, Any] = field(default_factory=dict)


class Attack(Protocol):
    """A membership-inference attack. Attacks never retrain the target."""

    name: str

    def run(
        self, target: TrainedModel, split: MembershipSplit, *, seed: int, device: torch.device
    ) -> AttackResult:
        """Score ``split.members`` and ``split.non_members`` (balanced) against ``target``."""
        ...
