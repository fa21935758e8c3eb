"""DPMix with a tenth of its noise (planted: ``tests/privacy_bugs/dpmix_tenth_noise.py``): every mixture gets σ/10 on
its features and σ_y/10 on its label while the accountant certifies σ and σ_y."""

from __future__ import annotations

from typing import Any

from bench.zoo.api import Bug, register_bug
from bench.zoo.bugs._release import dpmix_epsilon, scale_dpmix_noise


def apply() -> None:
    """``mix_release`` (as the mechanism calls it) draws σ/10 and σ_y/10."""
    scale_dpmix_noise(1 / 10)


def true_epsilon(params: dict[str, Any], certified: float) -> float | None:
    """DPMix's PLD ε at σ/10, σ_y/10 (None unless the run records d_x)."""
    return dpmix_epsilon(params, factor=1 / 10)


BUG = register_bug(Bug(
    name="dpmix-tenth-noise", mechanism="dpmix", summary="each mixture gets a tenth of the certified noise",
    source="planted (tests/privacy_bugs/dpmix_tenth_noise.py)", documented=False,
    changes="mechanisms/dpmix/mechanism.py mix_release: σ/10, σ_y/10", claims="DPMix's ε at σ, σ_y, ℓ, T",
    apply=apply, true_epsilon=true_epsilon, true_epsilon_text="DPMix ε at σ/10"))
