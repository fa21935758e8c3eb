"""Privacy accounting of the Gaussian mechanism: the analytic calibration (Balle & Wang, ICML 2018, Thm. 8 / Alg. 1,
evaluated by ``dp_accounting``) and the classic one kept to show what sources claimed. Pure maths, no torch. ε is
unitless, δ a probability. DPMix's accountant: ``mechanisms.dpmix_accounting``."""

from __future__ import annotations

import math


def require(ok: bool, message: str) -> None:
    if not ok:
        raise ValueError(message)



def _check_gauss(**values: float) -> None:
    for name, val in values.items():
        if name == "delta":
            require(0 < val < 1, f"delta must be in (0, 1), got {val!r}")
        else:
            require(math.isfinite(val) and val > 0, f"{name} must be a finite number > 0, got {val!r}")


def gaussian_delta(*, sigma: float, epsilon: float, sensitivity: float = 1.0) -> float:
    """Exact δ(ε) of the Gaussian mechanism N(0, σ²) with L2 sensitivity Δ (Balle & Wang, ICML 2018, Thm. 8):
    δ = Φ(Δ/(2σ) − εσ/Δ) − e^ε Φ(−Δ/(2σ) − εσ/Δ), by ``dp_accounting``'s ``GaussianPrivacyLoss``.

    Args:
        sigma: noise standard deviation (> 0, units of ``sensitivity``).
        epsilon: ε ≥ 0 (unitless).
        sensitivity: L2 sensitivity Δ (> 0).

    Returns:
        δ, a probability in [0, 1].

    Raises:
        ValueError: sigma or sensitivity not > 0, or epsilon < 0.
    """
    from dp_accounting.pld.privacy_loss_mechanism import GaussianPrivacyLoss

    _check_gauss(sigma=sigma, sensitivity=sensitivity)
    require(math.isfinite(epsilon) and epsilon >= 0, f"epsilon must be a finite number >= 0, got {epsilon!r}")
    return min(1.0, float(GaussianPrivacyLoss(sigma, sensitivity=sensitivity).get_delta_for_epsilon(epsilon)))


def gaussian_sigma(*, epsilon: float, delta: float, sensitivity: float = 1.0) -> float:
    """Smallest σ making the Gaussian mechanism (ε, δ)-DP: the analytic Gaussian mechanism (Balle & Wang, ICML
    2018, Thm. 8 / Alg. 1), valid for every ε > 0 (unlike the classic calibration, which needs ε < 1), by
    ``dp_accounting.get_sigma_gaussian`` (root-finding to 1e-12).

    Args:
        epsilon: ε > 0 (unitless); delta: δ, a probability in (0, 1).
        sensitivity: L2 sensitivity Δ (> 0); σ scales linearly with it.

    Returns:
        σ in the units of ``sensitivity``.

    Raises:
        ValueError: epsilon or sensitivity not > 0, or delta outside (0, 1).
    """
    from dp_accounting import get_sigma_gaussian

    _check_gauss(epsilon=epsilon, delta=delta, sensitivity=sensitivity)
    return float(get_sigma_gaussian(epsilon, delta)) * sensitivity


def gaussian_epsilon(*, sigma: float, delta: float, sensitivity: float = 1.0) -> float:
    """Smallest ε with :func:`gaussian_delta` ≤ δ: what a given σ really buys (Balle & Wang, ICML 2018, Thm. 8), by
    ``dp_accounting.get_epsilon_gaussian`` (root-finding to 1e-12).

    Args:
        sigma: noise standard deviation (> 0, units of ``sensitivity``); delta: δ in (0, 1).
        sensitivity: L2 sensitivity Δ (> 0).

    Returns:
        ε ≥ 0 (unitless).

    Raises:
        ValueError: sigma or sensitivity not > 0, or delta outside (0, 1).
    """
    from dp_accounting import get_epsilon_gaussian

    _check_gauss(sigma=sigma, delta=delta, sensitivity=sensitivity)
    return float(get_epsilon_gaussian(sigma / sensitivity, delta))


def classic_gaussian_sigma(*, epsilon: float, delta: float, sensitivity: float = 1.0) -> float:
    """Textbook calibration σ = Δ·√(2 ln(1.25/δ))/ε (Dwork & Roth 2014, Thm. A.1), kept to show what sources claimed.

    Valid only for ε < 1. Use :func:`gaussian_sigma`: smaller for ε < 1, and correct for every ε
    (for large ε this σ is too small to give the claimed ε; Balle & Wang, ICML 2018, Sec. 3).

    Args:
        epsilon: ε > 0 (unitless); delta: δ in (0, 1); sensitivity: L2 sensitivity Δ (> 0).

    Returns:
        σ in the units of ``sensitivity``.

    Raises:
        ValueError: epsilon or sensitivity not > 0, or delta outside (0, 1).
    """
    _check_gauss(epsilon=epsilon, delta=delta, sensitivity=sensitivity)
    return sensitivity * math.sqrt(2 * math.log(1.25 / delta)) / epsilon
