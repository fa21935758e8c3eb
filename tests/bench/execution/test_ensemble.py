"""Tests for bench.execution.ensemble: the vectorised ensemble trains every model exactly as sequential training
does."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from bench.core.models import build_model
from bench.core.types import TrainSpec
from bench.execution.ensemble import choose_path, init_model, train_ensemble, train_sequential
from mechanisms import MECHANISMS

CPU = torch.device("cpu")
SGD = TrainSpec(model="cnn-small", epochs=2, batch_size=32, lr=0.05, optimizer="sgd", momentum=0.9)


def _data(k: int, n: int, shape=(1, 28, 28), seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    return [(torch.rand(n, *shape, generator=g), torch.randint(0, 10, (n,), generator=g)) for _ in range(k)]


def _models(seeds, name="cnn-small", shape=(1, 28, 28)):
    return [init_model(lambda: build_model(name, shape, 10), s) for s in seeds]


def _assert_same(a: list[nn.Module], b: list[nn.Module], rtol: float, atol: float) -> None:
    for ma, mb in zip(a, b, strict=True):
        for (name, pa), pb in zip(ma.named_parameters(), mb.parameters(), strict=True):
            torch.testing.assert_close(pb.detach(), pa.detach(), rtol=rtol, atol=atol, msg=name)


@pytest.mark.parametrize("spec,tol", [
    (SGD, 1e-5),
    # Adam divides by √v: float differences in tiny gradients are amplified, still far below the steps' size
    (TrainSpec(model="cnn-small", epochs=2, batch_size=32, lr=1e-2, optimizer="adam"), 1e-4),
])
def test_ensemble_equals_sequential(spec, tol):
    seeds = [3, 1, 4]
    data = _data(3, 80)  # 80 = 2·32 + 16: the last batch is short, as in sequential training
    seq = train_sequential(_models(seeds), data, spec, seeds, CPU)
    ens = train_ensemble(_models(seeds), data, spec, seeds, CPU)
    _assert_same(seq, ens, rtol=tol, atol=tol)
    init = _models(seeds)
    moved = max(float((p - q).abs().max()) for m, i in zip(seq, init, strict=True)
                for p, q in zip(m.state_dict().values(), i.state_dict().values(), strict=True))
    assert moved > 100 * tol  # training moved the weights far more than the tolerance


def test_datasets_of_different_sizes_are_grouped():
    seeds = [0, 1, 2]
    data = [_data(1, 64, seed=1)[0], _data(1, 40, seed=2)[0], _data(1, 64, seed=3)[0]]
    seq = train_sequential(_models(seeds), data, SGD, seeds, CPU)
    ens = train_ensemble(_models(seeds), data, SGD, seeds, CPU)
    _assert_same(seq, ens, rtol=1e-5, atol=1e-5)


def test_sequential_path_is_baseline_fit(digits_split):
    """init_model + train_sequential with seed s is exactly Baseline.fit(seed=s): shadows trained either way
    match the non-private target's training procedure."""
    spec = TrainSpec(model="mlp", epochs=2, batch_size=32, lr=0.05, optimizer="sgd", momentum=0.9)
    members = digits_split.members
    fit = MECHANISMS.get("baseline")().fit(members, spec, target_epsilon=None, delta=1e-5, seed=5, device=CPU)
    (ours,) = train_sequential(_models([5], "mlp", members.input_shape), [members], spec, [5], CPU)
    for a, b in zip(fit.model.state_dict().values(), ours.state_dict().values(), strict=True):
        assert torch.equal(a, b)


def test_rejects_mismatched_inputs_and_buffers():
    with pytest.raises(ValueError, match="one dataset and one seed"):
        train_ensemble(_models([0, 1]), _data(1, 8), SGD, [0, 1], CPU)
    bn = [nn.Sequential(nn.Flatten(), nn.Linear(784, 8), nn.BatchNorm1d(8), nn.Linear(8, 10)) for _ in range(2)]
    with pytest.raises(ValueError, match="buffers"):
        train_ensemble(bn, _data(2, 8), SGD, [0, 1], CPU)
    mixed = [build_model("mlp", (1, 28, 28), 10), build_model("mlp", (1, 28, 28), 10, hidden=16)]
    with pytest.raises(ValueError, match="one architecture"):
        train_ensemble(mixed, _data(2, 8), SGD, [0, 1], CPU)


def test_choose_path():
    assert choose_path("cpu") == "sequential"  # compute-bound: the ensemble measured 0.6-0.9x when idle
    assert choose_path(torch.device("cuda")) == "ensemble"
    assert choose_path("meta") == "sequential"
