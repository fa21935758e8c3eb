"""The crafted black-box audit.

(threat model ``black-box-crafted``: the final model's outputs only, with an auditor-chosen initial model θ_0 and
canary; Annamalai & De Cristofaro, NeurIPS 2024, "Nearly Tight Black-Box Auditing of Differentially Private Machine
Learning".) R independent runs of the mechanism from the same θ_0 on the first N members, plus one crafted canary by
each run's fair coin (add/remove), so the R (coin, score) pairs are independent trials (Jagielski, Ullman, Oprea 2020).

Design notes: docs/design-notes.md.
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
import torch
from pydantic import Field, field_validator

from attacks.base import AttackContext, AuditDesign, MembershipAttack, MembershipScores, at_most
from attacks.canaries.crafted_runs import SideBySideJob, audit_spec
from attacks.membership.shadows import shadow_seed
from bench.core.data import ArrayDataset, concat
from bench.core.params import Params
from mechanisms.base import InitialModel, Weights

THREAT_MODEL = "black-box-crafted"


class CraftedParams(Params):
    """Settings of the crafted black-box audit.

    Attributes:
        runs: R, independent training runs (10 to 90,000), each with the canary in or out by its own fair coin.
        members: N, the first N of the target's members every run trains on (>= 2).
        canary: ``pixels``, ``blank`` or ``clipbkd`` (``attacks.canaries.crafted_init``).
        init_epochs: θ_0's pre-training epochs without privacy (0: the mechanism's own initialisation, drawn once).
        init_data: θ_0's pre-training records: the attacker's ``population``, or the ``test`` split where the
            members take the whole training pool (both disjoint from the members).
        runs_per_job: runs trained side by side in one job (a mechanism with ``"side-by-side"``).
        ideal_draws: draws of the ideal mechanism (Gaussian scores at the certified μ, q = 1) put through the same
            analysis and through the anchor's estimator, recorded beside the audit (0: none).
        model: the runs' architecture, the auditor's choice like θ_0 (e.g. ``linear``: logistic regression, trained
            side by side); None: the target's. Everything else (the mechanism's code, its other settings, ε and δ) is
            the target's; a mechanism that trains one run per job (``"initial-model"`` only) takes the target's.
        batch_size: the runs' (expected) batch size, the auditor's choice (e.g. above the members: q = 1); None: the
            target's.
    """

    runs: int = Field(1000, ge=10, le=90_000)
    members: int = Field(1000, ge=2)
    canary: Literal["pixels", "blank", "clipbkd"] = "pixels"
    init_epochs: int = Field(5, ge=0, le=1000)
    init_data: Literal["population", "test"] = "population"
    runs_per_job: int = Field(1000, ge=1)
    ideal_draws: int = Field(50, ge=0, le=10_000)
    model: str | None = None
    batch_size: int | None = Field(None, ge=1)

    @field_validator("model")
    @classmethod
    def _known_model(cls, value: str | None) -> str | None:
        from bench.core.catalog import MODELS

        if value is not None and value not in MODELS.names():
            raise ValueError(f"model must be a registered model ({', '.join(sorted(MODELS.names()))}), got {value!r}")
        return value


class CraftedAudit(MembershipAttack):
    """R runs from an auditor-chosen θ_0 with one crafted canary each (module docstring).

    Returns ``{"multi-run-crafted": scores}`` (larger: "included"). Settings: ``CraftedParams``.

    Args:
        params: the audit's ``CraftedParams`` (None: the defaults).
    """

    audit = True
    name = "multi-run-crafted"
    Params = CraftedParams

    def __init__(self, params: Params | None = None) -> None:
        super().__init__(params)
        self._chosen: dict[tuple[int, str], tuple[Weights, object, dict]] = {}

    @property
    def needs_population(self) -> bool:  # type: ignore[override]
        """θ_0 is pre-trained on the attacker's population (unless on the test split, or not pre-trained)."""
        return self.params.init_data == "population" and self.params.init_epochs > 0

    def size_problem(self, *, n_members: int, n_population: int) -> str | None:
        """Every run trains on the first ``members`` of the target's members: at most ``n_members``."""
        return at_most(self.name, "members", self.params.members, n_members, "n_members")

    def _side_by_side(self, ctx: AttackContext) -> bool:
        """Whether the runs train side by side.

        The mechanism declares ``"side-by-side"`` and its model is one linear layer on a fixed front; else one run per
        job through ``fit`` (``"initial-model"``).

        Raises:
            ValueError: the mechanism accepts no initial model (the hook it lacks, in one line).
        """
        from mechanisms import MECHANISMS
        from mechanisms.dpsgd.side_by_side import linear_head

        mech = MECHANISMS.get(ctx.mechanism)
        if "side-by-side" in mech.audits:
            base, spec = self._base(ctx), self._spec(ctx)
            try:
                linear_head(mech().build(base.input_shape, base.num_classes, spec))
                return True
            except ValueError:
                pass
        if "initial-model" in mech.audits and not self._update():
            return False
        if "initial-model" in mech.audits:
            raise ValueError(f"{self.name}: model / batch_size are for runs trained side by side; {ctx.mechanism!r} "
                             "trains one run per job with the target's settings")
        raise ValueError(f"{self.name} is not run on {ctx.mechanism!r}: it does not accept an initial model (declare "
                         "'initial-model' in Mechanism.audits and start fit from audit.weights.state; "
                         "mechanisms.base.InitialModel, examples/opacus_plugin.py)")

    def choices(self, ctx: AttackContext) -> tuple[Weights, object, dict]:
        """(θ_0's weights, the canary, facts), fixed by the auditor before any coin.

        Computed once per seed and mechanism; Annamalai & De Cristofaro 2024: a pre-trained θ_0 and a canary crafted
        against it.

        Args:
            ctx: the cell's attack context (its seed, mechanism, members, population or test split and device).

        Returns:
            ``(weights, canary, facts)``: θ_0's state, the ``crafted_init`` canary (input ``(1, C, H, W)``, label
            ``(1,)``, unit class direction ``(K,)``), and the JSON-able facts recorded with the audit (θ_0's SHA-256,
            its data, the canary's).

        Raises:
            ValueError: the target's settings are unknown (``TrainLikeTarget.spec``).
        """
        from attacks.canaries.crafted_init import craft_canary, isolated, pretrain
        from mechanisms import MECHANISMS

        key = (ctx.seed, ctx.mechanism)
        if key not in self._chosen:
            p, spec = self.params, self._spec(ctx)
            base = self._base(ctx)
            mech = MECHANISMS.get(ctx.mechanism)()
            data = ctx.split.population if p.init_data == "population" else ctx.split.test
            seed = shadow_seed(ctx.seed, "crafted", 0)
            torch.manual_seed(seed)
            model = pretrain(mech.build(base.input_shape, base.num_classes, spec), data, epochs=p.init_epochs,
                             seed=seed, device=ctx.device)
            canary = craft_canary(p.canary, model, base, device=ctx.device)
            weights = Weights(model.state_dict())
            facts = {"initial_model_sha256": weights.digest, "init_data": p.init_data, "init_records": len(data),
                     "init_epochs": p.init_epochs, "canary": canary.facts,
                     "isolated": isolated(model, canary, base, device=ctx.device),
                     "linear_sgd": spec.optimizer == "sgd"}
            self._chosen[key] = (weights, canary, facts)
        return self._chosen[key]

    def _update(self) -> dict:
        """The auditor's settings over the target's recipe (``model``, ``batch_size``; those given)."""
        p = self.params
        return {k: v for k, v in (("model", p.model), ("batch_size", p.batch_size)) if v is not None}

    def _spec(self, ctx: AttackContext):
        """The runs' training settings (``audit_spec``).

        Raises:
            ValueError: the target's settings are unknown (``TrainLikeTarget.spec``).
        """
        if ctx.train_like_target.spec is None:
            raise ValueError(f"{self.name} needs the target's training settings (TrainLikeTarget.spec) to build θ_0")
        return audit_spec(ctx.train_like_target.spec, self._update())

    def _base(self, ctx: AttackContext) -> ArrayDataset:
        return ctx.split.members.subset(torch.arange(min(self.params.members, len(ctx.split.members))))

    def _jobs(self, ctx: AttackContext):
        """(coins (R,), the jobs ``(data, seed, request)`` for ``audit_runs``, whether side by side, the canary)."""
        weights, canary, _ = self.choices(ctx)
        p, base = self.params, self._base(ctx)
        gen = torch.Generator().manual_seed(shadow_seed(ctx.seed, "crafted", 1))
        coins = (torch.rand(p.runs, generator=gen) < 0.5).numpy()
        seeds = [shadow_seed(ctx.seed, "crafted", 10 + r) for r in range(p.runs)]
        one = ArrayDataset(canary.x, canary.y, base.num_classes, base.name)
        initial = InitialModel(weights, public_size=len(base) + 1)
        if not self._side_by_side(ctx):
            return coins, [(concat(base, one) if c else base, s, initial) for c, s in zip(coins, seeds, strict=True)], \
                False, canary
        queries = Weights({"x": canary.x if canary.reference is None else torch.cat([canary.x, canary.reference])})
        data = concat(base, one)
        jobs = [(data, seeds[i], SideBySideJob(tuple(seeds[i : i + p.runs_per_job]),
                                               tuple(bool(c) for c in coins[i : i + p.runs_per_job]), initial, queries,
                                               ctx.device.type, tuple(sorted(self._update().items()))))
                for i in range(0, p.runs, p.runs_per_job)]
        return coins, jobs, True, canary

    def prefetch(self, ctx: AttackContext) -> None:
        """Submit the runs (training workers train them meanwhile)."""
        _, jobs, _, _ = self._jobs(ctx)
        ctx.train_like_target.prefetch(jobs)

    def score(self, ctx: AttackContext) -> MembershipScores:
        """Train the R runs; score each final model along the canary's class direction (Annamalai & De Cristofaro 2024).

        Args:
            ctx: the cell's attack context.

        Returns:
            ``(R,)`` scores with their coins (larger: "included"), the design and the ideal mechanism's draws.

        Raises:
            ValueError: the mechanism accepts no initial model, or the target's settings are unknown.
        """
        from attacks.analysis.audits.crafted import crafted_summary, scores_from_outputs

        coins, jobs, together, canary = self._jobs(ctx)
        outputs, privacy, params, seconds = [], None, {}, 0.0
        for run in ctx.train_like_target.audit_runs(jobs):
            outputs.append(np.asarray(run.audit["outputs"]) if together else _query(run.model, canary, ctx.device))
            privacy, params, seconds = privacy or run.privacy, params or run.params, seconds + run.train_seconds
        out = np.concatenate(outputs) if together else np.stack(outputs)
        scores = scores_from_outputs(out, canary.direction.numpy())
        _, _, facts = self.choices(ctx)
        sigma, q, steps = (float(params.get(k) or 0) for k in ("noise_multiplier", "sample_rate", "steps"))
        mu = math.sqrt(steps) / sigma if q == 1.0 and sigma > 0 and steps else None
        # Gaussian by construction: the excluded runs' scores (θ_0's part + the noise, nothing of the members), and at
        # q = 1 the included ones too (the canary's clipped step at every step, along a near-constant direction)
        gaussian = bool(facts["isolated"] and facts["linear_sgd"] and q == 1.0)
        design = AuditDesign("multi-run", THREAT_MODEL, size=len(coins), relation="add-remove", gaussian=gaussian,
                             certified_mu=mu)
        delta = privacy.delta if privacy is not None and privacy.delta else 1e-5
        extra = {"threat": "black-box, final model only, auditor-chosen θ_0 and canary", "runs": len(coins),
                 "members": len(self._base(ctx)), "public_size": len(self._base(ctx)) + 1,
                 "side_by_side": together, "train_seconds": seconds, **facts, **self._update(),
                 **{k: params.get(k) for k in ("noise_multiplier", "sample_rate", "steps", "max_grad_norm")},
                 **crafted_summary(scores, coins, design=design, delta=delta, ideal_draws=self.params.ideal_draws)}
        return MembershipScores(scores, coins.astype(np.int64), design=design, privacy=privacy, extra=extra)


def _query(model, canary, device: torch.device) -> np.ndarray:
    """``(Q, K)``: one final model's logits on the canary and its reference (if any): black-box queries."""
    x = canary.x if canary.reference is None else torch.cat([canary.x, canary.reference])
    model.eval()
    with torch.no_grad():
        return model.to(device)(x.to(device)).cpu().numpy()
