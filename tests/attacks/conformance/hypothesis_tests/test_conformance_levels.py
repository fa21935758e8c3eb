"""The level of the conformance tests whose validity is ``simulated`` (``attacks.conformance.hypothesis_tests``), at the
sizes DP-SGD's audit run gives them (``attacks.conformance.dpsgd``): R null runs of the certified mechanism (Poisson
sampling at q over T steps for n records; iid N(0, 1) reference noise, T steps × k sampled coordinates), each test's
rejection rate at α no more than α plus a 3-sd binomial margin, down to α = 0.002 (about the per-comparison level of a
run's Bonferroni family of ~12 tests at 5 %). Pure NumPy."""

from __future__ import annotations

import math

import numpy as np
import pytest

from attacks.conformance.hypothesis_tests.noise import independence_test, shape_test
from attacks.conformance.hypothesis_tests.sampling import dispersion_test

SIZES = {"ci": (700, 105, 1 / 7, 64 + 26 + 64 + 1),  # ci profile: MLP 64-1024-10, batch 100, 15 epochs
         "default": (10_500, 120, 1 / 3, 64 + 1)}  # default profile: ScatterNet + linear, batch 4,096, 40 epochs
ALPHAS = (0.05, 0.01, 0.002)


def _within_level(p_values: np.ndarray) -> list[tuple[float, float, float]]:
    """(α, rejection rate, allowed) where the rate exceeds α + 3·√(α(1 − α)/R); empty when none does."""
    r = p_values.size
    rows = [(a, float(np.mean(p_values < a)), a + 3 * math.sqrt(a * (1 - a) / r)) for a in ALPHAS]
    return [row for row in rows if row[1] > row[2]]


@pytest.mark.parametrize("size", sorted(SIZES))
def test_dispersion_holds_its_level(size):
    n, steps, q, _ = SIZES[size]
    rng = np.random.default_rng(1)
    counts = rng.binomial(steps, q, size=(2000, n))
    p = np.array([dispersion_test("d", c, steps, q)["p_value"] for c in counts])
    assert _within_level(p) == []


@pytest.mark.parametrize("size", sorted(SIZES))
def test_independence_and_shape_hold_their_level(size):
    _, steps, _, k = SIZES[size]
    rng = np.random.default_rng(2)
    ind, shape = [], []
    for _ in range(1000):
        x = rng.standard_normal((steps, k))
        ind.append(independence_test("i", x)["p_value"])
        shape.append(shape_test("s", x)["p_value"])
    assert _within_level(np.array(ind)) == []
    assert _within_level(np.array(shape)) == []
