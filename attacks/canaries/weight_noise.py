"""Auditing weight noise where it is published: the noisy autoencoder weights of the final model.

Design notes: docs/design-notes.md.
"""

from __future__ import annotations

import copy

import numpy as np
import torch
from pydantic import Field

from attacks.base.attack import MembershipAttack
from attacks.base.context import AttackContext
from attacks.base.outputs import MembershipScores
from attacks.membership.shadows import shadow_seed
from bench.core.data import concat
from bench.core.design import AuditDesign
from bench.core.params import Params
from bench.core.types import TrainedModel


class WeightCanaryParams(Params):
    """Settings of the weight-noise canary audit.

    Attributes:
        draws: R, noisy releases drawn (20 to 100,000; time grows linearly), each from D or D' by a fair coin.
    """

    draws: int = Field(2000, ge=20, le=100_000)


def _flat(module: torch.nn.Module) -> torch.Tensor:
    return torch.cat([p.detach().double().cpu().reshape(-1) for p in module.parameters()])


class WeightCanaryAudit(MembershipAttack):
    """One canary (a record of the attacker's population) in or out of the members.

    The clean autoencoder trained on both with one seed; R noisy releases scored by their projection on the clean
    difference. Settings: ``WeightCanaryParams``.
    """

    audit = True
    name = "weight-canary"
    Params = WeightCanaryParams
    needs_population = True

    def applies_to(self, target: TrainedModel) -> bool:
        """Weight-noise targets only: their ``params`` record ``weight_noise_std``."""
        return "weight_noise_std" in target.params

    @staticmethod
    def _jobs(ctx: AttackContext) -> list:
        """The two audit runs: the clean weights without and with the canary, one training seed."""
        from mechanisms.weight_noise import CleanWeights

        if len(ctx.split.population) < 1:
            raise ValueError("weight-canary needs one attacker population record as its canary")
        seed = shadow_seed(ctx.seed, "canary", 30)
        canary = ctx.split.population.subset(torch.arange(1))
        return [(data, seed, CleanWeights()) for data in (ctx.split.members, concat(ctx.split.members, canary))]

    def prefetch(self, ctx: AttackContext) -> None:
        """Submit the two audit runs, for mechanisms that take the ``clean-weights`` request."""
        from mechanisms import MECHANISMS

        if ctx.mechanism in MECHANISMS.names() and "clean-weights" in MECHANISMS.get(ctx.mechanism).audits:
            ctx.train_like_target.prefetch(self._jobs(ctx))

    def score(self, ctx: AttackContext) -> MembershipScores:
        """Draw R noisy releases of the clean weights with and without the canary, by fair coins.

        And score each by its projection on the clean difference (multi-run design, Jagielski, Ullman, Oprea 2020;
        Gaussian scores).

        Args:
            ctx: the cell's attack context.

        Returns:
            ``(R,)`` scores in units of the weights (larger: "canary in") with their coins.

        Raises:
            ValueError: no population record for the canary, or the canary left the clean weights unchanged.
        """
        from mechanisms.weight_noise import add_weight_noise

        runs = list(ctx.train_like_target.audit_runs(self._jobs(ctx)))
        std = float(runs[0].audit["weight_noise_std"])
        clean = [_flat(r.model.autoencoder) for r in runs]
        d = clean[1] - clean[0]
        norm = float(d.norm())
        if norm == 0:
            raise ValueError("weight-canary: the canary left the clean weights unchanged; no direction to test")
        gen = torch.Generator().manual_seed(shadow_seed(ctx.seed, "canary", 31))
        coins = (torch.rand(self.params.draws, generator=gen) < 0.5).numpy().astype(np.int64)
        release = copy.deepcopy(runs[0].model.autoencoder)
        scores = np.empty(len(coins))
        for i, coin in enumerate(coins):
            release.load_state_dict(runs[coin].model.autoencoder.state_dict())
            add_weight_noise(release, std=std, generator=gen)
            scores[i] = float((_flat(release) - clean[0]) @ d) / norm
        return MembershipScores(scores, coins, design=AuditDesign(
            "multi-run", "black-box", size=len(coins), relation="add-remove", gaussian=True),
            extra={"canary": "one attacker-population record", "clean_distance": norm, "noise_std": std,
                   "observations": "the released noisy autoencoder weights, training seed known"})
