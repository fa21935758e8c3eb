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
        guesses: c′, the guesses made (1 <= c′ <= m).
        correct: c, the correct guesses (0 <= c <= c′).
        tau: the test's level, in (0, 1).
        k: candidates per canary (2: included or not).

    Returns:
        True where the curve is rejected at level ``tau``.

    Raises:
        ValueError: counts out of range.
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
    """f̄⁻¹ of the (ε, δ)-DP trade-off curve, both branches (symmetric neighbouring relation).

    Args:
        epsilon: ε (unitless).
        delta: δ, a probability.

    Returns:
        y ↦ max(0, (y − δ)/e^ε, 1 − δ − e^ε(1 − y)).
    """
    e = math.exp(min(epsilon, 700.0))

    def inverse(y: float) -> float:
        return max(0.0, (y - delta) / e, 1.0 - delta - e * (1.0 - y))
    return inverse


def profile_inverse(profile: Sequence[Sequence[float]]) -> Inverse:
    """f̄⁻¹ of a mechanism that is (εᵢ, δᵢ)-DP for every point of ``profile``.

    Its curve is at least the maximum of theirs, so its f̄⁻¹ is at least the maximum of their f̄⁻¹.

    Args:
        profile: ``[ε, δ]`` pairs, ε unitless and δ a probability (not empty).

    Returns:
        y ↦ the maximum of the points' ``eps_delta_inverse``.
    """
    parts = [eps_delta_inverse(float(e), float(d)) for e, d in profile]
    return lambda y: max(p(y) for p in parts)


def gdp_inverse(mu: float) -> Inverse:
    """f̄⁻¹(y) = Φ(Φ⁻¹(y) − μ) of μ-GDP (Dong, Roth, Su 2022).

    Args:
        mu: μ (unitless).

    Returns:
        y ↦ f̄⁻¹(y), y clipped to [0, 1].
    """
    return lambda y: float(ndtr(ndtri(min(max(y, 0.0), 1.0)) - mu))


def gdp_delta(mu: float, epsilon: float) -> float:
    """δ(ε) of μ-GDP: Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2) (Dong, Roth, Su 2022, Cor. 2.13).

    Args:
        mu: μ > 0 (unitless).
        epsilon: ε (unitless).

    Returns:
        δ, a probability.
    """
    return float(ndtr(-epsilon / mu + mu / 2) - math.exp(epsilon) * ndtr(-epsilon / mu - mu / 2))


def gdp_epsilon(mu: float, delta: float) -> float:
    """The smallest ε with μ-GDP ⊂ (ε, δ)-DP (Dong, Roth, Su 2022, Cor. 2.13, inverted by Brent's method).

    Args:
        mu: μ (unitless); 0 or below gives 0.
        delta: δ, a probability.

    Returns:
        ε (unitless): 0 when μ-GDP is (0, δ)-DP; at most ``EPSILON_CAP``.
    """
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
    """Non-parametric ε lower bound: the largest ε whose (ε, δ)-DP curve a guessing rule rejects (``rejects``).

    Args:
        m: the number of canaries.
        rules: rows ``[k_plus, k_minus, r, v]``: guesses r, correct v (rows with r = 0 skipped).
        delta: δ, a probability.
        confidence: the bound's confidence; Bonferroni over the rules.

    Returns:
        ε_LB (unitless, in [0, 100]); 0 without a rule.
    """
    tau = (1.0 - confidence) / max(len(rules), 1)
    return max((_largest_rejected(_rule_test(lambda e: eps_delta_inverse(e, delta), m, r, v, tau), 100.0)
                for _, _, r, v in rules if r), default=0.0)


def fdp_gdp_epsilon(m: int, rules: Sequence[Sequence[int]], *, delta: float, confidence: float) -> float:
    """Parametric ε lower bound: the largest μ-GDP curve a guessing rule rejects, converted to ε at ``delta``.

    A lower bound only when the mechanism's curve is Gaussian-shaped.

    Args:
        m: the number of canaries.
        rules: rows ``[k_plus, k_minus, r, v]``: guesses r, correct v (rows with r = 0 skipped).
        delta: δ, a probability.
        confidence: the bound's confidence; Bonferroni over the rules.

    Returns:
        ε (unitless, ``gdp_epsilon`` of μ_LB in [0, 50]).
    """
    tau = (1.0 - confidence) / max(len(rules), 1)
    mu = max((_largest_rejected(_rule_test(gdp_inverse, m, r, v, tau), 50.0)
              for _, _, r, v in rules if r), default=0.0)
    return gdp_epsilon(mu, delta)


def profile_rejected(m: int, rules: Sequence[Sequence[int]], profile: Sequence[Sequence[float]], *,
                     confidence: float) -> bool:
    """Whether a guessing rule rejects the certified ``profile`` (Bonferroni over ``rules``) at ``confidence``.

    Args:
        m: the number of canaries.
        rules: rows ``[k_plus, k_minus, r, v]``: guesses r, correct v (rows with r = 0 skipped).
        profile: the accountant's ``[ε, δ]`` pairs.
        confidence: the test's confidence level.

    Returns:
        True where some rule rejects the profile's curve.
    """
    tau = (1.0 - confidence) / max(len(rules), 1)
    inverse = profile_inverse(profile)
    return any(rejects(inverse, m, r, v, tau=tau) for _, _, r, v in rules if r)
