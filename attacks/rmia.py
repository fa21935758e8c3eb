"""RMIA, the relative membership inference attack (Zarifzadeh, Liu, Mittal, Shokri 2024, "Low-cost
high-power membership inference attacks", ICML), offline: reference models that never saw a candidate,
population z-samples, and the offline correction parameter a."""

from __future__ import annotations

import numpy as np
import torch
from scipy.special import logsumexp

from attacks.base import AttackResult, TrainLikeTarget
from attacks.membership import balanced_candidates, labels_for
from attacks.metrics import membership_metrics
from attacks.shadows import concat, default_size, log_softmax, offline_design
from bench.core.data import MembershipSplit
from bench.core.types import TrainedModel


def _log_marginal(log_p_refs: np.ndarray, out_mask: np.ndarray, a: float) -> np.ndarray:
    """log Pr(x) from OUT reference models with the offline correction (RMIA §4.2, eq. 6):
    Pr(x) ≈ ½((1 + a)·mean_OUT Pr(x|θ') + (1 − a)). ``log_p_refs``, ``out_mask``: ``(k, N)``."""
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
        target_z, refs_z: ``(Z,)`` and ``(k, Z)`` on the population z-samples.
        out_z: ``(k, Z)`` bool, reference i did not train on z-sample j (z-samples with no OUT model are dropped).
        a: offline correction in [0, 1]. gamma: threshold γ > 0 on the pairwise likelihood ratio.

    Returns:
        ``(N,)`` scores in [0, 1]: the fraction of z-samples x dominates, plus a tie-break below one step
        (1/(Z+1)) that is increasing in Pr(x|θ)/Pr(x). Given the z-samples the fraction is itself a
        non-decreasing function of Pr(x|θ)/Pr(x), so the tie-break never changes the order it sets.
    """
    keep = out_z.any(0)
    ratio_x = target_x - _log_marginal(refs_x, np.ones_like(refs_x, dtype=bool), a)
    ratio_z = np.sort(target_z[keep] - _log_marginal(refs_z[:, keep], out_z[:, keep], a))
    dominated = np.searchsorted(ratio_z, ratio_x - np.log(gamma), side="right")  # #{z: ratio_x - ratio_z >= log γ}
    tie_break = 0.5 + np.arctan(ratio_x) / np.pi
    return (dominated + tie_break) / (ratio_z.size + 1)


class RMIA:
    """RMIA offline. Reference models are trained like the target on population records (the offline
    shadow design, shared with ``lira-offline`` and ``shadow``); z-samples are population records, with
    Pr(z) taken over the references that did not train on them.

    Args:
        max_per_side: members (and as many non-members) scored.
        num_shadow: reference models (>= 1; the paper's low-cost regime is 1-4).
        a: offline correction of Pr(x) (0.3 here; the paper tunes it per dataset with a reference model).
        gamma: γ > 0, threshold on the pairwise likelihood ratio LR(x, z) (default 1).
        num_z: population z-samples (at most the population).
        shadow_size: records per reference model (None: ``attacks.shadows.default_size``).
    """

    name = "rmia"

    def __init__(self, max_per_side: int | None = None, num_shadow: int = 4, a: float = 0.3, gamma: float = 1.0,
                 num_z: int = 2500, shadow_size: int | None = None) -> None:
        if num_shadow < 1 or not 0.0 <= a <= 1.0 or gamma <= 0 or num_z < 1:
            raise ValueError(f"rmia needs num_shadow >= 1, a in [0, 1], gamma > 0, num_z >= 1; got "
                             f"{num_shadow}, {a}, {gamma}, {num_z}")
        self.max_per_side, self.num_shadow, self.a, self.gamma = max_per_side, num_shadow, a, gamma
        self.num_z, self.shadow_size = num_z, shadow_size

    def run(self, target: TrainedModel, split: MembershipSplit, *, seed: int, device: torch.device,
            train_like_target: TrainLikeTarget) -> AttackResult | None:
        pop = split.population
        if len(pop) < 2:
            return None
        members, non_members = balanced_candidates(split, max_per_side=self.max_per_side, seed=seed)
        cands = concat(members, non_members)
        size = self.shadow_size or max(1, default_size(len(split.members), len(pop), online=False))
        design = offline_design(pop, num=self.num_shadow, size=size, seed=seed)
        z_idx = torch.randperm(len(pop), generator=torch.Generator().manual_seed(seed + 7))[: self.num_z]
        z = pop.subset(z_idx)
        probe = concat(cands, z)

        def true_class_logp(model) -> np.ndarray:
            return log_softmax(model, probe, device=device)[np.arange(len(probe)), probe.y.numpy()]

        refs = design.train(train_like_target, true_class_logp)  # (k, C + Z)
        tgt = true_class_logp(target.model)
        n = len(cands)
        out_z = ~design.inclusion[:, z_idx.numpy()]
        scores = rmia_scores(tgt[:n], refs[:, :n], tgt[n:], refs[:, n:], out_z, a=self.a, gamma=self.gamma)
        labels = labels_for(members, non_members)
        return AttackResult(self.name, scores, labels, membership_metrics(scores, labels))
