"""De-mixing a DPMix release, which needs no model: the Wiener estimate of its records.

Every prior comes from the attacker's population.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from attacks.base.attack import ReconstructionAttack
from attacks.base.context import AttackContext
from attacks.base.outputs import Reconstruction
from attacks.base.priors import ImagesParams, dpmix_prior, dpmix_release, wiener
from attacks.reconstruction.scoring import gray, nearest_scores


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
        z, sigma, ell = dpmix_release(ctx.target)
        split = ctx.split
        shape, k = split.members.input_shape, split.members.num_classes
        d_x = math.prod(shape)
        mu, lam, vecs = dpmix_prior(split, z, sigma, ell)
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


