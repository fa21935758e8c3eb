"""Conformance of a user's Opacus loop to the mechanism its ε certifies.

From what ``opacus-canary``'s observer sees (``attacks.canaries.opacus.observer``), and the ε its measured parameters
imply by Opacus' PRV accountant (Gopi, Lee, Wutschitz 2021, "Numerical Composition of Differential Privacy"). The
tests, k + 6 for k trainable parameter tensors, in a fixed order: noise σ per tensor, sample rate q, participation of
the canary records, optimizer steps T, clip bound C, parameter continuity, then the declared ε (last); a loop of several
``DPOptimizer`` phases has (k + 3)·P + 3. Beside them the measured ε (``MeasuredEpsilon``, ``opacus-prv``,
add/remove), a lower confidence limit of the ε the run spent. ``attacks.conformance.hypothesis_tests`` gives each
test's law; the tests and the measured ε in full: docs/design-notes.md, ``attacks.conformance.opacus``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy import stats

from attacks.analysis.statistics.confidence import clopper_pearson_lower, sd_upper
from attacks.conformance.hypothesis_tests import conformance_record
from attacks.conformance.hypothesis_tests.continuity import continuity_test
from attacks.conformance.hypothesis_tests.epsilon import declared_epsilon_test
from attacks.conformance.hypothesis_tests.noise import clip_test, noise_test
from attacks.conformance.hypothesis_tests.release import limit_p_value
from attacks.conformance.hypothesis_tests.sampling import dispersion_test, rate_test, steps_test

__all__ = ["SIGMA_STAR_MARGIN", "accountant_rate", "opacus_conformance", "opacus_tests", "prv_composed_epsilon",
           "prv_epsilon", "prv_sigma_for_epsilon"]
SIGMA_STAR_MARGIN = 1e-3  # σ* shrunk by this fraction: PRV's ε is piecewise in σ at its discretisation
SIGMA_FLOOR = 0.2  # PRV's domain; a smaller σ upper limit is read at the floor (a smaller, still valid, ε limit)


def prv_epsilon(noise_multiplier: float, sample_rate: float, steps: int, delta: float, *, which: str) -> float:
    """ε at δ (add/remove) of T subsampled Gaussian steps, Opacus' PRV (Gopi et al. 2021), ``which`` limit."""
    return prv_composed_epsilon([(noise_multiplier, sample_rate, steps)], delta, which=which)


def prv_composed_epsilon(history: list[tuple[float, float, int]], delta: float, *, which: str) -> float:
    """``prv_epsilon`` of the composition of ``history``'s ``(σ, q, steps)`` phases.

    Args:
        history: the ``(σ, q, T)`` phases (phases of 0 steps left out).
        delta: δ, a probability.
        which: ``lower``, ``estimate`` or ``upper``.

    Returns:
        ε (unitless, add/remove): ∞ where a phase with steps has σ ≤ 0, 0 without any step.

    Raises:
        ValueError: an unknown ``which``.
    """
    from opacus.accountants import PRVAccountant

    pick = {"lower": 0, "estimate": 1, "upper": 2}
    if which not in pick:
        raise ValueError(f"prv_epsilon: which must be one of {sorted(pick)}, got {which!r}")
    if any(float(s) <= 0 for s, _, t in history if int(t) > 0):
        return math.inf
    acc = PRVAccountant()
    acc.history = [(float(s), float(q), int(t)) for s, q, t in history if int(t) > 0]
    if not acc.history:
        return 0.0
    dprv = acc._get_dprv(eps_error=0.01, delta_error=delta / 1000)
    return float(dprv.compute_epsilon(delta, delta / 1000, 0.01)[pick[which]])


def prv_sigma_for_epsilon(epsilon: float, sample_rate: float, steps: int, delta: float, *, guess: float) -> float:
    """σ* at which PRV's certified (upper) ε equals ``epsilon`` > 0.

    Secant steps on log ε against log σ from ``guess`` (ε ≈ ∝ 1/σ), to 1e-5 relative in ε.

    Raises:
        ValueError: 12 secant steps do not get there.
    """
    def gap(log_s: float) -> float:
        return math.log(prv_epsilon(math.exp(log_s), sample_rate, steps, delta, which="upper") / epsilon)

    a, fa = math.log(guess), gap(math.log(guess))
    b = a + fa  # slope −1
    for _ in range(12):
        fb = gap(b)
        if abs(fb) < 1e-5:
            return math.exp(b)
        slope = (fb - fa) / (b - a) if b != a else -1.0
        a, fa, b = b, fb, b - fb / (slope if slope < -1e-3 else -1.0)
    raise ValueError(f"no noise multiplier near {guess:g} gives ε = {epsilon:g} under PRV")


def opacus_conformance(wb: dict[str, Any], *, certified: float, delta: float, relation: str,
                       confidence: float = 0.95) -> dict[str, Any]:
    """The conformance record of one observed run (``bench.results.Conformance``'s fields).

    ``wb`` is the observer's ``result()``; ``certified``, ``delta``, ``relation``: the ε the plug-in reported. See the
    module docstring.

    Args:
        wb: the observer's ``result()`` (one phase, or ``phases``).
        certified: the reported ε (unitless).
        delta: its δ.
        relation: its neighbouring relation.
        confidence: the confidence of the measured ε's limit.

    Returns:
        ``{"tests": [conformance records, the declared ε last], "measured_epsilon"}``.
    """
    phases = wb.get("phases") or []
    tests = opacus_tests(wb)
    if len(phases) > 1:
        measured = _phased_epsilon(phases, int(wb["records_total"]), certified=certified, delta=delta,
                                   relation=relation, confidence=confidence)
        declared = [(float(p["claimed_sigma"]), float(p["sample_rate"]), int(p["steps"])) for p in phases]
    else:
        tensors, q = wb["noise_by_tensor"], accountant_rate(wb)
        measured = _measured_epsilon(tensors, tests[len(tensors)], q, int(wb["steps"]), float(wb["claimed_sigma"]),
                                     certified=certified, delta=delta, relation=relation, confidence=confidence)
        declared = [(float(wb["claimed_sigma"]), q, int(wb["steps"]))]
    lower = prv_composed_epsilon([(s if s <= 0 else max(s, SIGMA_FLOOR), q, t) for s, q, t in declared], delta,
                                 which="lower")  # a σ below PRV's floor read at the floor: a smaller ε (errs low)
    tests.append(declared_epsilon_test("ε of the declared mechanism (conformance's own accountant)", declared=lower,
                                       certified=certified, phases=[list(h) for h in declared],
                                       accountant="opacus-prv (lower estimate)"))
    return {"tests": tests, "measured_epsilon": measured}


def accountant_rate(wb: dict[str, Any]) -> float:
    """The accountant's steps-weighted q (or the hook's): Poisson-binomial rows keep the rate test valid."""
    history = wb["history"] or [[wb["claimed_sigma"], wb["sample_rate"], wb["steps"]]]
    return sum(float(h[1]) * int(h[2]) for h in history) / max(sum(int(h[2]) for h in history), 1)


def _phase_tests(ph: dict[str, Any], n: int, q: float, prefix: str) -> list[dict[str, Any]]:
    """One phase's noise per tensor, sample rate and canary records' participation (module docstring, 1-3)."""
    sigma, steps, hits = float(ph["claimed_sigma"]), int(ph["steps"]), np.asarray(ph["hits"], np.int64)
    tensors, tests = ph["noise_by_tensor"], []
    for i, t in enumerate(tensors):
        name = f"{prefix}noise σ, tensor {i + 1} of {len(tensors)} {tuple(t['shape'])}"
        tests.append(noise_test(name, t["sum_squares"], t["n"], sigma) if t["n"] and sigma > 0 else
                     conformance_record(name, "noise sd", certified=sigma, measured=None, n=t["n"], p_value=1.0,
                                        alternative="less", validity="exact", reason="no observation or σ = 0"))
    rows, name = int(ph["batch_rows"]), f"{prefix}sample rate q (rows of every batch)"
    tests.append(rate_test(name, "sample rate", min(rows, n * steps), n * steps, q) if n > 0 and 0 < q <= 1 and
                 steps > 0 else conformance_record(name, "sample rate", certified=q, measured=None, n=0, p_value=1.0,
                                                   alternative="greater", validity="exact",
                                                   reason="no record count or no rate"))
    name = f"{prefix}participation of the canary records"
    tests.append(dispersion_test(name, hits, steps, q) if 0 < q < 1 and len(hits) > 1 and steps > 0 else
                 conformance_record(name, "participation dispersion", certified=1.0, measured=None, n=len(hits),
                                    p_value=1.0, alternative="two-sided", validity="simulated", reason="q = 1"))
    return tests


def _clip(ph: dict[str, Any], prefix: str) -> dict[str, Any]:
    bound, name = float(ph["clip_bound"]), f"{prefix}clipped crafted gradient vs max_grad_norm C"
    return (clip_test(name, ph["largest_clip"] * bound, bound) if ph["largest_clip"] is not None else
            conformance_record(name, "clip bound", certified=bound, measured=None, n=0, p_value=1.0,
                               alternative="greater", validity="exact", reason="no canary in any batch"))


def opacus_tests(wb: dict[str, Any]) -> list[dict[str, Any]]:
    """The conformance tests of one observed run but the declared ε (module docstring), in their fixed order.

    k + 5 for one phase, (k + 3)·P + 2 for P phases (the parameter continuity last; none where ``wb`` has no
    ``continuity`` key, a record from before the test existed).

    Args:
        wb: the observer's ``result()``.

    Returns:
        The conformance records (k: the parameter tensors).
    """
    phases, n = wb.get("phases") or [], int(wb["records_total"])
    continuity = [continuity_test(wb["continuity"])] if "continuity" in wb else []
    if len(phases) <= 1:
        steps = int(wb["steps"])
        accounted = sum(int(h[2]) for h in wb["history"]) if wb["history"] else steps
        return [*_phase_tests(wb, n, accountant_rate(wb), ""),
                steps_test("optimizer steps T vs the accountant's history", steps, accounted), _clip(wb, ""),
                *continuity]
    prefixes = [f"phase {i + 1} of {len(phases)}: " for i in range(len(phases))]
    histories = {p["accountant_id"]: p["history"] for p in phases}  # each accountant once, however many phases
    accounted = sum(int(h[2]) for history in histories.values() for h in history)
    steps = sum(int(p["steps"]) for p in phases)
    return [*(t for p, pre in zip(phases, prefixes, strict=True) for t in _phase_tests(p, n, float(p["sample_rate"]),
                                                                                      pre)),
            steps_test("optimizer steps T vs the accountants' histories", steps, accounted),
            *(_clip(p, pre) for p, pre in zip(phases, prefixes, strict=True)), *continuity]


def _phased_epsilon(phases: list[dict[str, Any]], n: int, *, certified: float, delta: float, relation: str,
                    confidence: float) -> dict[str, Any]:
    """``MeasuredEpsilon``'s fields of a loop of several phases (module docstring).

    PRV's lower estimate of every phase's (σ upper limit, q lower limit, observed T) composed, K limits at α/K each.
    """
    observed = [[t for t in p["noise_by_tensor"] if t["n"]] for p in phases]
    k = sum(len(o) + 1 for o in observed)

    def at(alpha: float) -> list[tuple[float, float, int]]:
        out = []
        for p, tensors in zip(phases, observed, strict=True):
            s_u = min((sd_upper(t["sum_squares"], t["n"], alpha / k) for t in tensors),
                      default=float(p["claimed_sigma"]))
            trials = n * int(p["steps"])
            rows = min(int(p["batch_rows"]), trials)
            q_l = clopper_pearson_lower(rows, trials, alpha / k) if rows and trials else float(p["sample_rate"])
            out.append((max(s_u, SIGMA_FLOOR), max(q_l, 1e-9), int(p["steps"])))
        return out

    def epsilon_at(alpha: float) -> float:
        return prv_composed_epsilon(at(alpha), delta, which="lower")

    limits = at(1 - confidence)
    return {"epsilon": epsilon_at(1 - confidence), "certified": certified, "delta": delta, "relation": relation,
            "accountant": "opacus-prv", "confidence": confidence, "p_value": limit_p_value(epsilon_at, certified),
            "parameters": {**{f"phase_{i + 1}_{key}": float(v) for i, h in enumerate(limits) for key, v in
                              zip(("noise_multiplier", "sample_rate", "steps"), h, strict=True)},
                           "phases": float(len(phases))}}


def _measured_epsilon(tensors: list[dict[str, Any]], rate: dict[str, Any], q: float, steps: int, sigma: float, *,
                      certified: float, delta: float, relation: str, confidence: float) -> dict[str, Any]:
    """``MeasuredEpsilon``'s fields (module docstring); ``rate``: the sample-rate test's record."""
    observed = [t for t in tensors if t["n"]]
    level = 1.0 - (1.0 - confidence) / (len(observed) + 1)
    upper = [sd_upper(t["sum_squares"], t["n"], 1 - level) for t in observed]
    sigma_u = min(upper, default=sigma)
    q_l = q
    if rate["n"]:
        counts = int(rate["statistic"]), int(rate["n"])
        q_l = float(rate_test("q", "sample rate", *counts, q, confidence=level)["detail"]["lower"])
    eps = prv_epsilon(max(sigma_u, SIGMA_FLOOR), max(q_l, 1e-9), steps, delta, which="lower")
    try:
        star = prv_sigma_for_epsilon(certified, q, steps, delta, guess=max(sigma, SIGMA_FLOOR))
    except ValueError:  # no σ* (the certified ε out of PRV's reach): the comparison is counted and decides nothing
        star = 0.0
    star *= 1 - SIGMA_STAR_MARGIN
    ss, n = sum(t["sum_squares"] for t in observed), sum(t["n"] for t in observed)
    p = float(stats.chi2.cdf(ss / star**2, n)) if n and star > 0 else 1.0
    return {"epsilon": eps, "certified": certified, "delta": delta, "relation": relation,
            "accountant": "opacus-prv", "confidence": confidence, "p_value": p,
            "parameters": {"noise_multiplier": sigma_u, "sample_rate": q_l, "steps": float(steps),
                           "noise_multiplier_at_certified_epsilon": star, "accountant_sample_rate": q}}
