"""Power and false-alarm rate of the release audits' conformance tests.

Power and false-alarm rate of the release audits' conformance tests (``attacks.conformance.local``) at the ci
and default profiles' sizes, by simulating their sufficient statistics under the certified mechanism and under each
violation: per-pixel Σ noise² ~ s²·χ²_n (the exact law of iid Gaussian noise), the kept labels ~ Binomial(m, keep),
the replaced labels' offsets uniform, DPMix's inclusion counts from ``sample_subsets`` itself under H0 and otherwise
independent Binomial(T, rate_j) counts (for "a fifth of the records at twice the rate": 2r on n/5 records, r on the
rest, mean ℓ/n, the weighted draw without replacement to O(ℓ/n); uniform rates under the noise plants). A run
rejects when any of its conformance tests has p < 0.05/M, M = 17 (the run's Bonferroni family at ci size: local
noise's 10 tests, its measured ε and its audit's analyses; DPMix's are 16). The shape, independence and measured-ε
tests are left out of the power rows (their power is not what is measured here; their level is in the family rows,
tests/attacks/conformance/hypothesis_tests/test_release_conformance.py and the runs).

Sizes: ci = digits (1, 8, 8), local m = 4000 canaries, label ε_y = 0.5 (ε = 2, label share ¼); DPMix n = 500, ℓ = 4,
T = 2000, R = 512 releases. default = MNIST (1, 28, 28), local m = 80,000, ε_y = 0.5 (ε = 1, share ½); DPMix
n = 10,000, ℓ = 16, T = 10,000, R = 64. Run: ``python -m scripts.release_conformance_power [reps]``.

Measured (``python -m scripts.release_conformance_power 100``, seed 0; runs rejected of 100, H0 of DPMix of 10):

=====================  ==============  ==============  ===================  ===================
plant                  local ci        local default   DPMix ci             DPMix default
=====================  ==============  ==============  ===================  ===================
none (false alarms)    0.02            0.00            0.0 (of 10)          0.0 (of 10)
σ × 0.95 overall       1.00            1.00            1.00                 1.00
σ × 0.8 in one region  1.00            1.00            1.00                 1.00
keep rate × 1.05       0.11            1.00            —                    —
a fifth at 2× rate     —               —               1.00                 1.00
=====================  ==============  ==============  ===================  ===================
"""

from __future__ import annotations

import math
import sys

import numpy as np
import torch
from scipy import stats

from attacks.analysis.statistics.confidence import clopper_pearson_upper
from attacks.conformance.accountants.analytic_gaussian import rr_keep as randomized_response_keep
from attacks.conformance.hypothesis_tests.mixing import mixing_weight_test, weight_spread_test
from attacks.conformance.hypothesis_tests.noise import independence_test, noise_test, shape_test
from attacks.conformance.hypothesis_tests.release import (
    image_noise_tests,
    label_flip_test,
    mixing_dispersion,
    mixing_dispersion_test,
    region_ids,
)
from attacks.conformance.hypothesis_tests.sampling import rate_test
from attacks.conformance.local import SAMPLE_ROWS
from mechanisms.dpmix.mixing import sample_subsets

LEVEL, K = 0.05 / 17, 10
SIZES = {"ci": {"shape": (1, 8, 8), "m": 4000, "n": 500, "ell": 4, "t": 2000, "r": 512, "m_dpmix": 16, "epsilon": 2.0,
                "share": 0.25},
         "default": {"shape": (1, 28, 28), "m": 80_000, "releases": 5, "n": 10_000, "ell": 16, "t": 10_000, "r": 64,
                     "m_dpmix": 32, "epsilon": 1.0, "share": 0.5}}


def local_reject(rng: np.random.Generator, size: dict, plant: str) -> bool:
    shape, m = size["shape"], size["m"]
    factor = np.ones(int(np.prod(shape)))
    if plant == "sigma 0.95":
        factor[:] = 0.95
    if plant == "region 0.8":
        factor[region_ids(shape) == 5] = 0.8
    ss = factor**2 * rng.chisquare(m, factor.size)
    keep = randomized_response_keep(0.5, K) * (1.05 if plant == "keep +5%" else 1.0)
    kept = int(rng.binomial(m, keep))
    tests = image_noise_tests("n", ss, m, 1.0, shape) + [
        rate_test("keep", "keep rate", kept, m, randomized_response_keep(0.5, K)),
        label_flip_test("flips", rng.integers(1, K, m - kept), K)]
    return min(t["p_value"] for t in tests) < LEVEL


def dpmix_reject(rng: np.random.Generator, size: dict, plant: str, gen: torch.Generator) -> bool:
    n, ell, t, r, shape = size["n"], size["ell"], size["t"], size["r"], size["shape"]
    factor = np.ones(int(np.prod(shape)))
    if plant == "sigma 0.95":
        factor[:] = 0.95
    if plant == "region 0.8":
        factor[region_ids(shape) == 5] = 0.8
    ss = factor**2 * rng.chisquare(r * t, factor.size)
    d = 0.0
    for _ in range(r):  # H0: DPMix's own subsets; the noise plants: uniform independent counts (only σ differs)
        if plant.startswith("none"):
            counts = torch.bincount(sample_subsets(n, ell, t, generator=gen).flatten(), minlength=n).numpy()
        else:
            rate = np.full(n, ell / n / (1.2 if plant == "fifth at 2x" else 1.0))
            if plant == "fifth at 2x":
                rate[: n // 5] *= 2
            counts = rng.binomial(t, rate)
        d += mixing_dispersion(counts, t, ell)
    tests = image_noise_tests("x", ss, r * t, 1.0, shape, alternative="two-sided") + [
        mixing_dispersion_test("d", d, releases=r, samples=t, size=ell, records=n)]
    return min(t["p_value"] for t in tests) < LEVEL


def _gaussian_rows(rng: np.random.Generator, rows: int, cols: int) -> np.ndarray:
    """The first ``rows`` noise rows a run's shape and independence tests read, under H0 (unit iid Gaussian)."""
    return rng.standard_normal((rows, cols))


def local_family(rng: np.random.Generator, size: dict) -> float:
    """Under the certified local mechanism, the smallest p-value of every deciding test of ``local_conformance``.

    Noise pooled / regions / pixels, shape, independence, input scale (two-sided), keep rate, replacements; releases per
    record and the declared ε are exact and p = 1 under H0. R releases pool R·m draws.
    """
    shape, m = size["shape"], size["m"] * size.get("releases", 1)
    d = int(np.prod(shape))
    keep = randomized_response_keep(0.5, K)
    kept = int(rng.binomial(m, keep))
    sample = _gaussian_rows(rng, min(size["m"], SAMPLE_ROWS), d)
    tests = image_noise_tests("n", rng.chisquare(m, d), m, 1.0, shape) + [
        shape_test("shape", sample, per_column=sample.shape[0] >= 1000), independence_test("independence", sample),
        rate_test("keep", "keep rate", kept, m, keep), label_flip_test("flips", rng.integers(1, K, m - kept), K),
        {"p_value": 2 * float(stats.norm.sf(abs(rng.standard_normal())))}]  # the input scale: z ~ N(0, 1) under H0
    return min(t["p_value"] for t in tests if t.get("deciding", True))


def dpmix_family(rng: np.random.Generator, size: dict, gen: torch.Generator) -> float:
    """Under the certified DPMix (its own ``sample_subsets``).

    The smallest p-value of every deciding test of ``MixingObserver.result`` (``attacks.conformance.dpmix``): image
    noise (pooled / regions / pixels) and label noise, both two-sided, independence, inclusion dispersion, largest
    inclusion count, the mixing weight (its z is N(0, 1) under H0) and the weights' spread (χ² with as many degrees of
    freedom as the held canaries' inclusions, ``spread_dimensions``) (T, ℓ and the declared ε are exact: p = 1 under H0;
    the noise shape is shown, not deciding).
    """
    n, ell, t, r, shape = size["n"], size["ell"], size["t"], size["r"], size["shape"]
    d = int(np.prod(shape))
    disp, largest = 0.0, 0
    for _ in range(r):
        counts = torch.bincount(sample_subsets(n, ell, t, generator=gen).flatten(), minlength=n).numpy()
        disp += mixing_dispersion(counts, t, ell)
        largest = max(largest, int(counts.max()))
    q = ell / n
    sample = _gaussian_rows(rng, min(t, SAMPLE_ROWS), d + K)
    dims = spread_dimensions(size)
    tests = image_noise_tests("x", rng.chisquare(r * t, d), r * t, 1.0, shape, alternative="two-sided") + [
        noise_test("y", float(rng.chisquare(r * t * K)), r * t * K, 1.0, alternative="two-sided"),
        independence_test("independence", sample),
        mixing_dispersion_test("d", disp, releases=r, samples=t, size=ell, records=n),
        {"p_value": min(1.0, r * n * float(stats.binom.sf(largest - 1, t, q)))},
        mixing_weight_test("w", float(rng.standard_normal()), 1.0, 1 / ell),
        weight_spread_test("spread", float(rng.chisquare(dims)), dims)]
    return min(t["p_value"] for t in tests)


def spread_dimensions(size: dict) -> int:
    """The weights' spread test's degrees of freedom.

    The held canaries' inclusions over the R releases, R·T·ℓ·(m/2)/n in expectation (``m`` canary slots per release,
    half holding their canary).
    """
    return round(size["r"] * size["t"] * size["ell"] * size["m_dpmix"] / 2 / size["n"])


def slot_shift(size: dict) -> float:
    """‖z − c‖² whitened by the calibrated σ_x, σ_y at the profile's ε, over ℓ².

    The squared shift of a held canary at weight 1/ℓ (``dpmix_canary``: z is 1 on half the pixels and labelled e_b, c
    the 0-image labelled e_a).
    """
    from mechanisms.accounting.dpmix import dpmix_sigma

    d, scale = int(np.prod(size["shape"])), math.sqrt(2 / int(np.prod(size["shape"])))
    sigma = dpmix_sigma(target_epsilon=size["epsilon"], mixture_degree=size["ell"], num_samples=size["t"],
                        num_records=size["n"], d_x=d, d_y=K, delta=1e-5, sigma_y_scale=scale)
    return ((d // 2) / sigma**2 + 2 / (scale * sigma) ** 2) / size["ell"] ** 2


def weights_reject(rng: np.random.Generator, size: dict, plant: str, shift: float) -> bool:
    """The weights' plants at the profile's size (the audit design's held canaries).

    ``half at 2/ℓ`` (half of each recorded subset at weight 2/ℓ, the other half at 0: every held canary's inclusion off
    by ±1/ℓ, its squared shift ``shift`` added to the spread's χ², noncentral) and ``one in four at 2/ℓ`` (a quarter of
    them at 2/ℓ, the rest at 2/(3ℓ): the mean weight still 1/ℓ).
    """
    dims = spread_dimensions(size)
    off = 1.0 if plant == "half at 2/ℓ" else (0.25 * 1.0 + 0.75 * (1 / 3) ** 2)  # mean of (Δw·ℓ)²
    spread = weight_spread_test("s", float(rng.noncentral_chisquare(dims, dims * off * shift)), dims)
    return spread["p_value"] < LEVEL


def family(mechanism: str, reps: int, sizes: tuple[str, ...] = tuple(SIZES)) -> None:
    """False alarms of the whole family under the certified mechanism: runs with a deciding p below 0.05/M."""
    rng, gen = np.random.default_rng(1), torch.Generator().manual_seed(1)
    for name in sizes:
        size = SIZES[name]
        hits = 0
        for rep in range(1, reps + 1):
            hits += (local_family(rng, size) if mechanism == "local" else dpmix_family(rng, size, gen)) < LEVEL
            if rep % 100 == 0 and rep < reps:
                print(f"{mechanism} {name:8s} {hits} of {rep} so far", flush=True)
        upper = clopper_pearson_upper(hits, reps, 1 - 0.95)
        print(f"{mechanism} {name:8s} family false alarms {hits} of {reps} ({hits / reps:.3f}; 95 % upper {upper:.3f})",
              flush=True)


def scale_reject(rng: np.random.Generator, size: dict, scale: float) -> bool:
    """Local noise whose records enter at ``scale``·x.

    (or ``another``: each released as another record's image, scale ≈ 0.) The two-sided regression z of the R·m releases
    on their records, N((s − 1)·√(R·m)/σ, 1), σ at the profile's ε.
    """
    from mechanisms.accounting.gaussian import local_record_sigma

    sigma, _ = local_record_sigma(target_epsilon=size["epsilon"], delta=1e-5, label_share=size["share"],
                                  num_classes=K)
    draws = size["m"] * size.get("releases", 1)
    z = rng.standard_normal() + (scale - 1) * math.sqrt(draws) / sigma
    return 2 * float(stats.norm.sf(abs(z))) < LEVEL


def main(reps: int) -> None:
    rng, gen = np.random.default_rng(0), torch.Generator().manual_seed(0)
    for name, size in SIZES.items():
        for label, scale in (("input scale 0.9", 0.9), ("input scale 1.1", 1.1), ("another record's image", 0.0)):
            rate = np.mean([scale_reject(rng, size, scale) for _ in range(reps)])
            print(f"local {name:8s} {label:22s} rejected {rate:.3f} of {reps}")
        shift = slot_shift(size)
        for plant in ("half at 2/ℓ", "one in four at 2/ℓ"):
            rate = np.mean([weights_reject(rng, size, plant, shift) for _ in range(reps)])
            print(f"dpmix {name:8s} {plant:22s} rejected {rate:.3f} of {reps} (slot shift² {shift:.3g})")
        for plant in ("none (false alarms)", "sigma 0.95", "region 0.8", "keep +5%"):
            rate = np.mean([local_reject(rng, size, plant) for _ in range(reps)])
            print(f"local {name:8s} {plant:20s} rejected {rate:.3f} of {reps}")
        for plant in ("none (false alarms)", "sigma 0.95", "region 0.8", "fifth at 2x"):
            dreps = max(reps // 10, 10) if plant.startswith("none") else reps  # an H0 rep draws R·T real subsets
            rate = np.mean([dpmix_reject(rng, size, plant, gen) for _ in range(dreps)])
            print(f"dpmix {name:8s} {plant:20s} rejected {rate:.3f} of {dreps}")


if __name__ == "__main__":
    torch.set_num_threads(1)  # sample_subsets: one thread (the runs' own setting), no spinning on a shared machine
    if len(sys.argv) > 1 and sys.argv[1] == "family":  # family local|dpmix [REPS [ci|default]]
        family(sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 1000, tuple(sys.argv[4:]) or tuple(SIZES))
    else:
        main(int(sys.argv[1]) if len(sys.argv) > 1 else 200)
