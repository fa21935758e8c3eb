"""Local Gaussian noise calibrated for a smaller input norm than the data's.

Local Gaussian noise calibrated for a smaller input norm than the data's. Documented in the ``local-gaussian``
reference system privbench reproduces (docs/reproductions.md: the source's σ from the classic formula at
"sensitivity 1" for unit-norm images, whose replace-one sensitivity is 2). Here the accountant keeps sensitivity 2
for unit-norm images while ``perturb`` normalises each image to norm 2: the sensitivity is 4, so the noise is half
what the stated sensitivity needs.
"""

from __future__ import annotations

from typing import Any

from bench.zoo.api import Bug, register_bug
from bench.zoo.bugs._release import local_epsilon

NORM = 2.0


def apply() -> None:
    """``perturb``: images scaled to norm 2 before the noise (σ unchanged)."""
    import mechanisms.local.mechanism as local

    original = local.perturb

    def perturb(x, *, sigma, generator):  # type: ignore[no-untyped-def]
        return original(x, sigma=sigma / NORM, generator=generator) * NORM  # = 2·x/‖x‖ + N(0, σ²)

    local.perturb = perturb


def true_epsilon(params: dict[str, Any], certified: float) -> float:
    """The record's ε at sensitivity 4 under σ, i.e. sensitivity 2 under σ/2."""
    return local_epsilon(params, sigma=float(params["sigma"]) / NORM)


BUG = register_bug(Bug(
    name="local-input-norm", mechanism="local-gaussian",
    summary="images normalised to norm 2 while the sensitivity is stated for unit norm",
    source="the local-gaussian reference system (docs/reproductions.md: σ for sensitivity 1 on unit-norm images)",
    documented=True, changes="mechanisms/local/mechanism.py perturb: 2·x/‖x‖ + N(0, σ²)",
    claims="ε of σ at sensitivity 2 (+ label)", apply=apply, true_epsilon=true_epsilon,
    true_epsilon_text="ε(σ at sensitivity 4) ∘ label channel"))
