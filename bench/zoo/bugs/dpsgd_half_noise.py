"""DP-SGD drawing half the noise it certifies (planted: ``tests/privacy_bugs/dpsgd_half_noise.py``)."""

from __future__ import annotations

from typing import Any

from bench.zoo.api import Bug, register_bug


def apply() -> None:
    """``noisy_step`` draws N(0, (σC/2)²) while every caller, and the accountant, keeps σ."""
    import mechanisms.dpsgd.fast as fast

    original = fast.noisy_step

    def noisy_step(optimizer, sums, *, noise_multiplier, **kwargs):  # type: ignore[no-untyped-def]
        return original(optimizer, sums, noise_multiplier=noise_multiplier * 0.5, **kwargs)

    fast.noisy_step = noisy_step


def true_epsilon(params: dict[str, Any], certified: float) -> float:
    """The replace-one ε of σ/2 at the run's q and T (dp_accounting PLD)."""
    from attacks.analysis.conformance import poisson_gaussian_epsilon

    return poisson_gaussian_epsilon(noise_multiplier=params["noise_multiplier"] * 0.5,
                                    sample_rate=params["sample_rate"], steps=int(params["steps"]),
                                    delta=params["delta"], relation="replace-one")


BUG = register_bug(Bug(
    name="dpsgd-half-noise", mechanism="dpsgd", summary="the noise is drawn at half the certified σ",
    source="planted (tests/privacy_bugs/dpsgd_half_noise.py)", documented=False,
    changes="mechanisms/dpsgd/fast.py noisy_step: N(0, (σC/2)²) instead of N(0, (σC)²)",
    claims="ε of σ at the run's q and T", apply=apply, true_epsilon=true_epsilon, true_epsilon_text="ε(σ/2, q, T)"))
