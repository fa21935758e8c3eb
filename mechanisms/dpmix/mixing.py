"""DPMix's mixing (Lee, Kim, Lee, Suh, ISIT 2019).

Uniform ℓ-subsets of the records, their means by one fused kernel, and the noisy release built from them. The mechanism
(accounting, learners) is ``mechanisms.dpmix.mechanism``.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F


def sample_subsets(n: int, size: int, count: int, *, generator: torch.Generator) -> torch.Tensor:
    """``(count, size)`` int64: ``count`` independent uniform ``size``-subsets of ``range(n)``, rows without repeats.

    Rejection sampling of rows drawn with replacement (exact and fast when size² ≪ n), else a Gumbel top-k over all n.

    Raises:
        ValueError: if ``size`` (ℓ) is not in [1, n].
    """
    if not 1 <= size <= n:
        raise ValueError(f"mixture degree {size} must be in [1, {n}] (the number of records)")
    if size * size > 4 * n:
        return torch.rand(count, n, generator=generator).topk(size, dim=1).indices
    idx = torch.randint(n, (count, size), generator=generator)
    check = torch.arange(count)  # rows not yet known to be repeat-free; a good row is never redrawn
    while True:
        bad = check[_rows_with_repeats(idx[check], n)]
        if len(bad) == 0:
            return idx
        idx[bad] = torch.randint(n, (len(bad), size), generator=generator)
        check = bad


def _rows_with_repeats(rows: torch.Tensor, n: int, chunk_bytes: int = 8 << 20) -> torch.Tensor:
    """``(R,)`` bool: which rows of ``rows (R, ℓ)`` (values in [0, n)) hold a repeated value.

    Each row scatters its positions 0..ℓ-1 into a scratch row of length n and gathers them back: a position
    reads another position's stamp exactly when its value occurs twice. O(R·ℓ), no sort, no zeroing.
    """
    r, size = rows.shape
    dtype = torch.int16 if size <= torch.iinfo(torch.int16).max else torch.int32
    c = max(1, min(r, chunk_bytes // (dtype.itemsize * n)))
    scratch = torch.empty(c, n, dtype=dtype)
    stamp = torch.arange(size, dtype=dtype).expand(c, size).contiguous()
    out = torch.empty(r, dtype=torch.bool)
    for i in range(0, r, c):
        part = rows[i : i + c]
        buf, pos = scratch[: len(part)], stamp[: len(part)]
        buf.scatter_(1, part, pos)
        out[i : i + c] = (buf.gather(1, part) != pos).any(dim=1)
    return out


def _within_unit(t: torch.Tensor) -> bool:
    """Every value of ``t`` in [0, 1] (none NaN): by its min and max, which NaN propagates into."""
    if t.numel() == 0:
        return True
    lo, hi = torch.aminmax(t)
    return 0 <= float(lo) and float(hi) <= 1


def check_records(x: torch.Tensor, y: torch.Tensor) -> None:
    """The accountant's precondition: features ``x (n, d_x)`` in [0, 1], label rows ``y (n, d_y)`` distributions.

    Replacing a record then moves a mean of ℓ by at most √(d_x + 2)/ℓ; ``d_y`` = 0: no label part (per-class mixing).

    Raises:
        ValueError: a value outside [0, 1] (or NaN), or a label row not summing to 1 (naming the first, and its record).
    """
    sums = y.double().sum(1) if y.shape[1] else torch.ones(len(y), dtype=torch.float64)  # per-class: no label part
    if _within_unit(x) and _within_unit(y) and bool(((sums - 1).abs() <= 1e-6).all()):
        return
    for what, t, bad in (("feature", x, (x < 0) | (x > 1) | x.isnan()), ("label", y, (y < 0) | (y > 1) | y.isnan()),
                         ("label sum", sums[:, None], (sums[:, None] - 1).abs() > 1e-6)):
        if bad.any():
            i, j = (int(v) for v in torch.nonzero(bad)[0])
            raise ValueError(f"dpmix: {what} {float(t[i, j])!r} of record {i} is not allowed; DPMix's sensitivity "
                             f"needs features in [0, 1] and one-hot (or soft, summing to 1) labels")


def mix_release(
    x: torch.Tensor, y_onehot: torch.Tensor, *, mixture_degree: int, num_samples: int, sigma: float,
    generator: torch.Generator, sigma_y: float | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The DPMix release: means of ℓ = ``mixture_degree`` distinct records of ``x (n, d_x)``, ``y_onehot (n, d_y)``.

    Plus N(0, σ_x²) per feature (``sigma``) and N(0, σ_y²) per label coordinate (``sigma_y``, default ``sigma``); T =
    ``num_samples``; records in [0, 1], label rows summing to 1 (else ``check_records``'s ValueError). Returns
    ``(T, d_x)`` features, ``(T, d_y)`` labels and the ``(T, ℓ)`` subsets (secret: tests' and attacks' truth).
    """
    check_records(x, y_onehot)
    n = x.shape[0]
    idx = sample_subsets(n, mixture_degree, num_samples, generator=generator)
    noisy = torch.randn((num_samples, x.shape[1] + y_onehot.shape[1]), generator=generator).mul_(sigma)
    if sigma_y is not None and sigma_y != sigma:
        noisy[:, x.shape[1]:] *= sigma_y / sigma
    # = mean + σ·N(0, 1), the same draws as before; [x, y] as float32 column blocks, joined only if the float path
    # needs them (the byte path packs each block into its columns)
    noisy += mean_of_rows([x.to(torch.float32), y_onehot.to(torch.float32)], idx)
    return noisy[:, : x.shape[1]], noisy[:, x.shape[1] :], idx


def mean_of_rows(data: torch.Tensor | Sequence[torch.Tensor], idx: torch.Tensor) -> torch.Tensor:
    """``(T, d)`` means of the rows ``idx (T, ℓ)`` of ``data (n, d)`` (or of its column blocks ``[(n, d₁), ...]``).

    One fused ``embedding_bag`` kernel, no ``(T, ℓ, d)`` intermediate. Data on the 1/255 grid are read as bytes
    (FBGEMM, exact, float32 sums); other data in their dtype.
    """
    t, ell = idx.shape
    flat, offsets = idx.reshape(-1), torch.arange(0, t * ell, ell)
    packed = _bytes_with_scale(data, 1.0 / (255 * ell))
    if packed is not None:
        try:
            return torch.ops.quantized.embedding_bag_byte_rowwise_offsets(
                packed, flat, offsets, False, 0, False, None, None, False)
        except (RuntimeError, AttributeError, NotImplementedError):  # a build without FBGEMM's kernels
            pass
    whole = data if isinstance(data, torch.Tensor) else torch.cat(list(data), dim=1)
    return F.embedding_bag(flat, whole, offsets, mode="mean")


def _bytes_with_scale(data: torch.Tensor | Sequence[torch.Tensor], scale: float, rows: int = 256
                      ) -> torch.Tensor | None:
    """``data`` in FBGEMM's row-wise 8-bit layout, or None where it is not 8-bit.

    ``data (n, d)`` (or its column blocks, as ``mean_of_rows`` takes them) as FBGEMM's row-wise 8-bit layout
    ``(n, d + 8)`` uint8 (255·data, then float32 scale and bias 0), or ``None`` unless every value is exactly k/255
    for an integer k in [0, 255]. Checked in cache-sized row blocks (scratch blocks reused: no allocation per
    block).
    """
    parts = [data] if isinstance(data, torch.Tensor) else list(data)
    n, d = len(parts[0]), sum(p.shape[1] for p in parts)
    out = torch.empty(n, d + 8, dtype=torch.uint8)
    out[:, d:] = torch.tensor([scale, 0.0]).view(torch.uint8)
    col = 0
    for part in parts:
        w = part.shape[1]
        scaled, back = (torch.empty(min(rows, n), w, dtype=part.dtype) for _ in range(2))
        for i in range(0, n, rows):
            block = part[i : i + rows]
            q = torch.mul(block, 255, out=scaled[: len(block)]).round_().clamp_(0, 255)
            if not torch.equal(torch.div(q, 255, out=back[: len(block)]), block):
                return None
            out[i : i + rows, col : col + w] = q
        col += w
    return out
