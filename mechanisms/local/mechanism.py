"""Local DP by input perturbation.

Every image scaled to unit L2 norm and perturbed by the analytic Gaussian mechanism, and its label by k-ary randomized
response, before any training (the `local-gaussian` reference system, corrected: the source left labels in the clear,
which ``labels: public`` keeps as an explicit option).
"""

from __future__ import annotations

import math
import time
from typing import Any, ClassVar, Literal

import torch
from pydantic import Field
from torch import nn

from bench.core.data import ArrayDataset
from bench.core.training import EpochCallback, fit_supervised, seed_everything
from bench.core.types import PrivacySpent, Release, TrainedModel, TrainSpec
from mechanisms.accounting.gaussian import (
    classic_gaussian_sigma,
    gaussian_epsilon,
    gaussian_sigma,
    local_record_epsilon,
    local_record_sigma,
    privacy_profile,
    randomized_response_keep,
)
from mechanisms.base import ModelParams
from mechanisms.baseline import Baseline
from mechanisms.local.class_means import fit_class_means
from mechanisms.local.iic import ClusterToClass, hungarian_mapping, train_iic

# Replacing one person's unit-norm image by another moves it by up to ||a - b|| <= 2.
SENSITIVITY = 2.0


class L2Normalize(nn.Module):
    """``(N, C, H, W)`` -> each image divided by its L2 norm, times ``scale`` (a fixed public constant).

    Args:
        scale: s, the public constant (a buffer, saved with the weights; ``LocalGaussian.fit`` sets it).
    """

    def __init__(self, scale: float = 1.0) -> None:
        super().__init__()
        self.register_buffer("scale", torch.tensor(float(scale)))  # saved with the weights

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``(N, ...)`` images each at L2 norm ``scale`` (an all-zero image stays zero: norm clamped to 1e-12)."""
        flat = x.flatten(1)
        return (flat / flat.norm(dim=1, keepdim=True).clamp_min(1e-12) * self.scale).view_as(x)


def perturb(x: torch.Tensor, *, sigma: float, generator: torch.Generator) -> torch.Tensor:
    """The local release: ``(N, C, H, W)`` images -> unit-L2-norm images + N(0, σ²) on every pixel (σ in those units).

    The same draws and float32 operations as ``L2Normalize()(x) + sigma * randn``, in place (less memory).
    """
    unit = L2Normalize()(x)
    noise = torch.randn(x.shape, generator=generator).mul_(sigma)
    if noise.dtype != unit.dtype:  # e.g. float64 images: the sum takes their type, as before
        return unit + noise
    return noise.add_(unit)  # u + σ·e: IEEE addition commutes, so these are the same bits


def randomize_labels(y: torch.Tensor, *, epsilon: float, num_classes: int, generator: torch.Generator
                     ) -> torch.Tensor:
    """k-ary randomized response on ``(N,)`` int64 labels: ε-DP per label (``randomized_response_keep``).

    Each kept with probability e^ε/(e^ε + k − 1), else one of the k − 1 others uniformly; ValueError if ε ≤ 0 or k < 2.
    """
    keep = randomized_response_keep(epsilon, num_classes)
    flip = torch.rand(y.shape, generator=generator) >= keep
    shift = torch.randint(1, num_classes, y.shape, generator=generator)  # another label, uniformly
    return torch.where(flip, (y + shift) % num_classes, y)


class LocalGaussianParams(ModelParams):
    """Local Gaussian noise's settings.

    Attributes:
        calibration: ``analytic`` (Balle & Wang 2018, sensitivity 2) or ``classic`` (the source's
            σ = √(2 ln(1.25/δ))/ε at "sensitivity 1", kept to reproduce it; ε is then what that σ really buys).
        labels: ``randomized-response`` (default: the whole (image, label) record is protected; the label by k-ary
            randomized response at ε_label = ``label_share``·ε, the image by the rest, the composition accounted by
            dp_accounting's PLD accountant) or ``public`` (labels released in the clear, as the source did: the
            ε then covers the image only, and every report's accountant name says so).
        label_share: the share of ε spent on the label, in (0, 1); 0.25 by default: the image carries the features,
            and symmetric label noise keeps the true label the most likely one at any ε_label > 0.
        learner: ``network`` (``spec.model`` trained on the noisy release, the source's) or ``class-means`` (a
            nearest-class-mean classifier (largest inner product with a class mean) estimated from the release,
            ``mechanisms.local.class_means``; ``spec.model`` must be ``linear``): with isotropic noise far larger
            than the signal, the class means are what a learner can still estimate. ``iic``: Invariant
            Information Clustering (Ji, Henriques & Vedaldi 2019; ``mechanisms.local.iic``) of the noisy images without
            their labels, clusters mapped to classes by Hungarian matching on a small labelled split: the first
            ``match_size`` released records with their released labels (public with ``labels: public``, as in the
            source; randomized-response labels otherwise), post-processing of the release at no privacy cost.
        match_size: records of the release whose labels map IIC's clusters to classes (``learner: iic``).
    """

    calibration: Literal["analytic", "classic"] = "analytic"
    labels: Literal["randomized-response", "public"] = "randomized-response"
    label_share: float = Field(0.25, gt=0, lt=1)
    learner: Literal["network", "class-means", "iic"] = "network"
    match_size: int = Field(1000, ge=1)


_CNN = {"model": "cnn-small", "optimizer": "sgd", "momentum": 0.9}


class LocalGaussian(Baseline):
    """Each person releases ``x/||x||₂ + N(0, σ² I)`` and a label by k-ary randomized response.

    (the analytic Gaussian mechanism at replace-one sensitivity 2; Balle & Wang, ICML 2018.) (ε, δ) local DP per (image,
    label) record, the two channels composed by dp_accounting's PLD accountant (``accounting.local_record_sigma``). The
    learner trains ``spec.model`` on the noisy images and labels only, the images multiplied by the public constant s =
    1/√(1/d + σ²) so that pixels have unit-order variance whatever σ; at test time real images get the same
    normalisation and the same s.

    Learners (both see only the release): ``network`` (the source's) or ``class-means`` (closed form, ``spec.model``
    ``linear``; see ``LocalGaussianParams.learner``).

    Settings: ``LocalGaussianParams``; with ``calibration: classic`` the target is only ``claimed_epsilon``; with
    ``labels: public`` the ε covers the image only. The ε holds for the replace-one relation (one person's record
    replaced by any other).
    """

    name = "local-gaussian"
    guarantee = "local-dp"
    needs_epsilon = True
    audits = frozenset({"release"})
    reference_epsilons = (150.0, 2000.0)  # the source system's own ε (docs/guides/presets.md)
    off_point = "no noise, labels in the clear (the same learner on the members' own unit-norm images)"
    Params = LocalGaussianParams
    recipes: ClassVar[dict[str, dict[str, Any]]] = {
        "smoke": {"model": "mlp", "epochs": 20, "batch_size": 32, "lr": 0.02, "optimizer": "sgd", "momentum": 0.9},
        # nearest class mean from the release, half of ε on the label: the best validation accuracy at the default
        # profile's 10,000 members (docs/recipes.md)
        "default": {"model": "linear", "epochs": 1, "batch_size": 64, "lr": 0.02, "optimizer": "sgd",
                    "params": {"learner": "class-means", "label_share": 0.5}},
        "full": {**_CNN, "epochs": 10, "batch_size": 64, "lr": 0.02},
    }
    # what --tune-recipes chooses among besides the profile's recipe: docs/recipes.md's label shares (default);
    # smoke: the default recipe's learner and label share
    tune_over_grid = True  # a release and its learner take seconds: candidates are scored over the whole ε grid
    recipe_candidates: ClassVar[dict[str, dict[str, dict[str, Any]]]] = {
        "smoke": {
            "label share 0.5": {"params": {"label_share": 0.5}},
            "class-means, label share 0.5": {"model": "linear", "epochs": 1,
                                             "params": {"learner": "class-means", "label_share": 0.5}},
        },
        "default": {f"label share {share:g}": {"params": {"label_share": share}} for share in (0.25, 0.35, 0.65, 0.8)},
    }

    def build(self, input_shape: tuple[int, ...], num_classes: int, spec: TrainSpec) -> nn.Module:
        """``L2Normalize``, ``spec.model`` (and ``ClusterToClass`` if ``learner: iic``): images to ``(N, k)`` logits."""
        if spec.params.learner == "iic":  # cluster logits, then the fixed cluster -> class map
            return nn.Sequential(L2Normalize(), super().build(input_shape, num_classes, spec),
                                 ClusterToClass(num_classes))
        return nn.Sequential(L2Normalize(), super().build(input_shape, num_classes, spec))

    def check(self, spec: TrainSpec, *, n_members: int) -> None:
        """Refuse ``learner: class-means`` with a model other than ``linear`` (ValueError); ``n_members`` is unused."""
        if spec.params.learner == "class-means" and spec.model != "linear":
            raise ValueError(f"params.learner 'class-means' needs model 'linear', got {spec.model!r}")

    def release(self, data: ArrayDataset, spec: TrainSpec, *, target_epsilon: float | None, delta: float,
                seed: int) -> tuple[Release, PrivacySpent]:
        """``(release, privacy)`` of ``data`` alone (what each person publishes), as ``fit`` makes it with ``seed``."""
        return self._release(data, spec, target_epsilon=target_epsilon, delta=delta, generator=seed_everything(seed))

    def _release(self, data: ArrayDataset, spec: TrainSpec, *, target_epsilon: float | None, delta: float,
                 generator: torch.Generator) -> tuple[Release, PrivacySpent]:
        if target_epsilon is None or target_epsilon <= 0:
            raise ValueError(f"local-gaussian needs a target epsilon > 0, got {target_epsilon}")
        p, k = spec.params, data.num_classes
        off = math.isinf(target_epsilon)  # the ε = ∞ point (Mechanism.fit_privacy_off states its privacy)
        private_labels = p.labels == "randomized-response" and not off
        label_epsilon = None
        if off:
            sigma = 0.0
        elif p.calibration == "classic":  # the source's σ; a label at the same share of the claimed ε
            sigma = classic_gaussian_sigma(epsilon=target_epsilon, delta=delta)
            label_epsilon = p.label_share * target_epsilon if private_labels else None
        elif private_labels:
            sigma, label_epsilon = local_record_sigma(target_epsilon=float(target_epsilon), delta=float(delta),
                                                      label_share=float(p.label_share), num_classes=k)
        else:
            sigma = gaussian_sigma(epsilon=target_epsilon, delta=delta, sensitivity=SENSITIVITY)
        noisy = perturb(data.x, sigma=sigma, generator=generator)
        y = data.y if label_epsilon is None else randomize_labels(data.y, epsilon=label_epsilon, num_classes=k,
                                                                  generator=generator)
        params = {"sigma": sigma, "sensitivity": SENSITIVITY, "labels": p.labels, "label_epsilon": label_epsilon}
        release = Release(noisy, y, "local-gaussian", params, display="minmax")
        claimed = None if p.calibration == "analytic" else target_epsilon
        note = "" if claimed is None else "source's σ: classic formula, sensitivity 1; ε is what it really buys"

        def epsilon_at(d: float) -> float:
            if off:
                return math.inf
            if label_epsilon is None:
                return gaussian_epsilon(sigma=sigma, delta=d, sensitivity=SENSITIVITY)
            return local_record_epsilon(sigma=sigma, delta=d, label_epsilon=label_epsilon, num_classes=k)

        if private_labels:
            accountant = "analytic-gaussian + randomized-response (PLD)"
            note = (note + "; " if note else "") + (
                f"label by {k}-ary randomized response at ε = {label_epsilon:.3g} (pure DP: δ = 0, exact, replace-one; "
                f"kept with probability "
                f"{randomized_response_keep(label_epsilon, k):.3f}), composed with the image channel by "
                "dp_accounting's PLD accountant")
        else:
            accountant = "analytic-gaussian, image only (labels public)"
            note = (note + "; " if note else "") + "labels released in the clear: the ε covers the image only"
        privacy = PrivacySpent.privacy_off(note="no noise, labels in the clear") if off else PrivacySpent(
            epsilon_at(delta), delta, accountant, "local-dp", claimed_epsilon=claimed, note=note,
            relation="replace-one", profile=privacy_profile(epsilon_at, delta))
        return release, privacy

    def fit(self, train: ArrayDataset, spec: TrainSpec, *, target_epsilon: float | None, delta: float,
            seed: int, device: torch.device, on_epoch: EpochCallback | None = None) -> TrainedModel:
        """Release ``train`` locally (``release``), then fit the learner on the release alone.

        Args:
            train: as ``Mechanism.fit``.
            spec: as ``Mechanism.fit``.
            target_epsilon: as ``Mechanism.fit`` (ε > 0; ∞: no noise).
            delta: as ``Mechanism.fit``.
            seed: as ``Mechanism.fit``.
            device: as ``Mechanism.fit``.
            on_epoch: as ``Mechanism.fit``.

        Returns:
            The ``TrainedModel``: the model, the release's privacy (replace-one), σ, samples/s.

        Raises:
            ValueError: a target ε ≤ 0 (or None); ``learner: class-means`` without ``model: linear``.
        """
        gen = seed_everything(seed)
        release, privacy = self._release(train, spec, target_epsilon=target_epsilon, delta=delta, generator=gen)
        sigma = release.params["sigma"]
        self.check(spec, n_members=len(train))
        model = self.build(train.input_shape, train.num_classes, spec)
        extra_params: dict[str, Any] = {}
        if spec.params.learner == "class-means":  # nearest class mean on unit-norm images, in closed form
            t0 = time.perf_counter()
            label_eps = release.params["label_epsilon"]
            keep = None if label_eps is None else randomized_response_keep(label_eps, train.num_classes)
            fit_class_means(model[-1][-1], release.x.flatten(1), release.y, num_classes=train.num_classes,
                            label_keep=keep)
            model.to(device)
            hist, seen, secs = [], len(train), max(time.perf_counter() - t0, 1e-9)
            if on_epoch is not None:
                on_epoch(spec.epochs, spec.epochs, float("nan"))
        elif spec.params.learner == "iic":  # clusters of the noisy images, mapped on a labelled split of the release
            scale = 1.0 / math.sqrt(1.0 / math.prod(train.input_shape) + sigma**2)
            model[0].scale.fill_(scale)
            hist, seen, secs = train_iic(model[1], release.x * scale, spec, generator=gen, device=device,
                                         on_epoch=on_epoch)
            m = min(spec.params.match_size, len(train))
            perm, match_accuracy = hungarian_mapping(model[1], release.x[:m] * scale, release.y[:m],
                                                     num_classes=train.num_classes, device=device)
            model[2].perm.copy_(perm)
            model.to(device)
            extra_params = {"match_size": m, "match_accuracy": match_accuracy}
        else:
            scale = 1.0 / math.sqrt(1.0 / math.prod(train.input_shape) + sigma**2)
            model[0].scale.fill_(scale)
            hist, seen, secs = fit_supervised(model[1], release.x * scale, release.y, spec, generator=gen,
                                              device=device, on_epoch=on_epoch, released=model)
        params = {**release.params,
                  "classic_sigma_sensitivity_1": 0.0 if math.isinf(target_epsilon) else
                  classic_gaussian_sigma(epsilon=target_epsilon, delta=delta),
                  **({"learner": spec.params.learner} if spec.params.learner != "network" else {}),
                  **extra_params}
        return TrainedModel(model, privacy, params=params, release=release, train_seconds=secs,
                            samples_per_s=seen / secs, history=hist)
