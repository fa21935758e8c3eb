"""Tests for mechanisms.dpsgd.side_by_side: R DP-SGD runs trained side by side give the models R calls of the
mechanism's own ``fit`` give (same seeds, data, θ_0 and public n) to float tolerance, on real digits."""

from __future__ import annotations

import pytest
import torch

from bench.core.data import ArrayDataset, concat
from mechanisms.base import InitialModel, Weights
from mechanisms.dpsgd.mechanism import DPSGD
from mechanisms.dpsgd.side_by_side import linear_head

CPU = torch.device("cpu")
pytestmark = pytest.mark.usefixtures("one_thread")


def _runs_and_fits(split, spec, *, target_epsilon):
    """The side-by-side heads and, per run, the head ``fit`` trains: 4 runs, the canary in runs 0 and 2."""
    base = split.members
    canary = ArrayDataset(torch.zeros(1, *base.input_shape), torch.tensor([3]), base.num_classes, base.name)
    mech = DPSGD()
    torch.manual_seed(123)  # θ_0: another draw than any run's own initialisation
    initial = InitialModel(Weights(mech.build(base.input_shape, base.num_classes, spec).state_dict()),
                           public_size=len(base) + 1)
    included, seeds = (True, False, True, False), (11, 12, 13, 14)
    heads, privacy, params = mech.fit_runs(base, canary, spec, included=included, seeds=seeds,
                                           target_epsilon=target_epsilon, delta=1e-5, initial=initial, device=CPU)
    fits = []
    for inc, seed in zip(included, seeds, strict=True):
        trained = mech.fit(concat(base, canary) if inc else base, spec, target_epsilon=target_epsilon, delta=1e-5,
                           seed=seed, device=CPU, audit=initial)
        assert trained.params == params and trained.privacy.epsilon == pytest.approx(privacy.epsilon)
        fits.append(linear_head(trained.model)[1])
    return heads, fits


@pytest.mark.parametrize(("model", "batch_size", "momentum"), [
    ("linear", 10_000, 0.0),  # q = 1, plain SGD: the anchor's setting
    ("linear", 100, 0.9),  # q = 1/4 Poisson batches, heavy-ball momentum
    ("scatternet-linear", 100, 0.0),  # a fixed ScatterNet front (the default profile's model)
])
def test_side_by_side_runs_equal_single_fits(digits_split, model, batch_size, momentum):
    spec = DPSGD.spec(model=model, epochs=4, batch_size=batch_size, lr=0.5, optimizer="sgd", momentum=momentum,
                      params={"max_grad_norm": 1.0, "noise_multiplier": 1.5})
    heads, fits = _runs_and_fits(digits_split, spec, target_epsilon=2.0)
    for r, head in enumerate(fits):
        torch.testing.assert_close(heads.weight[r], head.weight.detach(), atol=2e-6, rtol=1e-5)
        torch.testing.assert_close(heads.bias[r], head.bias.detach(), atol=2e-6, rtol=1e-5)
    # the runs differ (their own noise and coins): equality above is not that of one model copied R times
    assert (heads.weight[0] - heads.weight[1]).abs().max() > 1e-2


def test_side_by_side_calibrates_like_fit(digits_split):
    """σ calibrated to a target ε (add/remove, Opacus' PRV accountant) by the same code in both."""
    spec = DPSGD.spec(model="linear", epochs=3, batch_size=10_000, lr=0.5, optimizer="sgd",
                      params={"max_grad_norm": 1.0, "relation": "add-remove"})
    heads, fits = _runs_and_fits(digits_split, spec, target_epsilon=4.0)
    for r, head in enumerate(fits):
        torch.testing.assert_close(heads.weight[r], head.weight.detach(), atol=2e-6, rtol=1e-5)


def test_linear_head_refuses_a_hidden_layer():
    from bench.core.models import build_model

    with pytest.raises(ValueError, match="only trainable layer is a final nn.Linear"):
        linear_head(build_model("mlp", (1, 8, 8), 10))
