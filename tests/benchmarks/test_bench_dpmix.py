"""pytest-benchmark: DPMix synthesis of T = 60,000 samples of ℓ = 256 distinct records out of n = 60,000 8-bit
images (MNIST-sized; synthetic pixels: the kernels do not look at the values). Target: under 2 s on CPU."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from mechanisms.dpmix.mixing import mix_release

N, ELL, T = 60_000, 256, 60_000


def test_bench_dpmix_synthesis_60k(benchmark):
    g = torch.Generator().manual_seed(0)
    x = (torch.randint(0, 256, (N, 784), generator=g) * (torch.rand(N, 784, generator=g) < 0.2)).float() / 255
    y = F.one_hot(torch.randint(0, 10, (N,), generator=g), 10).float()
    rx, ry, idx = benchmark.pedantic(
        mix_release, args=(x, y), kwargs=dict(mixture_degree=ELL, num_samples=T, sigma=0.0,
                                              generator=torch.Generator().manual_seed(1)), rounds=3, iterations=1)
    assert rx.shape == (T, 784) and ry.shape == (T, 10) and idx.shape == (T, ELL)
    rows = [0, T // 2, T - 1]
    torch.testing.assert_close(rx[rows], x[idx[rows]].mean(1), rtol=0, atol=1e-5)
