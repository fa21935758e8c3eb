"""Conformance of a DPMix release tested for what it is, from the known records and the subsets the release recorded.

(Lee, Kim, Lee, Suh, ISIT 2019: each released sample the mean of the ℓ records of its subset plus Gaussian noise.) On
the residual r_t = o_t − (1/ℓ)·Σ_{j∈S_t} x_j of each released row, whitened by the certified noise (N(0, I) under H0,
so each test is exact): the records' weight in their samples (``mixing_weight_test``, two-sided), the spread of that
weight record by record (``weight_spread_test``, χ², two-sided), and the ε the measured parameters imply by the
conformance code's own accountant (``attacks.conformance.accountants.mixing_pair``). The statistics in full:
docs/design-notes.md. Pure NumPy / SciPy.
"""

from __future__ import annotations

import math
from typing import Any

from scipy import stats

from attacks.analysis.statistics.confidence import clopper_pearson_lower, sd_upper
from attacks.conformance.accountants.mixing_pair import mixing_epsilon, mixing_shift
from attacks.conformance.hypothesis_tests import conformance_record
from attacks.conformance.hypothesis_tests.release import limit_p_value

__all__ = ["dpmix_measured_epsilon", "mixing_weight_test", "weight_limit", "weight_spread_test"]


def mixing_weight_test(name: str, along: float, information: float, certified_weight: float, *,
                       confidence: float = 0.95) -> dict[str, Any]:
    """Two-sided z test of the records' weight in their samples against the certified 1/ℓ (module docstring).

    ``along``: A = Σ_t ⟨r̃_t, X̃_t⟩; ``information``: V = Σ_t ‖X̃_t‖². ``measured`` ŵ = 1/ℓ + A/V, ``statistic`` z,
    one-sided limits ``lower`` / ``upper`` at ``confidence``; p = 1 with a reason where V = 0.

    Raises:
        ValueError: a negative V or a weight <= 0.
    """
    if information < 0 or not certified_weight > 0:
        raise ValueError(f"mixing weight test {name!r}: need V >= 0 and a weight > 0, got {information}, "
                         f"{certified_weight}")
    if information == 0:
        return conformance_record(name, "mixing weight", certified=certified_weight, measured=None, n=0,
                                  p_value=1.0, alternative="two-sided", validity="exact", reason="no recorded record")
    z = along / math.sqrt(information)
    w = certified_weight + along / information
    half = float(stats.norm.ppf(confidence)) / math.sqrt(information)
    return conformance_record(name, "mixing weight", certified=certified_weight, measured=w, n=1, statistic=z,
                              p_value=min(1.0, 2 * float(stats.norm.sf(abs(z)))), alternative="two-sided",
                              validity="exact", lower=w - half, upper=w + half, standard_error=1 / math.sqrt(
                                  information))


def weight_limit(along: float, information: float, certified_weight: float, alpha: float) -> float:
    """The weight ε is read at: the lower 1 − α limit 1/ℓ + (A − z_α·√V)/V of the weight, floored at 1/ℓ (V <= 0: 1/ℓ).

    A, V as ``mixing_weight_test``'s. Below 1/ℓ the release is not its subset's mean, and the weight test refutes it.
    """
    if information <= 0:
        return certified_weight
    return max(certified_weight,
               certified_weight + (along - float(stats.norm.isf(alpha)) * math.sqrt(information)) / information)


def weight_spread_test(name: str, quadratic: float, dimensions: int) -> dict[str, Any]:
    """Two-sided χ² test of the residual's projections ``quadratic`` Σ_t ‖P_t r̃_t‖² (χ²_N under H0; module docstring).

    ``measured``: the ratio to its mean N = ``dimensions``; p = 1 with a reason where N = 0.

    Raises:
        ValueError: a negative statistic or N.
    """
    if quadratic < 0 or dimensions < 0:
        raise ValueError(f"weight spread test {name!r}: need a statistic and N >= 0, got {quadratic}, {dimensions}")
    if dimensions == 0:
        return conformance_record(name, "mixing weights' spread", certified=1.0, measured=None, n=0, p_value=1.0,
                                  alternative="two-sided", validity="exact", reason="no record apart from the "
                                  "most common one was recorded")
    p = 2 * min(float(stats.chi2.cdf(quadratic, dimensions)), float(stats.chi2.sf(quadratic, dimensions)))
    return conformance_record(name, "mixing weights' spread", certified=1.0, measured=quadratic / dimensions,
                              n=dimensions, statistic=quadratic, p_value=min(1.0, p), alternative="two-sided",
                              validity="exact")


def dpmix_measured_epsilon(*, noise: tuple[float, int, float, int], weight: tuple[float, float, float],
                           inclusions: tuple[int, int, int, int], rows: int, d_x: int, delta: float,
                           certified: float, confidence: float = 0.95) -> dict[str, Any]:
    """DPMix's ε from its measured parameters (``bench.results.MeasuredEpsilon``'s fields).

    By the conformance code's own accountant (``mixing_epsilon`` of the pair with c = (ŵ·Δ)², Δ² = d_x/σ_x² + 2/σ_y²),
    each parameter at its one-sided limit in the direction that lowers ε, at α/4 each: σ_x and σ_y at their upper χ²
    limits, the weight ŵ at its lower limit (``weight_limit``), the inclusion rate q at the larger of the observed
    mean rate (every subset holds ℓ distinct records, so Σ_j q_j = ℓ and the largest q_j is at least their mean: no
    error) and the Bonferroni-corrected lower Clopper-Pearson limit of the most included record's rate; T as observed.
    The p-value of "spent ≤ certified" by ``limit_p_value``.

    Args:
        noise: (Σr_x², its observations, Σr_y², its observations), in the data's units.
        weight: (A, V, 1/ℓ) of ``mixing_weight_test``.
        inclusions: (Σ_j c_j, the largest c_j, n records, trials per record), c_j a record's inclusions over every
            release.
        rows: T, the releases observed.
        d_x: the number of features.
        delta: the run's δ, a probability.
        certified: the run's certified ε (unitless).
        confidence: the limit's confidence level.

    Returns:
        ``{"epsilon", "certified", "delta", "relation", "accountant", "confidence", "p_value", "parameters"}``; ε
        (replace-one) 1e300 where it is infinite (a measured σ of 0).

    Raises:
        ValueError: no observation, no record or no trial.
    """
    ss_x, n_x, ss_y, n_y = noise
    along, information, w0 = weight
    total, largest, records, trials = inclusions
    if min(n_x, n_y, records, trials, rows) < 1:
        raise ValueError(f"dpmix_measured_epsilon: need observations, records, trials and rows, got {noise}, "
                         f"{inclusions}, {rows}")
    mean_rate = total / (records * trials)

    def at(alpha: float) -> tuple[float, float, float, float]:
        a = alpha / 4
        top = clopper_pearson_lower(largest, trials, a / records)
        return (sd_upper(ss_x, n_x, a), sd_upper(ss_y, n_y, a), weight_limit(along, information, w0, a),
                min(1.0, max(mean_rate, top)))

    def epsilon_at(alpha: float) -> float:
        sx, sy, w, q = at(alpha)
        if not (sx > 0 and sy > 0):
            return math.inf
        return mixing_epsilon(shift_sq=mixing_shift(sigma_x=sx, sigma_y=sy, d_x=d_x, weight=w), rate=q,
                              releases=rows, delta=delta)

    alpha = 1 - confidence
    eps = epsilon_at(alpha)
    sx, sy, w, q = at(alpha)
    return {"epsilon": eps if math.isfinite(eps) else 1e300, "certified": certified, "delta": delta,
            "relation": "replace-one", "accountant": "dp_accounting-pld (the dominating pair of DPMix, conformance's "
            "own)", "confidence": confidence, "p_value": limit_p_value(epsilon_at, certified),
            "parameters": {"sigma_x": sx, "sigma_y": sy, "mixing_weight": w, "inclusion_rate": q,
                           "num_samples": float(rows), "num_records": float(records)}}
