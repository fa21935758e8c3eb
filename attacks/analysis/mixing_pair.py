"""The conformance tests' own accountant for DPMix (Lee, Kim, Lee, Suh, ISIT 2019).

Built from first principles and sharing no code with the mechanism's (``mechanisms.accounting.dpmix``): a bug in that
accountant's rate, sensitivity or composition count cannot move the reference the conformance tests hold it to.

**One release.** A released sample is Σ_j w·x_j + N(0, diag(σ_x² on the d_x features, σ_y² on the d_y label
coordinates)) over a uniform ℓ-subset of the n records, w = 1/ℓ for the certified mixing. Replacing one record
moves the sample by at most w·Δ in the metric the noise whitens, Δ² = d_x·r²/σ_x² + Δ_y²/σ_y² (``mixing_shift``):
r the features' range ([0, 1]: r = 1) and Δ_y² = 2, the squared L2 diameter of the label distributions (two one-hot or
soft labels differ by at most √2), when the record is in the subset, which happens with probability q (ℓ/n for
uniform subsets). Under replace-one with sampling without replacement the pair (q·N(√c, 1) + (1 − q)·N(0, 1), N(0,
1)) and its reverse dominate one release, c = (w·Δ)² (Balle, Barthe, Gaboardi, NeurIPS 2018, "Privacy Amplification
by Subsampling", advanced joint convexity; Zhu, Dong, Wang, AISTATS 2022, the dominating pairs of subsampling without
replacement); the T releases compose.

**The accountant.** ``dp_accounting``'s privacy loss distribution of that pair (``from_gaussian_mechanism`` with the
sampling probability q: the same pair and its reverse), pessimistic connect-the-dots (Doroshenko et al. 2022) on a grid
of ``GRID``·max(1, c) (one release's losses span about c), composed T times (``mixing_epsilon``). Its discretisation
overstates ε by at most 1.8e-4 (relative) at the ``ci`` and ``default`` profiles' ℓ, T and n from ε = 1 to 15
(against a grid five times finer; ``scripts/accountant_check.py``). dp_accounting's optimistic estimate
(``pessimistic_estimate=False``, privacy buckets) is no use here: it rounds every release's losses down by up to one
grid step, T·1e-4 in all (ε = 0.37 for a certified 1.00 at T = 10,000). Its tests check it against the closed form at
q = 1 (T releases of N(√c) against N(0) are one Gaussian of μ = √(Tc), ``attacks.analysis.analytic_gaussian``) and
against dp_accounting's RDP accountant of sampling without replacement (an upper bound).

Pure ``dp_accounting``; no torch, no ``mechanisms``.
"""

from __future__ import annotations

import functools
import math

__all__ = ["GRID", "LABEL_DIAMETER_SQ", "MAX_SHIFT_SQ", "mixing_epsilon", "mixing_shift"]

GRID = 1e-4
"""The PLD's relative grid: the interval is GRID·max(1, c)."""

LABEL_DIAMETER_SQ = 2.0
"""Δ_y²: two label rows that are distributions over the classes (one-hot or soft) are at most √2 apart in L2."""
MAX_SHIFT_SQ = 5e6
"""Above this c one release's privacy losses pass e^500: ε is reported as ∞ (no grid is built)."""


def mixing_shift(*, sigma_x: float, sigma_y: float, d_x: int, weight: float, feature_range: float = 1.0,
                 label_diameter_sq: float = LABEL_DIAMETER_SQ) -> float:
    """C = (w·Δ)², the squared whitened shift one replaced record makes in one released sample (module docstring).

    Δ² = d_x·r²/σ_x² + Δ_y²/σ_y² (σ may be ∞), w the record's weight (1/ℓ as certified). ValueError: σ <= 0, d_x < 1,
    or a negative weight, range or diameter.
    """
    if not (sigma_x > 0 and sigma_y > 0 and d_x >= 1 and weight >= 0 and feature_range >= 0
            and label_diameter_sq >= 0):
        raise ValueError(f"mixing_shift: need σ_x, σ_y > 0, d_x >= 1 and w, r, Δ_y² >= 0, got {sigma_x!r}, "
                         f"{sigma_y!r}, {d_x!r}, {weight!r}, {feature_range!r}, {label_diameter_sq!r}")
    return weight**2 * (d_x * feature_range**2 / sigma_x**2 + label_diameter_sq / sigma_y**2)


def mixing_epsilon(*, shift_sq: float, rate: float, releases: int, delta: float, grid: float = GRID) -> float:
    """ε at δ of T ``releases`` compositions of the mixing pair and its reverse, by dp_accounting's PLD.

    The pair (q·N(√c, 1) + (1 − q)·N(0, 1), N(0, 1)), c = ``shift_sq``; PLD pessimistic on grid ``grid``·max(1, c),
    memoised. 0 for c = 0 or q = 0, ∞ above ``MAX_SHIFT_SQ``.

    Raises:
        ValueError: c < 0, q outside [0, 1], T < 1 or δ outside (0, 1).
    """
    if not (shift_sq >= 0 and 0 <= rate <= 1 and releases >= 1 and 0 < delta < 1 and grid > 0):
        raise ValueError(f"mixing_epsilon: need c >= 0, q in [0, 1], T >= 1 and δ in (0, 1), got {shift_sq!r}, "
                         f"{rate!r}, {releases!r}, {delta!r}")
    if shift_sq == 0 or rate == 0:
        return 0.0
    if shift_sq > MAX_SHIFT_SQ:
        return math.inf
    return _pld_epsilon(float(shift_sq), float(rate), int(releases), float(delta), float(grid))


@functools.lru_cache(maxsize=512)
def _pld_epsilon(shift_sq: float, rate: float, releases: int, delta: float, grid: float) -> float:
    from dp_accounting.pld import privacy_loss_distribution as pld

    one = pld.from_gaussian_mechanism(1.0 / math.sqrt(shift_sq), sensitivity=1.0, sampling_prob=rate,
                                      value_discretization_interval=grid * max(1.0, shift_sq))
    return max(0.0, float(one.self_compose(releases).get_epsilon_for_delta(delta)))
