"""Conformance of a user's Opacus loop to the mechanism its ε certifies, from what ``opacus-canary``'s observer sees
(``attacks.opacus_observer``), and the ε its measured parameters imply by Opacus' PRV accountant (Gopi, Lee, Wutschitz
2021, "Numerical Composition of Differential Privacy").

The tests, in this fixed order (k + 4 of them for a model of k trainable parameter tensors, fixed by the design and
the architecture before any data; ``attacks.audit.conformance`` gives each one's law):

1. ``noise σ, tensor i of k``: per parameter tensor, the noisy update at its reference coordinates (no canary there:
   noise alone, units of C) against the optimizer's ``noise_multiplier`` σ — exact one-sided χ² (less noise raises ε).
2. ``sample rate q``: the rows of every batch, Σ_t B_t, against Binomial(n·T, q) (n: the records given to ``fit``,
   every canary record among them; q: the accountant's, steps-weighted over its history) — exact one-sided binomial
   (a higher rate raises ε; under Poisson sampling each record joins each step independently with probability q).
3. ``participation of the canary records``: each canary record's count over the T steps against iid Binomial(T, q)
   — two-sided dispersion test (shuffled fixed-size batches give no dispersion, a weighted sampler too much; neither
   direction is safe), its level shown by simulation.
4. ``optimizer steps T``: the noisy steps observed against the steps in the accountant's history — exact (a count):
   more steps than accounted refutes it.
5. ``clip bound C``: the largest clipped crafted gradient per row (raw norm ``norm``·C) against the optimizer's
   ``max_grad_norm`` — exact (a norm computed, float tolerance 1e-4).

Measured ε (``MeasuredEpsilon``, accountant ``opacus-prv``, add/remove): PRV's lower ε estimate at the smallest
per-tensor upper χ² limit of σ (the worst-case record puts its whole clipped gradient in the least-noised tensor), the
lower Clopper-Pearson limit of q and the observed T, each limit at 1 − 0.05/(k + 1): a lower confidence limit of the
ε the run spent. Its p-value is the exact χ² test of all reference noise against σ*, the noise multiplier at which PRV
gives the certified ε at the accountant's q and the observed T (shrunk by ``SIGMA_STAR_MARGIN`` for PRV's
discretisation): small when the run spent more than it certifies through its noise or its step count. q enters at the
accountant's value there, not the measured one: the rate test tests q in the same family, so "spent ≤ certified"
is refuted through one or the other. A certified ε under replace-one is compared as is (its ε is at least the
add/remove one, so the comparison stays conservative).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy import stats

from attacks.audit.conformance import clip_test, conformance_record, dispersion_test, noise_test, rate_test, steps_test

__all__ = ["SIGMA_STAR_MARGIN", "accountant_rate", "opacus_conformance", "opacus_tests", "prv_epsilon",
           "prv_sigma_for_epsilon"]
SIGMA_STAR_MARGIN = 1e-3  # σ* shrunk by this fraction: PRV's ε is piecewise in σ at its discretisation
SIGMA_FLOOR = 0.2  # PRV's domain; a smaller σ upper limit is read at the floor (a smaller, still valid, ε limit)


def prv_epsilon(noise_multiplier: float, sample_rate: float, steps: int, delta: float, *, which: str) -> float:
    """ε at δ of ``steps`` Poisson-subsampled Gaussian steps by Opacus' PRV accountant (eps_error 0.01, delta_error
    δ/1000, Opacus' defaults): ``which`` ``lower``, ``estimate`` or ``upper`` (``upper`` is what
    ``PRVAccountant.get_epsilon`` certifies). Raises ValueError for an unknown ``which``."""
    from opacus.accountants import PRVAccountant

    pick = {"lower": 0, "estimate": 1, "upper": 2}
    if which not in pick:
        raise ValueError(f"prv_epsilon: which must be one of {sorted(pick)}, got {which!r}")
    acc = PRVAccountant()
    acc.history = [(float(noise_multiplier), float(sample_rate), int(steps))]
    dprv = acc._get_dprv(eps_error=0.01, delta_error=delta / 1000)
    return float(dprv.compute_epsilon(delta, delta / 1000, 0.01)[pick[which]])


def prv_sigma_for_epsilon(epsilon: float, sample_rate: float, steps: int, delta: float, *, guess: float) -> float:
    """σ* at which PRV's certified (upper) ε equals ``epsilon``: secant steps on log ε against log σ from ``guess``
    (ε ≈ ∝ 1/σ), to 1e-5 relative in ε. Raises ValueError when 12 steps do not get there."""
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
    """The conformance record of one observed run (``bench.results.Conformance``'s fields): ``wb`` is the observer's
    ``result()``; ``certified``, ``delta``, ``relation``: the ε the plug-in reported. See the module docstring."""
    tests = opacus_tests(wb)
    tensors, q = wb["noise_by_tensor"], accountant_rate(wb)
    measured = _measured_epsilon(tensors, tests[len(tensors)], q, int(wb["steps"]), float(wb["claimed_sigma"]),
                                 certified=certified, delta=delta, relation=relation, confidence=confidence)
    return {"tests": tests, "measured_epsilon": measured}


def accountant_rate(wb: dict[str, Any]) -> float:
    """The accountant's q, steps-weighted over its history (the hook's q without one): under Poisson sampling at
    varying q_t the rows are Poisson-binomial, less spread than the binomial at the mean q, so the rate test at the
    mean stays exact or conservative."""
    history = wb["history"] or [[wb["claimed_sigma"], wb["sample_rate"], wb["steps"]]]
    return sum(float(h[1]) * int(h[2]) for h in history) / max(sum(int(h[2]) for h in history), 1)


def opacus_tests(wb: dict[str, Any]) -> list[dict[str, Any]]:
    """The k + 4 conformance tests of one observed run (module docstring), in their fixed order."""
    sigma, steps, hits = float(wb["claimed_sigma"]), int(wb["steps"]), np.asarray(wb["hits"], np.int64)
    accounted = sum(int(h[2]) for h in wb["history"]) if wb["history"] else steps
    q, tensors = accountant_rate(wb), wb["noise_by_tensor"]
    tests = []
    for i, t in enumerate(tensors):
        name = f"noise σ, tensor {i + 1} of {len(tensors)} {tuple(t['shape'])}"
        tests.append(noise_test(name, t["sum_squares"], t["n"], sigma) if t["n"] and sigma > 0 else
                     conformance_record(name, "noise sd", certified=sigma, measured=None, n=t["n"], p_value=1.0,
                                        alternative="less", validity="exact", reason="no observation or σ = 0"))
    n, rows = int(wb["records_total"]), int(wb["batch_rows"])
    if n > 0 and 0 < q <= 1:
        tests.append(rate_test("sample rate q (rows of every batch)", "sample rate", min(rows, n * steps),
                               n * steps, q))
    else:
        tests.append(conformance_record("sample rate q (rows of every batch)", "sample rate", certified=q,
                                        measured=None, n=0, p_value=1.0, alternative="greater", validity="exact",
                                        reason="no record count or no rate"))
    name = "participation of the canary records"
    tests.append(dispersion_test(name, hits, steps, q) if 0 < q < 1 and len(hits) > 1 else
                 conformance_record(name, "participation dispersion", certified=1.0, measured=None, n=len(hits),
                                    p_value=1.0, alternative="two-sided", validity="simulated", reason="q = 1"))
    tests.append(steps_test("optimizer steps T vs the accountant's history", steps, accounted))
    bound = float(wb["clip_bound"])
    tests.append(clip_test("clipped crafted gradient vs max_grad_norm C", wb["largest_clip"] * bound, bound)
                 if wb["largest_clip"] is not None else
                 conformance_record("clipped crafted gradient vs max_grad_norm C", "clip bound", certified=bound,
                                    measured=None, n=0, p_value=1.0, alternative="greater", validity="exact",
                                    reason="no canary in any batch"))
    return tests


def _measured_epsilon(tensors: list[dict[str, Any]], rate: dict[str, Any], q: float, steps: int, sigma: float, *,
                      certified: float, delta: float, relation: str, confidence: float) -> dict[str, Any]:
    """``MeasuredEpsilon``'s fields (module docstring); ``rate``: the sample-rate test's record."""
    observed = [t for t in tensors if t["n"]]
    level = 1.0 - (1.0 - confidence) / (len(observed) + 1)
    upper = [math.sqrt(t["sum_squares"] / max(float(stats.chi2.ppf(1 - level, t["n"])), 1e-300)) for t in observed]
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
