"""DP-SGD's privacy: the calibration of σ to a target (ε, δ) before training and what a run certifies after it.

ε under the run's neighbouring relation with its profile, the other relation's ε beside, ε by epoch. Poisson-subsampled
Gaussian steps (Abadi et al. 2016, Algorithm 1 and §3.1) composed by dp_accounting's PLD accountant under replace-one
and by Opacus' accountants under add/remove (``mechanisms.accounting``).
"""

from __future__ import annotations

import math
from typing import Any

from bench.core.types import PrivacySpent, RelationEpsilon, TrainSpec
from mechanisms.accounting.gaussian import dpsgd_profile, gaussian_epsilon, pld_epsilon, pld_noise_multiplier
from mechanisms.accounting.last_iterate import last_iterate
from mechanisms.accounting.opacus_accountants import opacus_epsilon, opacus_noise_multiplier


def calibrate(spec: TrainSpec, *, n: int, target_epsilon: float | None, delta: float) -> tuple[float, float, int]:
    """(σ, q, T) of a run on ``n`` public records: noise multiplier (noise std over C), sample rate, steps.

    q = 1/⌈n/b⌉ (as Opacus' loader samples), T = epochs·⌈n/b⌉, and σ calibrated to the target (ε, δ) under
    ``params.relation`` (replace-one: ``pld_noise_multiplier``; add/remove: Opacus' ``accountant``), or the fixed
    ``params.noise_multiplier``; σ = 0 at the ε = ∞ point.

    Args:
        spec: the run's ``TrainSpec`` (``DPSGDParams``).
        n: the public record count.
        target_epsilon: the target ε (None, or ∞ for the off point).
        delta: δ in (0, 1).

    Raises:
        ValueError: no target ε > 0 and no fixed σ; a target the accountant cannot meet.
    """
    p = spec.params
    off = target_epsilon is not None and math.isinf(target_epsilon)  # the ε = ∞ point: no fixed σ either
    if p.noise_multiplier is None and not off and (target_epsilon is None or target_epsilon <= 0):
        raise ValueError(f"dpsgd needs a target epsilon > 0 or a noise_multiplier, got {target_epsilon}")
    batches = -(-n // spec.batch_size)  # q = 1 / batches, as Opacus' Poisson loader samples
    sample_rate, steps = 1.0 / batches, int(spec.epochs * batches)
    if off:  # a fixed σ is privacy too: off as well
        return 0.0, sample_rate, steps
    if p.noise_multiplier is not None:
        return float(p.noise_multiplier), sample_rate, steps
    if p.relation == "replace-one":
        sigma = pld_noise_multiplier(target_epsilon=float(target_epsilon), delta=float(delta),
                                     sample_rate=sample_rate, steps=steps, relation="replace-one")
        return sigma, sample_rate, steps
    return opacus_noise_multiplier(target_epsilon=float(target_epsilon), delta=float(delta),
                                   sample_rate=sample_rate, epochs=int(spec.epochs),
                                   accountant=p.accountant), sample_rate, steps


def epsilon_by_epoch(params: dict[str, Any], spec: TrainSpec, *, delta: float) -> list[float] | None:
    """``[ε after epoch 1, …, ε after epoch E]`` by the final ε's accountant, or None without recorded σ, q and steps.

    ``params``: a run's ``TrainedModel.params``; replace-one: dp_accounting's PLD, add/remove: Opacus' ``accountant``.
    """
    try:
        sigma, q, steps = float(params["noise_multiplier"]), float(params["sample_rate"]), int(params["steps"])
    except (KeyError, TypeError, ValueError):
        return None
    per_epoch, relation = steps // spec.epochs, params.get("relation", spec.params.relation)
    if relation == "replace-one":
        return [pld_epsilon(noise_multiplier=sigma, sample_rate=q, steps=e * per_epoch, delta=delta,
                            relation="replace-one") for e in range(1, spec.epochs + 1)]
    return [opacus_epsilon(((sigma, q, e * per_epoch),), delta=float(delta), accountant=spec.params.accountant)
            for e in range(1, spec.epochs + 1)]


def certify(*, sigma: float, sample_rate: float, steps: int, delta: float, spec: TrainSpec) -> PrivacySpent:
    """What ``steps`` DP-SGD steps (noise multiplier σ, Poisson rate q) certify at δ.

    ε under ``params.relation`` with its profile (``dpsgd_profile``: audits test the whole certified curve), the other
    relation's ε beside (add/remove: Opacus' ``accountant``, the figure papers quote; replace-one: dp_accounting's PLD),
    and, with a fixed σ (a source's setting), a note on what shuffled fixed-size batches — each record in one batch per
    epoch, as such sources trained — would certify: only the ``epochs``-fold composition of the Gaussian mechanism,
    without amplification by sampling (analytic Gaussian, Balle & Wang 2018, sensitivity √epochs; replace-one doubles
    it, so the note states add/remove).

    Args:
        sigma: σ > 0 (noise std over C).
        sample_rate: q in (0, 1].
        steps: T ≥ 1.
        delta: δ in (0, 1).
        spec: the run's ``TrainSpec`` (``DPSGDParams``: relation, accountant, fixed σ).

    Returns:
        ``PrivacySpent`` (``central-dp``): ε (unitless) at δ, its accountant and relation, the profile and the other
        relation's ε (``other_relations``) and the last-iterate heuristic ε under both (``heuristics``; Steinke et al.
        2025, ``mechanisms.accounting.last_iterate``: not a bound).
    """
    p = spec.params
    history = ((float(sigma), float(sample_rate), int(steps)),)
    add_remove = opacus_epsilon(history, delta=float(delta), accountant=p.accountant)
    replace_one = pld_epsilon(noise_multiplier=sigma, sample_rate=sample_rate, steps=steps, delta=delta,
                              relation="replace-one")
    stated = {"add-remove": (add_remove, f"opacus-{p.accountant}"),
              "replace-one": (replace_one, "dp_accounting-pld")}

    def profile(relation: str) -> tuple[tuple[float, float], ...]:
        return dpsgd_profile(noise_multiplier=sigma, sample_rate=sample_rate, steps=steps, delta=delta,
                             relation=relation)

    other = "add-remove" if p.relation == "replace-one" else "replace-one"
    note = ""
    if p.noise_multiplier is not None:
        shuffled = gaussian_epsilon(sigma=sigma, delta=delta, sensitivity=math.sqrt(spec.epochs))
        note = (f"For shuffled batches (each record in one batch per epoch) only the {spec.epochs}-fold "
                f"composition of the Gaussian mechanism is certain, without amplification: ε = {shuffled:.3g} "
                f"(δ = {delta:.0e}, analytic Gaussian, add-remove)")
    epsilon, accountant = stated[p.relation]
    heuristics = last_iterate(phases=((float(sigma), float(sample_rate), int(steps)),), delta=float(delta),
                              relations=(p.relation, other),
                              basis=f"the run's σ = {sigma:.4g}, q = {sample_rate:.4g}, T = {int(steps)}")
    return PrivacySpent(epsilon, delta, accountant, "central-dp", note=note, relation=p.relation,
                        profile=profile(p.relation), heuristics=heuristics,
                        other_relations=(RelationEpsilon(other, stated[other][0], stated[other][1],
                                                         profile(other)),))
