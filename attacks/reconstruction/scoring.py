"""How reconstructions are scored, shared by every reconstruction attack.

SSIM / MSE to class means, nearest member vs nearest non-member (a memorisation signal), and recognition by an
independent evaluation classifier trained on the attacker's own data.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
from skimage.metrics import structural_similarity
from torch import nn

from bench.core.data import ArrayDataset, MembershipSplit
from bench.core.models import build_model
from bench.core.training import fit_supervised, predict_logits
from bench.core.types import TrainSpec

INITS = ("zeros", "grey", "noise", "mean")
OBJECTIVES = ("nll", "prob")
OPTIMIZERS = ("adam", "gd")
_EVALUATORS: dict[tuple, tuple[nn.Module, float]] = {}  # (population fingerprint, seed, device) -> model


def ssim(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``(N,)`` SSIM (scikit-image, data range 1) of pairs of ``(N, H, W)`` images in [0, 1]; window odd, at most 7."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    win = min(7, *a.shape[-2:])
    win -= 1 - win % 2  # odd window, at most 7 (8×8 digits use 7)
    return np.array([structural_similarity(x, y, data_range=1.0, win_size=win) for x, y in zip(a, b, strict=True)])


def gray(x: torch.Tensor) -> np.ndarray:
    """``(N, H, W)`` float64 grey levels of ``(N, C, H, W)`` images: the channel mean, clipped to [0, 1]."""
    return x.detach().float().cpu().mean(1).clamp(0, 1).double().numpy()


def class_means(data: ArrayDataset) -> torch.Tensor:
    """``(K, C, H, W)`` mean image of each class of ``data`` (zeros for an absent class)."""
    out = torch.zeros(data.num_classes, *data.input_shape)
    for k in range(data.num_classes):
        rows = data.x[data.y == k]
        if len(rows):
            out[k] = rows.mean(0)
    return out


def nearest_scores(images: torch.Tensor, labels: torch.Tensor, split: MembershipSplit, *,
                   max_per_side: int | None, seed: int, same_class: bool = True) -> dict[str, Any]:
    """Memorisation signal: is each reconstruction closer to a training member than to a non-member?

    Members and non-members are subsampled to the same size, since the nearest of more images is nearer; distances
    are mean squared errors over pixels.

    Args:
        images: ``(R, C, H, W)`` reconstructions in [0, 1].
        labels: ``(R,)`` their classes.
        split: the target's membership split (its members and non-members are compared).
        max_per_side: the most members and non-members compared (None: as many as the smaller side has).
        seed: seeds the subsampling.
        same_class: compare each reconstruction only with records of its own class.

    Returns:
        ``nearest_member_mse``, ``nearest_non_member_mse`` (means over reconstructions),
        ``nearest_member_ssim`` (SSIM to the nearest member), ``closer_to_member`` (fraction nearer to
        a member; ties count ½; 0.5 = no memorisation signal — but reconstructions that are all alike
        make it one coin flip), ``member_mse_ratio`` (nearest-member / nearest-non-member mean MSE: 1 = no
        signal, 0 = copies of members) and ``pool_per_side``.
    """
    gen = torch.Generator().manual_seed(seed + 7919)
    n = min(len(split.members), len(split.non_members), max_per_side or math.inf)
    mem = split.members.subset(torch.randperm(len(split.members), generator=gen)[:n])
    non = split.non_members.subset(torch.randperm(len(split.non_members), generator=gen)[:n])
    flat = images.detach().float().cpu().flatten(1)
    d_mem, d_non = torch.full((len(flat),), math.inf), torch.full((len(flat),), math.inf)
    nearest = torch.zeros_like(images, device="cpu")
    groups = labels.unique().tolist() if same_class else [None]
    for k in groups:
        rows = torch.arange(len(flat)) if k is None else (labels.cpu() == k).nonzero().flatten()
        pools = [d if k is None else d.subset((d.y == k).nonzero().flatten()) for d in (mem, non)]
        m = min(len(p) for p in pools)
        if m == 0:
            continue
        pools = [p.subset(torch.arange(m)) for p in pools]
        dm = torch.cdist(flat[rows].double(), pools[0].x.flatten(1).double()).pow(2) / flat.shape[1]
        dn = torch.cdist(flat[rows].double(), pools[1].x.flatten(1).double()).pow(2) / flat.shape[1]
        best_mem = dm.min(1)
        d_mem[rows], d_non[rows] = best_mem.values.float(), dn.min(1).values.float()
        nearest[rows] = pools[0].x[best_mem.indices]
    ok = torch.isfinite(d_mem) & torch.isfinite(d_non)
    if not ok.any():
        return {"nearest_member_mse": None, "nearest_non_member_mse": None, "nearest_member_ssim": None,
                "closer_to_member": None, "member_mse_ratio": None, "pool_per_side": 0}
    closer = (d_mem[ok] < d_non[ok]).double() + 0.5 * (d_mem[ok] == d_non[ok]).double()
    return {
        "nearest_member_mse": float(d_mem[ok].mean()),
        "nearest_non_member_mse": float(d_non[ok].mean()),
        "nearest_member_ssim": float(ssim(gray(images[ok]), gray(nearest[ok])).mean()),
        "closer_to_member": float(closer.mean()),
        "member_mse_ratio": float(d_mem[ok].mean() / d_non[ok].mean().clamp_min(1e-12)),
        "pool_per_side": int(n),
    }


def class_mean_scores(images: torch.Tensor, labels: torch.Tensor, members: ArrayDataset) -> dict[str, float]:
    """``{"ssim_class_mean", "mse_class_mean"}`` (MSE: pixel²) to the class mean image (Fredrikson et al. 2015)."""
    means = class_means(members)[labels.cpu()]
    mse = (images.detach().float().cpu() - means).pow(2).flatten(1).mean(1)
    return {"ssim_class_mean": float(ssim(gray(images), gray(means)).mean()), "mse_class_mean": float(mse.mean())}


def evaluation_classifier(population: ArrayDataset, test: ArrayDataset, *, seed: int, device: torch.device
                          ) -> tuple[nn.Module, float]:
    """The attacker's judge: (a non-private classifier trained on ``population``, eval mode; its accuracy on ``test``).

    Disjoint from the target's members; ``cnn-small`` for images of side >= 16, else ``mlp``. Trained once per
    (population, seed, device) in this process and reused by every target; deterministic given the seed; the global
    RNG state is left untouched.
    """
    key = (population.fingerprint(), population.input_shape, seed, device.type)
    if key not in _EVALUATORS:
        big = min(population.input_shape[1:]) >= 16
        spec = TrainSpec(model="cnn-small" if big else "mlp", epochs=4 if big else 40, batch_size=64, lr=0.05,
                         optimizer="sgd", momentum=0.9)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            model = build_model(spec.model, population.input_shape, population.num_classes)
            fit_supervised(model, population.x, population.y, spec, generator=torch.Generator().manual_seed(seed),
                           device=device)
        model.eval()
        acc = float((predict_logits(model, test.x, device=device).argmax(1) == test.y).float().mean())
        _EVALUATORS[key] = (model, acc)
    return _EVALUATORS[key]
