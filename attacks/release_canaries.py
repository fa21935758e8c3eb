"""Canary audits of a data release, where it is published: the attacker sees the whole release and knows the
mechanism's settings. Both test the relation the releases are certified for, replace-one: canary slot i holds one of
two records, a_i or b_i, chosen by an independent fair coin, and the attacker guesses which.

- ``local-canary`` (local Gaussian noise): each canary slot is one person's local release, independent of every
  other (a multi-run design: m independent runs of the local randomiser). a_i is a random direction and b_i = −a_i,
  the pair at the stated replace-one sensitivity 2 of unit-norm inputs, with two different labels; the score is
  ⟨z_i, a_i/‖a_i‖⟩, which is N(±1, σ²): Gaussian by construction, so the Gaussian analyses are valid bounds here;
  the released label is the second channel, composed with the first (``attacks.audit.channels``).
- ``dpmix-canary`` (DPMix): m slots added to the members, one release of them all (a one-run design). a_i is 1 on a
  random half of the pixels and 0 elsewhere, b_i its complement (the largest distance [0, 1]-images allow), with two
  different labels; the score is the likelihood-ratio attack's (``dpmix-mia-lr``) score of a_i minus that of b_i.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from pydantic import Field

from attacks.base import AttackContext, AuditDesign, MembershipAttack, MembershipScores
from attacks.priors import population_moments, with_labels
from attacks.shadows import shadow_seed
from bench.core.data import ArrayDataset, concat
from bench.core.params import Params


class ReleaseCanaryParams(Params):
    """Settings of a release canary audit.

    Attributes:
        num_canaries: m, canary slots (2 to 100,000: memory grows as m × pixels).
    """

    num_canaries: int = Field(1000, ge=2, le=100_000)


def _coins(m: int, generator: torch.Generator) -> np.ndarray:
    """``(m,)`` int64 fair coins: 1 means slot i holds a_i, 0 means b_i."""
    return (torch.rand(m, generator=generator) < 0.5).numpy().astype(np.int64)


class LocalCanaryAudit(MembershipAttack):
    """Antipodal canary pairs through the local randomiser; m independent releases. Settings:
    ``ReleaseCanaryParams`` (default m = 20,000: each slot costs one image of noise).

    Pair i is (a_i, y₁ᵢ) vs (−a_i, y₂ᵢ) with two different random labels, so both channels of a record are tested:
    the scores are the image projections ⟨z_i, a_i⟩ (Gaussian by construction), ``label_outcomes`` whether the
    released label is y₁ᵢ (1), y₂ᵢ (−1) or another (0); the ``gaussian-composed`` analysis
    (``attacks.audit.channels``) composes the two channels. Where the mechanism declares its labels public
    (``release.params["labels"] == "public"``: its ε covers the image only), the design reads the image alone."""

    audit = True
    name = "local-canary"
    release_kind = "local-gaussian"
    Params = ReleaseCanaryParams

    def score(self, ctx: AttackContext) -> MembershipScores:
        shape, k = ctx.split.members.input_shape, ctx.split.members.num_classes
        gen = torch.Generator().manual_seed(shadow_seed(ctx.seed, "canary", 3))
        m = self.params.num_canaries
        a = torch.randn((m, math.prod(shape)), generator=gen)
        a = a / a.norm(dim=1, keepdim=True)
        coins = _coins(m, gen)
        first = torch.from_numpy(coins).bool()
        x = torch.where(first[:, None], a, -a).view(m, *shape)
        y1 = torch.randint(0, k, (m,), generator=gen)
        y2 = (y1 + torch.randint(1, k, (m,), generator=gen)) % k  # a different label: the label channel is tested
        release, privacy = ctx.train_like_target.release(ArrayDataset(x, torch.where(first, y1, y2), k, "canaries"),
                                                         seed=shadow_seed(ctx.seed, "canary", 4))
        scores = (release.x.flatten(1).double() * a.double()).sum(1).numpy()
        labels_covered = release.params.get("labels") != "public"
        outcomes = ((release.y == y1).long() - (release.y == y2).long()).numpy() if labels_covered else None
        return MembershipScores(scores, coins, privacy=privacy, label_outcomes=outcomes, design=AuditDesign(
            "multi-run", "black-box", size=m, relation="replace-one", gaussian=True,
            channels=("image", "label") if labels_covered else ("image",)),
            extra={"canaries": "antipodal unit vectors (a, −a), the stated sensitivity 2, with two different labels"
                   if labels_covered else "antipodal unit vectors (a, −a): the stated sensitivity 2 (labels public: "
                   "the ε covers the image only)"})


CENTRE_ROWS = 4096  # released samples the centre and spread of a slot's projections are estimated from


def slot_scores(z: torch.Tensor, a: torch.Tensor, b: torch.Tensor, mu: torch.Tensor, *, ell: int, n: int
                ) -> np.ndarray:
    """The likelihood-ratio score of "slot i holds a_i" against "b_i" from a DPMix release ``z (T, d)``.

    Along d_i = a_i − b_i, a sample that drew the slot's record is shifted by ⟨r − m, d_i⟩/ℓ (r the record, m the
    mean of the records it was mixed with), one that did not is not; each sample drew it with probability q = ℓ/n.
    The projections of the samples that did not draw it (nearly all: q is small) give the centre m and the spread
    s of the rest (the noise the release really carries plus the other records): the median and the scaled median
    absolute deviation over the first ``CENTRE_ROWS`` samples, never the claimed σ. The score is
    Σ_t log((1 − q + q·e^{h₊x_t − h₊²/2}) / (1 − q + q·e^{h₋x_t − h₋²/2})), x_t the standardised projection and
    h± the standardised shifts under a_i and b_i: the Neyman-Pearson test of one slot with samples treated as
    independent. ``a``, ``b``: ``(m, d)``; ``mu``: ``(d,)`` the attacker population's mean record; returns ``(m,)``
    (larger: a_i)."""
    d = (a - b).double()
    proj = (z - mu).float() @ d.float().T  # (T, m); single precision: a score, its validity is the design's
    rows = proj[:CENTRE_ROWS]  # centre and spread from the first rows (the release's order is random)
    centre = rows.median(0).values
    spread = 1.4826 * (rows - centre).abs().median(0).values.clamp_min(1e-12)
    x = (proj - centre) / spread
    h_a, h_b = ((((r.double() - mu) * d).sum(1).float() - centre) / ell / spread for r in (a, b))
    q = min(ell / n, 1.0)

    def mix(h: torch.Tensor) -> torch.Tensor:
        return torch.logaddexp(torch.full_like(x, math.log1p(-q) if q < 1 else -math.inf),
                               math.log(q) + h * x - h**2 / 2).double().sum(0)
    return (mix(h_a) - mix(h_b)).numpy()


class DPMixCanaryParams(Params):
    """Settings of the DPMix canary audit.

    Attributes:
        num_canaries: canary slots per release (>= 2), at most the largest power of two <= the pixels (their
            difference patterns are rows of a Hadamard matrix: mutually orthogonal, so no slot's signal leaks
            into another's score through the release's mean).
        releases: independent releases, each on the members plus its own slots (1 to 1,000; time grows linearly,
            one DPMix release each); the canaries of all of them
            form one one-run experiment.
    """

    num_canaries: int = Field(512, ge=2)
    releases: int = Field(4, ge=1, le=1_000)


def hadamard_pairs(members: ArrayDataset, count: int, gen: torch.Generator) -> tuple[ArrayDataset, ArrayDataset]:
    """``count`` pairs (a_i, b_i) of [0, 1]-images: on a random set of 2^k pixels (2^k >= count, 2^k <= pixels),
    a_i = (1 + h_i)/2 and b_i = (1 − h_i)/2 with h_i a row of the Sylvester-Hadamard matrix (±1, mutually
    orthogonal), 0 elsewhere; both with the same random label."""
    shape, k = members.input_shape, members.num_classes
    d = math.prod(shape)
    order = 1 << max(1, (count - 1).bit_length())
    if order > d:
        raise ValueError(f"dpmix-canary: {count} orthogonal canaries need {order} pixels; the images have {d}")
    h = torch.ones(1, 1)
    while len(h) < order:
        h = torch.cat([torch.cat([h, h], 1), torch.cat([h, -h], 1)])
    rows = h[torch.randperm(order, generator=gen)[:count]]
    pixels = torch.randperm(d, generator=gen)[:order]
    a, b = torch.zeros(count, d), torch.zeros(count, d)
    a[:, pixels], b[:, pixels] = (1 + rows) / 2, (1 - rows) / 2
    y = torch.randint(0, k, (count,), generator=gen)
    return (ArrayDataset(a.view(count, *shape), y, k, members.name),
            ArrayDataset(b.view(count, *shape), y, k, members.name))


class DPMixCanaryAudit(MembershipAttack):
    """Orthogonal canary slots among the members, over ``releases`` independent DPMix releases. Settings:
    ``DPMixCanaryParams``."""

    audit = True
    name = "dpmix-canary"
    release_kind = "dpmix"
    Params = DPMixCanaryParams
    needs_population = True

    def score(self, ctx: AttackContext) -> MembershipScores:
        prior = population_moments(ctx.split.population, "mix")
        scores, coins, privacy, n = [], [], None, 0
        for r in range(self.params.releases):
            gen = torch.Generator().manual_seed(shadow_seed(ctx.seed, "canary", 10 + r))
            a, b = hadamard_pairs(ctx.split.members, self.params.num_canaries, gen)
            coin = _coins(len(a), gen)
            pick = torch.from_numpy(coin).bool()
            slots = ArrayDataset(torch.where(pick[:, None, None, None], a.x, b.x), a.y, a.num_classes, a.name)
            data = concat(ctx.split.members, slots)
            release, privacy = ctx.train_like_target.release(data, seed=shadow_seed(ctx.seed, "canary", 20 + r))
            z = torch.cat([release.x.flatten(1), release.y.float().flatten(1)], dim=1).double()
            scores.append(slot_scores(z, with_labels(a), with_labels(b), prior[0],
                                      ell=int(release.params["mixture_degree"]), n=len(data)))
            coins.append(coin)
            n = len(data)
        m = len(np.concatenate(coins))
        return MembershipScores(np.concatenate(scores), np.concatenate(coins), privacy=privacy, design=AuditDesign(
            "one-run", "black-box", size=m, relation="replace-one"),
            extra={"canaries": "orthogonal (Hadamard) pattern pairs, same label", "releases": self.params.releases,
                   "records_per_release": n})
