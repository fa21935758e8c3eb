"""Privacy accounting of the Gaussian mechanism.

The analytic calibration (Balle & Wang, ICML 2018, Thm. 8 / Alg. 1, evaluated by ``dp_accounting``) and the classic one
kept to show what sources claimed; DP-SGD's PLD calibration and ε and the local release's (image, label) record
accountant, memoised. Pure maths. ε is unitless, δ a probability. DP-SGD's calibration and ε by Opacus' accountants
(add/remove): ``mechanisms.accounting.opacus_accountants``; DPMix's accountant: ``mechanisms.accounting.dpmix``.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import TYPE_CHECKING

from mechanisms.accounting.search import solve_log

if TYPE_CHECKING:
    from dp_accounting.pld.pld_privacy_accountant import PLDAccountant


def require(ok: bool, message: str) -> None:
    """Raise ``ValueError(message)`` unless ``ok``: the accounting functions' one-line argument check."""
    if not ok:
        raise ValueError(message)


def _check_gauss(**values: float) -> None:
    for name, val in values.items():
        if name == "delta":
            require(0 < val < 1, f"delta must be in (0, 1), got {val!r}")
        else:
            require(math.isfinite(val) and val > 0, f"{name} must be a finite number > 0, got {val!r}")


def gaussian_delta(*, sigma: float, epsilon: float, sensitivity: float = 1.0) -> float:
    """Exact δ(ε) in [0, 1] of N(0, σ²) with L2 sensitivity Δ, σ in units of Δ (Thm. 8, ``GaussianPrivacyLoss``).

    Raises:
        ValueError: sigma or sensitivity not > 0, or epsilon < 0.
    """
    from dp_accounting.pld.privacy_loss_mechanism import GaussianPrivacyLoss

    _check_gauss(sigma=sigma, sensitivity=sensitivity)
    require(math.isfinite(epsilon) and epsilon >= 0, f"epsilon must be a finite number >= 0, got {epsilon!r}")
    return min(1.0, float(GaussianPrivacyLoss(sigma, sensitivity=sensitivity).get_delta_for_epsilon(epsilon)))


def gaussian_sigma(*, epsilon: float, delta: float, sensitivity: float = 1.0) -> float:
    """Smallest σ (units of Δ) making N(0, σ²) (ε, δ)-DP, for every ε > 0: the analytic calibration (Alg. 1).

    Raises ValueError when epsilon or sensitivity is not > 0 or delta is outside (0, 1).
    """
    from dp_accounting import get_sigma_gaussian

    _check_gauss(epsilon=epsilon, delta=delta, sensitivity=sensitivity)
    return float(get_sigma_gaussian(epsilon, delta)) * sensitivity


def gaussian_epsilon(*, sigma: float, delta: float, sensitivity: float = 1.0) -> float:
    """Smallest ε ≥ 0 with :func:`gaussian_delta` ≤ δ: what σ (units of Δ) really buys.

    Raises ValueError when sigma or sensitivity is not > 0 or delta is outside (0, 1).
    """
    from dp_accounting import get_epsilon_gaussian

    _check_gauss(sigma=sigma, delta=delta, sensitivity=sensitivity)
    return float(get_epsilon_gaussian(sigma / sensitivity, delta))


def classic_gaussian_sigma(*, epsilon: float, delta: float, sensitivity: float = 1.0) -> float:
    """Textbook σ = Δ·√(2 ln(1.25/δ))/ε (Dwork & Roth 2014, Thm. A.1), valid only for ε < 1: what sources claimed."""
    _check_gauss(epsilon=epsilon, delta=delta, sensitivity=sensitivity)
    return sensitivity * math.sqrt(2 * math.log(1.25 / delta)) / epsilon


PROFILE_DELTAS = (1e-8, 1e-6, 1e-4, 1e-3, 1e-2, 0.05, 0.1, 0.2, 0.3)
"""δ values at which mechanisms record their privacy profile (plus the run's δ): audits test the whole curve."""


def privacy_profile(epsilon_of: Callable[[float], float], delta: float) -> tuple[tuple[float, float], ...]:
    """``((ε(δᵢ), δᵢ), ...)`` of an accountant's δ -> ε at ``PROFILE_DELTAS`` and the run's ``delta``, sorted by δ."""
    return tuple((float(epsilon_of(d)), d) for d in sorted({*PROFILE_DELTAS, float(delta)}))


def _dpsgd_pld(noise_multiplier: float, sample_rate: float, steps: int, relation: str) -> PLDAccountant:
    """dp_accounting's PLD accountant of ``steps`` Poisson-subsampled Gaussian steps.

    dp_accounting's PLD accountant (pessimistic, discretisation 1e-3) after ``steps`` Poisson-subsampled Gaussian
    steps (rate q, noise multiplier σ) under ``relation``.
    """
    from dp_accounting import dp_event, pld
    from dp_accounting.privacy_accountant import NeighboringRelation

    rel = {"add-remove": NeighboringRelation.ADD_OR_REMOVE_ONE, "replace-one": NeighboringRelation.REPLACE_ONE}
    acct = pld.PLDAccountant(neighboring_relation=rel[relation], value_discretization_interval=1e-3)
    step = dp_event.PoissonSampledDpEvent(sample_rate, dp_event.GaussianDpEvent(noise_multiplier))
    acct.compose(dp_event.SelfComposedDpEvent(step, int(steps)))
    return acct


@functools.lru_cache(maxsize=512)
def pld_epsilon(*, noise_multiplier: float, sample_rate: float, steps: int, delta: float, relation: str) -> float:
    """DP-SGD's ε at δ under ``relation`` by dp_accounting's PLD accountant (``_dpsgd_pld``), memoised.

    Raises ValueError when σ ≤ 0, q is outside (0, 1], steps < 1 or δ is outside (0, 1).
    """
    require(noise_multiplier > 0 and 0 < sample_rate <= 1 and steps >= 1 and 0 < delta < 1,
            f"pld_epsilon: need σ > 0, 0 < q <= 1, steps >= 1 and 0 < δ < 1, got σ = {noise_multiplier!r}, "
            f"q = {sample_rate!r}, steps = {steps!r}, δ = {delta!r}")
    return float(_dpsgd_pld(noise_multiplier, sample_rate, steps, relation).get_epsilon(delta))


SIGMA_SEARCH = (0.25, 1e4)
"""The noise multipliers σ a DP-SGD calibration searches; a target ε needing σ outside is refused with one line
(below σ ≈ 0.25 the ε of any useful run is in the hundreds, and PLD and PRV accountants slow down sharply: a search
that does not bound σ runs for minutes at ε = 1,000)."""


@functools.lru_cache(maxsize=512)
def pld_noise_multiplier(*, target_epsilon: float, delta: float, sample_rate: float, steps: int,
                         relation: str) -> float:
    """The smallest σ (to 1e-4 relative) whose PLD ε at δ after ``steps`` steps is at most ``target_epsilon``.

    Bisection on σ in ``SIGMA_SEARCH`` under ``relation``, memoised: DP-SGD's calibration under replace-one, the
    relation every mechanism's budget is matched on (Opacus' accountants are add/remove only).

    Args:
        target_epsilon: ε > 0.
        delta: δ in (0, 1).
        sample_rate: q in (0, 1].
        steps: T.
        relation: ``add-remove`` or ``replace-one``.

    Returns:
        σ, the noise multiplier (noise standard deviation over the clipping norm C).

    Raises:
        ValueError: a target ε ≤ 0 or one that no σ in ``SIGMA_SEARCH`` reaches.
    """
    require(target_epsilon > 0 and math.isfinite(target_epsilon),
            f"dpsgd: target ε must be a finite number > 0, got {target_epsilon!r}")
    lo, hi = SIGMA_SEARCH

    def eps(sigma: float) -> float:
        return pld_epsilon(noise_multiplier=sigma, sample_rate=sample_rate, steps=steps, delta=delta,
                           relation=relation)

    if eps(hi) > target_epsilon:
        raise ValueError(f"dpsgd: target ε = {target_epsilon:g} at δ = {delta:g} needs σ > {hi:g}; allowed: an ε "
                         f"reachable with σ <= {hi:g}")
    if eps(lo) <= target_epsilon:
        raise ValueError(f"dpsgd: target ε = {target_epsilon:g} at δ = {delta:g} is met even at σ = {lo:g}; allowed: "
                         f"ε < {eps(lo):.4g} at these settings ({relation}), or a fixed params.noise_multiplier")
    while hi / lo > 1 + 1e-4:  # geometric bisection; invariant eps(lo) > target >= eps(hi)
        mid = math.sqrt(lo * hi)
        lo, hi = (lo, mid) if eps(mid) <= target_epsilon else (mid, hi)
    return hi


@functools.lru_cache(maxsize=512)
def dpsgd_profile(*, noise_multiplier: float, sample_rate: float, steps: int, delta: float,
                  relation: str = "add-remove") -> tuple[tuple[float, float], ...]:
    """DP-SGD's ``privacy_profile``: T Poisson-subsampled Gaussian steps (q, σ) by dp_accounting's PLD, memoised."""
    return privacy_profile(_dpsgd_pld(noise_multiplier, sample_rate, steps, relation).get_epsilon, delta)


def randomized_response_keep(epsilon: float, num_classes: int) -> float:
    """P(true label kept) = e^ε/(e^ε + k − 1) of k-ary randomized response, ε-DP, replace-one (ε > 0, k ≥ 2)."""
    require(epsilon > 0 and num_classes >= 2, f"randomized response needs ε > 0 and k >= 2 classes, got ε = "
            f"{epsilon!r}, k = {num_classes!r}")
    return 1.0 / (1.0 + (num_classes - 1) * math.exp(-epsilon))


def _record_pld_epsilon(sigma: float, delta: float, label_epsilon: float, num_classes: int) -> float:
    """ε at δ of one record released as (noisy image, randomized-response label) under replace-one.

    The release: unit-norm image + N(0, σ²), k-ary RR label at ``label_epsilon``. dp_accounting's PLD accountant
    composes ``GaussianDpEvent(σ)`` (under ``REPLACE_ONE`` a Gaussian event moves by 2, our image sensitivity) with
    ``RandomizedResponseDpEvent`` (pessimistic discretisation max(1e-4, ε·1e-4)); never above the basic composition
    ε_image + ε_label, which it is capped by.
    """
    from dp_accounting import dp_event, pld
    from dp_accounting.privacy_accountant import NeighboringRelation

    basic = gaussian_epsilon(sigma=sigma, delta=delta, sensitivity=2.0) + label_epsilon
    # dp_accounting's parameter: P(uniform over k buckets) = k / (e^ε + k − 1), written without e^ε (no overflow)
    noise = num_classes * math.exp(-label_epsilon) / (1 + (num_classes - 1) * math.exp(-label_epsilon))
    acct = pld.PLDAccountant(NeighboringRelation.REPLACE_ONE, value_discretization_interval=max(1e-4, basic * 1e-4))
    acct.compose(dp_event.ComposedDpEvent([dp_event.GaussianDpEvent(sigma),
                                           dp_event.RandomizedResponseDpEvent(noise, num_classes)]))
    return min(float(acct.get_epsilon(delta)), basic)


@functools.lru_cache(maxsize=512)
def local_record_epsilon(*, sigma: float, delta: float, label_epsilon: float, num_classes: int) -> float:
    """ε at δ (replace-one) of one record: image + N(0, σ²) and a k-ary RR label at ``label_epsilon``, memoised."""
    return _record_pld_epsilon(sigma, delta, label_epsilon, num_classes)


@functools.lru_cache(maxsize=512)
def local_record_sigma(*, target_epsilon: float, delta: float, label_share: float, num_classes: int
                       ) -> tuple[float, float]:
    """(σ, ε_label) for a local release of (image, label) records at (``target_epsilon``, δ) under replace-one.

    The label gets ε_label = ``label_share``·ε by k-ary randomized response, the image the smallest σ (to 1e-6 relative,
    Brent's method on log ε) for which ``local_record_epsilon`` is at most the target. Raises ValueError when ε ≤ 0, the
    share is outside (0, 1) or k < 2.

    Args:
        target_epsilon: ε (unitless).
        delta: δ (a probability).
        label_share: the share of ε spent on the label, in (0, 1).
        num_classes: k ≥ 2.

    Returns:
        σ (units of the unit-norm image) and ε_label.
    """
    require(target_epsilon > 0 and 0 < label_share < 1 and num_classes >= 2,
            f"local-gaussian: need ε > 0, label share in (0, 1) and k >= 2, got ε = {target_epsilon!r}, "
            f"share = {label_share!r}, k = {num_classes!r}")
    label_epsilon = label_share * target_epsilon
    lo = gaussian_sigma(epsilon=target_epsilon, delta=delta, sensitivity=2.0)
    hi = gaussian_sigma(epsilon=target_epsilon - label_epsilon, delta=delta, sensitivity=2.0)

    def eps(sigma: float) -> float:
        return local_record_epsilon(sigma=sigma, delta=delta, label_epsilon=label_epsilon, num_classes=num_classes)

    if eps(lo) <= target_epsilon:  # the label adds nothing the accountant resolves: the image's σ for the whole ε
        return lo, label_epsilon
    if eps(hi) >= target_epsilon:  # basic composition meets the target exactly at hi (up to rounding): ε falls in σ,
        return hi, label_epsilon  # so no smaller σ meets it
    return solve_log(eps, target_epsilon, lo, hi, 1e-6), label_epsilon
