"""pytest-benchmark: one closed-form DPMix ε (Lee et al. 2019, Thm. 1) at MNIST settings (ℓ = 256, T = 10,000,
n = 60,000), the call ``dpmix_sigma`` bisects on. Target: about 0.3 s on CPU (it was a timing assert in
tests/mechanisms/test_accounting.py; speed is measured here, not asserted in unit tests)."""

from __future__ import annotations

import math

from mechanisms.dpmix_accounting import MAX_ORDER, dpmix_epsilon

MNIST = dict(mixture_degree=256, num_samples=10_000, num_records=60_000, d_x=784, d_y=10, delta=1 / 60_000)


def test_bench_dpmix_closed_form_epsilon(benchmark):
    eps = benchmark(dpmix_epsilon, sigma=1.2345, **MNIST)
    # finite, and never below the α = MAX_ORDER tail term log(1/δ)/(MAX_ORDER − 1) that no σ can beat
    assert math.isfinite(eps) and eps >= math.log(60_000) / (MAX_ORDER - 1)
