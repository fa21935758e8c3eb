"""The shadow-model attack (Shokri, Stronati, Song, Shmatikov 2017, "Membership inference attacks against
machine learning models", IEEE S&P): shadow models trained like the target on the attacker's population,
and attack classifiers (scikit-learn) that learn IN vs OUT from the shadows' outputs, one per class."""

from __future__ import annotations

import numpy as np
import torch
from sklearn.ensemble import HistGradientBoostingClassifier
from threadpoolctl import threadpool_limits

from attacks.base import AttackResult, TrainLikeTarget
from attacks.membership import balanced_candidates, labels_for
from attacks.metrics import membership_metrics
from attacks.shadows import concat, default_size, log_softmax, offline_design
from bench.core.data import MembershipSplit
from bench.core.types import TrainedModel


def attack_features(logp: np.ndarray, y: np.ndarray, *, per_class: bool) -> np.ndarray:
    """Features of the attack classifier from log-probabilities ``(N, K)`` and labels ``(N,)``.

    Per-class models see the whole log-probability vector (Shokri et al. §V-C: the prediction vector) and
    the logit-scaled confidence log(p_y / (1 − p_y)); the fallback model, shared by all classes, sees the
    label-free sorted vector and the same confidence. Returns ``(N, K + 1)`` float64.
    """
    logp = np.maximum(logp, -100.0)  # a finite floor for log(0)
    rows = np.arange(len(y))
    true = logp[rows, y]
    others = logp.copy()
    others[rows, y] = -np.inf
    top_other = np.max(others, axis=1)
    log1m = top_other + np.log(np.exp(others - top_other[:, None]).sum(1))
    conf = (true - log1m)[:, None]
    vec = logp if per_class else -np.sort(-logp, axis=1)
    return np.concatenate([conf, vec], axis=1)


class ShadowModelAttack:
    """Shokri et al.'s attack: k shadows trained like the target on population subsets (the offline design,
    shared with ``lira-offline`` and ``rmia``); each shadow's outputs on its own training records are
    labelled IN and on the rest of the population OUT; a gradient-boosted classifier per true class (where
    that class has at least ``min_per_class`` IN and OUT rows; else one shared model) learns IN vs OUT.
    Score = the classifier's log-odds of IN on the target's output.

    Args:
        max_per_side: members (and as many non-members) scored.
        num_shadow: shadow models (>= 1).
        shadow_size: records per shadow (None: ``attacks.shadows.default_size``, at most half the population).
        min_per_class: IN and OUT rows a class needs for its own attack model.
        max_rows: attack-training rows kept (a random subset, for speed).
    """

    name = "shadow"

    def __init__(self, max_per_side: int | None = None, num_shadow: int = 4, shadow_size: int | None = None,
                 min_per_class: int = 100, max_rows: int = 40_000) -> None:
        if num_shadow < 1 or min_per_class < 1 or max_rows < 2:
            raise ValueError(f"shadow needs num_shadow >= 1, min_per_class >= 1, max_rows >= 2; got "
                             f"{num_shadow}, {min_per_class}, {max_rows}")
        self.max_per_side, self.num_shadow, self.shadow_size = max_per_side, num_shadow, shadow_size
        self.min_per_class, self.max_rows = min_per_class, max_rows

    def _fit(self, features: np.ndarray, labels: np.ndarray, seed: int) -> HistGradientBoostingClassifier:
        clf = HistGradientBoostingClassifier(max_iter=100, learning_rate=0.1, random_state=seed)
        with threadpool_limits(limits=1, user_api="openmp"):  # OpenMP spin-waits collapse on a busy machine
            return clf.fit(features, labels)

    def run(self, target: TrainedModel, split: MembershipSplit, *, seed: int, device: torch.device,
            train_like_target: TrainLikeTarget) -> AttackResult | None:
        pop = split.population
        size = self.shadow_size or default_size(len(split.members), len(pop), online=False)
        if size < 1 or size >= len(pop):
            return None  # needs population records both IN and OUT of each shadow
        design = offline_design(pop, num=self.num_shadow, size=size, seed=seed)
        outputs = design.train(train_like_target, lambda m: log_softmax(m, pop, device=device))  # (k, P, K)
        k, n_pop, n_cls = outputs.shape
        logp, inside = outputs.reshape(k * n_pop, n_cls), design.inclusion.reshape(-1).astype(np.int64)
        y = np.tile(pop.y.numpy(), k)
        rng = np.random.default_rng(seed)
        rows = rng.permutation(len(y))[: self.max_rows]
        logp, inside, y = logp[rows], inside[rows], y[rows]

        members, non_members = balanced_candidates(split, max_per_side=self.max_per_side, seed=seed)
        cands = concat(members, non_members)
        t_logp, t_y = log_softmax(target.model, cands, device=device), cands.y.numpy()
        shared = self._fit(attack_features(logp, y, per_class=False), inside, seed)
        with threadpool_limits(limits=1, user_api="openmp"):
            scores = shared.decision_function(attack_features(t_logp, t_y, per_class=False))
            for c in np.unique(t_y):
                sel = y == c
                n_in = int(inside[sel].sum())
                if min(n_in, int(sel.sum()) - n_in) < self.min_per_class:
                    continue
                model = self._fit(attack_features(logp[sel], y[sel], per_class=True), inside[sel], seed)
                scores[t_y == c] = model.decision_function(attack_features(t_logp[t_y == c], t_y[t_y == c],
                                                                           per_class=True))
        labels = labels_for(members, non_members)
        return AttackResult(self.name, scores, labels, membership_metrics(scores, labels))
