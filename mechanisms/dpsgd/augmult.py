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
    """The crop padding for ``height`` × ``width`` images.

    1/8 of the shorter side, at least 1 pixel (4 on CIFAR-10's 32 × 32, De et al. 2022's setting; 3 on MNIST's 28 × 28;
    1 on 8 × 8 digits, where 4 would shift half the image).

    Args:
        height: the image's height in pixels.
        width: the image's width in pixels.

    Returns:
        The padding in pixels (≥ 1).
    """
    return max(1, min(height, width) // 8)


def augment_views(x: torch.Tensor, augmult: int, *, generator: torch.Generator, flip: bool = True,
                  padding: int | None = None) -> torch.Tensor:
    """``augmult`` = K random views of each image of ``x (B, C, H, W)``.

    ``(B·K, C, H, W)``, record i's views at rows i·K … i·K + K − 1. A view is a random H × W crop of the image
    reflection-padded by ``padding`` pixels (default ``augmult_padding(H, W)``; offsets uniform in 0 … 2·padding per
    axis), horizontally flipped with probability 1/2 when ``flip`` (De et al. 2022, §3.1: augmentation multiplicity with
    crops and flips; turn flips off for data a mirror changes, e.g. digits). Offsets and flips are drawn on the CPU from
    ``generator``, so a seeded run is reproducible on any device.

    Args:
        x: images ``(B, C, H, W)``.
        augmult: K ≥ 1, the views per image.
        generator: the CPU generator the offsets and flips are drawn from.
        flip: whether a view is mirrored with probability 1/2.
        padding: the reflection padding in pixels (None: ``augmult_padding(H, W)``).

    Returns:
        The views ``(B·K, C, H, W)``, on ``x``'s device and dtype.

    Raises:
        ValueError: ``x`` is not a batch of images (4 dimensions), K < 1, or ``padding`` ≥ the image's height or width
            (reflection needs a smaller pad; images of 1 pixel in height or width cannot be cropped).
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
    """``augment_views``' keyword settings for training ``model`` with ``augmult`` views per record.

    ``augment_views``' keyword settings for training ``model`` on ``x (N, C, H, W)`` with K = ``augmult`` views per
    record (None: no augmentation, returns None).

    Args:
        model: the model to train.
        x: the training records ``(N, C, H, W)``.
        augmult: K, the views per record, or None.
        flip: ``augment_views``' ``flip``.
        generator: its CPU generator.

    Returns:
        ``{"augmult", "generator", "flip"}`` for ``augment_views``, or None when ``augmult`` is None.

    Raises:
        ValueError: ``model`` is a ``FrozenFront`` (its fixed features are computed once per image, not per view), or
            ``x`` holds no images of at least 2 × 2 pixels (tabular records are ``(1, 1, D)``).
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
