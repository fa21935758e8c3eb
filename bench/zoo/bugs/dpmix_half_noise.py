"""DPMix with half its noise (planted: ``tests/privacy_bugs/dpmix_half_noise.py``): every mixture gets σ/2 on
its features and σ_y/2 on its label while the accountant certifies σ and σ_y."""

from __future__ import annotations

from typing import Any

from bench.zoo.api import Bug, register_bug
from bench.zoo.bugs._release import dpmix_epsilon


def apply() -> None:
    """``mix_release`` (as the mechanism calls it) draws σ/2 and σ_y/2."""
    import mechanisms.dpmix.mechanism as dpmix

    original = dpmix.mix_release  # type: ignore[attr-defined]

    def mix_release(x, y_onehot, *, sigma, sigma_y=None, **kwargs):  # type: ignore[no-untyped-def]
        return original(x, y_onehot, sigma=sigma / 2, sigma_y=None if sigma_y is None else sigma_y / 2, **kwargs)

    dpmix.mix_release = mix_release  # type: ignore[attr-defined]


def true_epsilon(params: dict[str, Any], certified: float) -> float | None:
    """DPMix's PLD ε at σ/2, σ_y/2 (None unless the run records d_x)."""
    return dpmix_epsilon(params, factor=1 / 2)


BUG = register_bug(Bug(
    name="dpmix-half-noise", mechanism="dpmix", summary="each mixture gets half the certified noise",
    source="planted (tests/privacy_bugs/dpmix_half_noise.py)", documented=False,
    changes="mechanisms/dpmix/mechanism.py mix_release: σ/2, σ_y/2", claims="DPMix's ε at σ, σ_y, ℓ, T",
    apply=apply, true_epsilon=true_epsilon, true_epsilon_text="DPMix ε at σ/2"))
