"""A record with two channels, audited as one.

The image read through a Gaussian score and the label through whether the release kept it, each bounded from below and
the two composed by their privacy-loss distributions (dp_accounting's PLD, optimistic discretisation): the
``gaussian-composed`` estimate of the local-canary audit. Four one-sided confidence bounds (two of the image, two of
the label), each at 1 − (1 − confidence)/4. Assumes u Gaussian (Gaussian noise read through a linear score; a normality
test checks it), the channels' randomness independent and the slots independent. Why each bound holds:
docs/design-notes.md, ``attacks.analysis.statistics.channels``. Pure NumPy / SciPy / dp_accounting (no torch).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from attacks.analysis.statistics.confidence import clopper_pearson
from attacks.analysis.statistics.fdp import EPSILON_CAP
from attacks.analysis.statistics.gaussian import _box

INTERVALS = 4  # two for the image (mean, standard deviation), two for the label (kept, swapped)
DISCRETISATION = 5e-4
"""dp_accounting's privacy-loss grid for μ² ≤ 10; DISCRETISATION·μ²/10 above (one channel's losses span about μ²).
The optimistic rounding keeps every grid a valid lower bound (it loses at most about one grid step); against a 1e-4
grid this one loses under 0.05 % of ε at ε_LB 1.9 to 37 and is 5 to 30 times faster (a 1e-4 grid took 27 s at
μ = 20, and minutes for local noise at ε = 2,000, in every audit, bug check and report)."""


def label_counts(label_outcomes: ArrayLike, labels: ArrayLike) -> dict[str, int]:
    """``{"kept", "swapped", "n"}``: slots that released the label they held, and the other label of their pair.

    ``label_outcomes`` ``(N,)`` in {−1, 0, 1} (released the pair's first label, its second, neither); ``labels``
    ``(N,)`` in {0, 1} (1: the slot holds the first record). ValueError for other shapes or values.
    """
    o, y = np.asarray(label_outcomes), np.asarray(labels)
    if o.shape != y.shape or o.ndim != 1 or not np.isin(o, (-1, 0, 1)).all() or not np.isin(y, (0, 1)).all():
        raise ValueError(f"label outcomes in {{-1, 0, 1}} and labels in {{0, 1}} must be (N,) arrays, got {o.shape} "
                         f"and {y.shape}")
    held = 2 * y.astype(np.int64) - 1  # the outcome that means "released the label held"
    return {"kept": int((o == held).sum()), "swapped": int((o == -held).sum()), "n": int(o.size)}


def image_summary(scores: ArrayLike, labels: ArrayLike) -> dict[str, float]:
    """``{"n", "mean", "sd"}`` of u = ⟨z, the image held⟩: the ``(N,)`` ``scores``, negated where ``labels`` is 0.

    ValueError for fewer than 3 scores.
    """
    u = np.where(np.asarray(labels) == 1, 1.0, -1.0) * np.asarray(scores, dtype=np.float64)
    if u.size < 3:
        raise ValueError(f"the image channel needs at least 3 scores, got {u.size}")
    return {"n": int(u.size), "mean": float(u.mean()), "sd": float(u.std(ddof=1))}


def image_mu(summary: dict[str, float], alpha: float) -> float:
    """μ_LB = 2·(mean's lower bound)/(sd's upper bound) of the image channel (one-sided t, χ², each at 1 − α), or 0."""
    (mean_lo, _), (_, sd_hi) = _box(int(summary["n"]), summary["mean"], summary["sd"], 2 * alpha)  # one end each
    return 2 * mean_lo / sd_hi if mean_lo > 0 and sd_hi > 0 else 0.0


def label_pair(counts: dict[str, int], alpha: float) -> tuple[float, float]:
    """``(t_LB, f_UB)``: one-sided Clopper-Pearson bounds (each at 1 − α) of the label channel's keep and swap rates."""
    t = clopper_pearson(counts["kept"], counts["n"], confidence=1 - alpha, sided="lower")[0]
    f = clopper_pearson(counts["swapped"], counts["n"], confidence=1 - alpha, sided="upper")[1]
    return float(t), float(f)


def composed_epsilon(mu: float, t: float, f: float, delta: float) -> float:
    """ε at ``delta`` of N(0, 1) vs N(μ, 1) composed with Bernoulli(t) vs Bernoulli(f), by dp_accounting's PLD.

    Optimistic discretisation: never above the exact value.

    Args:
        mu: the image channel's μ (unitless, >= 0; 0 leaves it out).
        t: the label's keep rate (a probability; the channel counts only when 0 < f < t < 1).
        f: the label's swap rate (a probability).
        delta: δ, a probability.

    Returns:
        ε (unitless), in [0, ``EPSILON_CAP``]; 0 when neither channel counts.
    """
    from dp_accounting.pld import privacy_loss_distribution as pld

    plds, grid = [], DISCRETISATION * max(1.0, mu * mu / 10)
    if mu > 0:
        plds.append(pld.from_gaussian_mechanism(1.0, sensitivity=mu, pessimistic_estimate=False,
                                                value_discretization_interval=grid, use_connect_dots=False))
    if 0 < f < t < 1:
        upper = {1: math.log(t), 0: math.log1p(-t)}
        lower = {1: math.log(f), 0: math.log1p(-f)}
        plds.append(pld.from_two_probability_mass_functions(lower, upper, pessimistic_estimate=False,
                                                            value_discretization_interval=grid,
                                                            symmetric=False))
    if not plds:
        return 0.0
    total = plds[0] if len(plds) == 1 else plds[0].compose(plds[1])
    return float(min(EPSILON_CAP, max(0.0, total.get_epsilon_for_delta(delta))))


def composed_bound(fit: dict[str, Any], *, delta: float, confidence: float) -> float:
    """ε_LB ≤ ``EPSILON_CAP`` of a record from both channels' ``fit``, its ``INTERVALS`` intervals sharing the error."""
    alpha = (1.0 - confidence) / INTERVALS
    return composed_epsilon(image_mu(fit["image"], alpha), *label_pair(fit["label"], alpha), delta)
