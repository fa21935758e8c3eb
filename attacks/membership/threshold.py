"""Membership-inference attacks that score examples by one statistic of the target's output.

LOSS (Yeom et al. 2018), confidence and modified entropy (Song & Mittal 2021).
"""

from __future__ import annotations

import numpy as np
import torch

from attacks.base.attack import MembershipAttack
from attacks.base.context import AttackContext
from attacks.base.outputs import MembershipScores
from bench.core.data import ArrayDataset
from bench.core.params import Params
from bench.core.training import logit_confidence, per_example_loss, predict_logits


def modified_entropy(logits: torch.Tensor, y: torch.Tensor) -> np.ndarray:
    """``(N,)`` float64 Song & Mittal's (2021, eq. 2) Mentr = −(1 − p_y)·log p_y − Σ_{i≠y} p_i·log(1 − p_i) (nats).

    Every log(1 − p) is a log-sum-exp of the other logits so that confident outputs stay finite and distinct.
    """
    z = logits.double()
    logp = torch.log_softmax(z, dim=1)
    eye = torch.eye(z.shape[1], dtype=torch.bool)
    # log(1 - p_i) = logsumexp_{j != i} z_j - logsumexp_j z_j, for every i: (N, K)
    log1m = torch.logsumexp(z.unsqueeze(1).masked_fill(eye, float("-inf")), dim=2) - torch.logsumexp(z, 1, True)
    idx = y.view(-1, 1)
    p = logp.exp()
    wrong = (p * log1m).scatter(1, idx, 0.0).sum(1)
    return (-(1.0 - p.gather(1, idx).squeeze(1)) * logp.gather(1, idx).squeeze(1) - wrong).numpy()


class ThresholdParams(Params):
    """Settings of a threshold attack.

    Attributes:
        per_class: standardise the statistic per class with the attacker's population (Song & Mittal's
            class-dependent thresholds); False: one global threshold.
    """

    per_class: bool = True


class _ThresholdAttack(MembershipAttack):
    """A single-statistic threshold attack (Song & Mittal 2021, §3): score = ±statistic of the target's output.

    With ``per_class`` the statistic is standardised with the mean and standard deviation of the target's statistic on
    the attacker's population records of the same class (non-members), which is one threshold per class at a common
    false-positive rate under a Gaussian fit: Song & Mittal's class-dependent thresholds, in a form whose ROC a single
    sweep traces. Classes with fewer than ``MIN_PER_CLASS`` population records, or no population at all, use the raw
    statistic.
    """

    Params = ThresholdParams
    sign = 1.0
    MIN_PER_CLASS = 10

    def statistic(self, logits: torch.Tensor, y: torch.Tensor) -> np.ndarray:
        raise NotImplementedError

    def _stat(self, model, data: ArrayDataset, device: torch.device) -> np.ndarray:
        return self.sign * self.statistic(predict_logits(model, data.x, device=device), data.y)

    def score(self, ctx: AttackContext) -> MembershipScores:
        sides = ctx.sides()
        y = torch.cat([d.y for d in sides]).numpy()
        scores = np.concatenate([self._stat(ctx.target.model, d, ctx.device) for d in sides])
        pop = ctx.split.population
        if self.params.per_class and len(pop):
            ref, ref_y = self._stat(ctx.target.model, pop, ctx.device), pop.y.numpy()
            calibrated = scores.copy()
            for c in np.unique(y):
                r = ref[ref_y == c]
                if r.size >= self.MIN_PER_CLASS and r.std() > 0:
                    calibrated[y == c] = (scores[y == c] - r.mean()) / r.std()
            scores = calibrated
        return MembershipScores(scores, ctx.labels())


class ConfidenceAttack(_ThresholdAttack):
    """Confidence threshold attack (Song & Mittal 2021, Conf).

    A member when the target's confidence in the true class is high. Score = log(p_y / (1 − p_y)), a monotone map of p_y
    that does not saturate at 1. Without ``per_class`` its ROC is the LOSS attack's (both are monotone in p_y).
    """

    name = "confidence"

    def statistic(self, logits: torch.Tensor, y: torch.Tensor) -> np.ndarray:
        """``(N,)`` logit-scaled confidence log(p_y / (1 − p_y)) in the true class (nats)."""
        return logit_confidence(logits, y).numpy()


class EntropyAttack(_ThresholdAttack):
    """Modified-entropy threshold attack (Song & Mittal 2021, Mentr).

    A member when the modified entropy, which rewards a confident correct prediction and penalises a confident wrong
    one, is low. Score = −Mentr.
    """

    name = "entropy"
    sign = -1.0

    def statistic(self, logits: torch.Tensor, y: torch.Tensor) -> np.ndarray:
        """``(N,)`` modified entropy (nats, ``modified_entropy``; the attack scores its negative)."""
        return modified_entropy(logits, y)


class LossAttack(MembershipAttack):
    """LOSS threshold attack (Yeom, Giacomelli, Fredrikson, Jha 2018, §3.2).

    An example is called a member when the target's cross-entropy loss on it is low. Score = −loss (nats).
    """

    name = "loss"

    def score(self, ctx: AttackContext) -> MembershipScores:
        """Score = −cross-entropy loss (nats) of the target per candidate (Yeom et al. 2018, §3.2); members first."""
        scores = [-per_example_loss(ctx.target.model, d.x, d.y, device=ctx.device) for d in ctx.sides()]
        return MembershipScores(np.concatenate(scores), ctx.labels())
