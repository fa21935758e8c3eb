"""The shadow-model attack of Shokri et al. (2017).

The shadow-model attack (Shokri, Stronati, Song, Shmatikov 2017, "Membership inference attacks against
machine learning models", IEEE S&P): shadow models trained like the target on the attacker's population,
and attack classifiers (scikit-learn) that learn IN vs OUT from the shadows' outputs, one per class.
"""

from __future__ import annotations

import numpy as np
import torch
from pydantic import Field
from sklearn.ensemble import HistGradientBoostingClassifier
from threadpoolctl import threadpool_limits

from attacks.base.context import AttackContext
from attacks.base.outputs import MembershipScores
from attacks.membership.shadows import OfflineShadows, ShadowDesign, default_size, log_softmax, offline_design
from bench.core.params import Params
from bench.core.training import logit_confidence


def attack_features(logp: np.ndarray, y: np.ndarray, *, per_class: bool) -> np.ndarray:
    """``(N, K + 1)`` attack-classifier features (Shokri et al. 2017, §V-C): log(p_y/(1 − p_y)), then the log-probs.

    Per class: the ``(N, K)`` log-probabilities as given; shared (``per_class`` False): sorted, label-free. Floor −100.
    """
    logp = np.maximum(logp, -100.0)  # a finite floor for log(0)
    conf = logit_confidence(torch.from_numpy(logp), torch.from_numpy(np.asarray(y, np.int64))).numpy()[:, None]
    vec = logp if per_class else -np.sort(-logp, axis=1)
    return np.concatenate([conf, vec], axis=1)


class ShadowParams(Params):
    """Settings of Shokri et al.'s attack.

    Attributes:
        num_shadow: shadow models (>= 1).
        shadow_size: records per shadow (None: ``attacks.membership.shadows.default_size``, at most half the
            population).
        min_per_class: IN and OUT rows a class needs for its own attack model (>= 1).
        max_rows: attack-training rows kept (a random subset, for speed; >= 2).
    """

    num_shadow: int = Field(4, ge=1)
    shadow_size: int | None = Field(None, ge=1)
    min_per_class: int = Field(100, ge=1)
    max_rows: int = Field(40_000, ge=2)


class ShadowModelAttack(OfflineShadows):
    """Shokri et al.'s attack: k shadows trained like the target on population subsets.

    (the offline design, shared with ``lira-offline`` and ``rmia``.) Each shadow's outputs on its own training records
    are labelled IN and on the rest of the population OUT; a gradient-boosted classifier per true class (where that
    class has at least ``min_per_class`` IN and OUT rows; else one shared model) learns IN vs OUT. Score = the
    classifier's log-odds of IN on the target's output. Settings: ``ShadowParams``.
    """

    name = "shadow"
    Params = ShadowParams

    def _fit(self, features: np.ndarray, labels: np.ndarray, seed: int) -> HistGradientBoostingClassifier:
        clf = HistGradientBoostingClassifier(max_iter=100, learning_rate=0.1, random_state=seed)
        with threadpool_limits(limits=1, user_api="openmp"):  # OpenMP spin-waits collapse on a busy machine
            return clf.fit(features, labels)

    def _training_rows(self, ctx: AttackContext) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(log-probabilities (R, K), IN labels (R,), classes (R,)) of the shadows on the population."""
        pop = ctx.split.population
        design = self._design(ctx)
        outputs = design.train(ctx.train_like_target, lambda m: log_softmax(m, pop, device=ctx.device))  # (k, P, K)
        k, n_pop, n_cls = outputs.shape
        logp, inside = outputs.reshape(k * n_pop, n_cls), design.inclusion.reshape(-1).astype(np.int64)
        y = np.tile(pop.y.numpy(), k)
        rows = np.random.default_rng(ctx.seed).permutation(len(y))[: self.params.max_rows]
        return logp[rows], inside[rows], y[rows]

    def _design(self, ctx: AttackContext) -> ShadowDesign:
        pop = ctx.split.population
        size = self.params.shadow_size or default_size(len(ctx.split.members), len(pop), online=False)
        if size < 1 or size >= len(pop):
            raise ValueError(f"shadow needs population records both IN and OUT of each shadow; n_population = "
                             f"{len(pop)} gives shadow size {size}")
        return offline_design(pop, num=self.params.num_shadow, size=size, seed=ctx.seed)

    def prefetch(self, ctx: AttackContext) -> None:
        """Submit the offline shadows (lira-offline, rmia reuse them); ValueError for a size leaving none IN or OUT."""
        ctx.train_like_target.prefetch([(data, seed, None) for data, seed in self._design(ctx).jobs()])

    def score(self, ctx: AttackContext) -> MembershipScores:
        """Shokri et al.'s scores: the attack classifiers' log-odds of IN on the target's outputs.

        The shared classifier scores every candidate; a class with at least ``min_per_class`` IN and OUT rows gets its
        own classifier, whose scores replace the shared one's there.

        Args:
            ctx: the target, its split and the attacker's population and training function.

        Returns:
            ``MembershipScores`` (``(N,)`` log-odds, larger: member), ``extra`` the number of shadows.

        Raises:
            ValueError: a shadow size that leaves no population record IN or OUT of each shadow.
        """
        logp, inside, y = self._training_rows(ctx)
        cands = ctx.candidates()
        t_logp, t_y = log_softmax(ctx.target.model, cands, device=ctx.device), cands.y.numpy()
        shared = self._fit(attack_features(logp, y, per_class=False), inside, ctx.seed)
        with threadpool_limits(limits=1, user_api="openmp"):
            scores = shared.decision_function(attack_features(t_logp, t_y, per_class=False))
            for c in np.unique(t_y):
                sel = y == c
                n_in = int(inside[sel].sum())
                if min(n_in, int(sel.sum()) - n_in) < self.params.min_per_class:
                    continue
                model = self._fit(attack_features(logp[sel], y[sel], per_class=True), inside[sel], ctx.seed)
                scores[t_y == c] = model.decision_function(attack_features(t_logp[t_y == c], t_y[t_y == c],
                                                                           per_class=True))
        return MembershipScores(scores, ctx.labels(), extra={"num_shadow": self.params.num_shadow})
