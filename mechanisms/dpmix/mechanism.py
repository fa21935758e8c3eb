"""DPMix random-mixing release (Lee, Kim, Lee, Suh, ISIT 2019).

Publish T noisy means of ℓ records, train a classifier on the release only.
"""

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
from mechanisms.accounting.dpmix import ACCOUNTANT_NAMES, dpmix_epsilon, dpmix_profile, dpmix_sigma
from mechanisms.base import ModelParams
from mechanisms.baseline import Baseline
from mechanisms.dpmix.mixing import mix_release


class DPMixParams(ModelParams):
    """DPMix's settings.

    Attributes:
        mixture_degree: ℓ, records averaged per released sample (1 <= ℓ <= n).
        num_samples: T, samples released (>= 1).
        accountant: ``pld`` (default: the exact ε of the dominating pair by ``dp_accounting``'s PLD,
            ``mechanisms.accounting.dpmix``), ``dp_accounting`` (Google's RDP accountant, sampling without replacement)
            or ``closed_form`` (Lee et al. 2019, Thm. 1); all under replace-one, label sensitivity √2.
        lr_halving_epochs: the network learner halves its learning rate every that many epochs.
        sigma: a fixed noise std σ_x (> 0, pixel units), e.g. a source's; the target ε is then ignored.
        sigma_y_scale: σ_y/σ_x, label noise relative to feature noise (> 0; 1: the source's equal noise).
        validation_split: fraction of the release held out of training (the last rows), in [0, 1).
        learner: ``network`` (``spec.model`` on the release, soft labels, KL loss) or ``class-means`` (a
            nearest-class-mean classifier from the release's moments; ``spec.model`` must be ``linear``).
    """

    mixture_degree: int = Field(256, ge=1)
    num_samples: int = Field(10_000, ge=1)
    accountant: Literal["pld", "dp_accounting", "closed_form"] = "pld"
    lr_halving_epochs: int = Field(10, ge=1)
    sigma: float | None = Field(None, gt=0)
    sigma_y_scale: float = Field(1.0, gt=0)
    validation_split: float = Field(0.0, ge=0, lt=1)
    learner: Literal["network", "class-means"] = "network"


@torch.no_grad()
def class_means_from_release(rx: torch.Tensor, ry: torch.Tensor, *, mixture_degree: int, num_records: int
                             ) -> tuple[torch.Tensor, torch.Tensor]:
    """``(K, d)`` class means of the private records from a DPMix release, and ``(K,)`` each one's expected error².

    Mixing ℓ of n keeps the first moments: E[x̄] = μ, Cov(x̄, ȳ_k) = (n − ℓ)/(ℓ(n − 1))·p_k(μ_k − μ), so
    μ̂_k = mean(x̄) + ℓ(n − 1)/(n − ℓ)·Ĉov(x̄, ȳ_k)/mean(ȳ_k) (post-processing). ``rx`` ``(T, d)`` unclipped (clipping
    would bias the moments), ``ry`` ``(T, K)``; ValueError for T < 2.
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
        # the moment-based class-mean learner of dpmix-best; ℓ, T, σ_y/σ_x chosen by the mean validation accuracy over
        # the default profile's ε grid (1, 3, 8) at its 10,000 members, tight (PLD) accountant (docs/recipes.md)
        "default": {"model": "linear", "epochs": 1, "batch_size": 256, "lr": 1.0, "optimizer": "sgd",
                    "params": {"mixture_degree": 16, "num_samples": 10_000, "learner": "class-means",
                               "sigma_y_scale": math.sqrt(2 / 784)}},
        "full": {"model": "cnn-dpmix", "epochs": 50, "batch_size": 128, "lr": 1e-4, "optimizer": "adam",
                 "params": {"mixture_degree": 256, "num_samples": 10_000}},
    }
    # what --tune-recipes chooses among besides the profile's recipe: docs/recipes.md's probe (the next best ℓ, T,
    # σ_y/σ_x by mean validation accuracy over ε 1, 3, 8); smoke: the class-means learner of the default recipe
    tune_over_grid = True  # a release and its learner take seconds: candidates are scored over the whole ε grid
    recipe_candidates: ClassVar[dict[str, dict[str, dict[str, Any]]]] = {
        "smoke": {
            "class-means, ℓ = 8": {"model": "linear", "epochs": 1, "lr": 1.0, "optimizer": "sgd",
                                   "params": {"learner": "class-means"}},
            "class-means, ℓ = 16": {"model": "linear", "epochs": 1, "lr": 1.0, "optimizer": "sgd",
                                    "params": {"learner": "class-means", "mixture_degree": 16}},
        },
        "default": {
            "ℓ = 16, T = 20,000": {"params": {"num_samples": 20_000}},
            "ℓ = 32, T = 10,000": {"params": {"mixture_degree": 32}},
            "ℓ = 32, T = 20,000": {"params": {"mixture_degree": 32, "num_samples": 20_000}},
            "ℓ = 8, T = 20,000": {"params": {"mixture_degree": 8, "num_samples": 20_000}},
            "ℓ = 16, T = 10,000, σ_y/σ_x = √(10/784)": {"params": {"sigma_y_scale": math.sqrt(10 / 784)}},
        },
    }

    def check(self, spec: TrainSpec, *, n_members: int) -> None:
        """Refuse, before training, ℓ > ``n_members`` or the ``class-means`` learner on a model but ``linear``."""
        p = spec.params
        if p.mixture_degree > n_members:
            raise ValueError(f"params.mixture_degree = {p.mixture_degree!r} must be an integer in [1, n_members="
                             f"{n_members}]")
        if p.learner == "class-means" and spec.model != "linear":
            raise ValueError(f"params.learner 'class-means' needs model 'linear', got {spec.model!r}")

    def release(self, data: ArrayDataset, spec: TrainSpec, *, target_epsilon: float | None, delta: float,
                seed: int) -> tuple[Release, PrivacySpent]:
        """``(release, privacy)`` of ``data``: T noisy mixtures and label means, as ``fit`` makes them with ``seed``."""
        return self._release(data, spec, target_epsilon=target_epsilon, delta=delta, generator=seed_everything(seed))

    def _release(self, data: ArrayDataset, spec: TrainSpec, *, target_epsilon: float | None, delta: float,
                 generator: torch.Generator) -> tuple[Release, PrivacySpent]:
        p = spec.params
        if p.sigma is None and (target_epsilon is None or target_epsilon <= 0):
            raise ValueError(f"dpmix needs a target epsilon > 0 or a sigma, got {target_epsilon}")
        self.check(spec, n_members=len(data))
        ell, t, method, y_scale = p.mixture_degree, p.num_samples, p.accountant, p.sigma_y_scale
        n, k, d_x = len(data), data.num_classes, math.prod(data.input_shape)
        acc = dict(mixture_degree=ell, num_samples=t, num_records=n, d_x=d_x, d_y=k, delta=delta, method=method,
                   label_form="distribution")  # one-hot labels: Δ_y = √2 (mixing.check_records enforces it)
        off = p.sigma is None and math.isinf(target_epsilon)  # the ε = ∞ point: the noiseless mixtures
        if p.sigma is not None:
            sigma = float(p.sigma)
        else:
            sigma = 0.0 if off else dpmix_sigma(target_epsilon=target_epsilon, sigma_y_scale=y_scale, **acc)
        sigma_y = sigma * y_scale
        rx, ry, _ = mix_release(data.x.flatten(1), F.one_hot(data.y, k).float(), mixture_degree=ell,
                                num_samples=t, sigma=sigma, sigma_y=sigma_y, generator=generator)
        release_params = {"sigma": sigma, "mixture_degree": ell, "num_samples": t, "num_records": n}
        if y_scale != 1.0:
            release_params["sigma_y"] = sigma_y
        if off:
            return Release(rx.view(t, *data.input_shape), ry, "dpmix", release_params), PrivacySpent.privacy_off(
                note=f"dpmix with privacy turned off: {self.off_point}")
        profile = dpmix_profile(sigma=sigma, sigma_y=sigma_y, **acc)
        privacy = PrivacySpent(dpmix_epsilon(sigma=sigma, sigma_y=sigma_y, **acc), delta, ACCOUNTANT_NAMES[method],
                               "dp-release", relation="replace-one", profile=profile)
        return Release(rx.view(t, *data.input_shape), ry, "dpmix", release_params), privacy

    def fit(self, train: ArrayDataset, spec: TrainSpec, *, target_epsilon: float | None, delta: float,
            seed: int, device: torch.device, on_epoch: EpochCallback | None = None) -> TrainedModel:
        """Release DPMix mixtures (``release``) and train the learner on them alone (Lee et al. 2019).

        Args:
            train: the members, images ``(N, C, H, W)`` in [0, 1] and labels ``(N,)``.
            spec: the training settings (``spec.params`` an instance of ``Params``).
            target_epsilon: ε to calibrate σ to (unitless; ``math.inf``: the ε = ∞ point).
            delta: δ (a probability).
            seed: seeds every draw.
            device: where to train.
            on_epoch: the progress callback.

        Returns:
            The ``TrainedModel`` with its release, samples/s and the release's privacy.

        Raises:
            ValueError: what ``release`` raises.
        """
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
                  "num_records": n, "d_x": math.prod(train.input_shape), "num_classes": k,
                  **({"sigma_y": sigma_y, "learner": learner} if p.sigma_y_scale != 1.0 or
                                       learner != "network" else {})}
        return TrainedModel(model, privacy, params=params, release=release, train_seconds=secs,
                            samples_per_s=seen / secs, history=hist)
