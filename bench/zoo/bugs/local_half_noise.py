"""Local Gaussian noise halved (planted: ``tests/privacy_bugs/local_half_noise.py``): each unit-norm image gets
N(0, (σ/2)²) per pixel while the accountant certifies σ."""

from __future__ import annotations

from typing import Any

from bench.zoo.api import Bug, register_bug
from bench.zoo.bugs._release import local_epsilon


def apply() -> None:
    """``perturb`` draws σ/2."""
    import mechanisms.local.mechanism as local

    original = local.perturb

    def perturb(x, *, sigma, generator):  # type: ignore[no-untyped-def]
        return original(x, sigma=sigma / 2, generator=generator)

    local.perturb = perturb


def true_epsilon(params: dict[str, Any], certified: float) -> float:
    """The record's ε with image noise σ/2 (and the recorded label channel)."""
    return local_epsilon(params, sigma=float(params["sigma"]) / 2)


BUG = register_bug(Bug(
    name="local-half-noise", mechanism="local-gaussian", summary="each image gets half the certified noise",
    source="planted (tests/privacy_bugs/local_half_noise.py)", documented=False,
    changes="mechanisms/local/mechanism.py perturb: N(0, (σ/2)²) per pixel", claims="ε of σ at sensitivity 2 (+ label)",
    apply=apply, true_epsilon=true_epsilon, true_epsilon_text="ε(σ/2) ∘ label channel"))
