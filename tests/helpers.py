"""Helpers shared by the tests (import as ``from helpers import ...``: pytest puts ``tests/`` on ``sys.path``)."""

from __future__ import annotations

import torch

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
