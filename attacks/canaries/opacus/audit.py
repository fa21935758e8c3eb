"""White-box audit of any plug-in whose training goes through Opacus' ``DPOptimizer``, the user's code unchanged.

Nasr et al. 2023, "Tight Auditing of Differentially Private Machine Learning", §3: crafted-gradient and Dirac canaries;
Steinke, Nasr, Jagielski 2023: one training run.

Design notes: docs/design-notes.md.
"""

from __future__ import annotations

import numpy as np
import torch
from pydantic import Field

from attacks.base.attack import MembershipAttack
from attacks.base.context import AttackContext
from attacks.base.outputs import MembershipScores
from attacks.canaries.opacus.observer import AuditRefused, OpacusCanaries, canary_records
from attacks.canaries.opacus.phases import observed_phases
from attacks.conformance.opacus import opacus_conformance
from attacks.membership.shadows import shadow_seed
from bench.core.data import ArrayDataset, concat
from bench.core.design import AuditDesign
from bench.core.params import Params

__all__ = ["AuditRefused", "OpacusCanaries", "OpacusCanaryAudit", "OpacusCanaryParams"]


class OpacusCanaryParams(Params):
    """Settings of the Opacus plug-in audit.

    Attributes:
        records: m canary records added to the training data (>= 2), each included (its crafted gradient given)
            with probability ½.
        dirac: Dirac gradient canaries at the optimizer (>= 0).
        gradient_norm: the crafted gradients' raw norm in units of C (>= 1).
    """

    records: int = Field(500, ge=2)
    dirac: int = Field(2000, ge=0)
    gradient_norm: float = Field(10.0, ge=1)


class OpacusCanaryAudit(MembershipAttack):
    """One audit run of a plug-in mechanism that trains through Opacus, observed white-box (module docstring).

    Returns ``{"opacus-canary": the canary records (the run's conformance tests and measured ε in ``conformance``),
    "opacus-canary-dirac": the optimizer's Dirac canaries}``; scores: larger means "included". Applies to mechanisms
    with a central-DP guarantee and no white-box audit of their own (privbench's DP-SGD has ``gradient-canaries``).
    """

    audit = True
    name = "opacus-canary"
    Params = OpacusCanaryParams

    def applies_to(self, target) -> bool:
        """Targets whose privacy guarantee is ``central-dp``."""
        return target.privacy.guarantee == "central-dp"

    @staticmethod
    def _own_audit(ctx: AttackContext) -> bool:
        """The mechanism has its own white-box audit (privbench's DP-SGD: the canary attack's gradient canaries).

        An audit hook of another kind (e.g. a plug-in's ``"initial-model"`` for the crafted black-box audit) is not one.
        """
        from mechanisms import MECHANISMS

        return ctx.mechanism in MECHANISMS.names() and "gradient-canaries" in MECHANISMS.get(ctx.mechanism).audits

    def _with_canaries(self, ctx: AttackContext, stream: int) -> tuple[ArrayDataset, tuple[bool, ...]]:
        """The audit run's training data.

        The members and every canary record, at random positions (the order drawn from the seed's ``stream`` before the
        coins, so n and the order do not depend on them), and the ``(records,)`` coins: an included record's crafted
        gradient is given, an excluded one's is zero.

        Raises:
            ValueError: every coin fell on one side (no included or no excluded canary to compare).
        """
        p, members = self.params, ctx.split.members
        gen = torch.Generator().manual_seed(shadow_seed(ctx.seed, "canary", stream))
        order = torch.randperm(len(members) + p.records, generator=gen)
        included = (torch.rand(p.records, generator=gen) < 0.5).numpy()
        if included.all() or not included.any():
            raise ValueError(f"{self.name}: all {p.records} canary records fell on one side of the coin")
        x, y = canary_records(p.records, members.input_shape, members.num_classes, ctx.seed)
        data = concat(members, ArrayDataset(x, y, members.num_classes, members.name))
        return data.subset(order), tuple(bool(b) for b in included)

    def _job(self, ctx: AttackContext):
        p = self.params
        data, included = self._with_canaries(ctx, 10 + 2)
        request = OpacusCanaries(p.records, p.dirac, ctx.seed, included, p.gradient_norm)
        return data, shadow_seed(ctx.seed, "canary", 10 + 3), request

    def prefetch(self, ctx: AttackContext) -> None:
        """Submit the audit run unless the mechanism has its own white-box audit; ValueError: all coins fell one way."""
        if self._own_audit(ctx):
            return
        data, seed, request = self._job(ctx)
        ctx.train_like_target.prefetch([(data, seed, request)])

    def score(self, ctx: AttackContext) -> dict[str, MembershipScores]:
        """Train the observed audit run and score its canaries (one-run design, Steinke, Nasr, Jagielski 2023).

        Args:
            ctx: the cell's attack context.

        Returns:
            ``{"opacus-canary": (m,) scores with the conformance, "opacus-canary-dirac": where asked}`` (larger:
            "included"); ``{}`` for a mechanism with its own white-box audit.

        Raises:
            ValueError: every coin on one side; ``AuditRefused``: a loop the observer cannot read.
        """
        if self._own_audit(ctx):  # audited by its own white-box design (the canary attack); nothing to add
            return {}
        data, seed, request = self._job(ctx)
        run = ctx.train_like_target.audit_run(data, seed=seed, request=request)
        wb = run.audit
        inc = np.asarray(wb["records"]["included"], bool)
        privacy = run.privacy.under("add-remove") or run.privacy
        conformance = opacus_conformance(wb, certified=float(privacy.epsilon), delta=float(privacy.delta),
                                         relation=str(privacy.relation))
        facts = {
            "observations": "every noisy update of the loop's DPOptimizer",
            "gradient_norm": request.norm,
            "sigma_hat": wb["sigma_hat"],
            "claimed_sigma": wb["claimed_sigma"],
            "steps": wb["steps"],
            "sample_rate": wb["sample_rate"],
            "observed_phases": observed_phases(wb),
        }
        out = {
            self.name: MembershipScores(
                np.asarray(wb["records"]["scores"]),
                inc.astype(np.int64),
                privacy=run.privacy,
                design=AuditDesign("one-run", "white-box", size=request.records, relation="add-remove"),
                extra={**facts, "canaries": "records in the loop's own data pipeline"},
                conformance=conformance,
            )
        }
        if request.dirac:
            out[f"{self.name}-dirac"] = MembershipScores(
                np.asarray(wb["dirac"]["scores"]),
                np.asarray(wb["dirac"]["included"], np.int64),
                privacy=run.privacy,
                design=AuditDesign("one-run", "white-box", size=request.dirac, relation="add-remove"),
                extra={**facts, "canaries": "Dirac gradients at the optimizer, sampled at the accountant's q"},
            )
        return out
