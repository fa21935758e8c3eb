"""Tests for the fast DPMix synthesis kernels (mechanisms.dpmix.mixing): same subsets as the plain rejection sampler,
exact repeat detection, and the byte and float mean-of-rows paths agreeing with an explicit mean."""

from __future__ import annotations

import torch
import torch.nn.functional as F

import mechanisms.dpmix.mixing as mixing
from mechanisms.dpmix.mixing import _rows_with_repeats, mean_of_rows, mix_release, sample_subsets


def _reference_subsets(n: int, size: int, count: int, generator: torch.Generator) -> torch.Tensor:
    """The textbook rejection sampler: redraw every row holding a repeat, re-checking all rows by sorting."""
    idx = torch.randint(n, (count, size), generator=generator)
    while True:
        s = idx.sort(dim=1).values
        bad = (s[:, 1:] == s[:, :-1]).any(dim=1).nonzero().flatten()
        if len(bad) == 0:
            return idx
        idx[bad] = torch.randint(n, (len(bad), size), generator=generator)


def test_subsets_equal_the_reference_sampler_draw_for_draw():
    # 30² > 4·200 would take the top-k path, so stay on rejection: 20² = 400 ≤ 800, with many redraws
    for n, size, count in [(200, 20, 3000), (1000, 31, 500), (60_000, 256, 200)]:
        ours = sample_subsets(n, size, count, generator=torch.Generator().manual_seed(n))
        ref = _reference_subsets(n, size, count, torch.Generator().manual_seed(n))
        assert torch.equal(ours, ref)


def test_repeat_detection_is_exact():
    g = torch.Generator().manual_seed(0)
    rows = torch.randint(50, (4000, 9), generator=g)
    s = rows.sort(dim=1).values
    expected = (s[:, 1:] == s[:, :-1]).any(dim=1)
    assert 0.2 < float(expected.float().mean()) < 0.9  # both kinds of rows occur
    for chunk_bytes in (1, 1000, 8 << 20):  # one row per block, a few rows, all rows
        assert torch.equal(_rows_with_repeats(rows, 50, chunk_bytes=chunk_bytes), expected)


def _records(n=300, d=20, k=4, grid=255):
    g = torch.Generator().manual_seed(1)
    x = torch.randint(0, grid + 1, (n, d), generator=g).float() / grid
    return torch.cat([x, F.one_hot(torch.randint(0, k, (n,), generator=g), k).float()], dim=1)


def test_mean_of_rows_byte_and_float_paths(monkeypatch):
    idx = sample_subsets(300, 7, 400, generator=torch.Generator().manual_seed(2))
    for grid in (255, 16):  # on the 1/255 grid: bytes; 1/16 (8×8 digits): float32
        data = _records(grid=grid)
        assert (mixing._bytes_with_scale(data, 1.0) is not None) == (grid == 255)
        expected = data.double()[idx].mean(1)
        torch.testing.assert_close(mean_of_rows(data, idx).double(), expected, rtol=0, atol=1e-6)
    # a build without FBGEMM's byte kernel falls back to float32
    data = _records()

    def missing(*args):
        raise RuntimeError("no such op")
    monkeypatch.setattr(torch.ops.quantized, "embedding_bag_byte_rowwise_offsets", missing, raising=False)
    torch.testing.assert_close(mean_of_rows(data, idx).double(), data.double()[idx].mean(1), rtol=0, atol=1e-6)


def test_release_of_8bit_images_is_mean_plus_noise():
    data = _records()
    x, y = data[:, :20], data[:, 20:]
    rx, ry, idx = mix_release(x, y, mixture_degree=5, num_samples=100, sigma=0.0,
                              generator=torch.Generator().manual_seed(3))
    torch.testing.assert_close(rx, x[idx].mean(1), rtol=0, atol=1e-6)
    torch.testing.assert_close(ry, y[idx].mean(1), rtol=0, atol=1e-6)
