"""The one-run canary audits ``canary`` and ``canary-final`` (Steinke, Nasr, Jagielski, NeurIPS 2023).

One extra training run, like the target's, on the members (or the first K) plus a random half of m canaries. ``canary``
writes two records: ``canary`` (black-box: input canaries, the attacker's records or noise images, scored from the final
model's outputs) and, where the mechanism supports it (DP-SGD), ``canary-whitebox`` (``WHITE_BOX_RECORD``, a design of
``canary``, not an attack of its own: in the same run, Dirac gradient canaries scored from every noisy update,
``mechanisms.dpsgd.canaries``; Nasr et al. 2023). Both add a canary to or leave it out of the training set: the
add/remove neighbouring relation. The one-run theorems need the mechanism fixed independently of the inclusion coins, so
where the mechanism takes a public record count (DP-SGD: ``GradientCanaries.public_size``) the audit run's q, steps and
expected batch come from n = members + m·½, fixed before the coins are drawn, never from how many canaries they
included.
"""

from __future__ import annotations

from typing import Annotated, Literal

import numpy as np
import torch
from pydantic import Field

from attacks.analysis.statistics.limits import whitebox_limit
from attacks.base import AttackContext, AuditDesign, MembershipAttack, MembershipScores, at_most
from attacks.canaries.input_scores import Score, input_canary_scores
from attacks.membership.shadows import shadow_seed
from bench.core.data import ArrayDataset, concat
from bench.core.params import Params

WHITE_BOX_RECORD = "canary-whitebox"  # results.json key of the white-box design's record


class CanaryParams(Params):
    """Settings of the one-run canary audit.

    Attributes:
        num_canaries: m, input canaries drawn from the attacker's population (>= 2; at most the population).
        mislabel: give every input canary a random wrong label (a stronger, more memorable canary; it also tests
            labels).
        inputs: the input canaries: ``population`` records, or ``noise`` images (each pixel uniform in [0, 1], a
            uniformly random label; drawn with the seed, no population needed): far from every member, so the members'
            training moves the final model's outputs on them less than on a natural image.
        score: ``loss`` (the final model's loss on the canary) or ``output-difference``: ⟨logits(x) − logits(blank
            image), e_y − 1/K⟩, linear in the final weights of a model linear in its parameters (the default profile's
            ScatterNet + linear: the canary's clipped steps moved them along (e_y − p)⊗φ(x)), so that it reads the
            canary's own steps as a Dirac canary's coordinate does, less what the members did to that direction; or
            ``margin``: the same difference's logit margin, its label's entry less the largest other's (the canary's
            clipped steps push its label up and the class the noise made likeliest down;
            ``attacks.canaries.input_scores``).
        gradient_canaries: white-box Dirac gradient canaries in the same run, where the mechanism supports them
            (0 to 1,000,000: none to many; at most the model's trainable coordinates), or ``all``: one at every
            trainable coordinate of every parameter tensor except a random 2.5 % of each tensor kept free to measure
            its noise (``GradientCanaries.every_coordinate``).
        gradient_norm: their raw norm in units of the clipping norm C (>= 1: a correct mechanism clips it to C; a
            mechanism that does not clip lets it through).
        members: how many of the target's members the audit run trains on beside the included canaries (the first
            of them; None: all). Fewer members leave room for more canaries at the same public n, so at the target's
            q, T and expected batch.
    """

    num_canaries: int = Field(1000, ge=2)
    mislabel: bool = False
    inputs: Literal["population", "noise"] = "population"
    score: Score = "loss"
    gradient_canaries: Annotated[int, Field(ge=0, le=1_000_000)] | Literal["all"] = 5000
    gradient_norm: float = Field(10.0, ge=1)
    members: int | None = Field(None, ge=0)


class CanaryAudit(MembershipAttack):
    """The input canaries are drawn from the attacker's population.

    Each is included independently with probability ½ in a training set made of the target's members plus the included
    canaries, and one model is trained on it exactly like the target (same mechanism, settings, ε and δ; through the
    cache), with the white-box gradient canaries where the mechanism supports them. Returns ``{"canary": input canaries
    (black-box), "canary-whitebox": gradient canaries (white-box)}``; scores: larger means "included". Settings:
    ``CanaryParams``.
    """

    audit = True
    name = "canary"
    Params = CanaryParams

    @property
    def needs_population(self) -> bool:  # type: ignore[override]
        """Population canaries are the attacker's records; noise canaries are drawn."""
        return self.params.inputs == "population"

    def size_problem(self, *, n_members: int, n_population: int) -> str | None:
        """Population canaries come from the attacker's population: ``num_canaries`` <= ``n_population``."""
        if self.params.inputs != "population":
            return None
        return at_most(self.name, "num_canaries", self.params.num_canaries, n_population, "n_population")

    def canaries(self, population: ArrayDataset, *, seed: int) -> tuple[ArrayDataset, np.ndarray]:
        """The m input canaries and their inclusion coins, drawn with ``seed``.

        Args:
            population: the attacker's records (images ``(P, C, H, W)``, labels ``(P,)``).
            seed: the run's seed.

        Returns:
            ``(canaries, included)``: m records ``(m, C, H, W)`` with labels, and ``(m,)`` bool coins (each ½).

        Raises:
            ValueError: population canaries with m above the population's size.
        """
        gen = torch.Generator().manual_seed(shadow_seed(seed, "canary", 0))
        m = self.params.num_canaries
        if self.params.inputs == "noise":
            x = torch.rand(m, *population.input_shape, generator=gen)
            y = torch.randint(0, population.num_classes, (m,), generator=gen)
            included = torch.rand(m, generator=gen) < 0.5
            return ArrayDataset(x, y, population.num_classes, population.name), included.numpy()
        if m > len(population):
            raise ValueError(f"{m} canaries need as many population records; there are {len(population)}")
        canaries = population.subset(torch.randperm(len(population), generator=gen)[:m])
        if self.params.mislabel:
            shift = torch.randint(1, canaries.num_classes, (m,), generator=gen)
            canaries = ArrayDataset(canaries.x, (canaries.y + shift) % canaries.num_classes, canaries.num_classes,
                                    canaries.name)
        included = torch.rand(m, generator=gen) < 0.5
        return canaries, included.numpy()

    def kept(self, members: int) -> int:
        """How many of the target's ``members`` the audit run trains on: all, or at most ``params.members``."""
        return members if self.params.members is None else min(members, self.params.members)

    def public_size(self, members: int) -> int:
        """The audit run's public record count n + ⌊m/2⌋ (the expected canaries in), fixed before any coin is drawn.

        n is the kept share of the target's member count (``kept``).
        """
        return self.kept(members) + self.params.num_canaries // 2

    def _request(self, ctx: AttackContext):
        """The audit run's request where the mechanism takes one (DP-SGD).

        The white-box gradient canaries (possibly none) and the public record count; None elsewhere.
        """
        from mechanisms import MECHANISMS

        if ctx.mechanism not in MECHANISMS.names() or "gradient-canaries" not in MECHANISMS.get(ctx.mechanism).audits:
            return None
        from mechanisms.dpsgd.canary_placement import GradientCanaries

        every = self.params.gradient_canaries == "all"
        return GradientCanaries(0 if every else self.params.gradient_canaries, shadow_seed(ctx.seed, "canary", 2),
                                self.params.gradient_norm, public_size=self.public_size(len(ctx.split.members)),
                                every_coordinate=every)

    @staticmethod
    def _planned_fraction(wb: dict, privacy) -> float | None:
        """The white-box design's single guessing rule, from the run's public claimed σ, q, T and m alone.

        Computed by ``attacks.analysis.audits.guess_plan``, at the per-analysis level of its 3-analysis family; None
        without noise.
        """
        from attacks.analysis import family
        from attacks.analysis.audits.guess_plan import planned_guess_fraction

        sigma, q, steps, m = wb.get("claimed_sigma"), wb.get("sample_rate"), wb.get("steps"), len(wb["included"])
        if not sigma or not q or not steps or m < 2 or privacy is None or not privacy.delta:
            return None
        k = len(family(AuditDesign("one-run", "white-box")))
        return planned_guess_fraction(sigma=float(sigma), sample_rate=float(q), steps=int(steps), m=m,
                                      delta=float(privacy.delta), confidence=1 - 0.05 / k)

    @staticmethod
    def _conformance(run) -> dict | None:
        """The audit run's conformance to its certified DP-SGD (``attacks.conformance.dpsgd``).

        K + 10 tests for a model of K parameter tensors and the ε from the measured parameters; None for a run without a
        guarantee or noise (nothing certified to test) or observations from before the tests existed.
        """
        from attacks.conformance.dpsgd import dpsgd_conformance

        wb, privacy, params = run.audit, run.privacy, run.params or {}
        sigma = float(params.get("noise_multiplier") or 0.0)
        if "conformance" not in wb or privacy is None or not privacy.has_guarantee or sigma <= 0:
            return None
        return dpsgd_conformance(wb["conformance"], noise_multiplier=sigma, sample_rate=float(params["sample_rate"]),
                                 certified_steps=int(params["steps"]), privacy=privacy, released=run.model)

    def _audit_job(self, ctx: AttackContext):
        """(canaries, their coins, the audit run's training set, its seed, its white-box request or None)."""
        if self.params.inputs == "population" and len(ctx.split.population) < 2:
            raise ValueError(f"canary needs at least 2 attacker population records, got {len(ctx.split.population)}")
        canaries, included = self.canaries(ctx.split.population, seed=ctx.seed)
        if included.all() or not included.any():
            raise ValueError(f"canary: all {len(included)} canaries fell on one side of the coin; use more canaries")
        members = ctx.split.members.subset(torch.arange(self.kept(len(ctx.split.members))))
        data = concat(members, canaries.subset(torch.from_numpy(np.flatnonzero(included))))
        return canaries, included, data, shadow_seed(ctx.seed, "canary", 1), self._request(ctx)

    def prefetch(self, ctx: AttackContext) -> None:
        """Submit the audit run (a training worker trains it meanwhile)."""
        _, _, data, seed, request = self._audit_job(ctx)
        ctx.train_like_target.prefetch([(data, seed, request)])

    def score(self, ctx: AttackContext) -> dict[str, MembershipScores]:
        """Train the audit run and score its canaries (Steinke, Nasr, Jagielski 2023, one-run design).

        Args:
            ctx: the cell's attack context.

        Returns:
            ``{"canary": (m,) black-box scores, "canary-whitebox": where taken}``, larger means "included".

        Raises:
            ValueError: fewer than 2 population records, or every coin on one side.
        """
        canaries, included, data, seed, request = self._audit_job(ctx)
        run = ctx.train_like_target(data, seed=seed) if request is None else \
            ctx.train_like_target.audit_run(data, seed=seed, request=request)
        scores = input_canary_scores(run.model, canaries, score=self.params.score, device=ctx.device)
        out = {self.name: MembershipScores(scores, included.astype(np.int64), privacy=run.privacy, design=AuditDesign(
            "one-run", "black-box", size=len(included), relation="add-remove"),
            extra={"inputs": self.params.inputs, "score": self.params.score,
                   "members": len(data) - int(included.sum())})}
        if request is not None and request.active:
            wb = run.audit
            model = (float(wb["sigma_hat"]), float(wb["sample_rate"]), int(wb["steps"])) \
                if wb.get("sigma_hat") and wb.get("sample_rate") and wb.get("steps") else None
            design = AuditDesign("one-run", "white-box", size=len(wb["included"]), relation="add-remove",
                                 guess_fraction=self._planned_fraction(wb, run.privacy), llr_model=model)
            limit = None if design.guess_fraction is None else whitebox_limit(  # the claimed σ, q, T: all set
                design, sigma=float(wb["claimed_sigma"]), sample_rate=float(wb["sample_rate"]), steps=int(wb["steps"]),
                delta=float(run.privacy.delta))
            out[WHITE_BOX_RECORD] = MembershipScores(
                np.asarray(wb["scores"]), np.asarray(wb["included"], np.int64), design=design,
                privacy=run.privacy, conformance=self._conformance(run),
                extra={"gradient_norm": request.norm, "observations": "every noisy update",
                       "placement": "every coordinate" if request.every_coordinate else "random", "ideal_limit": limit,
                       **{k: wb.get(k) for k in ("sigma_hat", "sigma_hat_by_tensor", "claimed_sigma", "sample_rate",
                                                 "steps")}})
        return out


class FinalModelCanaryParams(CanaryParams):
    """Settings of the final-model (hidden-state) canary audit.

    As ``CanaryParams``, the gradient canaries at every free coordinate by default (``all``).
    """

    gradient_canaries: Annotated[int, Field(ge=0, le=1_000_000)] | Literal["all"] = "all"


class FinalModelCanaryAudit(CanaryAudit):
    """DP-SGD's audit in the hidden-state threat model.

    (Cebere et al. 2024, "Tighter privacy auditing of DP-SGD in the hidden state threat model"; Steinke, Nasr, Jagielski
    2023, §6, gradient canaries with the final model only.) The auditor sees θ_0 (public: the mechanism's own ``build``
    with the run's seed) and θ_T, nothing in between.

    The audit run is ``canary``'s (the members plus a random half of the input canaries, q, T and B from the public
    n), with Dirac gradient canaries (``mechanisms.dpsgd.canaries``, ``GradientCanaries.final_model``), each
    included by a fair coin, at every trainable coordinate but a 2.5 % reference share. Canary i's score is
    −(θ_T − θ_0)·B/(lr·C·ā) at its coordinate (``CanaryTracker.final_scores``): for plain and heavy-ball momentum
    SGD (no weight decay, dampening, Nesterov or weight averaging; anything else, e.g. Adam, is refused in one line)
    the sum of its noisy updates, weighted by the momentum's a_t/ā. The other records' gradients at a canary's
    coordinate are unknown to this auditor and enter the excluded and included scores alike: they lower the bound
    and never invalidate the one-run bounds (any score of the final model is post-processing). Analyses: the
    one-run and f-DP analyses (assumption-free) and ``gaussian-llr``'s μ-GDP analysis of the sums, valid when the
    excluded canaries' scores pass a normality test; all three in the design's Bonferroni family. Beyond the shape
    that test checks, the Gaussian analysis assumes the canaries independent trials: true of their noise and
    sampling by construction, but the other records' part at their coordinates is shared data and feels the
    included canaries through θ (a second-order effect this design does not test; the one-run and f-DP bounds need
    no such assumption). Returns ``{"canary-final": scores}`` (larger means "included"); the members' part of the
    scores is measured and stored (``members_sd`` against ``noise_sd``). DP-SGD targets only (``applies_to``;
    skipped elsewhere).
    """

    name = "canary-final"
    Params = FinalModelCanaryParams

    def applies_to(self, target) -> bool:
        """DP-SGD targets only: their ``params`` record ``grad_sample_mode`` and ``noise_multiplier``."""
        return "grad_sample_mode" in target.params and "noise_multiplier" in target.params

    def _request(self, ctx: AttackContext):
        """The audit run's request: the gradient canaries with ``final_model`` set.

        Raises:
            ValueError: the mechanism takes no gradient canaries, or none are asked for.
        """
        from dataclasses import replace

        request = super()._request(ctx)
        if request is None or not request.active:
            raise ValueError(f"canary-final needs a mechanism that takes gradient canaries (dpsgd) and "
                             f"gradient_canaries >= 1 or 'all', got {ctx.mechanism!r}, "
                             f"{self.params.gradient_canaries!r}")
        return replace(request, final_model=True)

    def score(self, ctx: AttackContext) -> dict[str, MembershipScores]:
        """Train the audit run with final-model gradient canaries and read their hidden-state scores.

        Args:
            ctx: the cell's attack context.

        Returns:
            ``{"canary-final": scores}``, larger means "included".

        Raises:
            ValueError: as ``CanaryAudit.score``; no gradient canaries; not SGD (``CanaryTracker.final_setup``).
        """
        _, _, data, seed, request = self._audit_job(ctx)
        run = ctx.train_like_target.audit_run(data, seed=seed, request=request)
        wb = run.audit
        design = AuditDesign("one-run", "hidden-state", size=len(wb["included"]), relation="add-remove")
        keys = ("sigma_hat", "claimed_sigma", "sample_rate", "steps", "lr", "momentum", "expected_batch_size",
                "members_sd", "noise_sd")
        return {self.name: MembershipScores(
            np.asarray(wb["scores"]), np.asarray(wb["included"], np.int64), design=design, privacy=run.privacy,
            extra={"gradient_norm": request.norm, "observations": "θ_T − θ_0 (final model, public θ_0)",
                   "placement": "every coordinate" if request.every_coordinate else "random",
                   **{k: wb.get(k) for k in keys}})}
