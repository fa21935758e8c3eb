"""DP-SGD drawing three quarters of the noise it certifies (planted:
``tests/privacy_bugs/dpsgd_three_quarter_noise.py``): ``noisy_step`` draws N(0, (0.75σC)²) while the accountant
certifies σ, so the true ε is a third larger or more."""

from __future__ import annotations

from typing import Any

from bench.zoo.api import Bug, register_bug
from bench.zoo.bugs._common import dpsgd_epsilon, scale_dpsgd_noise


def apply() -> None:
    """``noisy_step`` draws 0.75·σ."""
    scale_dpsgd_noise(0.75)


def true_epsilon(params: dict[str, Any], certified: float) -> float | None:
    """ε(0.75σ, q, T) (dp_accounting PLD)."""
    return dpsgd_epsilon(params, sigma=0.75 * float(params["noise_multiplier"]))


BUG = register_bug(Bug(
    name="dpsgd-three-quarter-noise", mechanism="dpsgd", summary="the noise is drawn at 0.75 × the certified σ",
    source="planted (tests/privacy_bugs/dpsgd_three_quarter_noise.py)", documented=False,
    changes="mechanisms/dpsgd/fast.py noisy_step: N(0, (0.75σC)²) instead of N(0, (σC)²)",
    claims="ε of σ at the run's q and T", apply=apply, true_epsilon=true_epsilon, true_epsilon_text="ε(0.75σ, q, T)"))
