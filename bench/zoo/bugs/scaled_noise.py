"""σ × F: a mechanism's noise drawn at F times the σ its accountant certifies (planted).

One parametrised bug for every mechanism of the zoo. ``scaled_noise(mechanism, factor)`` builds the bug; the fixed
instances the suite's tests and the zoo's measured tables use are registered here (DP-SGD σ × 0.5, 0.25, 0.75 and 0,
DPMix σ × 0.5 and 0.1, local noise σ × 0.5, the example Opacus loop σ × 0); any other F is found by its name
``MECHANISM-noise-xF`` (``dpsgd-noise-x0.67``, ``local-gaussian-noise-x0.8``: ``bench.zoo.catalogue.find``), as the
detection-power table (``scripts/detection_power.py``) and the null test (``scripts/null_test.py``) ask for it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from bench.zoo.api import ZOO_MECHANISMS, Bug, register_bug
from bench.zoo.bugs._common import dpsgd_epsilon, scale_dpsgd_noise, unbounded
from bench.zoo.bugs._opacus import opacus_epsilon
from bench.zoo.bugs._release import dpmix_epsilon, local_epsilon, scale_dpmix_noise

NAME = re.compile(r"^(?P<mechanism>[a-z-]+)-noise-x(?P<factor>\d+(\.\d+)?)$")
"""A parametrised instance's name: ``MECHANISM-noise-xF`` with F ≥ 0 (``dpsgd-noise-x0.67``)."""


def _scale_local_noise(factor: float) -> None:
    """Local noise's ``perturb`` draws factor·σ per pixel while the accountant certifies σ."""
    import mechanisms.local.mechanism as local

    original = local.perturb

    def perturb(x, *, sigma, generator):  # type: ignore[no-untyped-def]
        return original(x, sigma=sigma * factor, generator=generator)

    local.perturb = perturb


def _scale_opacus_noise(factor: float) -> None:
    """Opacus' ``DPOptimizer.add_noise`` runs at factor·σ (the optimizer's σ restored after each call)."""
    from opacus.optimizers import DPOptimizer

    add_noise = DPOptimizer.add_noise

    def scaled(opt):  # type: ignore[no-untyped-def]
        sigma = opt.noise_multiplier
        opt.noise_multiplier = sigma * factor
        try:
            add_noise(opt)
        finally:
            opt.noise_multiplier = sigma

    DPOptimizer.add_noise = scaled


def _true_epsilon(mechanism: str, factor: float) -> Callable[[dict[str, Any], float], float | None]:
    """The mutant's ε from the run's recorded parameters with every noise scaled by ``factor`` (∞ for F = 0)."""
    def true_epsilon(params: dict[str, Any], certified: float) -> float | None:
        if factor == 0:
            return unbounded(params, certified)
        if mechanism == "dpsgd":
            return dpsgd_epsilon(params, sigma=factor * float(params["noise_multiplier"]))
        if mechanism == "opacus-example":
            return opacus_epsilon(params, sigma=factor * float(params["noise_multiplier"]))
        if mechanism == "local-gaussian":
            return local_epsilon(params, sigma=factor * float(params["sigma"]))
        return dpmix_epsilon(params, factor=factor)
    return true_epsilon


APPLY = {"dpsgd": scale_dpsgd_noise, "opacus-example": _scale_opacus_noise, "local-gaussian": _scale_local_noise,
         "dpmix": scale_dpmix_noise}
CHANGES = {"dpsgd": "mechanisms/dpsgd/fast.py noisy_step: N(0, ({f}σC)²) instead of N(0, (σC)²)",
           "opacus-example": "opacus.optimizers.DPOptimizer.add_noise: σ × {f}",
           "local-gaussian": "mechanisms/local/mechanism.py perturb: N(0, ({f}σ)²) per pixel",
           "dpmix": "mechanisms/dpmix/mechanism.py mix_release: {f}σ, {f}σ_y"}
CLAIMS = {"dpsgd": "ε of σ at the run's q and T", "opacus-example": "Opacus PRV ε at σ, q, T",
          "local-gaussian": "ε of σ at sensitivity 2 (+ label)", "dpmix": "DPMix's ε at σ, σ_y, ℓ, T"}
TRUE = {"dpsgd": "ε({f}σ, q, T)", "opacus-example": "ε({f}σ, q, T)", "local-gaussian": "ε({f}σ) ∘ label channel",
        "dpmix": "DPMix ε at {f}σ"}


def scaled_noise(mechanism: str, factor: float, *, name: str | None = None, summary: str | None = None,
                 changes: str | None = None, true_text: str | None = None) -> Bug:
    """The bug "``mechanism``'s noise drawn at ``factor`` × the certified σ" (not registered).

    Args:
        mechanism: one of ``ZOO_MECHANISMS``.
        factor: F ≥ 0 (0: no noise at all; 1 is the correct mechanism, refused).
        name: a fixed instance's key (default: from F).
        summary: its one line of what goes wrong (default: from F).
        changes: the code it changes (default: from F).
        true_text: its true ε in words (default: from F).

    Returns:
        The ``Bug``, named ``MECHANISM-noise-xF`` unless ``name`` is given; its ``apply`` patches the mechanism's
        noise draw, its true ε is the mechanism's ε at F·σ (∞ at F = 0).

    Raises:
        ValueError: an unknown mechanism, or F < 0 or F = 1.
    """
    if mechanism not in ZOO_MECHANISMS:
        raise ValueError(f"σ × F: mechanism {mechanism!r} not in {ZOO_MECHANISMS}")
    if factor < 0 or factor == 1:
        raise ValueError(f"σ × F: F = {factor}; allowed: F ≥ 0, F ≠ 1 (F = 1 is the correct mechanism)")
    f = f"{factor:g}"
    return Bug(name=name or f"{mechanism}-noise-x{f}", mechanism=mechanism,
               summary=summary or f"the noise is drawn at {f} × the certified σ",
               source=f"planted (σ × F, F = {f}: bench/zoo/bugs/scaled_noise.py)", documented=False,
               changes=changes or CHANGES[mechanism].format(f=f), claims=CLAIMS[mechanism],
               apply=lambda: APPLY[mechanism](factor), true_epsilon=_true_epsilon(mechanism, factor),
               true_epsilon_text=true_text or ("unbounded" if factor == 0 else TRUE[mechanism].format(f=f)))


def parse(name: str) -> Bug | None:
    """The instance ``MECHANISM-noise-xF`` named ``name`` (``dpsgd-noise-x0.67``).

    Or None where ``name`` is not of that form.

    Raises:
        ValueError: the form, but an unknown mechanism or F = 1.
    """
    match = NAME.match(name)
    return None if match is None else scaled_noise(match["mechanism"], float(match["factor"]))


INSTANCES = [  # the fixed instances, in their own words (the names and texts of the zoo's catalogue)
    scaled_noise("dpsgd", 0.5, name="dpsgd-half-noise", summary="the noise is drawn at half the certified σ",
                 changes="mechanisms/dpsgd/fast.py noisy_step: N(0, (σC/2)²) instead of N(0, (σC)²)",
                 true_text="ε(σ/2, q, T)"),
    scaled_noise("dpsgd", 0.25, name="dpsgd-quarter-noise", summary="the noise is drawn at a quarter of the "
                 "certified σ", true_text="ε(σ/4, q, T)"),
    scaled_noise("dpsgd", 0.75, name="dpsgd-three-quarter-noise"),
    scaled_noise("dpsgd", 0.0, name="dpsgd-no-noise", summary="no noise at all on the clipped gradient sum",
                 changes="mechanisms/dpsgd/fast.py noisy_step: σ = 0"),
    scaled_noise("opacus-example", 0.0, name="opacus-no-noise", summary="the loop's DPOptimizer adds no noise",
                 changes="opacus.optimizers.DPOptimizer.add_noise: σ = 0"),
    scaled_noise("local-gaussian", 0.5, name="local-half-noise", summary="each image gets half the certified noise",
                 changes="mechanisms/local/mechanism.py perturb: N(0, (σ/2)²) per pixel",
                 true_text="ε(σ/2) ∘ label channel"),
    scaled_noise("dpmix", 0.5, name="dpmix-half-noise", summary="each mixture gets half the certified noise",
                 changes="mechanisms/dpmix/mechanism.py mix_release: σ/2, σ_y/2", true_text="DPMix ε at σ/2"),
    scaled_noise("dpmix", 0.1, name="dpmix-tenth-noise", summary="each mixture gets a tenth of the certified noise",
                 changes="mechanisms/dpmix/mechanism.py mix_release: σ/10, σ_y/10", true_text="DPMix ε at σ/10"),
]
for _bug in INSTANCES:
    register_bug(_bug)
