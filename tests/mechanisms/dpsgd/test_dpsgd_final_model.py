"""The final-model (hidden-state) scores of DP-SGD's gradient canaries (``GradientCanaries.final_model``): read from
θ_T − θ_0 alone, equal to the sum of each canary's noisy updates weighted by the momentum's step weights, and
refused for optimizers whose final model is not linear in the updates."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from mechanisms.dpsgd.canaries import CanaryTracker
from mechanisms.dpsgd.canary_placement import GradientCanaries


def _train(tracker, params, optimizer, *, steps, noise, others, batch, clip=1.0, seed=0):
    """``steps`` DP-SGD steps as ``mechanisms.dpsgd.fast.noisy_step`` takes them: the other records' clipped sum is
    ``others`` at every coordinate, N(0, (noise·C)²) is added, the update is the noisy sum / ``batch``. Returns the
    noisy sums, ``(steps, coordinates)`` per parameter, as the test saw them."""
    gen = torch.Generator().manual_seed(seed)
    seen = {p: [] for p in params}
    for _ in range(steps):
        sums = {p: torch.full_like(p, others) for p in params}
        tracker.add(sums, clip)
        for p in params:
            s = sums[p] + noise * clip * torch.randn(p.shape, generator=gen)
            tracker.observe(p, s, clip)
            seen[p].append(s.reshape(-1).clone())
            p.grad = s / batch
        optimizer.step()
    return {p: torch.stack(v).double().numpy() for p, v in seen.items()}


def test_without_noise_an_included_canary_scores_its_clipped_norm_at_every_step():
    """Hand case: plain SGD, q = 1, no noise, no other records: an included canary's coordinate moves by
    −lr·C/B per step, so its score is T (one clipped norm per step), an excluded canary's 0."""
    params = [torch.nn.Parameter(torch.randn(6, 5))]  # θ_0 is not 0: the score is a difference
    opt = torch.optim.SGD(params, lr=0.7)
    tracker = CanaryTracker(GradientCanaries(0, seed=3, every_coordinate=True, final_model=True), params,
                            sample_rate=1.0, noise_multiplier=0.0)
    tracker.final_setup(opt, expected_batch_size=4, max_grad_norm=2.0, ema_decay=None)
    _train(tracker, params, opt, steps=12, noise=0.0, others=0.0, batch=4, clip=2.0)
    out = tracker.result()
    scores, coins = np.asarray(out["scores"]), np.asarray(out["included"])
    assert coins.sum() and (1 - coins).sum()
    np.testing.assert_allclose(scores[coins == 1], 12.0, rtol=1e-5)
    np.testing.assert_allclose(scores[coins == 0], 0.0, atol=1e-5)
    assert out["threat_model"] == "hidden-state" and out["steps"] == 12


def test_momentum_score_is_the_weighted_sum_of_the_noisy_updates():
    """Heavy-ball momentum μ = 0.9: θ_T − θ_0 = −(lr/B)·Σ_t a_t·s_t with a_t = Σ_{s≥t} μ^{s−t}; the score is
    Σ_t a_t·s_t / (C·ā), computed here from the noisy sums the test itself drew, and the members' part and the
    noise's sd are the ones the test knows."""
    params = [torch.nn.Parameter(torch.zeros(30, 20)), torch.nn.Parameter(torch.zeros(7))]
    opt = torch.optim.SGD(params, lr=0.05, momentum=0.9)
    tracker = CanaryTracker(GradientCanaries(0, seed=4, every_coordinate=True, final_model=True), params,
                            sample_rate=0.3, noise_multiplier=1.5)
    tracker.final_setup(opt, expected_batch_size=10, max_grad_norm=1.0, ema_decay=None)
    steps = 40
    seen = _train(tracker, params, opt, steps=steps, noise=1.5, others=0.25, batch=10)
    out = tracker.result()
    a = np.array([sum(0.9**k for k in range(steps - t)) for t in range(steps)])
    expected = np.zeros(tracker.count)
    for p, (ids, idx) in tracker.where.items():
        keep = ids.numpy() < tracker.count
        expected[ids.numpy()[keep]] = (a @ seen[p][:, idx.numpy()[keep]]) / a.mean()
    np.testing.assert_allclose(out["scores"], expected, rtol=1e-4, atol=1e-4)  # float32 parameters
    assert out["members_sd"] == pytest.approx(0.0, abs=1e-9)  # the same 0.25 at every coordinate: no variation
    assert out["noise_sd"] == pytest.approx(1.5 * np.sqrt(np.sum((a / a.mean()) ** 2)), rel=0.1)
    scores, coins = np.asarray(out["scores"]), np.asarray(out["included"])
    # an included canary moves by about T·q clipped norms more than an excluded one
    assert scores[coins == 1].mean() - scores[coins == 0].mean() == pytest.approx(steps * 0.3, rel=0.2)


@pytest.mark.parametrize(("make", "ema", "message"), [
    (lambda p: torch.optim.Adam(p, lr=0.1), None, "plain or momentum SGD.*got Adam"),
    (lambda p: torch.optim.SGD(p, lr=0.1, weight_decay=1e-4), None, "weight_decay=0.0001"),
    (lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, nesterov=True), None, "nesterov=True"),
    (lambda p: torch.optim.SGD(p, lr=0.1), 0.99, "ema_decay"),
])
def test_optimizers_whose_final_model_is_not_linear_in_the_updates_are_refused(make, ema, message):
    params = [torch.nn.Parameter(torch.zeros(4, 4))]
    tracker = CanaryTracker(GradientCanaries(0, seed=5, every_coordinate=True, final_model=True), params,
                            sample_rate=0.5, noise_multiplier=1.0)
    with pytest.raises(ValueError, match=message):
        tracker.final_setup(make(params), expected_batch_size=4, max_grad_norm=1.0, ema_decay=ema)
