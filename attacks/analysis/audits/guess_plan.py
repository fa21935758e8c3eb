"""The one-run audit's guessing rule fixed in advance from the mechanism's public parameters.

For white-box DP-SGD canaries (Steinke, Nasr, Jagielski 2023, "Privacy auditing with one (1) training run", §6: they
choose the number of guesses before the run): the two-sided fraction whose single rule gives the largest one-run bound
on the ideal mechanism's simulated scores at the claimed σ, q, T and m
(``attacks.analysis.statistics.gaussian_llr_ideal.simulate_llr_scores``, a fixed seed). Pure NumPy / SciPy (no torch).
"""

from __future__ import annotations

import functools

import numpy as np
from numpy.typing import ArrayLike

from attacks.analysis.statistics.gaussian_llr_ideal import simulate_llr_scores
from attacks.analysis.statistics.one_run import one_run_epsilon, one_run_guesses

PLANNED_FRACTIONS = (0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5)  # the candidates the plan chooses among
PLAN_SEED = 20230601  # the simulation's seed: fixed, so the plan is a function of the public parameters alone


@functools.lru_cache(maxsize=64)
def planned_guess_fraction(*, sigma: float, sample_rate: float, steps: int, m: int, delta: float,
                           confidence: float = 0.95) -> float:
    """The two-sided guess fraction f in ``PLANNED_FRACTIONS`` whose rule maximises the one-run ε lower bound.

    The bound of Steinke, Nasr, Jagielski (2023) at δ and ``confidence`` on the ideal mechanism's simulated scores
    (claimed σ, rate q, T steps, m canaries; a fixed seed: a function of the public parameters alone; cached).

    Raises:
        ValueError: σ <= 0, q outside (0, 1], T < 1 or m < 2.
    """
    if not (sigma > 0 and 0 < sample_rate <= 1 and steps >= 1 and m >= 2):
        raise ValueError(f"planned_guess_fraction needs σ > 0, 0 < q <= 1, T >= 1, m >= 2, got {sigma}, "
                         f"{sample_rate}, {steps}, {m}")
    scores, coins = simulate_llr_scores(sigma=sigma, sample_rate=sample_rate, steps=steps, m=m,
                                        rng=np.random.default_rng(PLAN_SEED))
    best, best_eps = PLANNED_FRACTIONS[-1], -1.0
    for f in PLANNED_FRACTIONS:
        _, _, r, v = two_sided_rule(scores, coins, f)
        eps = one_run_epsilon(m, r, v, delta=delta, confidence=confidence)
        if eps > best_eps:
            best, best_eps = f, eps
    return best


def two_sided_rule(scores: ArrayLike, included: ArrayLike, fraction: float) -> list[int]:
    """``[k, k, 2k, v]``: ``one_run_guesses``' two-sided rule at ``fraction`` (the f·m highest, f·m lowest guessed)."""
    return one_run_guesses(scores, included, fractions=(fraction,))[1]
