"""pytest-benchmark: one cnn-small training step at batch 256, non-private vs DP-SGD (per-sample clipping and
noise, ``bk`` and ``vmap``). The steps are those ``bench perf`` times (SGD at lr 0.01; DP-SGD at σ = 1, C = 1 through
``mechanisms.dpsgd.fast.dp_step``). Compare the two groups' means in the saved JSON; CI gates the same-run ratio
with ``bench perf --check``, not these absolute times."""

from __future__ import annotations

import pytest
import torch

from bench.core.models import build_model
from bench.perf.paths import nonprivate_step
from mechanisms.dpsgd.fast import dp_step, make_clipper


@pytest.fixture(scope="module")
def batch():
    g = torch.Generator().manual_seed(0)
    return torch.rand(256, 1, 28, 28, generator=g), torch.randint(0, 10, (256,), generator=g)


def _model():
    torch.manual_seed(0)
    return build_model("cnn-small", (1, 28, 28), 10)


def _dpsgd_step(mode, model, x, y):
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    clipper = make_clipper(mode, model)

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        dp_step(clipper, opt, x, y, noise_multiplier=1.0, max_grad_norm=1.0, expected_batch_size=len(x))
    return step


@pytest.mark.benchmark(group="cnn-small step, batch 256")
def test_bench_nonprivate_step(benchmark, batch):
    model = _model()
    before = [p.detach().clone() for p in model.parameters()]
    benchmark(nonprivate_step(model, *batch))
    assert any(not torch.equal(a, p) for a, p in zip(before, model.parameters(), strict=True))


@pytest.mark.benchmark(group="cnn-small step, batch 256")
@pytest.mark.parametrize("mode", ["bk", "vmap"])
def test_bench_dpsgd_step(benchmark, batch, mode):
    model = _model()
    before = [p.detach().clone() for p in model.parameters()]
    benchmark(_dpsgd_step(mode, model, *batch))
    assert any(not torch.equal(a, p) for a, p in zip(before, model.parameters(), strict=True))
