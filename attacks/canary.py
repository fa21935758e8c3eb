"""The one-run canary audit (Steinke, Nasr, Jagielski 2023, "Privacy auditing with one (1) training run"):
one extra training run, like the target's, on the members plus a random half of m population canaries."""

from __future__ import annotations

import numpy as np
import torch
from pydantic import Field

from attacks.base import AttackContext, AuditDesign, MembershipAttack, MembershipScores
from attacks.shadows import shadow_seed
from bench.core.data import ArrayDataset, concat
from bench.core.params import Params
from bench.core.training import per_example_loss


class CanaryParams(Params):
    """Settings of the one-run canary audit.

    Attributes:
        num_canaries: m, canaries drawn from the attacker's population (>= 2; at most the population).
        mislabel: give every canary a random wrong label (a stronger, more memorable canary; it also tests
            labels, which a local-noise mechanism may release in the clear).
    """

    num_canaries: int = Field(1000, ge=2)
    mislabel: bool = False


class CanaryAudit(MembershipAttack):
    """m canaries are drawn from the attacker's population; each is included independently with
    probability ½ in a training set made of the target's members plus the included canaries, and one model
    is trained on it exactly like the target (same mechanism, settings, ε and δ; through the cache).
    Every canary is then scored by that model's loss (score = −loss, larger means "included").

    The design (one run, black-box, m canaries under independent inclusion) lets the audit turn the top / bottom
    guesses into a valid ε lower bound. The added records change the dataset by add/remove, the neighbouring
    relation of the Opacus accountant. Settings: ``CanaryParams``.
    """

    name = "canary"
    Params = CanaryParams
    needs_population = True

    def canaries(self, population: ArrayDataset, *, seed: int) -> tuple[ArrayDataset, np.ndarray]:
        """The m canaries and their inclusion coins ``(m,)`` bool, drawn with ``seed``."""
        gen = torch.Generator().manual_seed(shadow_seed(seed, "canary", 0))
        m = min(self.params.num_canaries, len(population))
        canaries = population.subset(torch.randperm(len(population), generator=gen)[:m])
        if self.params.mislabel:
            shift = torch.randint(1, canaries.num_classes, (m,), generator=gen)
            canaries = ArrayDataset(canaries.x, (canaries.y + shift) % canaries.num_classes, canaries.num_classes,
                                    canaries.name)
        included = torch.rand(m, generator=gen) < 0.5
        return canaries, included.numpy()

    def score(self, ctx: AttackContext) -> MembershipScores:
        if len(ctx.split.population) < 2:
            raise ValueError(f"canary needs at least 2 attacker population records, got {len(ctx.split.population)}")
        canaries, included = self.canaries(ctx.split.population, seed=ctx.seed)
        if included.all() or not included.any():
            raise ValueError(f"canary: all {len(included)} canaries fell on one side of the coin; use more canaries")
        data = concat(ctx.split.members, canaries.subset(torch.from_numpy(np.flatnonzero(included))))
        model = ctx.train_like_target(data, seed=shadow_seed(ctx.seed, "canary", 1)).model
        scores = -per_example_loss(model, canaries.x, canaries.y, device=ctx.device)
        design = AuditDesign("one-run", "black-box", size=len(included), relation="add-remove")
        return MembershipScores(scores, included.astype(np.int64), design=design)
