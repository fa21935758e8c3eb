"""The example Opacus loop adding no noise (planted: ``tests/privacy_bugs/opacus_no_noise.py``): its ``DPOptimizer``
draws N(0, 0) where it should draw N(0, σ²C²) while the accountant is told the calibrated σ."""

from __future__ import annotations

from bench.zoo.api import Bug, register_bug
from bench.zoo.bugs._common import unbounded


def apply() -> None:
    """``DPOptimizer.add_noise`` runs with ``noise_multiplier = 0`` (restored after each call)."""
    from opacus.optimizers import DPOptimizer

    add_noise = DPOptimizer.add_noise

    def silent(opt):  # type: ignore[no-untyped-def]
        sigma = opt.noise_multiplier
        opt.noise_multiplier = 0.0
        try:
            add_noise(opt)
        finally:
            opt.noise_multiplier = sigma

    DPOptimizer.add_noise = silent


BUG = register_bug(Bug(
    name="opacus-no-noise", mechanism="opacus-example", summary="the loop's DPOptimizer adds no noise",
    source="planted (tests/privacy_bugs/opacus_no_noise.py)", documented=False,
    changes="opacus.optimizers.DPOptimizer.add_noise: σ = 0", claims="Opacus PRV ε at σ, q, T", apply=apply,
    true_epsilon=unbounded, true_epsilon_text="unbounded"))
