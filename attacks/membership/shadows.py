"""Shadow / reference models shared by the shadow-model attacks (Shokri, LiRA, RMIA).

Who trains on what, and what each trained model outputs.

Design notes: docs/design-notes.md.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from attacks.base.attack import MembershipAttack, at_most
from attacks.base.context import TrainLikeTarget
from bench.core.data import ArrayDataset, concat
from bench.core.training import logit_confidence, predict_logits

_KIND_OFFSET = {"offline": 0, "online": 500_000, "multi-run": 600_000, "canary": 900_000, "crafted": 900_100}


def shadow_seed(seed: int, kind: str, index: int) -> int:
    """Seed of shadow ``index`` of design ``kind``, unlike the target's and other designs' (KeyError: bad kind)."""
    return (seed + 1) * 1_000_003 + _KIND_OFFSET[kind] + index


def canonical_order(data: ArrayDataset) -> np.ndarray:
    """``(N,)`` int64 permutation of ``data``'s rows, sorted by the SHA-256 of image and label.

    A design built on it does not depend on how the candidates were listed.
    """
    x = data.x.contiguous().numpy().reshape(len(data), -1)
    y = data.y.numpy()
    digests = [hashlib.sha256(x[i].tobytes() + int(y[i]).to_bytes(8, "little")).hexdigest() for i in range(len(data))]
    return np.argsort(np.asarray(digests), kind="stable")


@dataclass(frozen=True)
class ShadowDesign:
    """Which rows of ``universe`` each shadow trains on.

    Attributes:
        universe: every record a shadow may train on.
        inclusion: ``(k, len(universe))`` bool, row i = shadow i's training set.
        seeds: the k training seeds.
    """

    universe: ArrayDataset
    inclusion: np.ndarray
    seeds: tuple[int, ...]

    def __len__(self) -> int:
        return len(self.seeds)

    def jobs(self) -> list[tuple[ArrayDataset, int]]:
        """One ``(training set, seed)`` per shadow, in the design's order."""
        return [(self.universe.subset(torch.from_numpy(np.flatnonzero(keep))), seed)
                for keep, seed in zip(self.inclusion, self.seeds, strict=True)]

    def train(self, train_like_target: TrainLikeTarget, outputs: Callable[[torch.nn.Module], np.ndarray]
              ) -> np.ndarray:
        """``(k, ...)``: ``outputs`` of each shadow in order; all trained at once; each dropped once used."""
        return np.stack([outputs(trained.model) for trained in train_like_target.many(self.jobs())])


def default_size(n_members: int, n_population: int, *, online: bool, n_candidates: int = 0) -> int:
    """Records per shadow: ``n_members``, offline at most half the population (the other half: OUT records).

    Online: at least the half of the candidates every shadow holds, at most that half plus the population.
    """
    if online:
        half = (n_candidates + 1) // 2
        return int(min(max(n_members, half), half + n_population))
    return int(min(n_members, n_population // 2))


def offline_design(population: ArrayDataset, *, num: int, size: int, seed: int) -> ShadowDesign:
    """``num`` shadows, each on ``size`` population records drawn with seed ``shadow_seed(seed, "offline", i)``.

    Raises:
        ValueError: ``num`` < 1, or ``size`` outside [1, len(population)].
    """
    if num < 1 or not 1 <= size <= len(population):
        raise ValueError(f"offline design needs num >= 1 and 1 <= size <= {len(population)}, got {num}, {size}")
    seeds = tuple(shadow_seed(seed, "offline", i) for i in range(num))
    inclusion = np.zeros((num, len(population)), dtype=bool)
    for i, s in enumerate(seeds):
        pick = torch.randperm(len(population), generator=torch.Generator().manual_seed(s))[:size]
        inclusion[i, pick.numpy()] = True
    return ShadowDesign(population, inclusion, seeds)


def online_design(candidates: ArrayDataset, population: ArrayDataset, *, num: int, size: int, seed: int
                  ) -> tuple[ShadowDesign, np.ndarray]:
    """``num`` (even) shadows; every candidate IN for exactly num/2 of them, topped up from the population.

    Carlini et al. (2022), §IV-B; the split follows ``canonical_order``, so it does not depend on which candidates
    are members.

    Args:
        candidates: the records to be scored (members and non-members, unlabeled).
        population: the attacker's population.
        num: shadows, even and >= 2.
        size: records per shadow, in [half the candidates, that half plus the population].
        seed: the run's seed.

    Returns:
        A pair ``(design, keep)``: ``keep`` is ``(num, len(candidates))`` bool in the order ``candidates`` were given.

    Raises:
        ValueError: odd or < 2 ``num``; ``size`` below half the candidates or above half plus the population.
    """
    n_c, n_p = len(candidates), len(population)
    half = (n_c + 1) // 2
    if num < 2 or num % 2:
        raise ValueError(f"online design needs an even number of shadows >= 2, got {num}")
    if not half <= size <= half + n_p:
        raise ValueError(f"online shadow size {size} must lie in [{half}, {half + n_p}] "
                         f"({n_c} candidates, {n_p} population records)")
    order = canonical_order(candidates)
    rng = np.random.default_rng([seed, 20220101])
    ranks = rng.uniform(size=(num, n_c)).argsort(0)  # Carlini et al.'s design: each column IN for num/2 rows
    keep_canon = ranks < num // 2
    keep = np.empty_like(keep_canon)
    keep[:, order] = keep_canon
    seeds = tuple(shadow_seed(seed, "online", i) for i in range(num))
    pop_keep = np.zeros((num, n_p), dtype=bool)
    for i, s in enumerate(seeds):
        fill = size - int(keep_canon[i].sum())
        if fill > 0:
            pop_keep[i, torch.randperm(n_p, generator=torch.Generator().manual_seed(s))[:fill].numpy()] = True
    universe = concat(candidates.subset(torch.from_numpy(order)), population) if n_p else \
        candidates.subset(torch.from_numpy(order))
    return ShadowDesign(universe, np.concatenate([keep_canon, pop_keep], axis=1), seeds), keep


# ---- what a model says about a set of examples -------------------------------------------------------------


def augmentations(x: torch.Tensor) -> list[torch.Tensor]:
    """Queries of an augmented LiRA (Carlini et al. 2022): ``x``, its horizontal flip and four one-pixel shifts.

    ``x``: ``(..., H, W)`` images; returns six tensors of its shape (shifts zero padded).
    """
    padded = F.pad(x, (1, 1, 1, 1))
    h, w = x.shape[-2:]
    shifts = [padded[..., 1 + dy : 1 + dy + h, 1 + dx : 1 + dx + w] for dy, dx in ((0, 1), (0, -1), (1, 0), (-1, 0))]
    return [x, torch.flip(x, dims=(-1,)), *shifts]


def query(model: torch.nn.Module, data: ArrayDataset, *, device: torch.device, augment: bool = False) -> np.ndarray:
    """``(N, A)`` logit-scaled confidences log(p_y/(1 − p_y)) of ``model`` on ``data``; A = 6 if ``augment``, else 1."""
    views = augmentations(data.x) if augment else [data.x]
    return np.stack([logit_confidence(predict_logits(model, v, device=device), data.y).numpy() for v in views],
                    axis=1)


def log_softmax(model: torch.nn.Module, data: ArrayDataset, *, device: torch.device) -> np.ndarray:
    """``model``'s ``(N, K)`` float64 log-probabilities (nats) on ``data``."""
    return torch.log_softmax(predict_logits(model, data.x, device=device).double(), dim=1).numpy()


class OfflineShadows(MembershipAttack):
    """A membership attack whose shadow models train on the attacker's population only (offline).

    A membership attack whose shadow models train on the attacker's population only (offline: ``shadow``,
    ``lira-offline``, ``rmia``), so ``shadow_size`` (a ``Params`` field) is bounded by the population.
    """

    needs_population = True

    def size_problem(self, *, n_members: int, n_population: int) -> str | None:
        """``shadow_size`` may not exceed the population: offline shadows train on it alone."""
        return at_most(self.name, "shadow_size", self.params.shadow_size, n_population, "n_population")
