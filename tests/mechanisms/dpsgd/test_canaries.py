"""White-box gradient canaries at every free coordinate (``GradientCanaries.every_coordinate``): placement in every
parameter tensor, the noise measured per tensor from its canary-free coordinates, and the request's checks."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from mechanisms.dpsgd.canaries import CanaryTracker
from mechanisms.dpsgd.canary_placement import REFERENCE_SHARE, GradientCanaries


def _params():
    return [torch.nn.Parameter(torch.zeros(40, 50)), torch.nn.Parameter(torch.zeros(10)),
            torch.nn.Parameter(torch.zeros(1))]


def _run(tracker, params, noise, steps=200, seed=0):
    """``steps`` noisy steps: the other records contribute nothing; tensor k draws N(0, noise[k]²) per coordinate."""
    gen = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        sums = {p: torch.zeros_like(p) for p in params}
        tracker.add(sums, 1.0)
        for p, s in zip(params, noise, strict=True):
            tracker.observe(p, sums[p] + s * torch.randn(p.shape, generator=gen), 1.0)
    return tracker.result()


def test_every_coordinate_holds_a_canary_or_a_reference():
    params = _params()
    tracker = CanaryTracker(GradientCanaries(0, seed=1, every_coordinate=True), params, sample_rate=0.2,
                            noise_multiplier=1.0)
    coords = [(id(p), int(i)) for p, (_, idx) in tracker.where.items() for i in idx]
    assert len(coords) == len(set(coords)) == sum(p.numel() for p in params)  # each coordinate once
    refs = np.bincount(tracker.owner[tracker.count:], minlength=3)
    canaries = np.bincount(tracker.owner[: tracker.count], minlength=3)
    assert refs.tolist() == [round(REFERENCE_SHARE * 2000), 1, 1]  # every tensor keeps a reference, at least one
    assert canaries.tolist() == [2000 - refs[0], 9, 0]  # a one-coordinate tensor is a reference only
    assert tracker.count == 2000 - refs[0] + 9
    # the canaries of the weight tensor sit at random positions, not at its start
    first = tracker.where[params[0]][1][: 50].numpy()
    assert first.max() > 1000


def test_noise_is_measured_per_tensor():
    """A tensor that draws half the noise is scored by the noise it really carries: its σ̂ is its own."""
    params = _params()
    request = GradientCanaries(0, seed=2, every_coordinate=True)
    out = _run(CanaryTracker(request, params, sample_rate=0.2, noise_multiplier=2.0), params, noise=(2.0, 1.0, 2.0))
    weight, bias, scalar = out["sigma_hat_by_tensor"]
    assert weight == pytest.approx(2.0, rel=0.03)
    assert bias == pytest.approx(1.0, rel=0.15)  # one reference coordinate, 200 steps
    assert scalar == pytest.approx(2.0, rel=0.15)
    assert out["steps"] == 200 and out["sample_rate"] == 0.2 and out["claimed_sigma"] == 2.0
    scores, coins = np.asarray(out["scores"]), np.asarray(out["included"])
    assert scores[coins == 1].mean() > scores[coins == 0].mean()


def test_requests_are_checked():
    with pytest.raises(ValueError, match="count must be 0"):
        GradientCanaries(5, seed=0, every_coordinate=True)
    with pytest.raises(ValueError, match="count >= 1"):
        GradientCanaries(0, seed=0)
    assert GradientCanaries(0, seed=0, every_coordinate=True).active
    assert not GradientCanaries(0, seed=0, public_size=10).active
    with pytest.raises(ValueError, match="need as many coordinates"):
        CanaryTracker(GradientCanaries(3000, seed=0), _params(), sample_rate=0.1, noise_multiplier=1.0)


def test_the_setting_takes_a_count_or_all_and_says_so():
    from attacks.canaries.canary import CanaryParams
    from bench.core.errors import ConfigError
    from bench.core.params import field_rows, parse

    assert parse(CanaryParams, {"gradient_canaries": "all"}, "attack_params.canary").gradient_canaries == "all"
    assert parse(CanaryParams, {"gradient_canaries": 7}, "attack_params.canary").gradient_canaries == 7
    with pytest.raises(ConfigError) as bad:
        parse(CanaryParams, {"gradient_canaries": -3}, "attack_params.canary")
    assert str(bad.value) == ("attack_params.canary.gradient_canaries = -3: input should be greater than or equal to 0 "
                              "or input should be 'all'")
    row = next(r for r in field_rows(CanaryParams) if r[0] == "gradient_canaries")
    assert row[1:4] == ("int | all", "5000", "[0, 1e+06]")
