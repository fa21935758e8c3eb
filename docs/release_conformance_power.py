"""Power and false-alarm rate of the release audits' conformance tests (``attacks.release_conformance``) at the ci
and default profiles' sizes, by simulating their sufficient statistics under the certified mechanism and under each
violation: per-pixel Σ noise² ~ s²·χ²_n (the exact law of iid Gaussian noise), the kept labels ~ Binomial(m, keep),
the replaced labels' offsets uniform, DPMix's inclusion counts from ``sample_subsets`` itself under H0 and otherwise
independent Binomial(T, rate_j) counts (for "a fifth of the records at twice the rate": 2r on n/5 records, r on the
rest, mean ℓ/n, the weighted draw without replacement to O(ℓ/n); uniform rates under the noise plants). A run
rejects when any of its conformance tests has p < 0.05/M, M = 15 (the run's Bonferroni family: the tests, the
measured ε and the audit's bounds). The shape, independence and measured-ε tests are left out (their power is not
what is measured here; their level is in tests/attacks/test_release_conformance.py and the runs).

Sizes: ci = digits (1, 8, 8), local m = 4000 canaries, label ε_y = 0.5 (ε = 2, label share ¼); DPMix n = 500, ℓ = 4,
T = 2000, R = 512 releases. default = MNIST (1, 28, 28), local m = 80,000, ε_y = 0.5 (ε = 1, share ½); DPMix
n = 10,000, ℓ = 16, T = 10,000, R = 64. Run: ``python docs/release_conformance_power.py [reps]``.

Measured (``python docs/release_conformance_power.py 100``, seed 0; runs rejected of 100, H0 of DPMix of 10):

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

import sys

import numpy as np
import torch
from scipy import stats

from attacks.audit.conformance import independence_test, noise_test, rate_test, shape_test
from attacks.audit.conformance_release import (
    image_noise_tests,
    label_flip_test,
    mixing_dispersion,
    mixing_dispersion_test,
    region_ids,
)
from attacks.release_conformance import SAMPLE_ROWS
from mechanisms.accounting.gaussian import randomized_response_keep
from mechanisms.dpmix.mixing import sample_subsets

LEVEL, K = 0.05 / 15, 10
SIZES = {"ci": {"shape": (1, 8, 8), "m": 4000, "n": 500, "ell": 4, "t": 2000, "r": 512},
         "default": {"shape": (1, 28, 28), "m": 80_000, "releases": 5, "n": 10_000, "ell": 16, "t": 10_000, "r": 64}}


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
    tests = image_noise_tests("x", ss, r * t, 1.0, shape) + [
        mixing_dispersion_test("d", d, releases=r, samples=t, size=ell, records=n)]
    return min(t["p_value"] for t in tests) < LEVEL


def _gaussian_rows(rng: np.random.Generator, rows: int, cols: int) -> np.ndarray:
    """The first ``rows`` noise rows a run's shape and independence tests read, under H0 (unit iid Gaussian)."""
    return rng.standard_normal((rows, cols))


def local_family(rng: np.random.Generator, size: dict) -> float:
    """Under the certified local mechanism, the smallest p-value of every deciding test of ``local_conformance``
    (noise pooled / regions / pixels, shape, independence, input scale, keep rate, replacements; releases per record
    is exact and p = 1 under H0). R releases pool R·m draws."""
    shape, m = size["shape"], size["m"] * size.get("releases", 1)
    d = int(np.prod(shape))
    keep = randomized_response_keep(0.5, K)
    kept = int(rng.binomial(m, keep))
    sample = _gaussian_rows(rng, min(size["m"], SAMPLE_ROWS), d)
    tests = image_noise_tests("n", rng.chisquare(m, d), m, 1.0, shape) + [
        shape_test("shape", sample, per_column=sample.shape[0] >= 1000), independence_test("independence", sample),
        rate_test("keep", "keep rate", kept, m, keep), label_flip_test("flips", rng.integers(1, K, m - kept), K),
        {"p_value": float(stats.norm.sf(rng.standard_normal()))}]  # the input scale: its z is N(0, 1) under H0
    return min(t["p_value"] for t in tests if t.get("deciding", True))


def dpmix_family(rng: np.random.Generator, size: dict, gen: torch.Generator) -> float:
    """Under the certified DPMix (its own ``sample_subsets``), the smallest p-value of every deciding test of
    ``MixingObserver.result``: image noise (pooled / regions / pixels), label noise, independence, inclusion
    dispersion, largest inclusion count (T, ℓ are exact: p = 1 under H0; the noise shape is shown, not deciding)."""
    n, ell, t, r, shape = size["n"], size["ell"], size["t"], size["r"], size["shape"]
    d = int(np.prod(shape))
    disp, largest = 0.0, 0
    for _ in range(r):
        counts = torch.bincount(sample_subsets(n, ell, t, generator=gen).flatten(), minlength=n).numpy()
        disp += mixing_dispersion(counts, t, ell)
        largest = max(largest, int(counts.max()))
    q = ell / n
    sample = _gaussian_rows(rng, min(t, SAMPLE_ROWS), d + K)
    tests = image_noise_tests("x", rng.chisquare(r * t, d), r * t, 1.0, shape) + [
        noise_test("y", float(rng.chisquare(r * t * K)), r * t * K, 1.0), independence_test("independence", sample),
        mixing_dispersion_test("d", disp, releases=r, samples=t, size=ell, records=n),
        {"p_value": min(1.0, r * n * float(stats.binom.sf(largest - 1, t, q)))}]
    return min(t["p_value"] for t in tests)


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
        upper = float(stats.beta.ppf(0.95, hits + 1, reps - hits)) if hits < reps else 1.0
        print(f"{mechanism} {name:8s} family false alarms {hits} of {reps} ({hits / reps:.3f}; 95 % upper {upper:.3f})",
              flush=True)


def main(reps: int) -> None:
    rng, gen = np.random.default_rng(0), torch.Generator().manual_seed(0)
    for name, size in SIZES.items():
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
