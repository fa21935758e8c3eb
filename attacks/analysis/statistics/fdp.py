"""The f-DP analysis of a one-run audit.

(Mahloujifar, Melis, Chaudhuri 2024, "Auditing f-Differential Privacy in One Run", ICML 2025, Algorithm 3 and Theorem
3.2.) With m canaries, c′ guesses and c correct, a hypothesised trade-off curve f is rejected at level τ when no f-DP
mechanism makes c or more correct guesses with probability τ or more. The curve is given by the inverse of its blow-up
f̄(x) = 1 − f(x): ``eps_delta_inverse(ε, δ)`` (non-parametric: rejecting it refutes (ε, δ)-DP),
``profile_inverse(profile)`` (an accountant's whole privacy profile) and ``gdp_inverse(μ)`` (μ-GDP, Dong, Roth, Su
2022: parametric, a lower bound only for a Gaussian-shaped curve). Pure NumPy / SciPy (no torch).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from scipy.optimize import brentq
from scipy.special import ndtr, ndtri

Inverse = Callable[[float], float]
EPSILON_CAP = 100.0  # bounds stop here (capping keeps a lower bound valid; far beyond any meaningful privacy)


def rejects(fbar_inverse: Inverse, m: int, guesses: int, correct: int, *, tau: float, k: int = 2) -> bool:
    """Whether P[≥ c correct of c′ guesses] < ``tau`` for every f-DP mechanism (Mahloujifar et al. 2024, Alg. 3).

    Args:
        fbar_inverse: f̄⁻¹ of the hypothesised curve, increasing on [0, 1].
        m: the number of canaries.
        guesses: c′, the guesses made (1 <= c′ <= m, else ValueError).
        correct: c, the correct guesses (0 <= c <= c′, else ValueError).
        tau: the test's level, in (0, 1).
        k: candidates per canary (2: included or not).
    """
    if not 0 <= correct <= guesses <= m or guesses < 1:
        raise ValueError(f"need 0 <= correct <= guesses <= m and guesses >= 1, got {correct}, {guesses}, {m}")
    r, h = tau * correct / m, tau * (guesses - correct) / m
    bound = guesses / m
    for i in range(correct - 1, -1, -1):
        if r + h > bound:
            return True
        new = max(h, (k - 1) * fbar_inverse(min(max(r, 0.0), 1.0)))
        if new == h:  # a fixed point: r and h stay where they are
            break
        r, h = r + i / (guesses - i) * (new - h), new
    return r + h > bound


def eps_delta_inverse(epsilon: float, delta: float) -> Inverse:
    """f̄⁻¹(y) = max(0, (y − δ)/e^ε, 1 − δ − e^ε(1 − y)) of (ε, δ)-DP, both branches (symmetric relation)."""
    e = math.exp(min(epsilon, 700.0))

    def inverse(y: float) -> float:
        return max(0.0, (y - delta) / e, 1.0 - delta - e * (1.0 - y))
    return inverse


def profile_inverse(profile: Sequence[Sequence[float]]) -> Inverse:
    """f̄⁻¹ of a mechanism (εᵢ, δᵢ)-DP for every ``[ε, δ]`` of ``profile``: the maximum of theirs."""
    parts = [eps_delta_inverse(float(e), float(d)) for e, d in profile]
    return lambda y: max(p(y) for p in parts)


def gdp_inverse(mu: float) -> Inverse:
    """f̄⁻¹(y) = Φ(Φ⁻¹(y) − μ) of μ-GDP (Dong, Roth, Su 2022), y clipped to [0, 1]."""
    return lambda y: float(ndtr(ndtri(min(max(y, 0.0), 1.0)) - mu))


def gdp_delta(mu: float, epsilon: float) -> float:
    """δ(ε) of μ-GDP: Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2) (Dong, Roth, Su 2022, Cor. 2.13), for μ > 0."""
    return float(ndtr(-epsilon / mu + mu / 2) - math.exp(epsilon) * ndtr(-epsilon / mu - mu / 2))


def gdp_epsilon(mu: float, delta: float) -> float:
    """The smallest ε with μ-GDP ⊂ (ε, δ)-DP (Cor. 2.13, by Brent's method): 0 for μ <= 0, at most ``EPSILON_CAP``."""
    if mu <= 0 or gdp_delta(mu, 0.0) <= delta:
        return 0.0
    if gdp_delta(mu, EPSILON_CAP) > delta:
        return EPSILON_CAP
    return float(brentq(lambda e: gdp_delta(mu, e) - delta, 0.0, EPSILON_CAP, xtol=1e-10))


def _largest_rejected(test: Callable[[float], bool], upper: float) -> float:
    """The largest x in [0, upper] with ``test(x)`` true.

    For a test true below a point and false above (0 when ``test(0)`` is false), by bisection.
    """
    if not test(0.0):
        return 0.0
    lo, hi = 0.0, min(1.0, upper)
    while test(hi):
        if hi >= upper:
            return upper
        lo, hi = hi, min(2 * hi, upper)
    for _ in range(50):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if test(mid) else (lo, mid)
    return lo


def _rule_test(curve: Callable[[float], Inverse], m: int, guesses: int, correct: int, tau: float
               ) -> Callable[[float], bool]:
    """Whether the guessing rule (``guesses``, ``correct``) rejects the curve ``curve(x)`` at level ``tau``.

    As a function of the curve's parameter x (ε or μ) for ``_largest_rejected``.
    """
    return lambda x: rejects(curve(x), m, guesses, correct, tau=tau)


def fdp_epsilon(m: int, rules: Sequence[Sequence[int]], *, delta: float, confidence: float) -> float:
    """Non-parametric ε_LB ≤ 100: largest ε whose (ε, δ)-DP curve a ``one_run_guesses`` rule rejects (Bonferroni)."""
    tau = (1.0 - confidence) / max(len(rules), 1)
    return max((_largest_rejected(_rule_test(lambda e: eps_delta_inverse(e, delta), m, r, v, tau), 100.0)
                for _, _, r, v in rules if r), default=0.0)


def fdp_gdp_epsilon(m: int, rules: Sequence[Sequence[int]], *, delta: float, confidence: float) -> float:
    """Parametric ε: ``gdp_epsilon`` at ``delta`` of the largest μ-GDP curve (μ ≤ 50) rules reject (``fdp_epsilon``)."""
    tau = (1.0 - confidence) / max(len(rules), 1)
    mu = max((_largest_rejected(_rule_test(gdp_inverse, m, r, v, tau), 50.0)
              for _, _, r, v in rules if r), default=0.0)
    return gdp_epsilon(mu, delta)


def profile_rejected(m: int, rules: Sequence[Sequence[int]], profile: Sequence[Sequence[float]], *,
                     confidence: float) -> bool:
    """Whether a rule of ``rules`` (``fdp_epsilon``'s) rejects the ``[ε, δ]`` ``profile`` at ``confidence``."""
    tau = (1.0 - confidence) / max(len(rules), 1)
    inverse = profile_inverse(profile)
    return any(rejects(inverse, m, r, v, tau=tau) for _, _, r, v in rules if r)
