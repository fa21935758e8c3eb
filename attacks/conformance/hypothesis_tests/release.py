"""Conformance tests of data releases (local Gaussian noise, DPMix).

The noise of an image release per pixel, per region and per channel, randomized response's label flips, the inclusion of
records in DPMix's mixtures, and the ε of the measured parameters with its p-value of "spent ≤ certified"
(``attacks.conformance.hypothesis_tests`` holds the generic tests these build on). The number of tests each function
returns is fixed by the image's shape alone, before any data. Pure NumPy / SciPy; no torch.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from scipy import stats

from attacks.conformance.hypothesis_tests import conformance_record
from attacks.conformance.hypothesis_tests.noise import noise_test

__all__ = ["GRID", "image_noise_tests", "label_flip_test", "limit_p_value", "mixing_dispersion",
           "mixing_dispersion_test", "region_ids", "sidak_test"]

GRID = 4  # an image's regions: a GRID × GRID grid of its pixels (every channel of a cell in one region)


def region_ids(shape: tuple[int, ...], grid: int = GRID) -> np.ndarray:
    """``(C·H·W,)`` int64 region ids of a ``(C, H, W)`` image's coordinates, in ``flatten`` order.

    A region: a cell of a ``grid`` × ``grid`` partition of the H × W pixels, all channels together (fewer cells on a
    smaller image). ValueError for a shape that is not (C, H, W).
    """
    if len(shape) != 3:
        raise ValueError(f"region_ids: need a (C, H, W) shape, got {shape}")
    c, h, w = shape
    rows = np.minimum(np.arange(h) * min(grid, h) // h, grid - 1)
    cols = np.minimum(np.arange(w) * min(grid, w) // w, grid - 1)
    cell = rows[:, None] * min(grid, w) + cols[None, :]
    return np.broadcast_to(cell, (c, h, w)).reshape(-1).astype(np.int64)


def sidak_test(name: str, records: list[dict[str, Any]], *, parts: int | None = None,
               observations: int | None = None, **detail: Any) -> dict[str, Any]:
    """One test of k sub-tests (e.g. each region's noise) by their smallest p-value, with Šidák's correction.

    p = 1 − (1 − p_min)^k, exact when the sub-tests are independent under H0 (disjoint coordinates' noise is), so the
    family counts one. ``parts``: k when ``records`` holds only the deciding sub-test (default: their number);
    ``observations``: default their summed ``n``. The record takes the deciding sub-test's ``measured``, ``certified``;
    its ``detail``: ``detail``, ``parts`` and ``worst`` (that sub-test's name).

    Raises:
        ValueError: no sub-test.
    """
    if not records:
        raise ValueError(f"sidak test {name!r}: no sub-tests")
    worst = min(records, key=lambda r: float(r["p_value"]))
    k, p_min = parts if parts is not None else len(records), float(worst["p_value"])
    p = -math.expm1(k * math.log1p(-p_min)) if p_min < 1 else 1.0
    n = observations if observations is not None else sum(int(r["n"]) for r in records)
    return conformance_record(name, worst["quantity"], certified=worst["certified"], measured=worst["measured"],
                              n=n, statistic=worst["statistic"],
                              p_value=min(1.0, max(0.0, p)), alternative=worst["alternative"], validity="exact",
                              parts=k, worst=worst["name"], **detail)


def image_noise_tests(prefix: str, sum_squares: ArrayLike, n: int, certified_sd: float, shape: tuple[int, ...], *,
                      alternative: str = "less") -> list[dict[str, Any]]:
    """The noise of an image release against its certified sd s > 0, from each coordinate's Σx² over ``n`` observations.

    ``sum_squares``: ``(C·H·W,)`` Σx² per coordinate of ``shape`` (data units squared). Each coordinate iid N(0, s²)
    under H0: the pooled χ² (``noise_test``), and the smallest of the per-region, per-pixel and (C > 1) per-channel χ²
    tests (``sidak_test``), all with ``noise_test``'s ``alternative``. One pixel's noise at 0.8·s shows in the per-pixel
    test, a region's in the per-region one, a 5 % shortfall everywhere in the pooled one.

    Returns:
        Three records (``conformance_record``) for C = 1, four otherwise.

    Raises:
        ValueError: ``sum_squares`` not of ``C·H·W`` entries, or what ``noise_test`` raises.
    """
    ss = np.asarray(sum_squares, np.float64).ravel()
    if ss.size != math.prod(shape):
        raise ValueError(f"image_noise_tests: {ss.size} sums of squares for a {shape} image")
    alt = alternative
    tests = [noise_test(f"{prefix} σ, pooled", float(ss.sum()), n * ss.size, certified_sd, alternative=alt)]
    if shape[0] > 1:
        per_channel = ss.reshape(shape[0], -1)
        tests.append(sidak_test(f"{prefix} σ, smallest of {shape[0]} channels", [
            noise_test(f"channel {c}", float(per_channel[c].sum()), n * per_channel.shape[1], certified_sd,
                       alternative=alt) for c in range(shape[0])]))
    ids = region_ids(shape)
    tests.append(sidak_test(f"{prefix} σ, smallest of {int(ids.max()) + 1} regions", [
        noise_test(f"region {r}", float(ss[ids == r].sum()), n * int((ids == r).sum()), certified_sd, alternative=alt)
        for r in range(int(ids.max()) + 1)]))
    tests.append(_pixel_test(f"{prefix} σ, smallest of {ss.size} pixels", ss, n, certified_sd, alt))
    return tests


def _pixel_test(name: str, ss: np.ndarray, n: int, certified_sd: float, alternative: str = "less"
                ) -> dict[str, Any]:
    """The per-pixel χ² tests read by ``sidak_test``.

    Every pixel has ``n`` observations, so the smallest p-value is the smallest Σx² (the χ² cdf is increasing), or,
    two-sided, the smallest or the largest: only those pixels' tests are computed (784 χ² limits were 0.5 s).
    """
    ends = {int(np.argmin(ss))} | ({int(np.argmax(ss))} if alternative == "two-sided" else set())
    worst = min((noise_test(f"pixel {i}", float(ss[i]), n, certified_sd, alternative=alternative) for i in ends),
                key=lambda r: float(r["p_value"]))
    return sidak_test(name, [worst], parts=ss.size, observations=n * ss.size)


def label_flip_test(name: str, offsets: ArrayLike, num_classes: int) -> dict[str, Any]:
    """Two-sided test that randomized response's replaced labels are uniform over the k − 1 other labels.

    ``offsets``: released − true label, mod k, of the replaced labels only (any shape). k-ary RR (Kairouz, Oh,
    Viswanath 2016): Pearson's χ² with k − 2 degrees of freedom, asymptotic (level shown by simulation); fewer than 5
    expected per label, or k = 2, leaves nothing to test (p = 1 with the reason). ``measured``: the most frequent
    offset's count over its expectation.

    Raises:
        ValueError: k < 2 or an offset outside 1..k − 1.
    """
    o = np.asarray(offsets, np.int64).ravel()
    if num_classes < 2 or (o.size and (o.min() < 1 or o.max() > num_classes - 1)):
        raise ValueError(f"label flip test {name!r}: need k >= 2 and offsets in 1..k−1")
    expected = o.size / max(num_classes - 1, 1)
    if num_classes == 2 or expected < 5:
        return conformance_record(name, "label flips", certified=None, measured=None, n=int(o.size), p_value=1.0,
                                  alternative="two-sided", validity="simulated",
                                  reason="k = 2" if num_classes == 2 else "fewer than 5 replaced labels per label")
    counts = np.bincount(o - 1, minlength=num_classes - 1)
    chi2 = float(((counts - expected) ** 2).sum() / expected)
    return conformance_record(name, "label flips", certified=1.0, measured=float(counts.max() / expected),
                              n=int(o.size), statistic=chi2, p_value=float(stats.chi2.sf(chi2, num_classes - 2)),
                              alternative="two-sided", validity="simulated")


def mixing_dispersion(counts: ArrayLike, samples: int, size: int) -> float:
    """D = Σ_j (c_j − Tℓ/n)² of one release's ``(n,)`` ``counts`` (T = ``samples`` mixtures of ℓ = ``size``)."""
    c = np.asarray(counts, np.float64).ravel()
    return float(((c - samples * size / c.size) ** 2).sum())


def mixing_dispersion_test(name: str, dispersion: float, *, releases: int, samples: int, size: int, records: int
                           ) -> dict[str, Any]:
    """Two-sided test that DPMix's mixtures are T independent uniform ℓ-subsets of the n records (Lee et al. 2019).

    ``dispersion``: D (``mixing_dispersion``) summed over R = ``releases`` independent releases of T = ``samples``
    mixtures of ℓ = ``size`` of the n = ``records``. Exact moments under H0: with X_ts = ``|S_t ∩ S_s|``
    (hypergeometric, mean ℓ²/n, variance v = ℓ·(ℓ/n)(1 − ℓ/n)(n − ℓ)/(n − 1)), D = Tℓ + Σ_{t≠s} X_ts − T²ℓ²/n, so
    E[D] = Tℓ(1 − ℓ/n) and, the X_ts being pairwise uncorrelated, Var[D] = 2T(T − 1)·v; D is read against the gamma
    law of those moments (level shown by simulation). Uneven mixing raises D. ``measured``: D / E[D].

    Raises:
        ValueError: R, T or ℓ < 1, n ≤ ℓ, or a negative D.
    """
    r, t, ell, n = releases, samples, size, records
    if r < 1 or t < 1 or ell < 1 or n <= ell or dispersion < 0:
        raise ValueError(f"mixing dispersion test {name!r}: need R, T, ℓ >= 1, n > ℓ and D >= 0, got {r}, {t}, "
                         f"{ell}, {n}, {dispersion}")
    v = ell * (ell / n) * (1 - ell / n) * (n - ell) / (n - 1)
    mean, var = r * t * ell * (1 - ell / n), r * 2.0 * t * (t - 1) * v
    if var <= 0:  # T = 1: D is a constant
        p = 1.0 if abs(dispersion - mean) <= 1e-9 * max(mean, 1.0) else 0.0
    else:
        shape, scale = mean * mean / var, var / mean
        p = 2 * min(float(stats.gamma.cdf(dispersion, shape, scale=scale)),
                    float(stats.gamma.sf(dispersion, shape, scale=scale)))
    return conformance_record(name, "inclusion dispersion", certified=1.0, measured=dispersion / mean,
                              n=r * n, statistic=float(dispersion), p_value=min(1.0, p), alternative="two-sided",
                              validity="simulated", releases=r, samples=t, mixture_degree=ell, records=n)


def limit_p_value(epsilon_at: Callable[[float], float], certified: float, *, floor: float = 1e-6,
                  steps: int = 10) -> float:
    """The p-value, in [``floor``, 1], of "the run spent at most ``certified``" (ε).

    The smallest α at which ``epsilon_at(α)``, a lower confidence limit of ε at confidence 1 − α (not falling as α
    grows) built from one-sided limits of the parameters (each at α/k, ε monotone in each), exceeds it. Valid at every
    level: under H0 the true parameters give ε ≤ certified, so the limit exceeds it only if some parameter's limit
    misses, with probability ≤ α. Bisection on log α in ``steps`` evaluations, rounded up (conservative).
    """
    if epsilon_at(1.0) <= certified:
        return 1.0
    if epsilon_at(floor) > certified:
        return floor
    lo, hi = math.log(floor), 0.0
    for _ in range(steps):
        mid = (lo + hi) / 2
        if epsilon_at(math.exp(mid)) > certified:
            hi = mid
        else:
            lo = mid
    return min(1.0, math.exp(hi))
