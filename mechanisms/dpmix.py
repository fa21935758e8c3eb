"""DPMix random-mixing release (Lee, Kim, Lee, Suh, ISIT 2019): publish T noisy means of ℓ records,
train a classifier on the release only."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from bench.data import ArrayDataset
from bench.training import EpochCallback, seed_everything, soft_cross_entropy
from mechanisms.accounting import dpmix_epsilon, dpmix_sigma
from mechanisms.base import PrivacySpent, Release, TrainedModel, TrainSpec
from mechanisms.baseline import Baseline, fit_supervised

ACCOUNTANT_NAMES = {"closed_form": "dpmix-closed-form", "dp_accounting": "dp-accounting-rdp"}


def sample_subsets(n: int, size: int, count: int, *, generator: torch.Generator) -> torch.Tensor:
    """``count`` independent uniform ``size``-subsets of ``range(n)``, as a ``(count, size)`` int64 tensor.

    Rows are drawn with replacement and rows holding a repeated index are redrawn (rejection sampling,
    exact and fast when size² ≪ n); when repeats are likely, a Gumbel top-k over all n is used instead.

    Raises:
        ValueError: if ``size`` is not in [1, n].
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


def mix_release(
    x: torch.Tensor, y_onehot: torch.Tensor, *, mixture_degree: int, num_samples: int, sigma: float,
    generator: torch.Generator,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The DPMix release: each sample is the mean of ℓ distinct records plus N(0, σ²) per coordinate.

    Args:
        x: ``(n, d_x)`` records in [0, 1]. y_onehot: ``(n, d_y)`` one-hot (or any [0, 1]) labels.
        mixture_degree: ℓ. num_samples: T. sigma: noise std σ (same on features and labels).

    Returns:
        ``(T, d_x)`` released features, ``(T, d_y)`` released labels, ``(T, ℓ)`` the subsets used
        (secret: kept for tests and attack ground truth, never part of the release).
    """
    n = x.shape[0]
    idx = sample_subsets(n, mixture_degree, num_samples, generator=generator)
    data = torch.cat([x, y_onehot], dim=1).to(torch.float32)
    noisy = torch.randn((num_samples, data.shape[1]), generator=generator).mul_(sigma)
    noisy += mean_of_rows(data, idx)  # = mean + σ·N(0, 1), the same draws as before
    return noisy[:, : x.shape[1]], noisy[:, x.shape[1] :], idx


def mean_of_rows(data: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """``(T, d)`` means of the rows ``idx (T, ℓ)`` of ``data (n, d)``: one fused gather-and-sum kernel
    (``embedding_bag``), no Python loop and no ``(T, ℓ, d)`` intermediate.

    Data on the 1/255 grid (8-bit images, one-hot labels) are read as bytes (FBGEMM's row-wise 8-bit
    embedding bag, exact values, float32 sums), a quarter of the memory traffic; other data as float32.
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
    return F.embedding_bag(flat, data, offsets, mode="mean")


def _bytes_with_scale(data: torch.Tensor, scale: float, rows: int = 8192) -> torch.Tensor | None:
    """``data (n, d)`` as FBGEMM's row-wise 8-bit layout ``(n, d + 8)`` uint8 (255·data, then float32
    scale and bias 0), or ``None`` unless every value is exactly k/255 for an integer k in [0, 255].
    Checked in cache-sized row blocks."""
    n, d = data.shape
    out = torch.empty(n, d + 8, dtype=torch.uint8)
    out[:, d:] = torch.tensor([scale, 0.0]).view(torch.uint8)
    for i in range(0, n, rows):
        block = data[i : i + rows]
        q = (block * 255).round_().clamp_(0, 255)
        if not torch.equal(q / 255, block):
            return None
        out[i : i + rows, :d] = q
    return out



class DPMix(Baseline):
    """Train ``spec.model`` on a DPMix release calibrated to the target (ε, δ).

    ``spec.params``: ``mixture_degree`` ℓ (default 256), ``num_samples`` T (default 10,000),
    ``accountant`` (``closed_form`` = Lee et al. 2019 Theorem, or ``dp_accounting`` = Google's RDP
    accountant, sampling without replacement, REPLACE_ONE), ``lr_halving_epochs`` (default 10),
    ``sigma`` (a fixed σ, e.g. a source's; the target ε is then ignored and the reported ε is what σ buys),
    ``validation_split`` (fraction of the release held out of training, as Keras' ``validation_split``: the
    last rows; default 0). Otherwise σ is the smallest noise (by bisection) whose accountant ε meets the target.
    The classifier sees only the release: features clipped to [0, 1] and labels clipped at 0 and renormalised into a
    soft-label distribution (post-processing), trained with a KL-divergence loss.
    """

    name = "dpmix"
    guarantee = "dp-release"
    needs_epsilon = True
    reference_epsilons = (15.0,)  # the source system's own ε (REFERENCE.md §1)

    def fit(self, train: ArrayDataset, spec: TrainSpec, *, target_epsilon: float | None, delta: float,
            seed: int, device: torch.device, on_epoch: EpochCallback | None = None) -> TrainedModel:
        fixed_sigma = spec.params.get("sigma")
        if fixed_sigma is None and (target_epsilon is None or target_epsilon <= 0):
            raise ValueError(f"dpmix needs a target epsilon > 0 or a sigma, got {target_epsilon}")
        ell = int(spec.params.get("mixture_degree", 256))
        t = int(spec.params.get("num_samples", 10_000))
        method = spec.params.get("accountant", "closed_form")
        if method not in ACCOUNTANT_NAMES:
            raise ValueError(f"dpmix accountant {method!r} not in {tuple(ACCOUNTANT_NAMES)}")
        n, k = len(train), train.num_classes
        d_x = math.prod(train.input_shape)
        acc = dict(mixture_degree=ell, num_samples=t, num_records=n, d_x=d_x, d_y=k, delta=delta, method=method)
        if fixed_sigma is not None:
            sigma = float(fixed_sigma)
        else:
            sigma = dpmix_sigma(target_epsilon=target_epsilon, **acc)
        epsilon = dpmix_epsilon(sigma=sigma, **acc)
        gen = seed_everything(seed)
        rx, ry, _ = mix_release(train.x.flatten(1), F.one_hot(train.y, k).float(), mixture_degree=ell,
                                num_samples=t, sigma=sigma, generator=gen)
        release = Release(rx.view(t, *train.input_shape), ry, "dpmix",
                          {"sigma": sigma, "mixture_degree": ell, "num_samples": t})
        x_in = rx.clamp(0.0, 1.0).view(t, *train.input_shape)
        y_soft = ry.clamp_min(0.0)
        mass = y_soft.sum(1, keepdim=True)
        y_soft = torch.where(mass > 0, y_soft / mass.clamp_min(1e-12), torch.full_like(y_soft, 1.0 / k))
        model = self.build(train.input_shape, k, spec)
        keep = t - int(float(spec.params.get("validation_split", 0.0)) * t)
        hist, seen, secs = fit_supervised(
            model, x_in[:keep], y_soft[:keep], spec, generator=gen, device=device, loss_fn=soft_cross_entropy,
            scheduler_step=int(spec.params.get("lr_halving_epochs", 10)), on_epoch=on_epoch)
        privacy = PrivacySpent(epsilon, delta, ACCOUNTANT_NAMES[method], "dp-release")
        params = {"sigma": sigma, "mixture_degree": ell, "num_samples": t, "accountant": method,
                  "num_records": n}
        return TrainedModel(model, privacy, params=params, release=release, train_seconds=secs,
                            samples_per_s=seen / secs, history=hist)
