"""Invariant Information Clustering.

(Ji, Henriques & Vedaldi, ICCV 2019, "Invariant Information Clustering for Unsupervised Image Classification and
Segmentation".) A network Φ with a K-way softmax is trained, without labels, to maximise the mutual information between
the cluster assignments of an image and of a random transformation of it; clusters are then mapped to classes by
Hungarian matching on a small labelled split (their §4 evaluation protocol).

Here it is a learner of the local-Gaussian mechanism (``LocalGaussianParams.learner: iic``): it sees only the noisy
release. Simplifications against the paper, stated: one clustering head with K = number of classes (no
over-clustering head, no sub-heads), one transformed copy per image, transformations = random affine maps (rotation
±15°, scale 0.9–1.1, translation ±10 %, their MNIST setting's kind) applied to the released image.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import numpy as np
import torch
import torch.nn.functional as F
from scipy.optimize import linear_sum_assignment
from torch import nn

from bench.core.training import TrainingDiverged, make_optimizer
from bench.core.types import TrainSpec

EPS = 1e-8  # floor of the joint distribution's entries (the paper's code clamps at sys.float_info.epsilon)


def iic_loss(z: torch.Tensor, zt: torch.Tensor) -> torch.Tensor:
    """−I(z; z′) in [−ln K, 0] nats of two ``(B, K)`` batches of cluster probabilities (Ji et al. 2019, eq. 3).

    The joint P = (1/n)·Σ_i z_i z′_iᵀ symmetrised, I = Σ_cc′ P_cc′ · ln(P_cc′ / (P_c · P_c′)); minimising it gives
    confident, balanced clusters that agree between an image and its transformation. ValueError if the shapes differ.
    """
    if z.shape != zt.shape:
        raise ValueError(f"iic_loss: shapes {tuple(z.shape)} and {tuple(zt.shape)} differ")
    p = (z.unsqueeze(2) * zt.unsqueeze(1)).sum(0)  # (K, K)
    p = ((p + p.t()) / 2) / p.sum()
    p = p.clamp_min(EPS)
    pi, pj = p.sum(1, keepdim=True), p.sum(0, keepdim=True)
    return -(p * (p.log() - pi.log() - pj.log())).sum()


def random_affine(x: torch.Tensor, *, generator: torch.Generator, degrees: float = 15.0,
                  scale: tuple[float, float] = (0.9, 1.1), translate: float = 0.1) -> torch.Tensor:
    """Each image of ``x (B, C, H, W)`` under its own random rotation (±``degrees``), scale and shift (Ji et al., §4).

    ``translate``: the largest shift, a fraction of the side; bilinear, zero outside; ``x``'s shape, dtype and device.
    """
    b = len(x)
    angle = (torch.rand(b, generator=generator) * 2 - 1) * math.radians(degrees)
    s = scale[0] + torch.rand(b, generator=generator) * (scale[1] - scale[0])
    t = (torch.rand(b, 2, generator=generator) * 2 - 1) * translate * 2  # affine_grid's [-1, 1] coordinates
    cos, sin = torch.cos(angle) / s, torch.sin(angle) / s
    theta = torch.stack([torch.stack([cos, -sin, t[:, 0]], 1), torch.stack([sin, cos, t[:, 1]], 1)], 1)
    grid = F.affine_grid(theta.to(x), list(x.shape), align_corners=False)
    return F.grid_sample(x, grid, align_corners=False, padding_mode="zeros")


def train_iic(model: nn.Module, x: torch.Tensor, spec: TrainSpec, *, generator: torch.Generator,
              device: torch.device, on_epoch: Callable[[int, int, float], None] | None = None
              ) -> tuple[list[float], int, float]:
    """Train ``model`` (images to K logits) by IIC on unlabelled images ``x (N, C, H, W)`` for ``spec.epochs`` passes.

    Shuffled batches of ``spec.batch_size``, ``spec``'s optimiser; the pair of each image is ``random_affine`` of it.

    Args:
        model: images ``(B, C, H, W)`` -> K cluster logits ``(B, K)``.
        x: unlabelled images ``(N, C, H, W)``.
        spec: epochs, batch size and optimiser.
        generator: draws the shuffles and the transformations.
        device: where to train.
        on_epoch: progress callback ``(epoch, epochs, mean loss)``, or None.

    Returns:
        (per-epoch mean loss −I in nats, images processed, wall seconds).

    Raises:
        TrainingDiverged: a NaN or infinite loss.
    """
    model.to(device).train()
    opt = make_optimizer(model.parameters(), spec)
    history: list[float] = []
    seen, start = 0, time.perf_counter()
    for epoch in range(spec.epochs):
        perm = torch.randperm(len(x), generator=generator)
        total, count = 0.0, 0
        for i in range(0, len(perm), spec.batch_size):
            xb = x[perm[i : i + spec.batch_size]]
            if len(xb) < 2:
                continue
            xt = random_affine(xb, generator=generator)
            xb, xt = xb.to(device), xt.to(device)
            opt.zero_grad(set_to_none=True)
            loss = iic_loss(F.softmax(model(xb), 1), F.softmax(model(xt), 1))
            if not torch.isfinite(loss):
                raise TrainingDiverged(f"IIC loss became {loss.item()} in epoch {epoch + 1}")
            loss.backward()
            opt.step()
            total, count = total + loss.item() * len(xb), count + len(xb)
        seen += count
        history.append(total / max(count, 1))
        if on_epoch is not None:
            on_epoch(epoch + 1, spec.epochs, history[-1])
    return history, seen, time.perf_counter() - start


@torch.no_grad()
def hungarian_mapping(model: nn.Module, x: torch.Tensor, y: torch.Tensor, *, num_classes: int,
                      device: torch.device) -> tuple[torch.Tensor, float]:
    """The cluster → class map maximising agreement with ``y (M,)`` on ``x (M, C, H, W)``, and its accuracy.

    Hungarian matching of the K×K contingency table (Kuhn 1955). Returns ``(perm, accuracy)``: ``perm[c]``, int64
    ``(K,)``, the class of cluster c; accuracy a fraction.
    """
    model.eval()
    clusters = torch.cat([model(x[i : i + 1024].to(device)).argmax(1).cpu() for i in range(0, len(x), 1024)])
    table = np.zeros((num_classes, num_classes))
    np.add.at(table, (clusters.numpy(), y.numpy()), 1)
    rows, cols = linear_sum_assignment(-table)
    perm = torch.zeros(num_classes, dtype=torch.long)
    perm[torch.as_tensor(rows)] = torch.as_tensor(cols)
    return perm, float(table[rows, cols].sum() / max(len(y), 1))


class ClusterToClass(nn.Module):
    """``(N, K)`` cluster logits -> ``(N, K)`` class logits.

    Class ``perm[c]`` gets cluster c's logit (a fixed permutation found by ``hungarian_mapping``, saved with the
    weights).

    Args:
        num_classes: K; the map starts as the identity.
    """

    def __init__(self, num_classes: int) -> None:
        super().__init__()
        self.register_buffer("perm", torch.arange(num_classes))

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        """Class logits ``(N, K)`` of cluster logits ``(N, K)``."""
        out = torch.empty_like(z)
        out[:, self.perm] = z
        return out
