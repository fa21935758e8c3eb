"""The likelihood-ratio attack.

LiRA (Carlini, Chien, Nasr, Song, Terzis, Tramèr 2022, "Membership inference attacks from first principles", IEEE S&P),
online and offline.
"""

from __future__ import annotations

import numpy as np
from pydantic import Field
from scipy.stats import norm

from attacks.base.attack import MembershipAttack, at_most
from attacks.base.context import AttackContext
from attacks.base.outputs import MembershipScores
from attacks.membership.shadows import OfflineShadows, default_size, offline_design, online_design, query
from bench.core.params import Params

GLOBAL_VARIANCE_BELOW = 64  # Carlini et al. §VI-A: below 64 shadow models a global variance works better
MIN_STD = 1e-4


def gaussian_fit(values: np.ndarray, mask: np.ndarray, *, global_variance: bool) -> tuple[np.ndarray, np.ndarray]:
    """Per-example ``(mean, std)``, each ``(N, A)``, of ``(k, N, A)`` shadow statistics (Carlini et al. 2022).

    ``mask`` ``(k, N)``: the shadows counted per example; ``global_variance``: one pooled variance per query.
    Std >= ``MIN_STD``.

    Raises:
        ValueError: an example with no shadow in its group.
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
    """``(N,)`` LiRA scores of the target's ``(N, A)`` statistics against the shadows' ``(k, N, A)``.

    Online (``keep`` ``(k, N)``: IN): mean over queries of log N(φ; μ_in, σ_in²) − log N(φ; μ_out, σ_out²); offline
    (None): mean of −log P[Z > (φ − μ_out)/σ_out] (§IV-C, ``logsf``: confident members keep distinct scores).
    """
    out_mask = np.ones(shadows.shape[:2], dtype=bool) if keep is None else ~keep
    mu_out, sd_out = gaussian_fit(shadows, out_mask, global_variance=global_variance)
    if keep is None:
        return -norm.logsf((target - mu_out) / sd_out).mean(1)
    mu_in, sd_in = gaussian_fit(shadows, keep, global_variance=global_variance)
    return (norm.logpdf(target, mu_in, sd_in) - norm.logpdf(target, mu_out, sd_out)).mean(1)


class LiRAParams(Params):
    """LiRA's settings.

    Attributes:
        num_shadow: shadow models (online: >= 4, rounded up to an even number; offline: >= 2).
        augment: also query the horizontal flip and four one-pixel shifts and average the per-query tests.
        shadow_size: records per shadow (None: ``attacks.membership.shadows.default_size``).
        global_variance: one variance per query for all examples; None: when num_shadow < 64.
    """

    num_shadow: int = Field(16, ge=4)
    augment: bool = False
    shadow_size: int | None = Field(None, ge=1)
    global_variance: bool | None = None


class LiRAOfflineParams(LiRAParams):
    """LiRA offline's settings (as ``LiRAParams``; num_shadow >= 2)."""

    num_shadow: int = Field(16, ge=2)


class LiRA(MembershipAttack):
    """LiRA: per-example Gaussian fits across shadow models and a likelihood-ratio test on the target.

    LiRA: per-example Gaussian fits of the logit-scaled confidence φ = log(p_y/(1 − p_y)) across shadow
    models trained like the target, and a likelihood-ratio test on the target's φ.

    Online: shadows are trained on random halves of the (unlabeled) candidate set topped up with population
    records, so each candidate is IN for half of them; score = Gaussian log-likelihood ratio IN vs OUT.
    Offline (``lira-offline``): shadows train on population records only; score = one-sided test against the
    OUT Gaussian. Settings: ``LiRAParams``.
    """

    name = "lira"
    Params = LiRAParams
    online = True

    def size_problem(self, *, n_members: int, n_population: int) -> str | None:
        """Online shadows hold half the candidates topped up from the population: ``shadow_size`` <= both together."""
        return at_most(self.name, "shadow_size", self.params.shadow_size, n_members + n_population,
                       "n_members + n_population")

    def score(self, ctx: AttackContext) -> MembershipScores:
        """LiRA's scores: train the shadows, fit the Gaussians, test the target's φ (Carlini et al. 2022).

        Online: each of the (even) shadows holds half of the candidates, at most the shadows' size a side scored;
        offline: shadows on population records only. ``global_variance`` None: one variance when fewer than
        ``GLOBAL_VARIANCE_BELOW`` shadows (§VI-A).

        Args:
            ctx: the target, its split and the attacker's population and training function.

        Returns:
            ``MembershipScores`` of ``lira_scores`` (larger: member), ``extra`` the number of shadows trained.

        Raises:
            ValueError: offline with no attacker population to train OUT shadows on.
        """
        p, split, pop = self.params, ctx.split, ctx.split.population
        num_shadow = p.num_shadow + (p.num_shadow % 2 if self.online else 0)
        global_variance = p.num_shadow < GLOBAL_VARIANCE_BELOW if p.global_variance is None else p.global_variance
        if self.online:
            n_side = len(ctx.member_index)
            size = p.shadow_size or default_size(len(split.members), len(pop), online=True, n_candidates=2 * n_side)
            limit = min(n_side, size)
            cands = ctx.candidates(limit)
            half = (len(cands) + 1) // 2  # every shadow holds half of the candidates, topped up from the population
            design, keep = online_design(cands, pop, num=num_shadow, size=min(max(size, half), half + len(pop)),
                                         seed=ctx.seed)
        else:
            size = p.shadow_size or default_size(len(split.members), len(pop), online=False)
            if size < 1:
                raise ValueError("lira-offline needs an attacker population to train OUT shadows on (n_population)")
            limit = None
            cands = ctx.candidates()
            design, keep = offline_design(pop, num=num_shadow, size=size, seed=ctx.seed), None
        stats = design.train(ctx.train_like_target,
                             lambda m: query(m, cands, device=ctx.device, augment=p.augment))
        phi = query(ctx.target.model, cands, device=ctx.device, augment=p.augment)
        scores = lira_scores(phi, stats, keep, global_variance=global_variance)
        return MembershipScores(scores, ctx.labels(limit), extra={"num_shadow": num_shadow})


class LiRAOffline(OfflineShadows, LiRA):
    """LiRA offline (population-only shadows), registered as ``lira-offline`` so both variants can run."""

    name = "lira-offline"
    Params = LiRAOfflineParams
    online = False
