"""The ε a run's parameters imply (``attacks.conformance.hypothesis_tests``).

DP-SGD's ε from its measured noise, sample rate and steps at their confidence limits (``dpsgd_measured_epsilon``), and
the test that the accountant's ε is the ε of the mechanism's declared parameters (``declared_epsilon_test``). Neither is
an "ε ≥" statement. Pure NumPy / SciPy and ``dp_accounting``'s PLD accountant; no torch.
"""

from __future__ import annotations

from typing import Any

from scipy import stats

from attacks.conformance.accountants.subsampled_gaussian import (
    PLD_SMALLEST_SIGMA,
    poisson_gaussian_epsilon,
    sigma_for_epsilon,
)
from attacks.conformance.hypothesis_tests import conformance_record
from attacks.conformance.hypothesis_tests.noise import noise_test
from attacks.conformance.hypothesis_tests.sampling import rate_test


def dpsgd_measured_epsilon(*, sum_squares: float, n: int, rate_counts: tuple[int, int] | None, sample_rate: float,
                           steps: int, certified: float, delta: float, relation: str, claimed_sigma: float,
                           confidence: float = 0.95) -> dict[str, Any]:
    """DP-SGD's ε from its measured parameters (``bench.results.MeasuredEpsilon``'s fields).

    The noise multiplier at the upper one-sided χ² limit of the ``n`` noise observations (Σx² = ``sum_squares``, units
    of C), the sample rate at the lower Clopper-Pearson limit of ``rate_counts`` = (participations, record-steps) (the
    certified ``sample_rate`` where None), the observed ``steps``; each limit at 1 − (1 − confidence)/k for the k
    limits used, so ε(σ_U, q_L, T) is a lower confidence limit of the ε the run spent (``poisson_gaussian_epsilon``;
    dp_accounting's PLD). A σ_U below ``PLD_SMALLEST_SIGMA`` is accounted at that floor
    (``parameters['noise_multiplier_accounted']``): a smaller, still valid, lower limit. ``p_value``: the exact χ² test
    of "the noise is at least σ*", σ* the multiplier at which that accountant gives the ``certified`` ε·(1 +
    ``DECLARED_TOLERANCE``) at the certified q and observed T — small when the run spent more than it certifies,
    whether its noise or its accountant is wrong. The tolerance (the accountants' numerical disagreement that
    ``declared_epsilon_test`` allows) keeps a correct run from failing where millions of noise observations resolve
    σ* sitting ~0.02 % above its σ.

    Raises:
        ValueError: what ``noise_test``, ``rate_test`` or ``sigma_for_epsilon`` raise.
    """
    k = 2 if rate_counts is not None else 1
    level = 1.0 - (1.0 - confidence) / k
    noise = noise_test("noise", sum_squares, n, claimed_sigma, confidence=level)
    q = sample_rate
    if rate_counts is not None:
        q = max(rate_test("q", "sample rate", rate_counts[0], rate_counts[1], sample_rate,
                          confidence=level)["detail"]["lower"], 1e-12)
    sigma_u = float(noise["detail"]["sd_upper"])
    sigma_acc = sigma_u if sigma_u == 0 else max(sigma_u, PLD_SMALLEST_SIGMA)  # a lower bound below the floor
    eps = poisson_gaussian_epsilon(noise_multiplier=sigma_acc, sample_rate=min(q, 1.0), steps=steps, delta=delta,
                                   relation=relation)
    star = sigma_for_epsilon(certified * (1 + DECLARED_TOLERANCE), sample_rate=sample_rate, steps=steps, delta=delta,
                             relation=relation, guess=claimed_sigma)
    p = float(stats.chi2.cdf(sum_squares / star**2, n))
    parameters = {"noise_multiplier": sigma_u, "sample_rate": q, "steps": float(steps),
                  "noise_multiplier_at_certified_epsilon": star}
    if sigma_acc != sigma_u:
        parameters["noise_multiplier_accounted"] = sigma_acc
    return {"epsilon": eps, "certified": certified, "delta": delta, "relation": relation,
            "accountant": "dp_accounting-pld", "confidence": confidence, "p_value": p, "parameters": parameters}


DECLARED_TOLERANCE = 1e-3
"""How far the certifying accountant's ε may fall below the ε the conformance code computes for the declared
mechanism before ``declared_epsilon_test`` rejects (relative). The conformance code's accountants either are exact
(local noise: ``attacks.conformance.accountants.analytic_gaussian``) or are dp_accounting's pessimistic PLD, whose grid
overstates ε by at most 1.8e-4 at the profiles' settings (``scripts/accountant_check.py``: against a grid five to ten
times finer, DP-SGD and DPMix, ε 1 to 15): a correct accountant, however tight, certifies at least the exact ε, so at
most that far below. 1e-3 is five times it, and fifty times below the 5 % the conformance family must catch."""


def declared_epsilon_test(name: str, *, declared: float, certified: float, tolerance: float = DECLARED_TOLERANCE,
                          **detail: Any) -> dict[str, Any]:
    """"The accountant's ε is the ε of the declared mechanism": exact, p = 0 where declared > certified·(1 + tolerance).

    ``declared``: the conformance code's own ε of the stated σ, rate, sensitivity, steps (never as the mechanism's
    accountant derives them). ValueError: a certified ε <= 0 or a negative tolerance.
    """
    if not certified > 0 or tolerance < 0:
        raise ValueError(f"declared ε test {name!r}: need a certified ε > 0 and a tolerance >= 0, got {certified}, "
                         f"{tolerance}")
    return conformance_record(name, "declared epsilon", certified=float(certified), measured=float(declared), n=1,
                              statistic=float(declared), p_value=0.0 if declared > certified * (1 + tolerance)
                              else 1.0, alternative="greater", validity="exact", tolerance=tolerance, **detail)
