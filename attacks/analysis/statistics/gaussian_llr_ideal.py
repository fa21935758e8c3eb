"""The ideal mechanism behind the μ-GDP analysis of white-box DP-SGD canaries' summed log-likelihood ratios.

The ideal mechanism behind the Gaussian (μ-GDP) analysis of white-box DP-SGD canaries' summed log-likelihood ratios
(``attacks.analysis.statistics.gaussian_llr``): the exact moments and cumulants of a Dirac canary's score S = Σ_t ℓ(x_t)
under exact DP-SGD (Poisson sampling at rate q, N(0, σ²) noise per step; Nasr et al. 2023, "Tight Auditing of
Differentially Private Machine Learning"), by Gauss-Hermite quadrature, and a simulation of its canaries' scores. The
analysis tests a run's scores against them; ``scripts/dpsgd_audit_ideal.py`` and ``attacks.analysis.audits.guess_plan``
judge the analysis on them. Pure NumPy (no torch).
"""

from __future__ import annotations

import math

import numpy as np


def exact_llr_cumulants(*, sigma: float, sample_rate: float, steps: int, nodes: int = 200,
                        contribution: float | None = None) -> dict[str, float]:
    """Skewness and excess kurtosis of a canary's summed log-likelihood ratio (T iid terms ℓ(x)), by Gauss-Hermite.

    Args:
        sigma: σ, the noise's standard deviation (units of C, > 0).
        sample_rate: q, in (0, 1].
        steps: T.
        nodes: the quadrature's nodes.
        contribution: None: excluded (x ~ N(0, σ²)); c: included (x ~ N(c·b, σ²), b ~ Bernoulli(q)), units of C.

    Returns:
        ``{"skew", "excess_kurtosis"}``: T·κ₃/(T·κ₂)^1.5 and T·κ₄/(T·κ₂)² (cumulants add over steps).
    """
    z, w = np.polynomial.hermite_e.hermegauss(nodes)
    w = w / w.sum()

    def ell(x: np.ndarray) -> np.ndarray:
        u = (2 * x - 1) / (2 * sigma**2)
        return np.logaddexp(math.log1p(-sample_rate), math.log(sample_rate) + u) if sample_rate < 1 else u

    if contribution is None:
        points, weights = ell(sigma * z), w
    else:  # the mixture (1 − q)·N(0, σ²) + q·N(c, σ²)
        points = np.concatenate([ell(sigma * z), ell(contribution + sigma * z)])
        weights = np.concatenate([(1 - sample_rate) * w, sample_rate * w])
    c = points - float(weights @ points)
    k2, k3 = float(weights @ c**2), float(weights @ c**3)
    k4 = float(weights @ c**4) - 3 * k2**2
    return {"skew": steps * k3 / (steps * k2) ** 1.5, "excess_kurtosis": steps * k4 / (steps * k2) ** 2}


def simulate_llr_scores(*, sigma: float, sample_rate: float, steps: int, m: int, rng: np.random.Generator,
                        contribution: float = 1.0, score_sigma: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The ideal mechanism's ``(m,)`` canary scores and ``(m,)`` int64 inclusion coins (1: included).

    m Dirac canaries of an exact DP-SGD run (noise N(0, σ²) per step, σ in units of C; each included by a fair coin,
    then sampled at rate q, adding ``contribution`` when sampled), scored as ``mechanisms.dpsgd.canaries`` scores them
    (Nasr et al. 2023), with σ̂ = ``score_sigma`` (None: σ). Memory grows as steps·m (a block of canaries at a time).
    """
    coins = (rng.random(m) < 0.5).astype(np.int64)
    out = np.empty(m)
    block = max(1, 2_000_000 // max(steps, 1))
    scale = sigma if score_sigma is None else score_sigma
    for a in range(0, m, block):
        c = coins[a:a + block].astype(bool)
        sampled = (rng.random((steps, c.size)) < sample_rate) & c
        x = rng.standard_normal((steps, c.size)) * sigma + contribution * sampled
        z = (2 * x - 1) / (2 * scale**2)
        out[a:a + block] = (np.logaddexp(math.log1p(-sample_rate), math.log(sample_rate) + z)
                            if sample_rate < 1 else z).sum(0)
    return out, coins


def exact_llr_moments(*, sigma: float, sample_rate: float, steps: int, contribution: float = 1.0,
                      nodes: int = 200, score_sigma: float | None = None) -> dict[str, float]:
    """The exact means and variances of a canary's summed log-likelihood ratio S = Σ_t ℓ(x_t).

    ℓ(x) = log(1 − q + q·exp((2x − 1)/(2σ̂²))), under Q (x_t ~ N(0, σ²)) and P (x_t ~ N(c·b_t, σ²), b_t ~
    Bernoulli(q)): T times the per-step moments, by Gauss-Hermite quadrature on ``nodes``. ``mu`` = (E_P S −
    E_Q S)/max(sd_P, sd_Q) is what the analysis converges to with many canaries. σ, c in units of C; σ̂ =
    ``score_sigma`` (None: σ, the Neyman-Pearson score). Returns ``{"mean_in", "var_in", "mean_out", "var_out", "mu"}``.

    Raises:
        ValueError: σ <= 0, σ̂ <= 0, q outside (0, 1] or T < 1.
    """
    scale = sigma if score_sigma is None else score_sigma
    if not (sigma > 0 and scale > 0 and 0 < sample_rate <= 1 and steps >= 1):
        raise ValueError(f"exact_llr_moments needs σ > 0, σ̂ > 0, 0 < q <= 1, T >= 1, got {sigma}, {scale}, "
                         f"{sample_rate}, {steps}")
    z, w = np.polynomial.hermite_e.hermegauss(nodes)
    w = w / w.sum()

    def ell(x: np.ndarray) -> np.ndarray:
        u = (2 * x - 1) / (2 * scale**2)
        return np.logaddexp(math.log1p(-sample_rate), math.log(sample_rate) + u) if sample_rate < 1 else u

    off, on = ell(sigma * z), ell(contribution + sigma * z)
    m_out, s_out = float(w @ off), float(w @ off**2)
    m_in = (1 - sample_rate) * m_out + sample_rate * float(w @ on)
    s_in = (1 - sample_rate) * s_out + sample_rate * float(w @ on**2)
    out = {"mean_in": steps * m_in, "var_in": steps * (s_in - m_in**2), "mean_out": steps * m_out,
           "var_out": steps * (s_out - m_out**2)}
    out["mu"] = (out["mean_in"] - out["mean_out"]) / math.sqrt(max(out["var_in"], out["var_out"]))
    return out

