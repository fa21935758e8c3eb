"""ε of the Poisson-subsampled Gaussian mechanism by ``dp_accounting``'s PLD accountant.

The accountant the conformance tests recompute DP-SGD's ε with from its measured parameters
(``attacks.conformance.hypothesis_tests``), independent of the mechanisms' own accounting code. Pure SciPy and
``dp_accounting``; no torch.
"""

from __future__ import annotations

import functools
import math

__all__ = ["PLD_SMALLEST_SIGMA", "RELATIONS", "poisson_gaussian_epsilon", "sigma_for_epsilon"]

RELATIONS = ("add-remove", "replace-one")

PLD_SMALLEST_SIGMA = 0.2
"""The smallest noise multiplier ``dpsgd_measured_epsilon`` gives dp_accounting's PLD accountant: below it the
privacy-loss grid of many steps takes minutes and gigabytes (q = 0.33, T = 120 on the 2-core machine: σ = 0.2 7 s and
0.25 GB, σ = 0.03 58 s and 3.4 GB; σ ≈ 0.008, DP-SGD with its noise on the average gradient at ``default`` size, was
killed for memory at 22 GB). ε falls as σ grows, so ε at this σ is a lower bound of ε at any smaller one."""


def poisson_gaussian_epsilon(*, noise_multiplier: float, sample_rate: float, steps: int, delta: float,
                             relation: str) -> float:
    """ε at δ of T compositions of the Poisson-subsampled Gaussian mechanism (Abadi et al. 2016); ∞ for σ = 0.

    ``dp_accounting``'s PLD (pessimistic, discretisation 1e-3), independent of the mechanism's own code. ValueError: q
    outside (0, 1], steps < 1, δ outside (0, 1), σ < 0 or an unknown relation.
    """
    if relation not in RELATIONS or not 0 < sample_rate <= 1 or steps < 1 or not 0 < delta < 1 or noise_multiplier < 0:
        raise ValueError(f"poisson_gaussian_epsilon: need q in (0, 1], steps >= 1, δ in (0, 1), σ >= 0 and a relation "
                         f"in {list(RELATIONS)}, got {sample_rate}, {steps}, {delta}, {noise_multiplier}, {relation!r}")
    if noise_multiplier == 0:
        return math.inf
    return _pld_epsilon(float(noise_multiplier), float(sample_rate), int(steps), float(delta), relation)


@functools.lru_cache(maxsize=256)
def _pld_epsilon(noise_multiplier: float, sample_rate: float, steps: int, delta: float, relation: str) -> float:
    """``poisson_gaussian_epsilon``'s accountant, memoised (a root search asks for one point more than once)."""
    from dp_accounting import dp_event, pld
    from dp_accounting.privacy_accountant import NeighboringRelation

    rel = {"add-remove": NeighboringRelation.ADD_OR_REMOVE_ONE, "replace-one": NeighboringRelation.REPLACE_ONE}
    acct = pld.PLDAccountant(neighboring_relation=rel[relation], value_discretization_interval=1e-3)
    event = dp_event.PoissonSampledDpEvent(sample_rate, dp_event.GaussianDpEvent(noise_multiplier))
    acct.compose(dp_event.SelfComposedDpEvent(event, steps))
    return float(acct.get_epsilon(delta))


def sigma_for_epsilon(epsilon: float, *, sample_rate: float, steps: int, delta: float, relation: str,
                      guess: float) -> float:
    """The noise multiplier σ* (units of C) at which ``poisson_gaussian_epsilon`` equals ``epsilon``.

    Brent's method on log σ, to 1e-3 relative, from a bracket of ±5 % around ``guess``, widened until it holds the
    root (ε falls as σ grows).

    Raises:
        ValueError: no σ in [guess/64, 64·guess] reaches ``epsilon``, or what ``poisson_gaussian_epsilon`` raises.
    """
    from scipy.optimize import brentq

    def gap(log_sigma: float) -> float:
        return math.log(poisson_gaussian_epsilon(noise_multiplier=math.exp(log_sigma), sample_rate=sample_rate,
                                                 steps=steps, delta=delta, relation=relation)) - math.log(epsilon)

    lo, hi = math.log(guess) - 0.05, math.log(guess) + 0.05
    while gap(lo) < 0 and lo > math.log(guess) - math.log(64):
        lo -= 0.7
    while gap(hi) > 0 and hi < math.log(guess) + math.log(64):
        hi += 0.7
    if gap(lo) < 0 or gap(hi) > 0:  # memoised: no accountant is composed again here
        raise ValueError(f"no noise multiplier within 64× of {guess:g} gives ε = {epsilon:g} ({relation})")
    return math.exp(float(brentq(gap, lo, hi, xtol=1e-3)))
