"""The multi-run audit: R independent training runs, one canary each.

The multi-run audit (Jagielski, Ullman, Oprea 2020; Nasr et al. 2023, "Tight Auditing of Differentially Private
Machine Learning"): R independent training runs, each with one canary in or out by its own fair coin, so the R
(coin, score) pairs are independent trials and every bound over them is a valid statement about the mechanism.

Design notes: docs/design-notes.md.
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
import torch
from pydantic import Field

from attacks.base.attack import MembershipAttack, at_most
from attacks.base.context import AttackContext
from attacks.base.outputs import MembershipScores
from attacks.membership.shadows import shadow_seed
from bench.core.data import ArrayDataset, concat
from bench.core.design import AuditDesign
from bench.core.params import Params
from bench.core.training import per_example_loss


class MultiRunParams(Params):
    """Settings of the multi-run audit.

    Attributes:
        runs: R, independent training runs (10 to 250,000).
        members: N, the target's members each run trains on (>= 2; at most the members).
        canary: the input canary: ``mislabelled`` (a population record with a wrong label) or ``blank``.
        gradient_norm: the white-box gradient canary's raw norm in units of C (>= 1).
    """

    runs: int = Field(200, ge=10, le=250_000)
    members: int = Field(1000, ge=2)
    canary: Literal["mislabelled", "blank"] = "mislabelled"
    gradient_norm: float = Field(10.0, ge=1)


class MultiRunAudit(MembershipAttack):
    """R training runs with one canary each.

    Returns ``{"multi-run": black-box, "multi-run-whitebox": white-box}`` (the second where the mechanism takes gradient
    canaries). Settings: ``MultiRunParams``.
    """

    audit = True
    name = "multi-run"
    Params = MultiRunParams

    @property
    def needs_population(self) -> bool:  # type: ignore[override]
        """The mislabelled canary is a population record; the blank one is made, so it needs none."""
        return self.params.canary != "blank"

    def size_problem(self, *, n_members: int, n_population: int) -> str | None:
        """Every run trains on the first ``members`` of the target's members: at most ``n_members``."""
        return at_most(self.name, "members", self.params.members, n_members, "n_members")

    def canary(self, ctx: AttackContext) -> ArrayDataset:
        """The input canary (cell's seed): a population record with a wrong label, or the blank image labelled 0."""
        pop = ctx.split.population
        gen = torch.Generator().manual_seed(shadow_seed(ctx.seed, "multi-run", 0))
        if self.params.canary == "blank":
            return ArrayDataset(torch.zeros(1, *pop.input_shape), torch.zeros(1, dtype=torch.int64),
                                pop.num_classes, pop.name)
        one = pop.subset(torch.randint(len(pop), (1,), generator=gen))
        shift = torch.randint(1, one.num_classes, (1,), generator=gen)
        return ArrayDataset(one.x, (one.y + shift) % one.num_classes, one.num_classes, one.name)

    def _white_box(self, ctx: AttackContext) -> bool:
        from mechanisms import MECHANISMS

        return "gradient-canaries" in MECHANISMS.get(ctx.mechanism).audits

    def score(self, ctx: AttackContext) -> dict[str, MembershipScores]:
        """Train the R runs (through the executor and the cache) and score each run's canaries.

        Args:
            ctx: the cell's attack context.

        Returns:
            ``{"multi-run": (R,) black-box scores}`` and, where the mechanism takes gradient canaries,
            ``"multi-run-whitebox"``: (R,) scores with their coins; larger means "included".

        Raises:
            ValueError: a mislabelled canary without any population record.
        """
        from mechanisms.dpsgd.canary_placement import GradientCanaries

        if self.needs_population and len(ctx.split.population) < 1:
            raise ValueError("multi-run needs one attacker population record as its canary")
        p = self.params
        n = min(p.members, len(ctx.split.members))
        base, canary = ctx.split.members.subset(torch.arange(n)), self.canary(ctx)
        gen = torch.Generator().manual_seed(shadow_seed(ctx.seed, "multi-run", 1))
        coins = (torch.rand(p.runs, 2, generator=gen) < 0.5).numpy()  # (R, [input canary, gradient canary])
        white = self._white_box(ctx)
        jobs = [(concat(base, canary) if coin[0] else base, shadow_seed(ctx.seed, "multi-run", 10 + r),
                 GradientCanaries(1, shadow_seed(ctx.seed, "multi-run", 10 + r), p.gradient_norm, (bool(coin[1]),),
                                  public_size=n + 1)
                 if white else None) for r, coin in enumerate(coins)]
        black, wb, sigma_hat, privacy = np.empty(p.runs), np.empty(p.runs), np.empty(p.runs), None
        for r, run in enumerate(ctx.train_like_target.audit_runs(jobs)):
            black[r] = -float(per_example_loss(run.model, canary.x, canary.y, device=ctx.device)[0])
            wb[r], sigma_hat[r] = (run.audit["scores"][0], run.audit["sigma_hat"]) if white else (math.nan, math.nan)
            privacy = privacy or run.privacy
        extra = {"members": n, "canary": p.canary, "runs": p.runs}
        out = {self.name: MembershipScores(black, coins[:, 0].astype(np.int64), privacy=privacy, extra=extra,
                                           design=AuditDesign("multi-run", "black-box", size=p.runs,
                                                              relation="add-remove"))}
        if white:
            out["multi-run-whitebox"] = MembershipScores(
                wb, coins[:, 1].astype(np.int64), privacy=privacy,
                design=AuditDesign("multi-run", "white-box", size=p.runs, relation="add-remove"),
                extra={**extra, "gradient_norm": p.gradient_norm, "observations": "every noisy update",
                       "sigma_hat": float(np.median(sigma_hat)), "claimed_sigma": run.audit["claimed_sigma"]})
        return out
