"""Helpers shared by the tests (import as ``from helpers import ...``: pytest puts ``tests/`` on ``sys.path``)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from attacks.base import AttackContext, TrainLikeTarget
from bench.core.data import MembershipSplit
from bench.core.types import TrainedModel

CPU = torch.device("cpu")


def context(target: TrainedModel | None, split: MembershipSplit, *, seed: int, max_per_side: int | None = None,
            train_like_target: TrainLikeTarget | None = None, device: torch.device = CPU) -> AttackContext:
    """The ``AttackContext`` the runner builds for one cell: the scored members and non-members are
    ``split.scored(max_per_side, seed=seed)`` (balanced, the same people for every attack of the cell)."""
    members, non_members = split.scored(max_per_side, seed=seed)
    return AttackContext(target, split, members, non_members, seed, device, train_like_target)


class NormNet(nn.Module):
    """Conv (with bias) → GroupNorm → ReLU → LayerNorm → Linear on (3, 8, 8): every layer type the ``bk`` clipper
    supports, for the per-sample clipping tests."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, stride=2, padding=1)
        self.gn = nn.GroupNorm(2, 8)
        self.ln = nn.LayerNorm(8 * 4 * 4)
        self.fc = nn.Linear(8 * 4 * 4, 10)

    def forward(self, x):
        return self.fc(self.ln(F.relu(self.gn(self.conv(x))).flatten(1)))
