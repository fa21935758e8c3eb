"""Canary audits of a data release, where it is published: ``local-canary`` (local Gaussian noise).

The attacker sees the whole release and knows the mechanism's settings; the audit tests replace-one: canary slot i
holds a_i or b_i = −a_i (a random direction, the pair at the stated sensitivity 2 of unit-norm inputs, with two
different labels), chosen by an independent fair coin. A multi-run design (m independent local releases) whose slots go
through one release call, so the one-run analyses join its family (``AuditDesign.one_release``); the release's
conformance is tested on the same canaries (``attacks.conformance.local``). The valid analyses read the certified
pair's likelihood ratio of both channels (``label_weight``); the ``gaussian-composed`` estimate composes the channels'
fits (``attacks.analysis.statistics.channels``). ``dpmix-canary`` is ``attacks.canaries.dpmix``.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import torch
from pydantic import Field

from attacks.analysis.statistics.limits import gaussian_mixture_sf, threshold_limit
from attacks.base.attack import MembershipAttack
from attacks.base.context import AttackContext
from attacks.base.outputs import MembershipScores
from attacks.conformance.local import local_conformance
from attacks.membership.shadows import shadow_seed
from bench.core.data import ArrayDataset
from bench.core.design import AuditDesign
from bench.core.params import Params
from mechanisms.accounting.gaussian import randomized_response_keep


class ReleaseCanaryParams(Params):
    """Settings of a release canary audit.

    Attributes:
        num_canaries: m, canary slots (2 to 100,000: memory grows as m × pixels).
        conformance_releases: R, independent releases of the same m canaries the conformance tests read (the first
            is also the one scored); the keep rate's limit, which bounds the ε from measured parameters at small ε,
            tightens as 1/√(R·m). Each further release costs one more release of m images (1 to 16).
    """

    num_canaries: int = Field(1000, ge=2, le=100_000)
    conformance_releases: int = Field(1, ge=1, le=16)


def _coins(m: int, generator: torch.Generator) -> np.ndarray:
    """``(m,)`` int64 fair coins: 1 means slot i holds a_i, 0 means b_i."""
    return (torch.rand(m, generator=generator) < 0.5).numpy().astype(np.int64)


def projections(z: torch.Tensor, a: torch.Tensor, rows: int = 4096) -> np.ndarray:
    """``(m,)`` float64 ⟨z_i, a_i⟩ of the rows of ``z (m, d)`` and ``a (m, d)``, bit-equal to the float64 product's sum.

    Computed in blocks of ``rows`` rows, so that no ``(m, d)`` float64 copy is made.
    """
    out = torch.empty(len(z), dtype=torch.float64)
    for i in range(0, len(z), rows):
        out[i : i + rows] = (z[i : i + rows].double() * a[i : i + rows].double()).sum(1)
    return out.numpy()


def label_weight(ctx: AttackContext, shape: tuple[int, ...], k: int) -> float | None:
    """The label outcome's weight w = σ²·ε_label/2 (score units) in s = ⟨z, a⟩ + w·o, or None without such a channel.

    With ⟨z, a⟩ ~ N(±1, σ²) and k-ary RR at ε_label, s is the certified pair's log-likelihood ratio (× σ²/2), the most
    powerful score for both channels at once (Neyman–Pearson). Read from a release of two fixed records, so w cannot
    depend on the canaries' coins; None where it states no private label channel or no finite σ, ε_label.
    """
    probe = ArrayDataset(torch.full((2, *shape), 0.5), torch.arange(2) % k, k, "probe")
    params = ctx.train_like_target.release(probe, seed=shadow_seed(ctx.seed, "canary", 5))[0].params
    sigma, label_epsilon = params.get("sigma"), params.get("label_epsilon")
    if params.get("labels") == "public" or sigma is None or label_epsilon is None:
        return None
    w = float(sigma) ** 2 * float(label_epsilon) / 2
    return w if math.isfinite(w) and w > 0 else None


def ideal_limit(params: dict, weight: float | None, coins: np.ndarray, k: int, delta: float) -> float | None:
    """The ideal release's ε limit for this audit (``statistics.limits.threshold_limit``), None without a σ.

    Its score u + w·o with u ~ N(±1, σ²) and o by k-ary randomized response at ε_label (``params``' ``sigma``,
    ``label_epsilon``; w = ``weight``, None: the image alone), at the counts of the ``(m,)`` ``coins``.
    """
    sigma = params.get("sigma")
    if not isinstance(sigma, (int, float)) or not 0 < sigma < math.inf:
        return None
    keep = randomized_response_keep(params["label_epsilon"], k) if weight is not None else 1.0
    swap, w = (1.0 - keep) / (k - 1), weight or 0.0
    probs = (keep, swap, 1.0 - keep - swap)  # o = the label held, the pair's other label, another one
    included = gaussian_mixture_sf((1.0 + w, 1.0 - w, 1.0), probs, sigma)
    excluded = gaussian_mixture_sf((-1.0 - w, -1.0 + w, -1.0), probs, sigma)
    n1 = int(coins.sum())
    span = (-1.0 - w - 8 * sigma, 1.0 + w + 8 * sigma)
    return threshold_limit(excluded, included, span, coins.size - n1, n1, delta=delta)


CONFORMANCE_SEEDS = 1000  # the further conformance releases' seeds: shadow_seed(seed, "canary", 1000 + r)


class LocalCanaryAudit(MembershipAttack):
    """Antipodal canary pairs through the local randomiser; m independent releases.

    Settings: ``ReleaseCanaryParams`` (default m = 1,000; the profiles set their own: each slot costs one image of
    noise).

    Pair i is (a_i, y₁ᵢ) vs (−a_i, y₂ᵢ) with two different random labels, so both channels of a record are tested:
    the scores are the image projections ⟨z_i, a_i⟩ (Gaussian by construction), ``label_outcomes`` whether the
    released label is y₁ᵢ (1), y₂ᵢ (−1) or another (0); the ``gaussian-composed`` analysis
    (``attacks.analysis.statistics.channels``) composes the two channels. Where the mechanism declares its labels public
    (``release.params["labels"] == "public"``: its ε covers the image only), the design reads the image alone.
    """

    audit = True
    name = "local-canary"
    release_kind = "local-gaussian"
    Params = ReleaseCanaryParams

    def score(self, ctx: AttackContext) -> MembershipScores:
        """Release the m antipodal canaries through the target's randomiser and score them.

        m slots of one release, a multi-run design in the sense of Jagielski, Ullman, Oprea 2020: each slot an
        independent trial.

        Args:
            ctx: the cell's attack context (a local-gaussian target).

        Returns:
            ``(m,)`` image projections with their coins and label outcomes (larger: "a, not −a"), and, for a release
            with a guarantee and noise, the conformance of ``conformance_releases`` releases.
        """
        shape, k = ctx.split.members.input_shape, ctx.split.members.num_classes
        gen = torch.Generator().manual_seed(shadow_seed(ctx.seed, "canary", 3))
        m = self.params.num_canaries
        a = torch.randn((m, math.prod(shape)), generator=gen)
        a /= a.norm(dim=1, keepdim=True)  # in place: the same division
        coins = _coins(m, gen)
        first = torch.from_numpy(coins).bool()
        x = (a * (2 * first.float() - 1)[:, None]).view(m, *shape)  # a or −a (a sign flip: exact), no −a copy
        y1 = torch.randint(0, k, (m,), generator=gen)
        y2 = (y1 + torch.randint(1, k, (m,), generator=gen)) % k  # a different label: the label channel is tested
        records = ArrayDataset(x, torch.where(first, y1, y2), k, "canaries")
        weight = label_weight(ctx, shape, k)  # fixed before any canary is released
        release, privacy = ctx.train_like_target.release(records, seed=shadow_seed(ctx.seed, "canary", 4))
        scores = projections(release.x.flatten(1)[:m], a)  # the first m rows: a release of more is a conformance bug
        labels_covered = release.params.get("labels") != "public"
        ry = release.y[:m]
        outcomes = ((ry == y1).long() - (ry == y2).long()).numpy() if labels_covered else None
        weight = weight if outcomes is not None else None
        if weight is not None:  # both channels in one score: the certified pair's likelihood ratio
            scores = scores + weight * outcomes
        conformance = None
        if privacy.has_guarantee and release.params.get("sigma", 0.0) > 0:
            seeds = (shadow_seed(ctx.seed, "canary", CONFORMANCE_SEEDS + r)
                     for r in range(1, self.params.conformance_releases))
            further = (ctx.train_like_target.release(records, seed=seed)[0] for seed in seeds)
            conformance = local_conformance(x, records.y, itertools.chain([release], further), privacy, num_classes=k)
        return MembershipScores(scores, coins, privacy=privacy, label_outcomes=outcomes, conformance=conformance,
                                design=AuditDesign(
            "multi-run", "black-box", size=m, relation="replace-one", gaussian=True, one_release=True,
            channels=("image", "label") if labels_covered else ("image",), label_weight=weight),
            extra={"ideal_limit": None if privacy.delta is None or not privacy.has_guarantee
                   else ideal_limit(release.params, weight, coins, k, privacy.delta),
                   "canaries": "antipodal unit vectors (a, −a), the stated sensitivity 2, with two different labels"
                   if labels_covered else "antipodal unit vectors (a, −a): the stated sensitivity 2 (labels public: "
                   "the ε covers the image only)"})
