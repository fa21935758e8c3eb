"""DPMix random-mixing release (Lee, Kim, Lee, Suh, ISIT 2019): publish T noisy means of ℓ records,
train a classifier on the release only."""

from __future__ import annotations

import math
import time
from typing import Any, ClassVar, Literal

import torch
import torch.nn.functional as F
from pydantic import Field

from bench.core.data import ArrayDataset
from bench.core.training import EpochCallback, fit_supervised, seed_everything, soft_cross_entropy
from bench.core.types import PrivacySpent, Release, TrainedModel, TrainSpec
from mechanisms.accounting import privacy_profile
from mechanisms.base import ModelParams
from mechanisms.baseline import Baseline
from mechanisms.dpmix_accounting import dpmix_epsilon, dpmix_sigma

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
    generator: torch.Generator, sigma_y: float | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The DPMix release: each sample is the mean of ℓ distinct records plus N(0, σ_x²) per feature and
    N(0, σ_y²) per label coordinate.

    Args:
        x: ``(n, d_x)`` records in [0, 1]. y_onehot: ``(n, d_y)`` one-hot (or any [0, 1]) labels.
        mixture_degree: ℓ. num_samples: T. sigma: noise std σ_x on the features. sigma_y: noise std on the
            labels (default ``sigma``, the source's equal noise).

    Returns:
        ``(T, d_x)`` released features, ``(T, d_y)`` released labels, ``(T, ℓ)`` the subsets used
        (secret: kept for tests and attack ground truth, never part of the release).
    """
    n = x.shape[0]
    idx = sample_subsets(n, mixture_degree, num_samples, generator=generator)
    data = torch.cat([x, y_onehot], dim=1).to(torch.float32)
    noisy = torch.randn((num_samples, data.shape[1]), generator=generator).mul_(sigma)
    if sigma_y is not None and sigma_y != sigma:
        noisy[:, x.shape[1]:] *= sigma_y / sigma
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


LEARNERS = ("network", "class-means")


class DPMixParams(ModelParams):
    """DPMix's settings.

    Attributes:
        mixture_degree: ℓ, records averaged per released sample (1 <= ℓ <= n).
        num_samples: T, samples released (>= 1).
        accountant: ``closed_form`` (Lee et al. 2019, Thm. 1) or ``dp_accounting`` (Google's RDP accountant,
            sampling without replacement).
        lr_halving_epochs: the network learner halves its learning rate every that many epochs.
        sigma: a fixed noise std σ_x (> 0, pixel units), e.g. a source's; the target ε is then ignored.
        sigma_y_scale: σ_y/σ_x, label noise relative to feature noise (> 0; 1: the source's equal noise).
        validation_split: fraction of the release held out of training (the last rows), in [0, 1).
        learner: ``network`` (``spec.model`` on the release, soft labels, KL loss) or ``class-means`` (a
            nearest-class-mean classifier from the release's moments; ``spec.model`` must be ``linear``).
    """

    mixture_degree: int = Field(256, ge=1)
    num_samples: int = Field(10_000, ge=1)
    accountant: Literal["closed_form", "dp_accounting"] = "closed_form"
    lr_halving_epochs: int = Field(10, ge=1)
    sigma: float | None = Field(None, gt=0)
    sigma_y_scale: float = Field(1.0, gt=0)
    validation_split: float = Field(0.0, ge=0, lt=1)
    learner: Literal["network", "class-means"] = "network"


@torch.no_grad()
def class_means_from_release(rx: torch.Tensor, ry: torch.Tensor, *, mixture_degree: int, num_records: int
                             ) -> tuple[torch.Tensor, torch.Tensor]:
    """Class means of the private records estimated from a DPMix release, and the squared norm each estimate
    owes to noise.

    Random mixing keeps the first moments: for ℓ records drawn without replacement from n, with class
    frequencies p_k and class means μ_k, E[x̄] = μ and Cov(x̄, ȳ_k) = (n − ℓ)/(ℓ(n − 1)) · p_k (μ_k − μ); the
    added noise is independent and zero-mean. So μ̂_k = mean(x̄) + ℓ(n − 1)/(n − ℓ) · Ĉov(x̄, ȳ_k) / mean(ȳ_k),
    a moment estimator (post-processing of the release, no privacy cost).

    Args:
        rx: ``(T, d)`` released features (unclipped: clipping would bias the moments). ry: ``(T, K)`` released
            labels. mixture_degree: ℓ. num_records: n.

    Returns:
        ``(K, d)`` class means and ``(K,)`` the expected squared norm of each estimate's error.

    Raises:
        ValueError: fewer than 2 released samples.
    """
    t = rx.shape[0]
    if t < 2:
        raise ValueError(f"class means need at least 2 released samples, got {t}")
    rx, ry = rx.double(), ry.double()
    mx, my = rx.mean(0), ry.mean(0)
    cxy = (rx - mx).T @ (ry - my) / (t - 1)  # (d, K)
    fpc = (num_records - mixture_degree) / max(num_records - 1, 1)
    gain = mixture_degree / fpc / my.clamp_min(1e-3)  # (K,)
    means = mx[None, :] + (cxy * gain[None, :]).T
    err = rx.var(0).sum() * ry.var(0) / t * gain**2  # E‖μ̂_k − μ_k‖² under independence
    return means.float(), err.float()


class DPMix(Baseline):
    """Train a classifier on a DPMix release calibrated to the target (ε, δ).

    Settings: ``DPMixParams``. Without a fixed ``sigma``, σ is the smallest noise (by bisection) whose
    accountant ε meets the target; the ε holds for the replace-one relation (sampling without replacement).

    Learners (both see only the release): ``network`` (default, the source's) trains ``spec.model`` on features
    clipped to [0, 1] and labels clipped at 0 and renormalised into a soft-label distribution, with a
    KL-divergence loss; ``class-means`` (``spec.model`` must be ``linear``) sets a nearest-class-mean
    classifier in closed form from ``class_means_from_release``: mixing keeps linear statistics exactly, so a
    linear rule transfers from mixtures to single images, where a network trained on mixtures need not.
    """

    name = "dpmix"
    guarantee = "dp-release"
    needs_epsilon = True
    audits = frozenset({"release"})
    reference_epsilons = (15.0,)  # the source system's own ε (Lee et al. 2019)
    Params = DPMixParams
    recipes: ClassVar[dict[str, dict[str, Any]]] = {
        "smoke": {"model": "mlp", "epochs": 20, "batch_size": 64, "lr": 3e-3, "optimizer": "adam",
                  "params": {"mixture_degree": 8, "num_samples": 2000}},
        "default": {"model": "cnn-dpmix", "epochs": 12, "batch_size": 128, "lr": 1e-3, "optimizer": "adam",
                    "params": {"mixture_degree": 256, "num_samples": 10_000}},
        "full": {"model": "cnn-dpmix", "epochs": 50, "batch_size": 128, "lr": 1e-4, "optimizer": "adam",
                 "params": {"mixture_degree": 256, "num_samples": 10_000}},
    }

    def check(self, spec: TrainSpec, *, n_members: int) -> None:
        p = spec.params
        if p.mixture_degree > n_members:
            raise ValueError(f"params.mixture_degree = {p.mixture_degree!r} must be an integer in [1, n_members="
                             f"{n_members}]")
        if p.learner == "class-means" and spec.model != "linear":
            raise ValueError(f"params.learner 'class-means' needs model 'linear', got {spec.model!r}")

    def release(self, data: ArrayDataset, spec: TrainSpec, *, target_epsilon: float | None, delta: float,
                seed: int) -> tuple[Release, PrivacySpent]:
        """The DPMix release of ``data`` (its noisy mixtures), as ``fit`` makes it with ``seed``; audits call it on
        the members plus their canaries. Raises ValueError for neither a target ε > 0 nor a fixed σ."""
        return self._release(data, spec, target_epsilon=target_epsilon, delta=delta, generator=seed_everything(seed))

    def _release(self, data: ArrayDataset, spec: TrainSpec, *, target_epsilon: float | None, delta: float,
                 generator: torch.Generator) -> tuple[Release, PrivacySpent]:
        p = spec.params
        if p.sigma is None and (target_epsilon is None or target_epsilon <= 0):
            raise ValueError(f"dpmix needs a target epsilon > 0 or a sigma, got {target_epsilon}")
        self.check(spec, n_members=len(data))
        ell, t, method, y_scale = p.mixture_degree, p.num_samples, p.accountant, p.sigma_y_scale
        n, k, d_x = len(data), data.num_classes, math.prod(data.input_shape)
        acc = dict(mixture_degree=ell, num_samples=t, num_records=n, d_x=d_x, d_y=k, delta=delta, method=method)
        if p.sigma is not None:
            sigma = float(p.sigma)
        else:
            sigma = dpmix_sigma(target_epsilon=target_epsilon, sigma_y_scale=y_scale, **acc)
        sigma_y = sigma * y_scale
        rx, ry, _ = mix_release(data.x.flatten(1), F.one_hot(data.y, k).float(), mixture_degree=ell,
                                num_samples=t, sigma=sigma, sigma_y=sigma_y, generator=generator)
        release_params = {"sigma": sigma, "mixture_degree": ell, "num_samples": t, "num_records": n}
        if y_scale != 1.0:
            release_params["sigma_y"] = sigma_y
        profile = privacy_profile(lambda d: dpmix_epsilon(sigma=sigma, sigma_y=sigma_y, **{**acc, "delta": d}), delta)
        privacy = PrivacySpent(dpmix_epsilon(sigma=sigma, sigma_y=sigma_y, **acc), delta, ACCOUNTANT_NAMES[method],
                               "dp-release", relation="replace-one", profile=profile)
        return Release(rx.view(t, *data.input_shape), ry, "dpmix", release_params), privacy

    def fit(self, train: ArrayDataset, spec: TrainSpec, *, target_epsilon: float | None, delta: float,
            seed: int, device: torch.device, on_epoch: EpochCallback | None = None) -> TrainedModel:
        p = spec.params
        gen = seed_everything(seed)
        release, privacy = self._release(train, spec, target_epsilon=target_epsilon, delta=delta, generator=gen)
        ell, t, learner, n, k = p.mixture_degree, p.num_samples, p.learner, len(train), train.num_classes
        sigma, sigma_y = release.params["sigma"], release.params.get("sigma_y", release.params["sigma"])
        rx, ry = release.x.flatten(1), release.y
        model = self.build(train.input_shape, k, spec)
        keep = t - int(p.validation_split * t)
        if learner == "class-means":
            t0 = time.perf_counter()
            means, err = class_means_from_release(rx[:keep], ry[:keep], mixture_degree=ell, num_records=n)
            with torch.no_grad():
                model[-1].weight.copy_(means)
                model[-1].bias.copy_(-(means.pow(2).sum(1) - err) / 2)  # nearest class mean, noise norm removed
            hist, seen, secs = [], keep, max(time.perf_counter() - t0, 1e-9)
            model.to(device)
            if on_epoch is not None:
                on_epoch(spec.epochs, spec.epochs, float("nan"))
        else:
            x_in = rx.clamp(0.0, 1.0).view(t, *train.input_shape)
            y_soft = ry.clamp_min(0.0)
            mass = y_soft.sum(1, keepdim=True)
            y_soft = torch.where(mass > 0, y_soft / mass.clamp_min(1e-12), torch.full_like(y_soft, 1.0 / k))
            hist, seen, secs = fit_supervised(
                model, x_in[:keep], y_soft[:keep], spec, generator=gen, device=device, loss_fn=soft_cross_entropy,
                scheduler_step=p.lr_halving_epochs, on_epoch=on_epoch)
        params = {"sigma": sigma, "mixture_degree": ell, "num_samples": t, "accountant": p.accountant,
                  "num_records": n, **({"sigma_y": sigma_y, "learner": learner} if p.sigma_y_scale != 1.0 or
                                       learner != "network" else {})}
        return TrainedModel(model, privacy, params=params, release=release, train_seconds=secs,
                            samples_per_s=seen / secs, history=hist)
