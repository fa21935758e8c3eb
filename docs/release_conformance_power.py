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

from attacks.audit.conformance import rate_test
from attacks.audit.conformance_release import (
    image_noise_tests,
    label_flip_test,
    mixing_dispersion,
    mixing_dispersion_test,
    region_ids,
)
from mechanisms.accounting.gaussian import randomized_response_keep
from mechanisms.dpmix.mixing import sample_subsets

LEVEL, K = 0.05 / 15, 10
SIZES = {"ci": {"shape": (1, 8, 8), "m": 4000, "n": 500, "ell": 4, "t": 2000, "r": 512},
         "default": {"shape": (1, 28, 28), "m": 80_000, "n": 10_000, "ell": 16, "t": 10_000, "r": 64}}


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
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 200)
