"""DP-SGD's Gaussian noise, drawn in one place: the one-model step (``mechanisms.dpsgd.fast.noisy_step``) and the
side-by-side runs (``mechanisms.dpsgd.side_by_side``) both call ``gaussian_noise``, so a run's noise is the same draws
whichever trains it."""

from __future__ import annotations

import torch


def gaussian_noise(like: torch.Tensor, std: float, generator: torch.Generator | None) -> torch.Tensor:
    """N(0, std²) of ``like``'s shape, dtype and device, drawn with the same ``torch.normal`` call as Opacus'
    ``_generate_noise`` (non-secure mode) from ``generator`` (None: torch's global RNG); zeros, drawing nothing, when
    std = 0."""
    if std <= 0:
        return torch.zeros_like(like)
    return torch.normal(mean=0, std=std, size=like.shape, device=like.device, generator=generator, dtype=like.dtype)
