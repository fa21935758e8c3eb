"""Conformance tests of how records are sampled and how often (``attacks.conformance.hypothesis_tests``).

A rate (a sample rate q, a keep rate) against the certified one (exact binomial), the dispersion of records'
participation counts against Poisson sampling's (two-sided) and the number of noisy steps against the accountant's. Pure
NumPy / SciPy; no torch.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from scipy import stats

from attacks.analysis.statistics.confidence import clopper_pearson_lower, clopper_pearson_upper
from attacks.conformance.hypothesis_tests import conformance_record


def rate_test(name: str, quantity: str, successes: int, trials: int, certified: float, *,
              confidence: float = 0.95) -> dict[str, Any]:
    """Exact one-sided binomial test that a rate (e.g. a sample rate q, RR's keep rate) is not above the certified one.

    k = ``successes`` of n = ``trials`` independent Bernoulli(``certified``) trials under H0: p = P(Binomial(n,
    certified) ≥ k); ``measured`` = k/n; ``detail``: the Clopper-Pearson (1934) one-sided limits ``lower``, ``upper`` at
    ``confidence``.

    Raises:
        ValueError: trials < 1, successes outside [0, trials], or a certified rate outside (0, 1].
    """
    if trials < 1 or not 0 <= successes <= trials or not 0 < certified <= 1:
        raise ValueError(f"rate test {name!r}: need 0 <= k <= n, n >= 1 and a rate in (0, 1], got {successes}, "
                         f"{trials}, {certified}")
    p = 1.0 if certified >= 1 else float(stats.binom.sf(successes - 1, trials, certified))
    alpha = 1.0 - confidence
    lower = clopper_pearson_lower(successes, trials, alpha)
    upper = clopper_pearson_upper(successes, trials, 1 - (1 - alpha))  # the tail as 1 − level: the bits it always had
    return conformance_record(name, quantity, certified=certified, measured=successes / trials, n=trials,
                       statistic=float(successes), p_value=min(1.0, p), alternative="greater", validity="exact",
                       lower=lower, upper=upper)


def dispersion_test(name: str, counts: ArrayLike, trials: int, rate: float) -> dict[str, Any]:
    """Two-sided test that records' participation counts ``(n,)`` over ``trials`` steps are iid Binomial(trials, rate).

    As Poisson sampling makes them (Abadi et al. 2016; the accountant's assumption), by their dispersion D = Σ(c − Tq)².
    Under H0, E[D] = n·Tq(1−q) and Var[D] = n·(μ₄ − (Tq(1−q))²), μ₄ the binomial's fourth central moment; D is read
    against the gamma law of those moments (its skew falls as 1/√n). Shuffled fixed batches give D ≈ 0; a weighted
    sampler, or uneven rates, a large D. ``measured``: D / E[D] (1 under H0).

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
    """Exact test of the steps (or releases) ``observed`` against the accountant's: p = 0 where more ran, else 1."""
    return conformance_record(name, "steps", certified=float(certified), measured=float(observed), n=1,
                       statistic=float(observed), p_value=0.0 if observed > certified else 1.0, alternative="greater",
                       validity="exact")
