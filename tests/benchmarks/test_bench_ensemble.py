"""pytest-benchmark: one epoch of 16 cnn-small shadow models (256 examples each, batch 64), trained one after
another vs as one vectorised ensemble (bench.execution.ensemble)."""

from __future__ import annotations

import pytest
import torch

from bench.core.models import build_model
from bench.core.types import TrainSpec
from bench.execution.ensemble import init_model, train_ensemble, train_sequential

K, N = 16, 256
SPEC = TrainSpec(model="cnn-small", epochs=1, batch_size=64, lr=0.05, optimizer="sgd", momentum=0.9)


@pytest.fixture(scope="module")
def data():
    g = torch.Generator().manual_seed(0)
    return [(torch.rand(N, 1, 28, 28, generator=g), torch.randint(0, 10, (N,), generator=g)) for _ in range(K)]


@pytest.mark.benchmark(group="16 shadow cnn-small, 1 epoch")
@pytest.mark.parametrize("train", [train_sequential, train_ensemble], ids=["sequential", "ensemble"])
def test_bench_shadow_training(benchmark, data, train):
    seeds = list(range(K))

    def run():
        models = [init_model(lambda: build_model("cnn-small", (1, 28, 28), 10), s) for s in seeds]
        return train(models, data, SPEC, seeds, torch.device("cpu"))

    models = benchmark.pedantic(run, rounds=2, iterations=1)
    assert len(models) == K
