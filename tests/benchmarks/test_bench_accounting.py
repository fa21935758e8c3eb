"""pytest-benchmark: one DPMix ε at MNIST settings (ℓ = 256, T = 10,000, n = 60,000) by the closed form (Lee et al.
2019, Thm. 1; about 0.02 s, the bracket of every calibration) and by the tight PLD accountant (a fresh σ each round,
so the memoised PLD is rebuilt: the call ``dpmix_sigma`` solves on, up to about a second). Speed is measured here, not
asserted in unit tests."""

from __future__ import annotations

import itertools
import math

from mechanisms.accounting.dpmix import dpmix_epsilon
from mechanisms.accounting.dpmix_closed_form import MAX_ORDER

MNIST = dict(mixture_degree=256, num_samples=10_000, num_records=60_000, d_x=784, d_y=10, delta=1 / 60_000)


def test_bench_dpmix_closed_form_epsilon(benchmark):
    eps = benchmark(dpmix_epsilon, sigma=1.2345, method="closed_form", **MNIST)
    # finite, and never below the α = MAX_ORDER tail term log(1/δ)/(MAX_ORDER − 1) that no σ can beat
    assert math.isfinite(eps) and eps >= math.log(60_000) / (MAX_ORDER - 1)


def test_bench_dpmix_pld_epsilon(benchmark):
    sigmas = (1.2345 + 1e-6 * i for i in itertools.count())
    eps = benchmark(lambda: dpmix_epsilon(sigma=next(sigmas), **MNIST))
    assert 0 < eps < dpmix_epsilon(sigma=1.2345, method="closed_form", **MNIST)
