"""RMIA, the relative membership inference attack, offline.

(Zarifzadeh, Liu, Mittal, Shokri 2024, "Low-cost high-power membership inference attacks", ICML.) Reference models that
never saw a candidate, population z-samples, and the offline correction parameter a.
"""

from __future__ import annotations

import numpy as np
import torch
from pydantic import Field
from scipy.special import logsumexp

from attacks.base.attack import at_most
from attacks.base.context import AttackContext
from attacks.base.outputs import MembershipScores
from attacks.membership.shadows import OfflineShadows, default_size, log_softmax, offline_design
from bench.core.data import concat
from bench.core.params import Params


def _log_marginal(log_p_refs: np.ndarray, out_mask: np.ndarray, a: float) -> np.ndarray:
    """Log Pr(x) from OUT reference models with the offline correction (RMIA §4.2, eq. 6).

    Pr(x) ≈ ½((1 + a)·mean_OUT Pr(x|θ') + (1 − a)). ``log_p_refs``, ``out_mask``: ``(k, N)``.
    """
    count = out_mask.sum(0)
    masked = np.where(out_mask, log_p_refs, -np.inf)
    log_mean = logsumexp(masked, axis=0) - np.log(np.maximum(count, 1))
    return np.logaddexp(np.log1p(a) + log_mean, np.log1p(-a) if a < 1 else -np.inf) - np.log(2.0)


def rmia_scores(target_x: np.ndarray, refs_x: np.ndarray, target_z: np.ndarray, refs_z: np.ndarray,
                out_z: np.ndarray, *, a: float, gamma: float) -> np.ndarray:
    """RMIA scores: Score(x) = Pr_z[ LR(x, z) >= γ ] with LR(x, z) = (Pr(x|θ)/Pr(x)) / (Pr(z|θ)/Pr(z)).

    Args:
        target_x: ``(N,)`` log Pr(x|θ) of the target on the candidates (log-probability of the true class).
        refs_x: ``(k, N)`` the same for k reference models, all OUT for every candidate.
        target_z: ``(Z,)`` the same on the population z-samples.
        refs_z: ``(k, Z)`` the references on the z-samples.
        out_z: ``(k, Z)`` bool, reference i did not train on z-sample j (z-samples with no OUT model are dropped).
        a: offline correction in [0, 1].
        gamma: threshold γ > 0 on the pairwise likelihood ratio.

    Returns:
        ``(N,)`` in [0, 1]: the fraction of z-samples x dominates, plus an order-preserving tie-break below 1/(Z+1).
    """
    keep = out_z.any(0)
    ratio_x = target_x - _log_marginal(refs_x, np.ones_like(refs_x, dtype=bool), a)
    ratio_z = np.sort(target_z[keep] - _log_marginal(refs_z[:, keep], out_z[:, keep], a))
    dominated = np.searchsorted(ratio_z, ratio_x - np.log(gamma), side="right")  # #{z: ratio_x - ratio_z >= log γ}
    tie_break = 0.5 + np.arctan(ratio_x) / np.pi
    return (dominated + tie_break) / (ratio_z.size + 1)


DEFAULT_Z = 2500  # z-samples when num_z is not set (at most the population)


class RMIAParams(Params):
    """RMIA's settings.

    Attributes:
        num_shadow: reference models (>= 1; the paper's low-cost regime is 1-4).
        a: offline correction of Pr(x), in [0, 1] (0.3 here; the paper tunes it per dataset with a reference model).
        gamma: γ > 0, threshold on the pairwise likelihood ratio LR(x, z).
        num_z: population z-samples (1 to n_population; None: min(2500, the population), the paper's scale).
        shadow_size: records per reference model (None: ``attacks.membership.shadows.default_size``).
    """

    num_shadow: int = Field(4, ge=1)
    a: float = Field(0.3, ge=0, le=1)
    gamma: float = Field(1.0, gt=0)
    num_z: int | None = Field(None, ge=1)
    shadow_size: int | None = Field(None, ge=1)


class RMIA(OfflineShadows):
    """RMIA offline.

    Reference models are trained like the target on population records (the offline shadow design, shared with
    ``lira-offline`` and ``shadow``); z-samples are population records, with Pr(z) taken over the references that did
    not train on them. Settings: ``RMIAParams``.
    """

    name = "rmia"
    Params = RMIAParams

    def size_problem(self, *, n_members: int, n_population: int) -> str | None:
        """``num_z`` z-samples, the references' records (``OfflineShadows.size_problem``): from the population."""
        return at_most(self.name, "num_z", self.params.num_z, n_population, "n_population") or \
            super().size_problem(n_members=n_members, n_population=n_population)

    def score(self, ctx: AttackContext) -> MembershipScores:
        """RMIA offline's scores of the candidates (Zarifzadeh et al. 2024; the offline correction: §4.2).

        Trains ``num_shadow`` reference models on population records, draws ``num_z`` (default ``DEFAULT_Z``) population
        z-samples, and compares each candidate's true-class log-probability with theirs (``rmia_scores``).

        Args:
            ctx: the target, its split and the attacker's population and training function.

        Returns:
            ``MembershipScores`` with ``(N,)`` scores in [0, 1] (larger: member), ``extra`` the number of references.

        Raises:
            ValueError: fewer than 2 attacker population records.
        """
        p, pop = self.params, ctx.split.population
        if len(pop) < 2:
            raise ValueError(f"rmia needs at least 2 attacker population records (n_population), got {len(pop)}")
        cands = ctx.candidates()
        size = p.shadow_size or max(1, default_size(len(ctx.split.members), len(pop), online=False))
        design = offline_design(pop, num=p.num_shadow, size=size, seed=ctx.seed)
        z_idx = torch.randperm(len(pop), generator=torch.Generator().manual_seed(ctx.seed + 7))[: p.num_z or DEFAULT_Z]
        probe = concat(cands, pop.subset(z_idx))

        def true_class_logp(model) -> np.ndarray:
            return log_softmax(model, probe, device=ctx.device)[np.arange(len(probe)), probe.y.numpy()]

        refs = design.train(ctx.train_like_target, true_class_logp)  # (k, C + Z)
        tgt = true_class_logp(ctx.target.model)
        n = len(cands)
        out_z = ~design.inclusion[:, z_idx.numpy()]
        scores = rmia_scores(tgt[:n], refs[:, :n], tgt[n:], refs[:, n:], out_z, a=p.a, gamma=p.gamma)
        return MembershipScores(scores, ctx.labels(), extra={"num_shadow": p.num_shadow})
