"""The last-iterate heuristic ε of DP-SGD.

(Steinke, Nasr, Ganesh, Balle, Choquette-Choo, Jagielski, Hayes, Thakurta, Smith, Terzis, "The Last Iterate Advantage:
Empirical Auditing and Principled Heuristic Analysis of Differentially Private SGD", ICLR 2025.) **not a bound**. If
every loss were linear, one record's whole effect on the last iterate would be the number of steps that sampled it times
its clipped gradient, so an attacker who sees only the final model faces, in units of C, the pair P = K + N(0, σ²T)
against Q = N(0, σ²T), K ~ Binomial(T, q) (add/remove). The heuristic ε at δ is the smallest ε with max(H_{e^ε}(P‖Q),
H_{e^ε}(Q‖P)) ≤ δ. Real losses are not linear and artificial counterexamples exceed it; it upper-bounds every black-box
audit the paper ran on real models.

Design notes: docs/design-notes.md.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import TypeVar

import numpy as np
from scipy.optimize import brentq
from scipy.special import logsumexp
from scipy.stats import binom, norm

from bench.core.privacy import LAST_ITERATE_LABEL, HeuristicEpsilon, PrivacySpent
from mechanisms.accounting.gaussian import require

__all__ = ["LAST_ITERATE_LABEL", "last_iterate", "last_iterate_delta", "last_iterate_epsilon", "last_iterate_pair",
           "with_observed_phases"]

S = TypeVar("S", bound=PrivacySpent)

Phases = tuple[tuple[float, float, int], ...]
"""``((σ, q, T), ...)``: the noise multiplier, Poisson rate and steps of each phase, in order (one clip bound C)."""


def _check(phases: Phases, relation: str) -> None:
    require(relation in ("add-remove", "replace-one"),
            f"last-iterate heuristic: relation must be add-remove or replace-one, got {relation!r}")
    require(len(phases) > 0, "last-iterate heuristic: need at least one phase (σ, q, T)")
    for sigma, q, steps in phases:
        require(math.isfinite(sigma) and sigma > 0 and 0 < q <= 1 and int(steps) == steps and steps >= 1,
                f"last-iterate heuristic: need σ > 0, 0 < q <= 1 and steps >= 1, got σ = {sigma!r}, q = {q!r}, "
                f"steps = {steps!r}")


@functools.lru_cache(maxsize=256)
def last_iterate_pair(phases: Phases) -> tuple[np.ndarray, np.ndarray, float]:
    """The law of K = Σ_j Binomial(T_j, q_j) and the last iterate's noise scale, for ``phases`` ``((σ, q, T), ...)``.

    Returns (k = 0 … Σ T_j, log P(K = k) (−inf where 0), s = √(Σ_j σ_j² T_j) in units of C); raises ValueError on a
    σ ≤ 0, a q outside (0, 1] or steps < 1.
    """
    _check(phases, "add-remove")
    pmf = np.ones(1)
    for _, q, steps in phases:
        pmf = np.convolve(pmf, binom.pmf(np.arange(int(steps) + 1), int(steps), q))
    with np.errstate(divide="ignore"):
        logw = np.log(np.clip(pmf, 0.0, None))
    k = np.arange(len(pmf), dtype=float)
    s = math.sqrt(sum(sigma * sigma * steps for sigma, _, steps in phases))
    return k, logw, s


def _shifts(phases: Phases, relation: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, float]:
    """(means of P, log weights of P, means of Q, log weights of Q, s).

    P = K + N(0, s²); Q = N(0, s²) (add/remove) or −K' + N(0, s²) (replace-one).
    """
    k, logw, s = last_iterate_pair(phases)
    if relation == "add-remove":
        return k, logw, np.zeros(1), np.zeros(1), s
    return k, logw, -k, logw, s


def _log_ratio(x: float, a: np.ndarray, la: np.ndarray, b: np.ndarray, lb: np.ndarray, s: float) -> float:
    """Ln p(x)/q(x) for Gaussian mixtures of one scale s (the common factor e^{−x²/2s²} cancelled)."""
    return float(logsumexp(la + (a * x - a * a / 2) / (s * s)) - logsumexp(lb + (b * x - b * b / 2) / (s * s)))


def _crossing(level: float, a: np.ndarray, la: np.ndarray, b: np.ndarray, lb: np.ndarray, s: float) -> float:
    """The x where ln p/q (increasing) equals ``level``; −inf or +inf where it lies above or below it everywhere."""
    lo, hi = float(b.min()) - 10 * s - 1, float(a.max()) + 10 * s + 1
    for _ in range(200):
        f_lo = _log_ratio(lo, a, la, b, lb, s) - level
        if f_lo < 0 or not math.isfinite(f_lo):
            break
        if abs(f_lo - (_log_ratio(lo - 1, a, la, b, lb, s) - level)) < 1e-15:  # flat: the ratio's infimum is above
            return -math.inf
        lo -= 2 * (hi - lo)
    for _ in range(200):
        f_hi = _log_ratio(hi, a, la, b, lb, s) - level
        if f_hi > 0:
            break
        if abs(f_hi - (_log_ratio(hi + 1, a, la, b, lb, s) - level)) < 1e-15:  # flat: the supremum is below
            return math.inf
        hi += 2 * (hi - lo)
    return float(brentq(_log_ratio_minus, lo, hi, args=(level, a, la, b, lb, s), xtol=1e-13, rtol=1e-15,
                        maxiter=500))


def _log_ratio_minus(x: float, level: float, a: np.ndarray, la: np.ndarray, b: np.ndarray, lb: np.ndarray,
                     s: float) -> float:
    return _log_ratio(x, a, la, b, lb, s) - level


def _hockey_stick(epsilon: float, a: np.ndarray, la: np.ndarray, b: np.ndarray, lb: np.ndarray, s: float) -> float:
    """H_{e^ε}(P‖Q) = ∫ (p − e^ε q)_+ = P(X > x*) − e^ε Q(X > x*), x* the crossing of ln p/q = ε."""
    x = _crossing(epsilon, a, la, b, lb, s)
    if x == math.inf:
        return 0.0
    if x == -math.inf:
        return max(0.0, 1.0 - math.exp(epsilon))
    upper_p = math.exp(logsumexp(la + norm.logsf((x - a) / s)))
    upper_q = math.exp(logsumexp(lb + norm.logsf((x - b) / s)))
    return max(0.0, upper_p - math.exp(epsilon) * upper_q)


def last_iterate_delta(*, phases: Phases, epsilon: float, relation: str = "add-remove") -> float:
    """δ(ε) = max(H_{e^ε}(P‖Q), H_{e^ε}(Q‖P)) of the last-iterate pair (module docstring).

    Args:
        phases: ``((σ, q, T), ...)`` (σ the noise multiplier, q the Poisson rate, T the steps; one clip bound C).
        epsilon: ε ≥ 0 (unitless).
        relation: ``add-remove`` or ``replace-one``.

    Returns:
        δ, a probability in [0, 1].

    Raises:
        ValueError: bad phases, ε < 0 or an unknown relation.
    """
    _check(phases, relation)
    require(math.isfinite(epsilon) and epsilon >= 0, f"last-iterate heuristic: ε must be >= 0, got {epsilon!r}")
    a, la, b, lb, s = _shifts(phases, relation)
    forward = _hockey_stick(epsilon, a, la, b, lb, s)
    if relation == "replace-one":  # Q is P reflected about 0: the two divergences are equal
        return forward
    # H(Q‖P): the crossing of ln q/p = ε, i.e. of ln p/q = −ε; Q(X < y) − e^ε P(X < y)
    y = _crossing(-epsilon, a, la, b, lb, s)
    backward = 0.0
    if y == math.inf:
        backward = max(0.0, 1.0 - math.exp(epsilon))
    elif y != -math.inf:
        lower_q = math.exp(logsumexp(lb + norm.logcdf((y - b) / s)))
        lower_p = math.exp(logsumexp(la + norm.logcdf((y - a) / s)))
        backward = max(0.0, lower_q - math.exp(epsilon) * lower_p)
    return max(forward, backward)


@functools.lru_cache(maxsize=512)
def last_iterate_epsilon(*, phases: Phases, delta: float, relation: str = "add-remove") -> float:
    """The last-iterate heuristic ε ≥ 0 at δ (Steinke et al. 2025), memoised: an estimate, **not a bound**.

    The smallest ε with ``last_iterate_delta`` ≤ δ (Brent, to 1e-12). ``phases``: ``((σ, q, T), ...)``; ``relation``:
    ``add-remove`` or ``replace-one``. Raises ValueError on bad phases, δ outside (0, 1) or an unknown relation.
    """
    _check(phases, relation)
    require(0 < delta < 1, f"last-iterate heuristic: δ must be in (0, 1), got {delta!r}")

    def excess(eps: float) -> float:
        return last_iterate_delta(phases=phases, epsilon=eps, relation=relation) - delta

    if excess(0.0) <= 0:
        return 0.0
    hi = 1.0
    while excess(hi) > 0:
        hi *= 2
    return float(brentq(excess, 0.0, hi, xtol=1e-12, rtol=1e-14, maxiter=500))


def last_iterate(*, phases: Phases, delta: float, relations: tuple[str, ...], basis: str = ""
                 ) -> tuple[HeuristicEpsilon, ...]:
    """One ``HeuristicEpsilon`` (results.json) per relation in ``relations``: add/remove, replace-one; others skipped.

    ``phases``: ``((σ, q, T), ...)``; ``basis``: where they came from (default: written out). Empty for σ = 0.
    """
    if any(sigma == 0 for sigma, _, _ in phases):
        return ()
    words = basis or "; ".join(f"σ = {s:.4g}, q = {q:.4g}, T = {t}" for s, q, t in phases)
    return tuple(HeuristicEpsilon(relation=r, epsilon=last_iterate_epsilon(phases=phases, delta=delta, relation=r),
                                  delta=delta, label=LAST_ITERATE_LABEL, basis=words)
                 for r in relations if r in ("add-remove", "replace-one"))


def with_observed_phases(privacy: S, phases: Sequence[Sequence[float]] | None) -> S:
    """``privacy`` with the last-iterate heuristic ε of a user's Opacus loop, from the observed ``[[σ, q, T], ...]``.

    Under each of add/remove and replace-one the record states; ``privacy`` itself where it has heuristics already, no
    guarantee, or no valid phases.
    """
    if not phases or privacy.heuristics or not privacy.has_guarantee or privacy.delta is None:
        return privacy
    ph = tuple((float(s), float(q), int(t)) for s, q, t in phases)
    if any(not (s > 0 and 0 < q <= 1 and t >= 1) for s, q, t in ph):
        return privacy
    relations = tuple(r for r in (privacy.relation, *(o.relation for o in privacy.other_relations)) if r)
    words = "; ".join(f"σ = {s:.4g}, q = {q:.4g}, T = {t}" for s, q, t in ph)
    found = last_iterate(phases=ph, delta=float(privacy.delta), relations=relations,
                         basis=f"the observed DPOptimizer phases: {words}")
    return privacy.model_copy(update={"heuristics": found}) if found else privacy
