"""The ideal mechanism's limit of an audit at its size.

The largest ε lower bound any single threshold fixed in advance reaches with Clopper-Pearson at the audit's size, on
the ideal (certified) mechanism's expected counts.

No analysis of the audit's scores can be expected to beat it by more than sampling luck; an audit far below it loses
signal in its design or its analysis, an audit near it is as tight as its sample allows (docs/audits.md). Pure NumPy /
SciPy (no torch).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from scipy.stats import norm

from attacks.analysis.statistics.thresholds import epsilon_lower_bound
from bench.core.design import AuditDesign

__all__ = ["gaussian_limit", "gaussian_mixture_sf", "threshold_limit", "whitebox_limit"]

GRID = 2001  # thresholds tried between the two laws' 1e-7 and 1 − 1e-7 quantiles


def gaussian_mixture_sf(means: Sequence[float], weights: Sequence[float], sd: float) -> Callable[[np.ndarray],
                                                                                                np.ndarray]:
    """The survival function P(S > t), ``(G,)`` thresholds ↦ ``(G,)``, of S ~ Σ_i w_i·N(means_i, sd²) (score units).

    ValueError: sd ≤ 0, negative weights or weights that do not sum to 1.
    """
    m, w = np.asarray(means, np.float64), np.asarray(weights, np.float64)
    if not sd > 0 or (w < 0).any() or abs(w.sum() - 1) > 1e-9 or m.shape != w.shape:
        raise ValueError(f"need sd > 0 and one probability per mean summing to 1, got sd={sd!r}, weights={weights!r}")
    return lambda t: (w[None, :] * norm.sf((np.asarray(t, np.float64)[:, None] - m[None, :]) / sd)).sum(1)


def threshold_limit(excluded_sf: Callable[[np.ndarray], np.ndarray], included_sf: Callable[[np.ndarray], np.ndarray],
                    span: tuple[float, float], n_excluded: int, n_included: int, *, delta: float,
                    confidence: float = 0.95) -> float:
    """Max over thresholds t of Jagielski et al.'s (2020) ε_LB at the expected counts n·P(S > t) of each side.

    ``excluded_sf`` / ``included_sf``: P(S > t) with the canary excluded (the slot holds the other record) / included;
    t on ``GRID`` points of ``span``; ``confidence``: the single threshold's. ValueError: fewer than one trial a side,
    δ outside [0, 1) or confidence outside (0, 1).
    """
    if n_excluded < 1 or n_included < 1:
        raise ValueError(f"need at least one trial a side, got {n_excluded} and {n_included}")
    t = np.linspace(span[0], span[1], GRID)
    fp = np.rint(n_excluded * excluded_sf(t)).astype(int)
    tp = np.rint(n_included * included_sf(t)).astype(int)
    return max(epsilon_lower_bound(a, n_included - a, b, n_excluded - b, delta=delta, confidence=confidence)
               for a, b in set(zip(tp.tolist(), fp.tolist(), strict=True)))


def gaussian_limit(mu: float, n_excluded: int, n_included: int, *, delta: float, confidence: float = 0.95) -> float:
    """``threshold_limit`` of N(0, 1) (excluded) vs N(μ, 1) (included), the μ-GDP mechanism; ValueError: μ ≤ 0."""
    if not mu > 0:
        raise ValueError(f"μ must be > 0, got {mu!r}")
    return threshold_limit(gaussian_mixture_sf((0.0,), (1.0,), 1.0), gaussian_mixture_sf((mu,), (1.0,), 1.0),
                           (-8.0, mu + 8.0), n_excluded, n_included, delta=delta, confidence=confidence)


def whitebox_limit(design: AuditDesign, *, sigma: float, sample_rate: float, steps: int, delta: float,
                   draws: int = 3, seed: int = 0) -> float:
    """The ideal DP-SGD's ε limit for a white-box one-run audit of Dirac canaries.

    The median ε_LB of ``draws`` simulations of the exact mechanism (σ > 0 in units of C, rate q, T steps;
    ``attacks.analysis.statistics.gaussian_llr_ideal.simulate_llr_scores``) through the same ``design`` and analysis
    (``membership_audit``). A one-run bound has no closed-form limit: its analysis looks at m canaries at once (Steinke,
    Nasr, Jagielski 2023).

    Raises:
        ValueError: σ ≤ 0, a design of fewer than 2 canaries or no draw.
    """
    from attacks.analysis import membership_audit
    from attacks.analysis.statistics.gaussian_llr_ideal import simulate_llr_scores

    if not sigma > 0 or design.size < 2 or draws < 1:
        raise ValueError(f"need σ > 0, m >= 2 and a draw, got σ={sigma!r}, m={design.size}, draws={draws}")
    rng = np.random.default_rng(seed)
    values = []
    for _ in range(draws):
        scores, coins = simulate_llr_scores(sigma=sigma, sample_rate=sample_rate, steps=steps, m=design.size, rng=rng)
        values.append(membership_audit(scores, coins, delta=delta, design=design)["epsilon_lb"])
    return float(np.median(values))
