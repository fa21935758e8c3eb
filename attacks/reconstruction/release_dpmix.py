"""Attacks on a DPMix release, which need no model.

Release membership (best correlation, and a likelihood-ratio test that knows ℓ, σ and n) and de-mixing (Wiener
reconstruction). Every prior comes from the attacker's population.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from pydantic import Field

from attacks.base.attack import MembershipAttack, ReconstructionAttack
from attacks.base.context import AttackContext
from attacks.base.outputs import MembershipScores, Reconstruction
from attacks.reconstruction.priors import (
    CHUNK,
    CandidateParams,
    ImagesParams,
    gaussian_moments,
    population_moments,
    wiener,
    with_labels,
)
from attacks.reconstruction.scoring import gray, nearest_scores
from bench.core.data import MembershipSplit
from bench.core.types import TrainedModel


def _dpmix_release(target: TrainedModel) -> tuple[torch.Tensor, float, int]:
    """``(z, σ_x, ℓ)``: the release as ``(T, d_x + K)`` [image, label] rows.

    A release with its own label noise σ_y < σ_x (``params["sigma_y"]``) is still scored with σ_x on every coordinate:
    weighting the labels by σ_x/σ_y measured weaker (likelihood-ratio AUC 0.57 vs 0.62 on digits, ℓ = 2, σ_x = 0.6, σ_y
    = 0.01), as one-hot labels are far from the attacks' Gaussian model.
    """
    rel = target.release
    z = torch.cat([rel.x.flatten(1), rel.y.float().flatten(1)], dim=1).double()
    return z, float(rel.params["sigma"]), int(rel.params["mixture_degree"])


def _dpmix_prior(split: MembershipSplit, z: torch.Tensor, sigma: float, ell: int):
    """The record distribution's moments.

    From the population, else from the release itself (Cov(release) = Σ/ℓ + σ²I, so Σ = ℓ·(Cov − σ²I), eigenvalues
    clipped at 0).
    """
    if len(split.population) > 1:
        return population_moments(split.population, "mix")
    mu, evals, evecs = gaussian_moments(z)
    return mu, (ell * (evals - sigma**2)).clamp_min(0.0), evecs


class _DPMixMembership(MembershipAttack):
    """Shared score(): each candidate against the release; larger means "member"."""

    Params = CandidateParams
    release_kind = "dpmix"

    def release_scores(self, z: torch.Tensor, cand: torch.Tensor, prior, *, sigma: float, ell: int, n: int
                       ) -> np.ndarray:
        raise NotImplementedError

    def score(self, ctx: AttackContext) -> MembershipScores:
        z, sigma, ell = _dpmix_release(ctx.target)
        limit = self.params.max_candidates
        members, non_members = ctx.sides(limit)
        cand = torch.cat([with_labels(members), with_labels(non_members)])
        prior = _dpmix_prior(ctx.split, z, sigma, ell)
        n = int(ctx.target.params.get("num_records", len(ctx.split.members)))
        return MembershipScores(self.release_scores(z, cand, prior, sigma=sigma, ell=ell, n=n), ctx.labels(limit))


class DPMixCorrelation(_DPMixMembership):
    """DPMix release membership by the best normalised correlation.

    Score(c) = max over released samples t of cos(z_t − μ, c − μ), with z = [image, label] and μ the population mean.
    Knows nothing of ℓ or σ. (A member is in about T·ℓ/n samples, each holding 1/ℓ of it.)

    Settings: ``CandidateParams``.
    """

    name = "dpmix-mia-corr"

    def release_scores(self, z, cand, prior, *, sigma, ell, n):
        """``(N,)`` float64 scores in [−1, 1]: max over released rows z_t of cos(z_t − μ, c − μ), μ the prior's mean."""
        mu = prior[0]
        r = F.normalize((z - mu).float(), dim=1)
        a = F.normalize((cand - mu).float(), dim=1)
        return torch.cat([(r @ a[i : i + CHUNK].T).max(0).values for i in range(0, len(a), CHUNK)]).double().numpy()


class LikelihoodRatioParams(CandidateParams):
    """Settings of the DPMix likelihood-ratio attack.

    Attributes:
        max_candidates: as ``CandidateParams``.
        ridge: added to every variance, relative to the mean eigenvalue of Σ (> 0; keeps σ = 0 finite).
    """

    ridge: float = Field(1e-3, gt=0)


class DPMixLikelihoodRatio(_DPMixMembership):
    """DPMix release membership by a likelihood-ratio test that knows ℓ, σ and n.

    With records ~ N(μ, Σ) (Σ from the population) and q = ℓ/n the chance that a given record is in a
    given sample, a sample holding candidate c is ≈ N(μ + (c − μ)/ℓ, Σ(ℓ−1)/ℓ² + σ²I) and one without
    it N(μ, Σ/ℓ + σ²I). With llr_t(c) the log-ratio of these two densities at sample t,
    score(c) = Σ_t log(1 − q + q·exp(llr_t(c))), the log-likelihood ratio of "c is a member" vs "not"
    when samples are treated as independent. Computed in the eigenbasis of Σ (float64).

    Settings: ``LikelihoodRatioParams``.
    """

    name = "dpmix-mia-lr"
    Params = LikelihoodRatioParams

    def release_scores(self, z, cand, prior, *, sigma, ell, n):
        """score(c) = Σ_t log(1 − q + q·exp(llr_t(c))) up to a constant, in the eigenbasis of Σ (class docstring).

        Args:
            z: ``(T, d)`` the release, [image, label] rows.
            cand: ``(N, d)`` the candidates, [image, one-hot label] rows.
            prior: ``(μ (d,), λ (d,), V (d, d))``, the records' mean and covariance eigenpairs.
            sigma: σ, the release's noise standard deviation.
            ell: ℓ, the mixture degree.
            n: records the release was drawn from (q = ℓ/n).

        Returns:
            ``(N,)`` float64 log-likelihood ratios (nats, without the constant T·log(1 − q)); larger: "member".
        """
        mu, lam, vecs = prior
        eps = self.params.ridge * float(lam.mean()) + 1e-12
        s0 = lam / ell + sigma**2 + eps
        s1 = lam * (ell - 1) / ell**2 + sigma**2 + eps
        r = (z - mu) @ vecs  # (T, d) in the eigenbasis
        a = (cand - mu) @ vecs / ell  # (N, d)
        alpha = 0.5 * (r.pow(2) * (1 / s0 - 1 / s1)).sum(1) + 0.5 * torch.log(s0 / s1).sum()
        beta = 0.5 * (a.pow(2) / s1).sum(1)
        q = min(ell / n, 1.0)
        # log(1 − q + q·e^l) = log(1 − q) + softplus(l + logit q); the constant log(1 − q) is dropped.
        logit_q = math.log(q) - math.log1p(-q) if q < 1 else 50.0
        rw, a32 = (r / s1).float(), a.float()  # the (T, N) products in float32: 2x faster, same ranking
        out = []
        for i in range(0, len(a), CHUNK):
            llr = (alpha[:, None] + logit_q - beta[None, i : i + CHUNK]).float() + rw @ a32[i : i + CHUNK].T
            out.append(F.softplus(llr).double().sum(0))
        return torch.cat(out).numpy()


class DPMixReconstruction(ReconstructionAttack):
    """De-mixing a DPMix release.

    For each released sample, the MMSE (Wiener) estimate of one of its ℓ records, E[x_i | z_t] = μ + (Σ/ℓ)(Σ/ℓ +
    σ²I)⁻¹(z_t − μ) with the population's μ, Σ (exact records when ℓ = 1 and σ = 0; the population mean when σ is huge).
    Scored by the nearest member vs the nearest non-member (equal pools): ``closer_to_member`` 0.5 means no better than
    unrelated people. The image per class is the reconstruction from the sample with the largest released label for it.

    Nearest neighbours are searched among as many members and non-members as the cell scores. Settings:
    ``ImagesParams`` (the first ``max_images`` released samples; the release is in random order).
    """

    name = "dpmix-reconstruct"
    Params = ImagesParams
    release_kind = "dpmix"
    needs_images = True

    def reconstruct(self, ctx: AttackContext) -> Reconstruction:
        """The Wiener estimate of one record of each of the first ``max_images`` released samples, scored.

        Args:
            ctx: the target (its DPMix release), its split and the attacker's population.

        Returns:
            A ``Reconstruction``: one ``(H, W)`` grey image in [0, 1] per class (from the sample with the largest
            released label for it), labels 0..K − 1, and the ``nearest_scores`` metrics with σ and ℓ.
        """
        z, sigma, ell = _dpmix_release(ctx.target)
        split = ctx.split
        shape, k = split.members.input_shape, split.members.num_classes
        d_x = math.prod(shape)
        mu, lam, vecs = _dpmix_prior(split, z, sigma, ell)
        z = z[: self.params.max_images]
        rec = wiener(z, mu, lam, vecs, 1.0 / ell, sigma**2)
        images = rec[:, :d_x].clamp(0, 1).float().view(-1, *shape)
        label_mass = z[:, d_x:]
        metrics: dict[str, Any] = {"n_reconstructions": len(images), "estimator": "wiener-demixing",
                                   "sigma": sigma, "mixture_degree": ell}
        metrics.update(nearest_scores(images, label_mass.argmax(1), split, max_per_side=len(ctx.member_index),
                                      seed=ctx.seed, same_class=False))
        pick = label_mass.argmax(0)
        return Reconstruction(gray(images[pick]), np.arange(k), metrics)


