"""Membership-inference attacks that score examples against a trained target."""

from __future__ import annotations

import numpy as np
import torch

from attacks.base import AttackResult
from attacks.metrics import membership_metrics
from bench.data import ArrayDataset, MembershipSplit
from bench.training import per_example_loss
from mechanisms.base import TrainedModel


def balanced_candidates(split: MembershipSplit, *, max_per_side: int | None, seed: int
                        ) -> tuple[ArrayDataset, ArrayDataset]:
    """Equal numbers of members and non-members (at most ``max_per_side`` each), drawn with ``seed``."""
    n = min(len(split.members), len(split.non_members))
    if max_per_side is not None:
        n = min(n, max_per_side)
    gen = torch.Generator().manual_seed(seed)
    pick = lambda d: d.subset(torch.randperm(len(d), generator=gen)[:n])  # noqa: E731
    return pick(split.members), pick(split.non_members)



class LossAttack:
    """LOSS threshold attack (Yeom, Giacomelli, Fredrikson, Jha 2018, §3.2): an example is called a
    member when the target's cross-entropy loss on it is low. Score = −loss (nats).

    Args:
        max_per_side: at most this many members and as many non-members are scored (None: all).
    """

    name = "loss"

    def __init__(self, max_per_side: int | None = None) -> None:
        self.max_per_side = max_per_side

    def run(self, target: TrainedModel, split: MembershipSplit, *, seed: int, device: torch.device,
            train_like_target=None) -> AttackResult:
        members, non_members = balanced_candidates(split, max_per_side=self.max_per_side, seed=seed)
        scores = np.concatenate([
            -per_example_loss(target.model, members.x, members.y, device=device),
            -per_example_loss(target.model, non_members.x, non_members.y, device=device),
        ])
        labels = np.concatenate([np.ones(len(members), np.int64), np.zeros(len(non_members), np.int64)])
        return AttackResult(self.name, scores, labels, membership_metrics(scores, labels))
