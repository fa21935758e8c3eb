"""The likelihood-ratio attack, LiRA (Carlini, Chien, Nasr, Song, Terzis, Tramèr 2022, "Membership
inference attacks from first principles", IEEE S&P), online and offline."""

from __future__ import annotations

import numpy as np
import torch
from scipy.stats import norm

from attacks.base import AttackResult, TrainLikeTarget
from attacks.membership import balanced_candidates, labels_for
from attacks.metrics import membership_metrics
from attacks.shadows import concat, default_size, offline_design, online_design, query
from bench.core.data import MembershipSplit
from bench.core.types import TrainedModel

GLOBAL_VARIANCE_BELOW = 64  # Carlini et al. §VI-A: below 64 shadow models a global variance works better
MIN_STD = 1e-4


def gaussian_fit(values: np.ndarray, mask: np.ndarray, *, global_variance: bool) -> tuple[np.ndarray, np.ndarray]:
    """Per-example means and standard deviations of shadow statistics.

    Args:
        values: ``(k, N, A)`` statistics of k shadows on N examples and A queries each.
        mask: ``(k, N)`` bool, which shadows count for each example (e.g. the OUT ones); >= 1 per example.
        global_variance: pool the squared deviations from each example's mean over all examples (one
            variance per query) instead of one variance per example.

    Returns:
        ``(mean, std)``, each ``(N, A)``; std at least ``MIN_STD``.
    """
    w = mask[..., None].astype(np.float64)
    count = w.sum(0)  # (N, 1)
    if (count < 1).any():
        raise ValueError("every example needs at least one shadow model in its group")
    mean = (values * w).sum(0) / count
    sq = ((values - mean) ** 2 * w).sum(0)  # (N, A)
    if global_variance:
        dof = max(float((count - 1).sum()), 1.0)
        var = np.broadcast_to(sq.sum(0, keepdims=True) / dof, mean.shape)
    else:
        var = sq / np.maximum(count - 1, 1)
    return mean, np.maximum(np.sqrt(var), MIN_STD)


def lira_scores(target: np.ndarray, shadows: np.ndarray, keep: np.ndarray | None, *,
                global_variance: bool) -> np.ndarray:
    """LiRA membership scores from logit-scaled confidences.

    Args:
        target: ``(N, A)`` the target's statistics on the N candidates (A queries each).
        shadows: ``(k, N, A)`` the shadows' statistics on the same candidates.
        keep: ``(k, N)`` bool, candidate j was IN shadow i (online); ``None`` for offline (all OUT).
        global_variance: see ``gaussian_fit``.

    Returns:
        ``(N,)``: online, the mean over queries of log N(φ; μ_in, σ_in²) − log N(φ; μ_out, σ_out²);
        offline, the mean over queries of −log P[Z > (φ − μ_out)/σ_out] (one-sided test, §IV-C),
        computed with ``logsf`` so that very confident members keep distinct scores.
    """
    out_mask = np.ones(shadows.shape[:2], dtype=bool) if keep is None else ~keep
    mu_out, sd_out = gaussian_fit(shadows, out_mask, global_variance=global_variance)
    if keep is None:
        return -norm.logsf((target - mu_out) / sd_out).mean(1)
    mu_in, sd_in = gaussian_fit(shadows, keep, global_variance=global_variance)
    return (norm.logpdf(target, mu_in, sd_in) - norm.logpdf(target, mu_out, sd_out)).mean(1)


class LiRA:
    """LiRA: per-example Gaussian fits of the logit-scaled confidence φ = log(p_y/(1 − p_y)) across shadow
    models trained like the target, and a likelihood-ratio test on the target's φ.

    Online: shadows are trained on random halves of the (unlabeled) candidate set topped up with population
    records, so each candidate is IN for half of them; score = Gaussian log-likelihood ratio IN vs OUT.
    Offline: shadows train on population records only; score = one-sided test against the OUT Gaussian.

    Args:
        max_per_side: members (and as many non-members) scored; online, at most the shadow size each.
        num_shadow: shadow models (online: >= 4, rounded up to an even number; offline: >= 2).
        online: online (True) or offline (False) variant.
        augment: also query the horizontal flip and four one-pixel shifts and average the per-query tests.
        shadow_size: records per shadow (None: ``attacks.shadows.default_size``).
        global_variance: one variance per query for all examples; None: when num_shadow < 64.
    """

    name = "lira"

    def __init__(self, max_per_side: int | None = None, num_shadow: int = 16, online: bool = True,
                 augment: bool = False, shadow_size: int | None = None, global_variance: bool | None = None) -> None:
        if num_shadow < (4 if online else 2):  # a variance needs two shadows in each group (IN / OUT)
            raise ValueError(f"lira needs num_shadow >= {4 if online else 2} ({'online' if online else 'offline'})"
                             f", got {num_shadow}")
        self.max_per_side, self.online, self.augment = max_per_side, online, augment
        self.num_shadow = num_shadow + (num_shadow % 2 if online else 0)
        self.shadow_size = shadow_size
        self.global_variance = num_shadow < GLOBAL_VARIANCE_BELOW if global_variance is None else global_variance

    def run(self, target: TrainedModel, split: MembershipSplit, *, seed: int, device: torch.device,
            train_like_target: TrainLikeTarget) -> AttackResult | None:
        pop = split.population
        if self.online:
            n_side = min(len(split.members), len(split.non_members), self.max_per_side or len(split.members))
            size = self.shadow_size or default_size(len(split.members), len(pop), online=True,
                                                    n_candidates=2 * n_side)
            members, non_members = balanced_candidates(split, max_per_side=min(n_side, size), seed=seed)
            cands = concat(members, non_members)
            half = (len(cands) + 1) // 2  # every shadow holds half of the candidates, topped up from the population
            design, keep = online_design(cands, pop, num=self.num_shadow, size=min(max(size, half), half + len(pop)),
                                         seed=seed)
        else:
            size = self.shadow_size or default_size(len(split.members), len(pop), online=False)
            if size < 1:
                return None  # no attacker data to train OUT shadows on
            members, non_members = balanced_candidates(split, max_per_side=self.max_per_side, seed=seed)
            cands = concat(members, non_members)
            design, keep = offline_design(pop, num=self.num_shadow, size=size, seed=seed), None
        stats = design.train(train_like_target, lambda m: query(m, cands, device=device, augment=self.augment))
        phi = query(target.model, cands, device=device, augment=self.augment)
        scores = lira_scores(phi, stats, keep, global_variance=self.global_variance)
        labels = labels_for(members, non_members)
        return AttackResult(self.name, scores, labels, membership_metrics(scores, labels))


class LiRAOffline(LiRA):
    """LiRA offline (population-only shadows), registered as ``lira-offline`` so both variants can run."""

    name = "lira-offline"

    def __init__(self, max_per_side: int | None = None, num_shadow: int = 16, augment: bool = False,
                 shadow_size: int | None = None, global_variance: bool | None = None) -> None:
        super().__init__(max_per_side, num_shadow, False, augment, shadow_size, global_variance)
