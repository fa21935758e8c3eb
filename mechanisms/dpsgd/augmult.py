"""Augmentation multiplicity for DP-SGD.

(De et al. 2022, "Unlocking high-accuracy differentially private image classification through scale", §3.1.) Each record
of a batch becomes K random crops (and flips) of itself, and the record's gradient is the mean over its K views, clipped
as one (``mechanisms.dpsgd.clipping``). One record still moves the clipped sum by at most C, so the noise multiplier σ,
the sample rate q and ε are those without augmentation; compute grows K-fold.
"""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["augment_views", "augmult_padding", "augmult_settings"]


def augmult_padding(height: int, width: int) -> int:
    """The crop padding in pixels: 1/8 of the shorter side, at least 1 (4 on 32 × 32 as De et al. 2022; 1 on 8 × 8)."""
    return max(1, min(height, width) // 8)


def augment_views(x: torch.Tensor, augmult: int, *, generator: torch.Generator, flip: bool = True,
                  padding: int | None = None) -> torch.Tensor:
    """K = ``augmult`` random views ``(B·K, C, H, W)`` of each image of ``x (B, C, H, W)``, record i's from row i·K.

    A view is a random H × W crop of the image reflection-padded by ``padding`` pixels (default ``augmult_padding``),
    mirrored with probability 1/2 when ``flip`` (De et al. 2022, §3.1; no flips for data a mirror changes, e.g.
    digits). Offsets and flips are drawn on the CPU from ``generator``: a seeded run is reproducible on any device.

    Raises:
        ValueError: ``x`` is not a batch of images (4 dimensions), K < 1, or ``padding`` ≥ the image's height or width.
    """
    if x.dim() != 4:
        raise ValueError(f"augmentation multiplicity needs images (B, C, H, W), got a batch of shape {tuple(x.shape)}")
    if augmult < 1:
        raise ValueError(f"augmult = {augmult} must be >= 1")
    b, c, h, w = x.shape
    padding = augmult_padding(h, w) if padding is None else padding
    if padding >= min(h, w):
        raise ValueError(f"augmentation padding {padding} must be smaller than the image ({h} x {w})")
    n = b * augmult
    dy = torch.randint(0, 2 * padding + 1, (n,), generator=generator)
    dx = torch.randint(0, 2 * padding + 1, (n,), generator=generator)
    mirror = torch.rand(n, generator=generator) < 0.5 if flip else torch.zeros(n, dtype=torch.bool)
    src = torch.nn.functional.pad(x, (padding,) * 4, mode="reflect").repeat_interleave(augmult, dim=0)
    dev = x.device
    rows = (dy[:, None] + torch.arange(h)).to(dev)  # (n, H) padded rows of each view
    cols = dx[:, None] + torch.arange(w)
    cols = torch.where(mirror[:, None], cols.flip(1), cols).to(dev)  # a flip reads the window's columns backwards
    idx = torch.arange(n, device=dev)
    return src[idx[:, None, None, None], torch.arange(c, device=dev)[None, :, None, None], rows[:, None, :, None],
               cols[:, None, None, :]]


def augmult_settings(model: nn.Module, x: torch.Tensor, augmult: int | None, *, flip: bool,
                     generator: torch.Generator) -> dict | None:
    """``augment_views``' settings to train ``model`` on ``x (N, C, H, W)`` with K = ``augmult`` views (None: None).

    Raises:
        ValueError: ``model`` is a ``FrozenFront`` (its fixed features are computed once per image, not per view), or
            ``x`` holds no images of at least 2 × 2 pixels.
    """
    from bench.core.models import FrozenFront

    if augmult is None:
        return None
    if isinstance(model, FrozenFront):
        raise ValueError(f"params.augmult = {augmult} needs a model trained end to end; this one's fixed front "
                         "is computed once per image, not per augmented view")
    if x.dim() != 4 or min(x.shape[2:]) < 2:
        raise ValueError(f"params.augmult = {augmult} needs images (C, H, W) of at least 2 x 2 pixels, got "
                         f"records of shape {tuple(x.shape[1:])}")
    return {"augmult": augmult, "generator": generator, "flip": flip}
