"""Conformance tests: is the mechanism that ran the one its ε certifies? Each test measures one quantity the
accountant assumes (the noise's standard deviation, the sample rate, the dispersion of records' participation, the
number of steps, the clip bound, the noise's shape and independence, a keep rate) and tests the hypothesis
H0 "this run is the certified mechanism" with a p-value that is exact, or whose level under H0 is shown by
simulation (``validity``). Each is one comparison of the run's Bonferroni family (``attacks.analysis.verdict``), fixed
by the design before any data: a rejection says "inconsistent with the certified mechanism at 95 %" and ends the run
with exit 3. None is an "ε ≥" statement; ``measured_epsilon`` is the ε the measured parameters imply, at their
confidence limits.

Direction. Where ε is monotone in the quantity the test is one-sided in the direction that raises ε (less noise,
a higher rate, more steps, a larger clipped norm, a higher keep rate): a mechanism that adds more noise than it
certifies is not refuted. Where no direction is safe (the dispersion of participation counts: shuffled fixed batches
accounted as Poisson sampling overstate privacy by up to 4×, Annamalai et al. 2026; the noise's shape and its
independence across steps) the test is two-sided.

Pure NumPy / SciPy (and ``dp_accounting`` for the ε); no torch.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from scipy import stats

from attacks.analysis.subsampled_gaussian import PLD_SMALLEST_SIGMA, poisson_gaussian_epsilon, sigma_for_epsilon

__all__ = ["DECLARED_TOLERANCE", "PLD_SMALLEST_SIGMA", "VALIDITY", "clip_test", "conformance_record",
           "declared_epsilon_test", "dispersion_test", "dpsgd_measured_epsilon", "independence_test", "noise_test",
           "poisson_gaussian_epsilon", "rate_test", "shape_test", "sigma_for_epsilon", "smallest_p", "steps_test"]

VALIDITY = {
    "exact": "exact under H0",
    "simulated": "asymptotic; its level under H0 shown by simulation (tests/attacks/conformance/test_conformance.py)",
}
SHAPE_SAMPLE = 200_000  # observations the shape test reads at most (an evenly spaced subsample)


def conformance_record(name: str, quantity: str, *, certified: float | None, measured: float | None, n: int,
                p_value: float, alternative: str, validity: str, statistic: float | None = None,
                **detail: Any) -> dict[str, Any]:
    """One conformance test's record (``bench.results.ConformanceTest``'s fields).

    Raises:
        ValueError: ``alternative`` not less / greater / two-sided, ``validity`` not in ``VALIDITY``, or a p-value
            outside [0, 1]."""
    if alternative not in ("less", "greater", "two-sided") or validity not in VALIDITY:
        raise ValueError(f"conformance test {name!r}: alternative {alternative!r} or validity {validity!r} unknown")
    if not 0.0 <= p_value <= 1.0 or math.isnan(p_value):
        raise ValueError(f"conformance test {name!r}: p-value {p_value!r} outside [0, 1]")
    return {"name": name, "quantity": quantity, "certified": certified, "measured": measured, "n": int(n),
            "statistic": statistic, "p_value": float(p_value), "alternative": alternative, "validity": validity,
            "detail": detail, "deciding": True}


def noise_test(name: str, sum_squares: float, n: int, certified_sd: float, *,
               confidence: float = 0.95, alternative: str = "less") -> dict[str, Any]:
    """χ² test of a noise's standard deviation: n observations iid N(0, s²) under H0 with s the certified sd;
    Σx²/s² ~ χ²_n, small when the mechanism adds less noise than it certifies. Exact. ``alternative``: ``less``
    (one-sided: only less noise raises ε) or ``two-sided`` (where more than the certified variance also says the
    release is not the certified mechanism: a residual that holds more than the noise, DPMix's release − the mean of
    its recorded subset; p = 2·min of the two tails).

    Args:
        name: the test's name (e.g. ``noise σ, tensor 2``). sum_squares: Σx² of the ``n`` observations (units of the
            sd). certified_sd: s > 0 (e.g. the noise multiplier σ when the observations are in units of C).
        confidence: of the interval ``sd_lower`` / ``sd_upper`` stored beside (each one-sided).

    Returns:
        The record, ``measured`` = √(Σx²/n), ``detail`` with ``sd_lower`` and ``sd_upper``.

    Raises:
        ValueError: n < 1, a negative sum of squares or certified_sd ≤ 0.
    """
    if n < 1 or sum_squares < 0 or not certified_sd > 0 or alternative not in ("less", "two-sided"):
        raise ValueError(f"noise test: need n >= 1, Σx² >= 0, a certified sd > 0 and alternative less or two-sided, "
                         f"got {n}, {sum_squares}, {certified_sd}, {alternative!r}")
    stat = sum_squares / certified_sd**2
    alpha = 1.0 - confidence
    p = float(stats.chi2.cdf(stat, n))
    if alternative == "two-sided":
        p = min(1.0, 2 * min(p, float(stats.chi2.sf(stat, n))))
    return conformance_record(
        name, "noise sd", certified=certified_sd, measured=math.sqrt(sum_squares / n), n=n, statistic=stat,
        p_value=p, alternative=alternative, validity="exact",
        sd_lower=math.sqrt(sum_squares / stats.chi2.ppf(1 - alpha, n)),
        sd_upper=math.sqrt(sum_squares / max(stats.chi2.ppf(alpha, n), 1e-300)))


def rate_test(name: str, quantity: str, successes: int, trials: int, certified: float, *,
              confidence: float = 0.95) -> dict[str, Any]:
    """Exact one-sided binomial test that a rate (a sample rate q, randomized response's keep rate) is not above the
    certified one: ``successes`` of ``trials`` independent Bernoulli(certified) trials under H0. ``detail`` holds
    the Clopper-Pearson one-sided limits ``lower`` and ``upper`` at ``confidence``.

    Raises:
        ValueError: trials < 1, successes outside [0, trials], or a certified rate outside (0, 1].
    """
    if trials < 1 or not 0 <= successes <= trials or not 0 < certified <= 1:
        raise ValueError(f"rate test {name!r}: need 0 <= k <= n, n >= 1 and a rate in (0, 1], got {successes}, "
                         f"{trials}, {certified}")
    p = 1.0 if certified >= 1 else float(stats.binom.sf(successes - 1, trials, certified))
    alpha = 1.0 - confidence
    lower = 0.0 if successes == 0 else float(stats.beta.ppf(alpha, successes, trials - successes + 1))
    upper = 1.0 if successes == trials else float(stats.beta.ppf(1 - alpha, successes + 1, trials - successes))
    return conformance_record(name, quantity, certified=certified, measured=successes / trials, n=trials,
                       statistic=float(successes), p_value=min(1.0, p), alternative="greater", validity="exact",
                       lower=lower, upper=upper)


def dispersion_test(name: str, counts: ArrayLike, trials: int, rate: float) -> dict[str, Any]:
    """Two-sided test that records' participation counts ``(n,)`` over ``trials`` steps are iid Binomial(trials,
    rate), as Poisson sampling at ``rate`` makes them (Abadi et al. 2016; the accountant's assumption), by their
    dispersion D = Σ(c − Tq)². Under H0, E[D] = n·Tq(1−q) and Var[D] = n·(μ₄ − (Tq(1−q))²) with μ₄ the binomial's
    fourth central moment; D is read against the gamma law with those two moments (a sum of n iid terms: its skew
    falls as 1/√n). Shuffled fixed batches give every record the same count (D ≈ 0); a weighted sampler, or records
    sampled at different rates, spread them (D large). ``measured``: D / E[D].

    Raises:
        ValueError: fewer than 2 counts, trials < 1 or a rate outside (0, 1).
    """
    c = np.asarray(counts, np.float64)
    if c.size < 2 or trials < 1 or not 0 < rate < 1:
        raise ValueError(f"dispersion test {name!r}: need >= 2 counts, trials >= 1 and a rate in (0, 1), got "
                         f"{c.size}, {trials}, {rate}")
    mu, v = trials * rate, trials * rate * (1 - rate)
    mu4 = v * (1 + 3 * (trials - 2) * rate * (1 - rate))
    mean, var = c.size * v, c.size * max(mu4 - v * v, 1e-300)
    d = float(((c - mu) ** 2).sum())
    shape, scale = mean * mean / var, var / mean
    p = 2 * min(float(stats.gamma.cdf(d, shape, scale=scale)), float(stats.gamma.sf(d, shape, scale=scale)))
    return conformance_record(name, "participation dispersion", certified=1.0, measured=d / mean, n=int(c.size),
                       statistic=d, p_value=min(1.0, p), alternative="two-sided", validity="simulated",
                       trials=int(trials), rate=float(rate))


def steps_test(name: str, observed: int, certified: int) -> dict[str, Any]:
    """The number of noisy steps (or releases) against the accountant's; exact (a count, observed without error).

    Args:
        name: the test's name.
        observed: the steps the run took.
        certified: the steps the accountant counted.

    Returns:
        The ``conformance_record``: p = 0 where more steps ran than certified (fewer only over-counts), else 1."""
    return conformance_record(name, "steps", certified=float(certified), measured=float(observed), n=1,
                       statistic=float(observed), p_value=0.0 if observed > certified else 1.0, alternative="greater",
                       validity="exact")


def clip_test(name: str, largest_norm: float, bound: float, *, tolerance: float = 1e-4) -> dict[str, Any]:
    """A contribution's L2 norm against the sensitivity the accountant assumes (DP-SGD's clip bound C); exact.

    Args:
        name: the test's name.
        largest_norm: the largest L2 norm observed (units of the contribution).
        bound: the assumed sensitivity (e.g. C, or a release's input norm).
        tolerance: relative float rounding allowed above ``bound``.

    Returns:
        The ``conformance_record``: p = 0 where the norm exceeds ``bound``·(1 + ``tolerance``), else 1."""
    return conformance_record(name, "clip bound", certified=float(bound), measured=float(largest_norm), n=1,
                       statistic=float(largest_norm),
                       p_value=0.0 if largest_norm > bound * (1 + tolerance) else 1.0, alternative="greater",
                       validity="exact")


def shape_test(name: str, observations: ArrayLike, *, per_column: bool = False) -> dict[str, Any]:
    """Two-sided test that a noise is Gaussian: D'Agostino and Pearson's K² (skewness and kurtosis; scipy's
    ``normaltest``) on the observations ``(N,)`` (at most ``SHAPE_SAMPLE``, evenly spaced), any scale. A noise of the
    certified variance but heavier or lighter tails (Laplace, uniform) is a different mechanism than the accountant's.
    ``per_column``: observations ``(R, k)`` (rows × coordinates, R ≥ 1,000) are first divided by each column's root
    mean square, so that Gaussian noise whose scale differs between coordinates (each coordinate's scale is what the
    noise tests judge) is not read as a heavy tail; the bias this adds to the kurtosis, about −6/R, is below 0.006.

    Raises:
        ValueError: fewer than 20 observations, or ``per_column`` with fewer than 1,000 rows.
    """
    x = np.asarray(observations, np.float64)
    if per_column:
        if x.ndim != 2 or x.shape[0] < 1000:
            raise ValueError(f"shape test {name!r}: per_column needs (rows >= 1000, k), got {x.shape}")
        rms = np.sqrt(np.mean(x * x, axis=0))
        x = x[:, rms > 0] / rms[rms > 0]
    x = x.ravel()
    if x.size < 20:
        raise ValueError(f"shape test {name!r}: need >= 20 observations, got {x.size}")
    if x.size > SHAPE_SAMPLE:
        x = x[np.linspace(0, x.size - 1, SHAPE_SAMPLE).astype(np.int64)]
    if not np.any(x != x[0]):
        return conformance_record(name, "noise shape", certified=None, measured=None, n=int(x.size), p_value=0.0,
                           alternative="two-sided", validity="simulated", reason="constant observations")
    k2, p = stats.normaltest(x)
    return conformance_record(name, "noise shape", certified=0.0, measured=float(stats.kurtosis(x)), n=int(x.size),
                       statistic=float(k2), p_value=float(p), alternative="two-sided", validity="simulated")


def independence_test(name: str, observations: ArrayLike) -> dict[str, Any]:
    """Two-sided test that a noise is independent across steps and across coordinates: the lag-1 correlations of the
    observations ``(T, k)`` (steps × coordinates) along both axes, r = Σ x_i x_{i+1} / Σ x², each √N·r ~ N(0, 1)
    under H0 (iid zero-mean noise); the smaller of the two p-values, × 2. Noise reused across steps (a generator
    re-seeded every step) gives r ≈ 1. ``measured``: the larger ``|r|``.

    Raises:
        ValueError: fewer than 2 steps or coordinates.
    """
    x = np.asarray(observations, np.float64)
    if x.ndim != 2 or x.shape[0] < 2 or x.shape[1] < 2:
        raise ValueError(f"independence test {name!r}: need (steps, coordinates) >= (2, 2), got {x.shape}")
    total = float((x * x).sum())
    if total <= 0:
        return conformance_record(name, "noise independence", certified=0.0, measured=None, n=int(x.size), p_value=0.0,
                           alternative="two-sided", validity="simulated", reason="no noise")
    rs, ps = [], []
    for lag in (x[1:] * x[:-1], x[:, 1:] * x[:, :-1]):
        r = float(lag.sum()) / total
        rs.append(r)
        ps.append(2 * float(stats.norm.sf(abs(r) * math.sqrt(lag.size))))
    return conformance_record(name, "noise independence", certified=0.0, measured=max(abs(r) for r in rs),
                              n=int(x.size), statistic=rs[int(np.argmin(ps))], p_value=min(1.0, 2 * min(ps)),
                              alternative="two-sided", validity="simulated", r_steps=rs[0], r_coordinates=rs[1])


def dpsgd_measured_epsilon(*, sum_squares: float, n: int, rate_counts: tuple[int, int] | None, sample_rate: float,
                           steps: int, certified: float, delta: float, relation: str, claimed_sigma: float,
                           confidence: float = 0.95) -> dict[str, Any]:
    """DP-SGD's ε from its measured parameters (``bench.results.MeasuredEpsilon``'s fields): the noise multiplier at
    the upper one-sided χ² limit of the ``n`` noise observations (Σx² = ``sum_squares``, units of C), the sample
    rate at the lower Clopper-Pearson limit of ``rate_counts`` = (participations, record-steps) (the certified
    ``sample_rate`` where none was observed), the observed ``steps``; each limit at 1 − (1 − confidence)/k for the k
    limits used, so ε(σ_U, q_L, T) is a lower confidence limit of the ε the run spent
    (``poisson_gaussian_epsilon``; dp_accounting's PLD accountant). A σ_U below ``PLD_SMALLEST_SIGMA`` is accounted
    at that floor (``parameters['noise_multiplier_accounted']``): a smaller, still valid, lower limit. ``p_value``:
    the exact χ² test of "the noise is at least σ*", σ* the multiplier at which that accountant gives the
    ``certified`` ε at the certified q and the observed T — small when the run spent more than it certifies, whether
    its noise or its accountant is wrong.

    Raises:
        ValueError: what ``noise_test``, ``rate_test`` or ``sigma_for_epsilon`` raise."""
    k = 2 if rate_counts is not None else 1
    level = 1.0 - (1.0 - confidence) / k
    noise = noise_test("noise", sum_squares, n, claimed_sigma, confidence=level)
    q = sample_rate
    if rate_counts is not None:
        q = max(rate_test("q", "sample rate", rate_counts[0], rate_counts[1], sample_rate,
                          confidence=level)["detail"]["lower"], 1e-12)
    sigma_u = float(noise["detail"]["sd_upper"])
    sigma_acc = sigma_u if sigma_u == 0 else max(sigma_u, PLD_SMALLEST_SIGMA)  # a lower bound below the floor
    eps = poisson_gaussian_epsilon(noise_multiplier=sigma_acc, sample_rate=min(q, 1.0), steps=steps, delta=delta,
                                   relation=relation)
    star = sigma_for_epsilon(certified, sample_rate=sample_rate, steps=steps, delta=delta, relation=relation,
                             guess=claimed_sigma)
    p = float(stats.chi2.cdf(sum_squares / star**2, n))
    parameters = {"noise_multiplier": sigma_u, "sample_rate": q, "steps": float(steps),
                  "noise_multiplier_at_certified_epsilon": star}
    if sigma_acc != sigma_u:
        parameters["noise_multiplier_accounted"] = sigma_acc
    return {"epsilon": eps, "certified": certified, "delta": delta, "relation": relation,
            "accountant": "dp_accounting-pld", "confidence": confidence, "p_value": p, "parameters": parameters}


DECLARED_TOLERANCE = 1e-3
"""How far the certifying accountant's ε may fall below the ε the conformance code computes for the declared
mechanism before ``declared_epsilon_test`` rejects (relative). The conformance code's accountants either are exact
(local noise: ``attacks.analysis.analytic_gaussian``) or are dp_accounting's pessimistic PLD, whose grid overstates ε by
at most 1.8e-4 at the profiles' settings (``scripts/accountant_check.py``: against a grid five to ten times finer,
DP-SGD and DPMix, ε 1 to 15): a correct accountant, however tight, certifies at least the exact ε, so at most
that far below. 1e-3 is five times it, and fifty times below the 5 % the conformance family must catch."""


def declared_epsilon_test(name: str, *, declared: float, certified: float, tolerance: float = DECLARED_TOLERANCE,
                          **detail: Any) -> dict[str, Any]:
    """"The accountant's ε is the ε of the declared mechanism": ``declared``, the ε the conformance code's own
    accountant gives the mechanism's declared parameters (its σ, rate, sensitivity, steps as the mechanism states
    them, never as its accountant derives them), against the ``certified`` ε. Exact (a number computed, not
    estimated): p = 0 where declared > certified·(1 + ``tolerance``), else 1 (``DECLARED_TOLERANCE``). A wrong rate,
    sensitivity or composition count inside the accountant's code fails it whatever the run measures.

    Raises:
        ValueError: a certified ε <= 0 or a negative tolerance."""
    if not certified > 0 or tolerance < 0:
        raise ValueError(f"declared ε test {name!r}: need a certified ε > 0 and a tolerance >= 0, got {certified}, "
                         f"{tolerance}")
    return conformance_record(name, "declared epsilon", certified=float(certified), measured=float(declared), n=1,
                              statistic=float(declared), p_value=0.0 if declared > certified * (1 + tolerance)
                              else 1.0, alternative="greater", validity="exact", tolerance=tolerance, **detail)


def smallest_p(tests: Sequence[dict[str, Any]]) -> float:
    """The smallest p-value of ``tests``' deciding ones (1 without any)."""
    return min((float(t["p_value"]) for t in tests if t.get("deciding", True)), default=1.0)
