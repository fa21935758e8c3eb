"""A record with two channels, audited as one: the image read through a Gaussian score and the label through whether
the release kept it, each bounded from below and the two composed by their privacy-loss distributions.

The local randomiser releases (image + Gaussian noise, label by randomized response) with independent randomness per
channel. A canary pair (a, y₁) vs (−a, y₂) with y₁ ≠ y₂ differs in both. The audit bounds each channel by a pair of
distributions that is a post-processing of what the channel really releases:

- image: the projection ⟨z, a⟩ is N(±1, s²), Gaussian by construction; from the Gaussian pair's confidence box
  (``attacks.audit.gaussian``) the smallest mean gap over the largest standard deviation, μ_LB. N(0, 1) vs N(μ_LB, 1)
  is a post-processing (rescale, add noise) of any equal-variance pair with a larger μ.
- label: the event "released label = y₁" has probability t when the slot holds y₁ and f when it holds y₂. With a
  one-sided Clopper-Pearson lower bound of t and upper bound of f, Bernoulli(t_LB) vs Bernoulli(f_UB) is a
  post-processing of Bernoulli(t) vs Bernoulli(f) (randomise the indicator), itself a post-processing of the label.

The channels' randomness is independent, so the product of the two bounding pairs is a post-processing of the
record's release: its ε at δ, from dp_accounting's PLD with optimistic (lower) discretisation, is a lower bound on the
record's ε. Six confidence intervals (four of the image box, two of the label) each at 1 − (1 − confidence)/6.
Assumes what the Gaussian pair assumes (Gaussian image scores of equal variance, independent across canaries).
Pure NumPy / SciPy / dp_accounting (no torch).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from attacks.audit.fdp import EPSILON_CAP
from attacks.audit.gaussian import _box
from attacks.metrics import clopper_pearson

INTERVALS = 6  # four for the image's Gaussian box, two for the label's Bernoulli pair
DISCRETISATION = 1e-4  # dp_accounting's privacy-loss grid


def label_counts(label_hits: Any, labels: Any) -> dict[str, int]:
    """``{"hits_in", "n_in", "hits_out", "n_out"}``: how often the released label equalled the pair's first label
    among slots holding the first record (``labels`` 1) and the second (0). ``label_hits``, ``labels``: ``(N,)`` in
    {0, 1}. Raises ValueError on shapes that differ or values outside {0, 1}."""
    h, y = np.asarray(label_hits), np.asarray(labels)
    if h.shape != y.shape or h.ndim != 1 or not np.isin(h, (0, 1)).all() or not np.isin(y, (0, 1)).all():
        raise ValueError(f"label hits and labels must be (N,) arrays in {{0, 1}}, got {h.shape} and {y.shape}")
    return {"hits_in": int(h[y == 1].sum()), "n_in": int((y == 1).sum()),
            "hits_out": int(h[y == 0].sum()), "n_out": int((y == 0).sum())}


def image_mu(fit: dict[str, Any], alpha: float) -> float:
    """μ_LB of the image channel from the Gaussian pair's summary ``fit`` (``n_in``, ``mean_in``, ``sd_in``, ``n_out``,
    ``mean_out``, ``sd_out``): the smallest mean gap over the largest standard deviation of its box, each interval at
    level 1 − ``alpha``; 0 when the box holds no gap."""
    (m_in, sd_in), (m_out, sd_out) = (_box(fit[f"n_{g}"], fit[f"mean_{g}"], fit[f"sd_{g}"], alpha)
                                      for g in ("in", "out"))
    gap = max(0.0, m_in[0] - m_out[1], m_out[0] - m_in[1])
    return gap / max(sd_in[1], sd_out[1]) if gap > 0 else 0.0


def label_pair(counts: dict[str, int], alpha: float) -> tuple[float, float]:
    """(t_LB, f_UB): one-sided Clopper-Pearson bounds, each at level 1 − ``alpha``, of the label channel's hit rates."""
    t = clopper_pearson(counts["hits_in"], counts["n_in"], confidence=1 - alpha, sided="lower")[0]
    f = clopper_pearson(counts["hits_out"], counts["n_out"], confidence=1 - alpha, sided="upper")[1]
    return float(t), float(f)


def composed_epsilon(mu: float, t: float, f: float, delta: float) -> float:
    """ε at ``delta`` of N(0, 1) vs N(μ, 1) composed with Bernoulli(t) vs Bernoulli(f), both directions, by
    dp_accounting's PLD (optimistic discretisation: never above the exact value); at most ``EPSILON_CAP``."""
    from dp_accounting.pld import privacy_loss_distribution as pld

    plds = []
    if mu > 0:
        plds.append(pld.from_gaussian_mechanism(1.0, sensitivity=mu, pessimistic_estimate=False,
                                                value_discretization_interval=DISCRETISATION))
    if 0 < f < t < 1:
        upper = {1: math.log(t), 0: math.log1p(-t)}
        lower = {1: math.log(f), 0: math.log1p(-f)}
        plds.append(pld.from_two_probability_mass_functions(lower, upper, pessimistic_estimate=False,
                                                            value_discretization_interval=DISCRETISATION,
                                                            symmetric=False))
    if not plds:
        return 0.0
    total = plds[0] if len(plds) == 1 else plds[0].compose(plds[1])
    return float(min(EPSILON_CAP, max(0.0, total.get_epsilon_for_delta(delta))))


def composed_bound(fit: dict[str, Any], *, delta: float, confidence: float) -> float:
    """The record's ε lower bound from ``fit = {"image": Gaussian pair summary, "label": label_counts(...)}`` at
    ``confidence`` (each of ``INTERVALS`` intervals at 1 − (1 − confidence)/``INTERVALS``)."""
    alpha = (1.0 - confidence) / INTERVALS
    return composed_epsilon(image_mu(fit["image"], alpha), *label_pair(fit["label"], alpha), delta)
