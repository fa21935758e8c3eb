"""DPMix with half its noise (planted: ``tests/privacy_bugs/dpmix_half_noise.py``): every mixture gets σ/2 on
its features and σ_y/2 on its label while the accountant certifies σ and σ_y."""

from __future__ import annotations

from typing import Any

from bench.zoo.api import Bug, register_bug
from bench.zoo.bugs._release import dpmix_epsilon, scale_dpmix_noise


def apply() -> None:
    """``mix_release`` (as the mechanism calls it) draws σ/2 and σ_y/2."""
    scale_dpmix_noise(1 / 2)


def true_epsilon(params: dict[str, Any], certified: float) -> float | None:
    """DPMix's PLD ε at σ/2, σ_y/2 (None unless the run records d_x)."""
    return dpmix_epsilon(params, factor=1 / 2)


BUG = register_bug(Bug(
    name="dpmix-half-noise", mechanism="dpmix", summary="each mixture gets half the certified noise",
    source="planted (tests/privacy_bugs/dpmix_half_noise.py)", documented=False,
    changes="mechanisms/dpmix/mechanism.py mix_release: σ/2, σ_y/2", claims="DPMix's ε at σ, σ_y, ℓ, T",
    apply=apply, true_epsilon=true_epsilon, true_epsilon_text="DPMix ε at σ/2"))
