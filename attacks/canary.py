"""The one-run canary audit (Steinke, Nasr, Jagielski 2023, "Privacy auditing with one (1) training run"):
one extra training run, like the target's, on the members plus a random half of m canaries."""

from __future__ import annotations

import numpy as np
import torch

from attacks.audit import one_run_guesses
from attacks.base import AttackResult, TrainLikeTarget
from attacks.metrics import membership_metrics
from attacks.shadows import concat, shadow_seed
from bench.core.data import ArrayDataset, MembershipSplit
from bench.core.training import per_example_loss
from bench.core.types import TrainedModel


class CanaryAudit:
    """m canaries are drawn from the attacker's population; each is included independently with
    probability ½ in a training set made of the target's members plus the included canaries, and one model
    is trained on it exactly like the target (same mechanism, settings, ε and δ; through the cache).
    Every canary is then scored by that model's loss (score = −loss, larger means "included").

    The result is a membership ROC over the m canaries, and ``audit["one_run"]`` carries the counts of the
    one-run audit (top / bottom k guesses, ``attacks.audit.one_run_guesses``); the harness turns them into
    ε̂ at the run's δ. The added records change the dataset by add/remove, the neighbouring relation of
    the Opacus accountant.

    Args:
        max_per_side: unused (the canaries are the scored set).
        num_canaries: m, at most the population size.
        mislabel: give every canary a random wrong label (a stronger, more memorable canary; it also
            tests labels, which a local-noise mechanism releases in the clear).
    """

    name = "canary"

    def __init__(self, max_per_side: int | None = None, num_canaries: int = 1000, mislabel: bool = False) -> None:
        if num_canaries < 2:
            raise ValueError(f"canary needs num_canaries >= 2, got {num_canaries}")
        self.num_canaries, self.mislabel = num_canaries, mislabel

    def canaries(self, population: ArrayDataset, *, seed: int) -> tuple[ArrayDataset, np.ndarray]:
        """The m canaries and their inclusion coins ``(m,)`` bool, drawn with ``seed``."""
        gen = torch.Generator().manual_seed(shadow_seed(seed, "canary", 0))
        m = min(self.num_canaries, len(population))
        canaries = population.subset(torch.randperm(len(population), generator=gen)[:m])
        if self.mislabel:
            shift = torch.randint(1, canaries.num_classes, (m,), generator=gen)
            canaries = ArrayDataset(canaries.x, (canaries.y + shift) % canaries.num_classes, canaries.num_classes,
                                    canaries.name)
        included = torch.rand(m, generator=gen) < 0.5
        return canaries, included.numpy()

    def run(self, target: TrainedModel, split: MembershipSplit, *, seed: int, device: torch.device,
            train_like_target: TrainLikeTarget) -> AttackResult | None:
        if len(split.population) < 2:
            return None
        canaries, included = self.canaries(split.population, seed=seed)
        if included.all() or not included.any():
            return None
        data = concat(split.members, canaries.subset(torch.from_numpy(np.flatnonzero(included))))
        model = train_like_target(data, seed=shadow_seed(seed, "canary", 1)).model
        scores = -per_example_loss(model, canaries.x, canaries.y, device=device)
        labels = included.astype(np.int64)
        result = AttackResult(self.name, scores, labels, membership_metrics(scores, labels))
        result.audit = {"one_run": {"m": len(labels), "guesses": one_run_guesses(scores, labels)}}
        return result
