"""pytest-benchmark: one cnn-small training step at batch 256, non-private vs DP-SGD (per-sample clipping and
noise, ``bk`` and ``vmap``). Compare the two groups' means in the saved JSON; CI gates the same-run ratio with
``bench perf --check``, not these absolute times."""

from __future__ import annotations

import pytest
import torch

from bench.core.models import build_model
from bench.runner.perf import _fast_step, _nonprivate_step


@pytest.fixture(scope="module")
def batch():
    g = torch.Generator().manual_seed(0)
    return torch.rand(256, 1, 28, 28, generator=g), torch.randint(0, 10, (256,), generator=g)


def _model():
    torch.manual_seed(0)
    return build_model("cnn-small", (1, 28, 28), 10)


@pytest.mark.benchmark(group="cnn-small step, batch 256")
def test_bench_nonprivate_step(benchmark, batch):
    benchmark(_nonprivate_step(_model(), *batch))


@pytest.mark.benchmark(group="cnn-small step, batch 256")
@pytest.mark.parametrize("mode", ["bk", "vmap"])
def test_bench_dpsgd_step(benchmark, batch, mode):
    model = _model()
    before = [p.detach().clone() for p in model.parameters()]
    benchmark(_fast_step(mode, model, *batch))
    assert any(not torch.equal(a, p) for a, p in zip(before, model.parameters(), strict=True))
