"""The ``dpmix-canary`` audit: maximal canary records against a centre record, through DPMix's own release.

Design notes: docs/design-notes.md.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch
from pydantic import Field

from attacks.base import AttackContext, AuditDesign, MembershipAttack, MembershipScores
from attacks.base.priors import with_labels
from attacks.canaries.local import _coins
from attacks.membership.shadows import shadow_seed
from bench.core.data import ArrayDataset, concat
from bench.core.params import Params
from bench.core.types import PrivacySpent, Release, TrainedModel, TrainSpec

if TYPE_CHECKING:  # pragma: no cover
    from mechanisms.base import Mechanism

ROUNDS = 3  # rounds of explaining the other slots' z's away, each with their last scores' posteriors
CONFIDENCE = 2.0  # a posterior is kept within sigmoid(±2) = [0.12, 0.88]: the scores are approximate log-ratios
MAD_SCALE = 1.4826  # the median absolute deviation of N(0, 1) is 1/1.4826
NOISE_ROWS = 1024  # released samples the noise of each block is estimated from (the release is in random order)


class DPMixCanaryParams(Params):
    """Settings of the DPMix canary audit.

    Attributes:
        num_canaries: m, canary slots per release (>= 2, at most the filler records n₀ = n − m so the slots stay
            rare in a sample: m ≤ n/2 for the target's n members); the release holds n₀ + m = n records.
        releases: independent releases, each of the n₀ fillers and its own m slots (1 to 1,000; time grows
            linearly, one DPMix release each); the slots of all of them form one one-run experiment.
    """

    num_canaries: int = Field(32, ge=2)
    releases: int = Field(64, ge=1, le=1_000)


def maximal_pairs(count: int, *, shape: tuple[int, ...], num_classes: int, gen: torch.Generator
                  ) -> tuple[ArrayDataset, ArrayDataset]:
    """``(centre, canaries)`` of one release: c, a 0-image labelled e_a (a random class), and m = ``count`` maximal z_i.

    Each z_i is 1 on a random half of the ``(C, H, W)`` pixels, 0 elsewhere, labelled a random class other than a.

    Raises:
        ValueError: fewer than 2 classes (the label could not differ).
    """
    if num_classes < 2:
        raise ValueError(f"dpmix-canary needs at least 2 classes, got {num_classes}")
    d = math.prod(shape)
    a = int(torch.randint(num_classes, (1,), generator=gen))
    half = torch.rand(count, d, generator=gen).argsort(dim=1)[:, : d // 2]
    z = torch.zeros(count, d).scatter_(1, half, 1.0)
    b = (a + torch.randint(1, num_classes, (count,), generator=gen)) % num_classes
    centre = ArrayDataset(torch.zeros(1, *shape), torch.tensor([a]), num_classes, "dpmix-canary")
    return centre, ArrayDataset(z.view(count, *shape), b, num_classes, "dpmix-canary")


def common_shift(centre: ArrayDataset, d_x: int) -> torch.Tensor:
    """``(d_x + K,)`` float64 g, the part every slot's shift z_i − c shares by design.

    (d_x // 2)/d_x on every pixel (each z_i is 1 on d_x // 2 pixels); on the label, the other labels' mean minus c's.
    """
    k, a = centre.num_classes, int(centre.y[0])
    label = torch.full((k,), 1.0 / (k - 1), dtype=torch.float64)
    label[a] = -1.0
    return torch.cat([torch.full((d_x,), (d_x // 2) / d_x, dtype=torch.float64), label])


def _standardised(z: torch.Tensor, v: torch.Tensor, weight: torch.Tensor, ell: int
                  ) -> tuple[torch.Tensor, torch.Tensor]:
    """``(T, m)`` projections of the release less c, ``z (T, d)``.

    On the whitened directions ``v (m, d)`` (weights ``(d,)``: 1/noise² per coordinate), in units of their noise, and
    ``(m,)`` the shift by v/ℓ in those units.
    """
    w = v.double() * weight
    norm = (v.double() * w).sum(1).sqrt().clamp_min(1e-12)  # ‖v/σ‖: the projection's noise
    return (z @ w.float().T) / norm.float(), (norm / ell).float()


def pair_scores(z: torch.Tensor, centre: torch.Tensor, shift: torch.Tensor, common: torch.Tensor, *, d_x: int,
                ell: int, n: int) -> np.ndarray:
    """``(m,)`` log-likelihood ratios of "slot i holds z_i" against "it holds c" from a DPMix release (larger: z_i).

    ``z``: ``(T, d_x + K)`` the release's [image, label] rows; ``centre`` c, ``common`` g: ``(d_x + K,)``; ``shift``:
    ``(m, d_x + K)`` z_i − c; q = ℓ/n. Each shift is g (half of every pixel, the mean of the other labels minus e_a)
    plus a part e_i orthogonal to g and nearly to every other slot's. A sample t is read on whitened, standardised
    coordinates, x_ti along e_i and x_tg along g, and L_ti = e^{h_i·x_ti − h_i²/2 + h_g·x_tg − h_g²/2} is the likelihood
    ratio of "t drew z_i" to "t drew no z" (h: the shifts a z makes, in the same units). Slot i's score is
    Σ_t log(1 + q·(L_ti − 1)/A_ti) with A_ti = 1 + q·Σ_{j≠i} p_j·(L_tj − 1): a sample another slot's z explains better
    is discounted for slot i. p_j is ½, then for ``ROUNDS`` − 1 more rounds the posterior of slot j's last score, within
    sigmoid(±``CONFIDENCE``). The image and label noise are estimated from the release (scaled MAD of z − c over the
    first ``NOISE_ROWS`` samples, per block), never taken from the claimed σ; c is known by design (every record but
    the slots is c). Any function of the release and the public design is a valid score: this one sets the tightness.
    """
    z = z.float() - centre.float()  # a sample that drew no z is c plus the noise alone
    dev = z[:NOISE_ROWS].abs()
    noise_x, noise_y = (MAD_SCALE * float(dev[:, sl].median()) for sl in (slice(None, d_x), slice(d_x, None)))
    weight = torch.cat([torch.full((d_x,), 1 / max(noise_x, 1e-12) ** 2, dtype=torch.float64),
                        torch.full((z.shape[1] - d_x,), 1 / max(noise_y, 1e-12) ** 2, dtype=torch.float64)])
    x, h = _standardised(z, shift.double() - common, weight, ell)  # (T, m), (m,)
    xg, hg = _standardised(z, common[None].double(), weight, ell)  # (T, 1), (1,)
    log_l = (h * x - h**2 / 2 + hg * xg - hg**2 / 2).double()
    top = log_l.max(1, keepdim=True).values.clamp_min(0.0)  # every term below scaled by e^{-top}: no overflow
    l, one = (log_l - top).exp(), (-top).exp()
    q, p = min(ell / n, 1.0), torch.full((len(shift),), 0.5, dtype=torch.float64)
    own = q * (l - one)  # q·(L_ti − 1), the same every round
    # each round's (T, m) terms in place, operation for operation those of score = Σ_t [log((a + q·(L − 1)) ∨ 1e-300)
    # − log(a ∨ 1e-300)], a = 1 + q·(others − (Σp − p)) (scaled): the same bits, fewer (T, m) temporaries
    for _ in range(ROUNDS):  # the other slots' chance of holding their z: ½, then their posteriors from their scores
        held = l * p
        others = held.sub_(held.sum(1, keepdim=True)).neg_().clamp_min_(0.0)  # Σ_{j≠i} p_j·L_tj (scaled)
        a = others.sub_((p.sum() - p) * one).mul_(q).add_(one)  # > 0: q·Σp < 1 (the audit checks ℓ·(m − 1) < 2n)
        score = torch.add(a, own).clamp_min_(1e-300).log_().sub_(a.clamp_min_(1e-300).log_()).sum(0)
        p = torch.sigmoid(score.clamp(-CONFIDENCE, CONFIDENCE))
    return score.numpy()


def scored_releases(members: ArrayDataset, *, num_canaries: int, releases: int, seed: int,
                    release: Callable[[ArrayDataset, int], tuple[Release, PrivacySpent]],
                    observe: Callable[[ArrayDataset, Release], None] | None = None
                    ) -> tuple[np.ndarray, np.ndarray, PrivacySpent]:
    """The design's ``releases`` data sets, each released by ``release(data, seed)`` (the mechanism's own) and scored.

    Args:
        members: the target's members (only their count n, image shape and classes are used).
        num_canaries: m.
        releases: R.
        seed: the cell's seed (every coin, pair and release seed is drawn from it).
        release: the mechanism's release of a data set with a seed, and the privacy that release spent.
        observe: called with each release's data set and release (the conformance tests' observer), if given.

    Returns:
        ``(scores (R·m,), coins (R·m,) int64, privacy)``: each slot's ``pair_scores``, its coin (1: z_i held) and the
        last release's privacy (every release has the same n, ℓ, T and σ).

    Raises:
        ValueError: m above n/2, or ℓ·(m − 1) ≥ 2n.
    """
    shape, k, m = members.input_shape, members.num_classes, num_canaries
    n, fill = len(members), len(members) - m  # the target's n records: n₀ fillers and m slots
    if m > fill:
        raise ValueError(f"dpmix-canary: {m} slots per release exceed the {fill} filler records of {n} (at most "
                         f"half the records)")
    scores, coins, privacy = [], [], None
    for r in range(releases):
        gen = torch.Generator().manual_seed(shadow_seed(seed, "canary", 10 + r))
        centre, canaries = maximal_pairs(m, shape=shape, num_classes=k, gen=gen)
        coin = _coins(m, gen)
        held = torch.from_numpy(coin).bool()
        slots = ArrayDataset(torch.where(held[:, None, None, None], canaries.x, centre.x),
                             torch.where(held, canaries.y, centre.y), k, canaries.name)
        fillers = ArrayDataset(centre.x.expand(fill, *shape), centre.y.expand(fill), k, centre.name)
        data = concat(fillers, slots)  # n = n₀ + m, the target's, whatever the coins
        out, privacy = release(data, shadow_seed(seed, "canary", 20 + r))
        if observe is not None:
            observe(data, out)
        z = torch.cat([out.x.flatten(1), out.y.float().flatten(1)], dim=1)
        ell, d_x = int(out.params["mixture_degree"]), math.prod(shape)
        if ell * (m - 1) >= 2 * len(data):
            raise ValueError(f"dpmix-canary: {m} slots per release with ℓ = {ell} of {len(data)} records: "
                             f"ℓ·(m − 1) must stay below 2n (a sample holds few slots)")
        shift = with_labels(canaries) - with_labels(centre)
        scores.append(pair_scores(z, with_labels(centre)[0], shift, common_shift(centre, d_x), d_x=d_x, ell=ell,
                                  n=len(data)))
        coins.append(coin)
    assert privacy is not None  # releases >= 1
    return np.concatenate(scores), np.concatenate(coins), privacy


@dataclass(frozen=True)
class ReleaseAuditJob:
    """The audit's releases and scores as one job of the training executor.

    The audit's releases and scores as one job of the training executor (an ``AuditRequest`` with ``run``:
    ``bench.execution.trainjob.run_job`` calls it instead of ``fit``), so that a training worker makes the R releases
    while the driver attacks other cells, and an interrupted run finds them in the model cache. ``run`` is a pure
    function of its arguments: the scores are the same bits wherever it runs.
    """

    num_canaries: int
    releases: int
    seed: int
    conformance: int = 2  # the version of the conformance observations the job returns (part of its cache key;
    # 2: issue 45's tests, the mixing weights and the declared ε)

    def run(self, mechanism: Mechanism, data: ArrayDataset, spec: TrainSpec, *, target_epsilon: float | None,
            delta: float) -> TrainedModel:
        """``scored_releases`` through ``mechanism.release`` with the recipe's ``spec``, ε and δ (nothing is trained).

        Args:
            mechanism: a ``DPMix``.
            data: the members.
            spec: the recipe.
            target_epsilon: ε.
            delta: δ.

        Returns:
            A ``TrainedModel``: the untrained architecture, the releases' privacy, ``audit = {"scores", "coins",
            "conformance"}`` (``attacks.conformance.dpmix``, subsets observed in these releases; None: no guarantee).
        """
        from attacks.conformance.dpmix import MixingObserver

        observer = MixingObserver(data.input_shape, data.num_classes)
        with observer.subsets():
            scores, coins, privacy = scored_releases(
                data, num_canaries=self.num_canaries, releases=self.releases, seed=self.seed, observe=observer.add,
                release=lambda d, s: mechanism.release(d, spec, target_epsilon=target_epsilon, delta=delta, seed=s))
        conformance = None if not privacy.has_guarantee else observer.result(
            mixture_degree=int(spec.params.mixture_degree), num_samples=int(spec.params.num_samples), privacy=privacy)
        model = mechanism.build(data.input_shape, data.num_classes, spec)
        return TrainedModel(model, privacy, params={"releases": self.releases, "records": len(data)},
                            audit={"scores": [float(v) for v in scores], "coins": [int(c) for c in coins],
                                   "conformance": conformance})


class DPMixCanaryAudit(MembershipAttack):
    """Maximal canary slots among records equal to a centre record, over ``releases`` DPMix releases (module docstring).

    Settings: ``DPMixCanaryParams``.
    """

    name = "dpmix-canary"
    release_kind = "dpmix"
    audit = True
    Params = DPMixCanaryParams

    def _job(self, ctx: AttackContext) -> ReleaseAuditJob:
        return ReleaseAuditJob(self.params.num_canaries, self.params.releases, ctx.seed)

    def prefetch(self, ctx: AttackContext) -> None:
        """Submit the releases as a job for a cell whose mechanism is a ``DPMix`` (other cells get none)."""
        from mechanisms import MECHANISMS
        from mechanisms.dpmix.mechanism import DPMix

        if issubclass(MECHANISMS.get(ctx.mechanism), DPMix):
            ctx.train_like_target.prefetch([(ctx.split.members, ctx.seed, self._job(ctx))])

    def score(self, ctx: AttackContext) -> MembershipScores:
        """The releases' pair scores, one one-run experiment under replace-one (Steinke, Nasr, Jagielski 2023).

        Args:
            ctx: the cell's attack context (a DPMix target).

        Returns:
            ``(m·R,)`` scores and coins (larger: "slot holds z_i"), with the releases' conformance.
        """
        members = ctx.split.members
        run = ctx.train_like_target.audit_run(members, seed=ctx.seed, request=self._job(ctx))
        assert run.audit is not None
        total = self.params.num_canaries * self.params.releases
        return MembershipScores(np.asarray(run.audit["scores"], np.float64), np.asarray(run.audit["coins"], np.int64),
                                privacy=run.privacy, conformance=run.audit.get("conformance"), design=AuditDesign(
            "one-run", "black-box", size=total, relation="replace-one"),
            extra={"canaries": "maximal records (1 on a random half of the pixels, label e_b) against the centre "
                   "record c (0-image, label e_a ≠ e_b) that every other record equals; both channels",
                   "releases": self.params.releases, "records_per_release": len(members)})
