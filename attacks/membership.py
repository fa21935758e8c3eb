"""Membership-inference attacks that score examples against a trained target."""

from __future__ import annotations

import numpy as np
import torch

from attacks.base import AttackResult
from attacks.metrics import membership_metrics
from bench.core.data import ArrayDataset, MembershipSplit
from bench.core.training import per_example_loss, predict_logits
from bench.core.types import TrainedModel


def balanced_candidates(split: MembershipSplit, *, max_per_side: int | None, seed: int
                        ) -> tuple[ArrayDataset, ArrayDataset]:
    """Equal numbers of members and non-members (at most ``max_per_side`` each), drawn with ``seed``."""
    n = min(len(split.members), len(split.non_members))
    if max_per_side is not None:
        n = min(n, max_per_side)
    gen = torch.Generator().manual_seed(seed)
    pick = lambda d: d.subset(torch.randperm(len(d), generator=gen)[:n])  # noqa: E731
    return pick(split.members), pick(split.non_members)


def labels_for(members: ArrayDataset, non_members: ArrayDataset) -> np.ndarray:
    """``(N,)`` int64 membership labels for ``concat(members, non_members)``: ones then zeros."""
    return np.concatenate([np.ones(len(members), np.int64), np.zeros(len(non_members), np.int64)])


def output_statistics(logits: torch.Tensor, y: torch.Tensor) -> dict[str, np.ndarray]:
    """Per-example statistics of a model's outputs ``(N, K)`` on labelled examples, all ``(N,)`` float64:
    ``logit_confidence`` = log(p_y / (1 − p_y)) and ``modified_entropy`` (Song & Mittal 2021, eq. 2)
    Mentr = −(1 − p_y)·log p_y − Σ_{i≠y} p_i·log(1 − p_i), with every log(1 − p) taken as a log-sum-exp of
    the other logits so that confident outputs stay finite and distinct."""
    z = logits.double()
    logp = torch.log_softmax(z, dim=1)
    k = z.shape[1]
    eye = torch.eye(k, dtype=torch.bool)
    # log(1 - p_i) = logsumexp_{j != i} z_j - logsumexp_j z_j, for every i: (N, K)
    log1m = torch.logsumexp(z.unsqueeze(1).masked_fill(eye, float("-inf")), dim=2) - torch.logsumexp(z, 1, True)
    idx = y.view(-1, 1)
    logp_y, log1m_y = logp.gather(1, idx).squeeze(1), log1m.gather(1, idx).squeeze(1)
    p = logp.exp()
    wrong = (p * log1m).scatter(1, idx, 0.0).sum(1)
    mentr = -(1.0 - p.gather(1, idx).squeeze(1)) * logp_y - wrong
    return {"logit_confidence": (logp_y - log1m_y).numpy(), "modified_entropy": mentr.numpy()}


class _ThresholdAttack:
    """A single-statistic threshold attack (Song & Mittal 2021, §3): score = ±statistic of the target's
    output. With ``per_class`` the statistic is standardised with the mean and standard deviation of the
    target's statistic on the attacker's population records of the same class (non-members), which is
    one threshold per class at a common false-positive rate under a Gaussian fit: Song & Mittal's
    class-dependent thresholds, in a form whose ROC a single sweep traces. Classes with fewer than
    ``MIN_PER_CLASS`` population records, or no population at all, use the raw statistic."""

    name = ""
    statistic = ""
    sign = 1.0
    MIN_PER_CLASS = 10

    def __init__(self, max_per_side: int | None = None, per_class: bool = True) -> None:
        self.max_per_side, self.per_class = max_per_side, per_class

    def _stat(self, model, data: ArrayDataset, device: torch.device) -> np.ndarray:
        return self.sign * output_statistics(predict_logits(model, data.x, device=device), data.y)[self.statistic]

    def run(self, target: TrainedModel, split: MembershipSplit, *, seed: int, device: torch.device,
            train_like_target=None) -> AttackResult:
        members, non_members = balanced_candidates(split, max_per_side=self.max_per_side, seed=seed)
        y = torch.cat([members.y, non_members.y]).numpy()
        scores = np.concatenate([self._stat(target.model, d, device) for d in (members, non_members)])
        if self.per_class and len(split.population):
            ref, ref_y = self._stat(target.model, split.population, device), split.population.y.numpy()
            calibrated = scores.copy()
            for c in np.unique(y):
                r = ref[ref_y == c]
                if r.size >= self.MIN_PER_CLASS and r.std() > 0:
                    calibrated[y == c] = (scores[y == c] - r.mean()) / r.std()
            scores = calibrated
        labels = labels_for(members, non_members)
        return AttackResult(self.name, scores, labels, membership_metrics(scores, labels))


class ConfidenceAttack(_ThresholdAttack):
    """Confidence threshold attack (Song & Mittal 2021, Conf): a member when the target's confidence in the
    true class is high. Score = log(p_y / (1 − p_y)), a monotone map of p_y that does not saturate at 1.
    Without ``per_class`` its ROC is the LOSS attack's (both are monotone in p_y)."""

    name = "confidence"
    statistic = "logit_confidence"


class EntropyAttack(_ThresholdAttack):
    """Modified-entropy threshold attack (Song & Mittal 2021, Mentr): a member when the modified entropy,
    which rewards a confident correct prediction and penalises a confident wrong one, is low.
    Score = −Mentr."""

    name = "entropy"
    statistic = "modified_entropy"
    sign = -1.0


class LossAttack:
    """LOSS threshold attack (Yeom, Giacomelli, Fredrikson, Jha 2018, §3.2): an example is called a
    member when the target's cross-entropy loss on it is low. Score = −loss (nats).

    Args:
        max_per_side: at most this many members and as many non-members are scored (None: all).
    """

    name = "loss"

    def __init__(self, max_per_side: int | None = None) -> None:
        self.max_per_side = max_per_side

    def run(self, target: TrainedModel, split: MembershipSplit, *, seed: int, device: torch.device,
            train_like_target=None) -> AttackResult:
        members, non_members = balanced_candidates(split, max_per_side=self.max_per_side, seed=seed)
        scores = np.concatenate([
            -per_example_loss(target.model, members.x, members.y, device=device),
            -per_example_loss(target.model, non_members.x, non_members.y, device=device),
        ])
        labels = labels_for(members, non_members)
        return AttackResult(self.name, scores, labels, membership_metrics(scores, labels))
