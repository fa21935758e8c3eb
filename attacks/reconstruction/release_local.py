"""Attacks on a local-noise release, which need no model.

Linkage (re-identification of each noisy image among sources and decoys) and class-conditional Wiener denoising. Every
prior comes from the attacker's population.
"""

from __future__ import annotations

import math

import torch

from attacks.analysis.statistics.confidence import clopper_pearson
from attacks.base.attack import ReconstructionAttack
from attacks.base.context import AttackContext
from attacks.base.outputs import Reconstruction
from attacks.base.priors import CHUNK, CandidateParams, ImagesParams, population_moments, unit_rows, wiener
from attacks.reconstruction.scoring import gray, ssim
from bench.core.data import MembershipSplit
from bench.core.types import TrainedModel


def _local_release(target: TrainedModel, split: MembershipSplit) -> tuple[torch.Tensor, float]:
    """``(z, σ)``: the noisy images ``(n, d)`` (row i is member i's) and the noise std.

    Raises:
        ValueError: the release does not hold one noisy image per member.
    """
    rel = target.release
    if len(rel.x) != len(split.members):
        raise ValueError(f"the local-noise release holds {len(rel.x)} images for {len(split.members)} members")
    return rel.x.flatten(1).double(), float(rel.params["sigma"])


class LinkageParams(CandidateParams):
    """Settings of the local-noise linkage attack.

    Attributes:
        max_candidates: queried members (and as many decoys), below the run's ``max_attack_examples``.
        use_labels: restrict matches to candidates with the released label.
    """

    use_labels: bool = True


class LocalLinkage(ReconstructionAttack):
    """Re-identification in a local-noise release.

    Match each released noisy image z to its source among candidates — the queried members themselves plus as many
    non-members as decoys.

    Under z = u + N(0, σ²I) with u the unit-norm source, the maximum-likelihood match is
    argmax_c ⟨z, c/‖c‖⟩ (all candidates have norm 1), i.e. the nearest neighbour; no denoiser can do
    better. With ``use_labels`` the released (clean) label restricts the candidates to that class.
    ``chance`` is the mean of 1/(number of eligible candidates). The images are the people picked for
    the first query of each class (right or wrong).

    Settings: ``LinkageParams``; the queries are the cell's scored members, the decoys its scored non-members.
    """

    name = "local-linkage"
    Params = LinkageParams
    release_kind = "local-gaussian"

    def reconstruct(self, ctx: AttackContext) -> Reconstruction:
        """Match each queried member's noisy image to its source among the members and the decoys (class docstring).

        Args:
            ctx: the target (its local-noise release), its split and scored indices.

        Returns:
            A ``Reconstruction``: the ``(H, W)`` grey image picked for the first query of each class, its label, and
            ``linkage_accuracy`` with its 95 % Clopper-Pearson ``lower`` / ``upper``, ``chance``, the counts and σ.

        Raises:
            ValueError: the release does not hold one noisy image per member.
        """
        split = ctx.split
        z, sigma = _local_release(ctx.target, split)
        q = ctx.member_index[: self.params.max_candidates]
        n = len(q)
        decoys = split.non_members.subset(ctx.non_member_index[: self.params.max_candidates])
        cand = torch.cat([unit_rows(split.members.x[q]), unit_rows(decoys.x)]).float()
        cand_y = torch.cat([split.members.y[q], decoys.y])
        zq, yq = z[q].float(), split.members.y[q]
        hits, chance, matched = 0, 0.0, []
        for i in range(0, n, CHUNK):
            sim = zq[i : i + CHUNK] @ cand.T
            if self.params.use_labels:
                same = yq[i : i + CHUNK, None] == cand_y[None, :]
                sim = sim.masked_fill(~same, -math.inf)
                chance += float((1.0 / same.sum(1).double()).sum())
            else:
                chance += min(CHUNK, n - i) / len(cand)
            matched.append(sim.argmax(1))
            hits += int((matched[-1] == torch.arange(i, i + len(sim))).sum())
        lower, upper = clopper_pearson(hits, n)
        metrics = {"linkage_accuracy": hits / n, "lower": lower, "upper": upper, "chance": chance / n,
                   "n_queries": n, "n_candidates": len(cand), "use_labels": self.params.use_labels, "sigma": sigma}
        pool_x = torch.cat([split.members.x[q], decoys.x])
        first = [int((yq == k).nonzero()[0]) for k in range(split.members.num_classes) if (yq == k).any()]
        return Reconstruction(gray(pool_x[torch.cat(matched)[first]]), yq[first].numpy(), metrics)


class LocalReconstruction(ReconstructionAttack):
    """Denoising a local-noise release.

    For each released image with label y, the class-conditional Wiener (linear MMSE) estimate of its unit-norm source,
    with mean and covariance of the unit-norm population images of class y, rescaled by their mean pixel norm and
    clipped to [0, 1]. Scored by SSIM / MSE to the true source, next to ``prior_ssim`` — the class mean alone, what the
    label gives without the noisy image.

    Settings: ``ImagesParams`` (a seeded random subset of ``max_images`` members).
    """

    name = "local-reconstruct"
    Params = ImagesParams
    release_kind = "local-gaussian"
    needs_images = True
    needs_population = True

    def reconstruct(self, ctx: AttackContext) -> Reconstruction:
        """The class-conditional Wiener estimate of ``max_images`` members' sources from their noisy images, scored.

        Args:
            ctx: the target (its local-noise release), its split and the attacker's population.

        Returns:
            A ``Reconstruction``: the first estimate of each class, ``(H, W)`` grey in [0, 1], its label, and
            ``ssim_to_source`` / ``mse_to_source`` beside the class mean's ``prior_ssim_to_source`` /
            ``prior_mse_to_source``.

        Raises:
            ValueError: no attacker population, or a release without one noisy image per member.
        """
        split = ctx.split
        z, sigma = _local_release(ctx.target, split)
        members, pop = split.members, split.population
        if len(pop) == 0:
            raise ValueError("local-reconstruct needs an attacker population to learn its prior (n_population)")
        pick = torch.randperm(len(members), generator=torch.Generator().manual_seed(ctx.seed))[
            : self.params.max_images]
        shape = members.input_shape
        rec = torch.zeros(len(pick), math.prod(shape), dtype=torch.float64)
        prior = torch.zeros_like(rec)
        for k in members.y[pick].unique().tolist():
            rows = (members.y[pick] == k).nonzero().flatten()
            mu, lam, vecs, scale = population_moments(pop, "unit", k)
            rec[rows] = wiener(z[pick[rows]], mu, lam, vecs, 1.0, sigma**2) * scale
            prior[rows] = mu * scale
        rec, prior = (t.clamp(0, 1).float().view(-1, *shape) for t in (rec, prior))
        src = members.x[pick]
        s_rec, s_prior = ssim(gray(rec), gray(src)), ssim(gray(prior), gray(src))
        labels = members.y[pick]
        metrics = {
            "ssim_to_source": float(s_rec.mean()), "mse_to_source": float((rec - src).pow(2).mean()),
            "prior_ssim_to_source": float(s_prior.mean()), "prior_mse_to_source": float((prior - src).pow(2).mean()),
            "n_reconstructions": len(pick), "estimator": "class-conditional-wiener", "sigma": sigma,
        }  # fmt: skip
        first = [int((labels == k).nonzero()[0]) for k in range(members.num_classes) if (labels == k).any()]
        return Reconstruction(gray(rec[first]), labels[first].numpy(), metrics)
