"""The one-run audit of Steinke, Nasr, Jagielski (2023, "Privacy auditing with one (1) training run", NeurIPS).

m canaries, each included independently with probability ½; the auditor guesses "included" for the k₊ highest scores and
"excluded" for the k₋ lowest; for an (ε, δ)-DP mechanism the number v of correct guesses among r is dominated by
Binomial(r, e^ε/(1+e^ε)) up to a δ term (their approximate-DP theorem, Appendix D). Pure NumPy / SciPy (no torch).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike
from scipy.stats import binom

from attacks.analysis.statistics.metrics import validate_scores

GUESS_FRACTIONS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5)  # k = fraction · m top (and bottom) guesses, fixed in advance


def _check_probability(name: str, value: float) -> float:
    v = float(value)
    if not 0.0 < v < 1.0:
        raise ValueError(f"{name} must be in (0, 1), got {value!r}")
    return v


def one_run_p_value(m: int, r: int, v: int, *, epsilon: float, delta: float = 0.0) -> float:
    """P[at least v of r guesses correct] for an (ε, δ)-DP mechanism with m canaries (Steinke, Nasr, Jagielski 2023).

    Each canary included independently with probability ½: the Binomial(r, e^ε/(1+e^ε)) tail plus
    2·m·δ·max_{i=1..v} P[v − i <= Binomial(r, q) < v] / i.

    Raises:
        ValueError: not 0 <= v <= r <= m.
    """
    if not 0 <= v <= r <= m:
        raise ValueError(f"need 0 <= v <= r <= m, got m={m}, r={r}, v={v}")
    q = 1.0 / (1.0 + math.exp(-epsilon))
    tail = float(binom.sf(v - 1, r, q))
    if delta <= 0.0 or v == 0:
        return min(tail, 1.0)
    below = binom.pmf(np.arange(v - 1, -1, -1), r, q)  # pmf(v-1), pmf(v-2), ..., pmf(0)
    worst = float(np.max(np.cumsum(below) / np.arange(1, v + 1)))
    return min(tail + 2.0 * m * delta * worst, 1.0)


def one_run_epsilon(m: int, r: int, v: int, *, delta: float = 0.0, confidence: float = 0.95) -> float:
    """The largest ε whose ``one_run_p_value`` (m canaries, r guesses, v correct) is below 1 − ``confidence``, or 0.

    Bisection; 0 without a guess.

    Raises:
        ValueError: confidence outside (0, 1), or counts out of range (``one_run_p_value``).
    """
    alpha = 1.0 - _check_probability("confidence", confidence)
    if r == 0 or one_run_p_value(m, r, v, epsilon=0.0, delta=delta) >= alpha:
        return 0.0
    lo, hi = 0.0, 1.0
    while one_run_p_value(m, r, v, epsilon=hi, delta=delta) < alpha and hi < 100.0:
        lo, hi = hi, 2.0 * hi
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        if one_run_p_value(m, r, v, epsilon=mid, delta=delta) < alpha:
            lo = mid
        else:
            hi = mid
    return lo


def one_run_guesses(scores: ArrayLike, included: ArrayLike, *,
                    fractions: Sequence[float] = GUESS_FRACTIONS) -> list[list[int]]:
    """``[k_plus, k_minus, r, v]`` for each guessing rule of the one-run audit (Steinke, Nasr, Jagielski 2023).

    The k_plus highest of the ``(m,)`` scores guessed "included", the k_minus lowest "excluded", the rest abstain;
    r = k_plus + k_minus guesses, v correct. Rules: k = fraction · m (in [1, m // 2]) for each of ``fractions`` (fixed
    in advance), one-sided (k_minus = 0) then two-sided.

    Raises:
        ValueError: invalid scores or labels (``validate_scores``).
    """
    s, y = validate_scores(scores, included)
    m = s.size
    order = np.argsort(-s, kind="stable")
    ranked = y[order]
    rows = []
    for f in fractions:
        k = max(1, min(m // 2, int(round(f * m))))
        for k_minus in (0, k):
            v = int(ranked[:k].sum()) + int((ranked[m - k_minus:] == 0).sum())
            rows.append([k, k_minus, k + k_minus, v])
    return rows


def best_one_run_epsilon(m: int, guesses: Sequence[Sequence[int]], *, delta: float,
                         confidence: float = 0.95) -> float:
    """Best ε_LB of the ``one_run_guesses`` rules, each at 1 − (1 − confidence)/len(guesses) (Bonferroni), or 0."""
    if not guesses:
        return 0.0
    each = 1.0 - (1.0 - confidence) / len(guesses)
    return max(one_run_epsilon(m, r, v, delta=delta, confidence=each) for _, _, r, v in guesses)


