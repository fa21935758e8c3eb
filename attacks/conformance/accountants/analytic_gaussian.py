"""The conformance tests' own accountants for local noise.

The analytic Gaussian mechanism (Balle & Wang, ICML 2018, "Improving the Gaussian Mechanism for Differential Privacy",
Thm. 8: δ_μ(ε) = Φ(μ/2 − ε/μ) − e^ε Φ(−μ/2 − ε/μ), μ = Δ/σ), k-ary randomized response (Warner 1965; Kairouz, Oh,
Viswanath, JMLR 2016: ε_y = ln(p(k − 1)/(1 − p)), δ = 0) and their composition (one record's image and label: the
exact privacy profile, ε at δ by bisection, never overstated), written from the papers and sharing no code with
``mechanisms.accounting``. The derivations: docs/design-notes.md. Pure SciPy; no torch, no ``mechanisms``.
"""

from __future__ import annotations

import math

from scipy import special

__all__ = ["gaussian_delta", "gaussian_epsilon", "local_delta", "local_epsilon", "rr_epsilon", "rr_keep"]

_SQRT2 = math.sqrt(2.0)


def _phi_cdf(x: float) -> float:
    return float(special.ndtr(x))


def gaussian_delta(epsilon: float, mu: float) -> float:
    """δ_μ(ε) of the Gaussian mechanism of μ = Δ/σ (Balle & Wang 2018, Thm. 8), at any real ε (module docstring).

    Args:
        epsilon: ε (unitless), any real value, negative ones included.
        mu: μ = Δ/σ, the L2 sensitivity over the noise's standard deviation (unitless, >= 0).

    Raises:
        ValueError: μ < 0 or not finite.
    """
    if not (math.isfinite(mu) and mu >= 0):
        raise ValueError(f"gaussian_delta: need a finite μ = Δ/σ >= 0, got {mu!r}")
    if mu == 0:
        return max(0.0, -math.expm1(epsilon)) if epsilon < 0 else 0.0
    a = mu / 2 - epsilon / mu
    b = a - mu
    if a < 0:  # both terms in the lower tail: read through erfcx, no cancellation
        value = math.exp(-a * a / 2) / 2 * (float(special.erfcx(-a / _SQRT2)) - float(special.erfcx(-b / _SQRT2)))
    else:
        value = _phi_cdf(a) - math.exp(min(epsilon + float(special.log_ndtr(b)), 700.0))
    return min(1.0, max(0.0, value))


def rr_keep(epsilon: float, num_classes: int) -> float:
    """k-ary RR's keep probability e^ε/(e^ε + k − 1) (Kairouz, Oh, Viswanath 2016); ValueError: ε < 0, k < 2."""
    if not epsilon >= 0 or num_classes < 2:
        raise ValueError(f"rr_keep: need ε >= 0 and k >= 2, got {epsilon!r}, {num_classes!r}")
    return 1.0 / (1.0 + (num_classes - 1) * math.exp(-epsilon))


def rr_epsilon(keep: float, num_classes: int) -> float:
    """The exact ε = ln(keep·(k − 1)/(1 − keep)) of k-ary RR keeping the label w.p. ``keep``: 0 up to 1/k, ∞ at 1.

    Raises:
        ValueError: keep outside [0, 1] or k < 2.
    """
    if not 0.0 <= keep <= 1.0 or num_classes < 2:
        raise ValueError(f"rr_epsilon: need a keep rate in [0, 1] and k >= 2, got {keep!r}, {num_classes!r}")
    if keep >= 1.0:
        return math.inf
    return max(0.0, math.log(keep * (num_classes - 1) / (1.0 - keep)))


def local_delta(epsilon: float, *, mu: float, label_epsilon: float | None = None, num_classes: int = 2) -> float:
    """δ(ε) of one local record, exactly: the Gaussian image channel composed with k-ary randomized response.

    The composition's privacy profile of the module docstring (Balle & Wang 2018, Thm. 8, conditioned on the label's
    privacy loss); ``mu`` = Δ/σ; ``label_epsilon`` None or 0: no label released, ∞: released as it is (δ = 1).

    Raises:
        ValueError: from ``gaussian_delta`` (μ < 0 or not finite) or ``rr_keep`` (ε_y < 0 or k < 2).
    """
    if label_epsilon is None or label_epsilon == 0:
        return gaussian_delta(epsilon, mu)
    if math.isinf(label_epsilon):
        return 1.0
    k, p = num_classes, rr_keep(label_epsilon, num_classes)
    other = (1.0 - p) / (k - 1)
    total = p * gaussian_delta(epsilon - label_epsilon, mu) + other * gaussian_delta(epsilon + label_epsilon, mu)
    if k > 2:
        total += (k - 2) * other * gaussian_delta(epsilon, mu)
    return min(1.0, total)


def local_epsilon(*, sigma: float, sensitivity: float, delta: float, label_epsilon: float | None = None,
                  num_classes: int = 2) -> float:
    """ε at δ of one local record released as (image + N(0, σ²I), k-ary randomized response of its label).

    The root of ``local_delta`` by bisection (δ falls in ε), 1e-12 relative, at the low end of the bracket: never
    above the exact ε.

    Args:
        sigma: σ, the image noise's standard deviation (pixel units, >= 0).
        sensitivity: Δ, the image's L2 sensitivity (2 for unit-norm images under replace-one).
        delta: δ, a probability in (0, 1).
        label_epsilon: the label's ε (unitless); None: the label is not released.
        num_classes: k, the number of labels.

    Returns:
        ε (unitless): ∞ for σ = 0 or an unbounded label; 0 where even ε = 0 meets δ.

    Raises:
        ValueError: σ < 0, Δ <= 0, δ outside (0, 1) or k < 2 with a label.
    """
    if not (sigma >= 0 and sensitivity > 0 and 0 < delta < 1) or (label_epsilon is not None and num_classes < 2):
        raise ValueError(f"local_epsilon: need σ >= 0, Δ > 0, δ in (0, 1) and k >= 2, got {sigma!r}, {sensitivity!r},"
                         f" {delta!r}, {num_classes!r}")
    if sigma == 0 or (label_epsilon is not None and math.isinf(label_epsilon)):
        return math.inf
    mu = sensitivity / sigma
    if not math.isfinite(mu) or mu > 1e6:
        return math.inf

    def above(eps: float) -> bool:
        return local_delta(eps, mu=mu, label_epsilon=label_epsilon, num_classes=num_classes) > delta

    if not above(0.0):
        return 0.0
    lo, hi = 0.0, 1.0
    while above(hi):
        lo, hi = hi, 2 * hi
    while hi - lo > 1e-12 * max(hi, 1e-300):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if above(mid) else (lo, mid)
    return lo


def gaussian_epsilon(*, sigma: float, sensitivity: float, delta: float) -> float:
    """The analytic Gaussian mechanism's ε at δ (Balle & Wang 2018; ∞ at σ = 0): ``local_epsilon`` without a label."""
    return local_epsilon(sigma=sigma, sensitivity=sensitivity, delta=delta)
