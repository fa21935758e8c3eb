"""DPMix random-mixing release (Lee, Kim, Lee, Suh, ISIT 2019): publish T noisy means of ℓ records,
train a classifier on the release only."""

from __future__ import annotations

import math
import warnings

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
    while True:
        s = idx.sort(dim=1).values
        bad = (s[:, 1:] == s[:, :-1]).any(dim=1).nonzero().flatten()
        if len(bad) == 0:
            return idx
        idx[bad] = torch.randint(n, (len(bad), size), generator=generator)


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
    crow = torch.arange(0, num_samples * mixture_degree + 1, mixture_degree, dtype=torch.int64)
    vals = torch.full((num_samples * mixture_degree,), 1.0 / mixture_degree)
    with warnings.catch_warnings():  # "sparse CSR is beta": the product is checked by our tests
        warnings.simplefilter("ignore")
        mixing = torch.sparse_csr_tensor(crow, idx.flatten(), vals, size=(num_samples, n))
        mean = mixing @ data
    noisy = mean + sigma * torch.randn(mean.shape, generator=generator)
    return noisy[:, : x.shape[1]], noisy[:, x.shape[1] :], idx



class DPMix(Baseline):
    """Train ``spec.model`` on a DPMix release calibrated to the target (ε, δ).

    ``spec.params``: ``mixture_degree`` ℓ (default 256), ``num_samples`` T (default 10,000),
    ``accountant`` (``closed_form`` = Lee et al. 2019 Theorem, or ``dp_accounting`` = Google's RDP
    accountant, sampling without replacement, REPLACE_ONE), ``lr_halving_epochs`` (default 10).
    σ is the smallest noise (by bisection) whose accountant ε meets the target. The classifier sees
    only the release: features clipped to [0, 1] and labels clipped at 0 and renormalised into a
    soft-label distribution (post-processing), trained with a KL-divergence loss.
    """

    name = "dpmix"
    guarantee = "dp-release"
    needs_epsilon = True
    reference_epsilons = (15.0,)  # the source system's own ε (REFERENCE.md §1)

    def fit(self, train: ArrayDataset, spec: TrainSpec, *, target_epsilon: float | None, delta: float,
            seed: int, device: torch.device, on_epoch: EpochCallback | None = None) -> TrainedModel:
        if target_epsilon is None or target_epsilon <= 0:
            raise ValueError(f"dpmix needs a target epsilon > 0, got {target_epsilon}")
        ell = int(spec.params.get("mixture_degree", 256))
        t = int(spec.params.get("num_samples", 10_000))
        method = spec.params.get("accountant", "closed_form")
        if method not in ACCOUNTANT_NAMES:
            raise ValueError(f"dpmix accountant {method!r} not in {tuple(ACCOUNTANT_NAMES)}")
        n, k = len(train), train.num_classes
        d_x = math.prod(train.input_shape)
        acc = dict(mixture_degree=ell, num_samples=t, num_records=n, d_x=d_x, d_y=k, delta=delta, method=method)
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
        hist, seen, secs = fit_supervised(
            model, x_in, y_soft, spec, generator=gen, device=device, loss_fn=soft_cross_entropy,
            scheduler_step=int(spec.params.get("lr_halving_epochs", 10)), on_epoch=on_epoch)
        privacy = PrivacySpent(epsilon, delta, ACCOUNTANT_NAMES[method], "dp-release")
        params = {"sigma": sigma, "mixture_degree": ell, "num_samples": t, "accountant": method,
                  "num_records": n}
        return TrainedModel(model, privacy, params=params, release=release, train_seconds=secs,
                            samples_per_s=seen / secs, history=hist)
