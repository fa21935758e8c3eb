"""Shared patches: DP-SGD's noise scaled by a factor (the accountant still uses the claimed σ)."""

from __future__ import annotations

import mechanisms.dpsgd.fast as fast


def scale_dpsgd_noise(factor: float) -> None:
    """Make ``noisy_step`` draw factor·σ while every caller (and the accountant) keeps σ."""
    original = fast.noisy_step

    def noisy_step(optimizer, sums, *, noise_multiplier, **kwargs):
        return original(optimizer, sums, noise_multiplier=noise_multiplier * factor, **kwargs)

    fast.noisy_step = noisy_step
