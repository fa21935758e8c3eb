"""Tests for the fast DPMix synthesis kernels (mechanisms.dpmix.mixing): same subsets as the plain rejection sampler,
exact repeat detection, the byte and float mean-of-rows paths agreeing with an explicit mean, and the reorganised
byte packing and record check equal to their straightforward forms."""

from __future__ import annotations

import math

import pytest
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


def test_byte_packing_in_small_blocks_equals_the_one_block_packing():
    """``_bytes_with_scale`` packs in reused scratch blocks; the bytes equal the straightforward one-block packing
    (scale 255, round, clamp) for any block size, and one value off the 1/255 grid anywhere refuses the whole data."""
    data = _records(n=1000)
    scale = torch.tensor([0.25, 0.0]).view(torch.uint8)
    plain = torch.cat([(data * 255).round().clamp(0, 255).to(torch.uint8), scale.expand(len(data), 8)], 1)
    for rows in (1, 7, 256, 5000):
        assert torch.equal(mixing._bytes_with_scale(data, 0.25, rows=rows), plain)
        assert torch.equal(mixing._bytes_with_scale([data[:, :20], data[:, 20:]], 0.25, rows=rows), plain)
    for i in (0, 500, 999):  # in the first, a middle and the last block
        off = data.clone()
        off[i, 3] = 0.5001
        assert mixing._bytes_with_scale(off, 0.25, rows=256) is None


def test_means_of_column_blocks_equal_the_means_of_their_concatenation(monkeypatch):
    """``mix_release`` hands ``mean_of_rows`` its features and labels as two column blocks, never joined on the byte
    path; the means are the bits of the joined data's, on the byte path, the float path, an empty label block (the
    per-class release) and a build without the byte kernel."""
    idx = sample_subsets(300, 7, 400, generator=torch.Generator().manual_seed(5))
    for grid in (255, 16):
        data = _records(grid=grid)
        for cut in (20, 24):  # features | labels, and everything | no label columns
            assert torch.equal(mean_of_rows([data[:, :cut], data[:, cut:]], idx), mean_of_rows(data, idx))
    data = _records()

    def missing(*args):
        raise RuntimeError("no such op")
    monkeypatch.setattr(torch.ops.quantized, "embedding_bag_byte_rowwise_offsets", missing, raising=False)
    assert torch.equal(mean_of_rows([data[:, :20], data[:, 20:]], idx), mean_of_rows(data, idx))


def test_record_check_accepts_and_refuses_what_the_element_wise_check_does():
    """``check_records`` decides by min/max first; it accepts exactly the data every element of which is allowed
    and names the first bad value otherwise (NaN included, which min/max propagate)."""
    data = _records()
    x, y = data[:, :20].clone(), data[:, 20:].clone()
    mixing.check_records(x, y)
    mixing.check_records(torch.zeros(0, 20), torch.zeros(0, 4))  # nothing to check
    mixing.check_records(x, torch.zeros(len(x), 0))  # no label part (per-class mixing)
    for what, bad_x, bad_y, value in (("feature", 1.5, None, "1.5"), ("feature", -0.25, None, "-0.25"),
                                      ("feature", math.nan, None, "nan"), ("label", None, math.nan, "nan"),
                                      ("label sum", None, 0.5, "0.5")):
        bx, by = x.clone(), y.clone()
        if bad_x is not None:
            bx[7, 3] = bad_x
        else:
            by[7] = torch.tensor([bad_y, 0.0, 0.0, 0.0])
        with pytest.raises(ValueError, match=rf"dpmix: {what} {value} of record 7 is not allowed"):
            mixing.check_records(bx, by)
