"""The conformance tests' own accountant for DPMix (Lee, Kim, Lee, Suh, ISIT 2019).

Built from first principles and sharing no code with ``mechanisms.accounting.dpmix``. One release is dominated, under
replace-one, by (q·N(√c, 1) + (1 − q)·N(0, 1), N(0, 1)) and its reverse, c = (w·Δ)² (``mixing_shift``), q = ℓ/n
(Balle, Barthe, Gaboardi, NeurIPS 2018; Zhu, Dong, Wang, AISTATS 2022); ``mixing_epsilon`` composes T of them with
``dp_accounting``'s pessimistic PLD (overstates ε by at most 1.8e-4 relative at the profiles' ℓ, T and n). The
derivation and its checks: docs/design-notes.md. Pure ``dp_accounting``; no torch, no ``mechanisms``.
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
