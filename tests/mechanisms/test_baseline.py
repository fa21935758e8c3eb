"""Tests for mechanisms.baseline: non-private training on real 8×8 digits."""

from __future__ import annotations

import pytest
import torch

from bench.core.training import evaluate
from bench.core.types import TrainedModel, TrainSpec
from mechanisms import MECHANISMS
from mechanisms.baseline import Baseline

CPU = torch.device("cpu")
SPEC = Baseline.spec(model="mlp", epochs=10, batch_size=32, lr=0.1, momentum=0.9)


def _fit(split, seed: int, spec: TrainSpec = SPEC) -> TrainedModel:
    return MECHANISMS.get("baseline")().fit(split.members, spec, target_epsilon=None, delta=1e-5, seed=seed,
                                            device=CPU)


@pytest.fixture(scope="module")
def fits(digits_split):
    """Two fits with seed 0 and one with seed 1, all on the same 300 members."""
    return {"a": _fit(digits_split, 0), "b": _fit(digits_split, 0), "c": _fit(digits_split, 1)}


def test_learns_digits_well_above_chance(fits, digits_split):
    # Chance is 10 % (10 roughly balanced classes). 8×8 digits are nearly linearly separable: scikit-learn's
    # "recognizing hand-written digits" example reaches ~97 % with an SVM trained on half the data. With
    # 300 images (~30 per class) a small MLP should be near 90 %; 0.8 leaves room for seed-to-seed
    # variation of a 10-epoch run while still being 8× chance.
    # With 397 test images the accuracy's sampling std is at most sqrt(.25/397) ≈ 0.025.
    acc = evaluate(fits["a"].model, digits_split.test.x, digits_split.test.y, device=CPU)["accuracy"]
    assert acc > 0.8
    # and it fits its own training data at least as well as unseen data (no label mix-up)
    train_acc = evaluate(fits["a"].model, digits_split.members.x, digits_split.members.y, device=CPU)["accuracy"]
    assert train_acc >= acc - 0.05


def test_training_loss_decreases(fits):
    hist = fits["a"].history
    assert len(hist) == SPEC.epochs
    assert all(torch.isfinite(torch.tensor(hist)))
    assert hist[-1] < hist[0]


def test_same_seed_gives_identical_weights(fits):
    sa, sb = fits["a"].model.state_dict(), fits["b"].model.state_dict()
    assert sa.keys() == sb.keys()
    for k in sa:
        assert torch.equal(sa[k], sb[k]), k


def test_different_seed_gives_different_weights(fits):
    sa, sc = fits["a"].model.state_dict(), fits["c"].model.state_dict()
    assert any(not torch.equal(sa[k], sc[k]) for k in sa)


def test_privacy_is_off_never_no_guarantee(fits):
    p = fits["a"].privacy
    assert p.describe() == "ε = ∞ (privacy off)" and p.off
    assert p.epsilon is None and p.delta is None
    assert p.guarantee == "none" and p.accountant == "none"
    assert fits["a"].release is None


def test_output_shape_and_build_matches(fits, digits_split):
    mech = MECHANISMS.get("baseline")()
    fresh = mech.build(digits_split.members.input_shape, 10, SPEC)
    trained = fits["a"].model
    # the architecture ``build`` returns can hold the trained weights (what the cache relies on)
    fresh.load_state_dict(trained.state_dict())
    x = digits_split.test.x[:7]
    trained.eval()
    fresh.eval()
    with torch.no_grad():
        out = trained(x)
        assert out.shape == (7, 10)
        assert torch.equal(out, fresh(x))
