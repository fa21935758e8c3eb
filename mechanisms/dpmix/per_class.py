"""Per-class DPMix (the `dpmix-per-class` reference system): mix only records of one class, keep the hard label.

Design notes: docs/design-notes.md.
"""

from __future__ import annotations

import math

import torch
from pydantic import Field

from bench.core.data import ArrayDataset
from bench.core.training import EpochCallback, fit_supervised, seed_everything
from bench.core.types import PrivacySpent, Release, TrainedModel, TrainSpec
from mechanisms.accounting.dpmix import dpmix_epsilon, dpmix_pld_epsilon
from mechanisms.base import ModelParams
from mechanisms.baseline import Baseline
from mechanisms.dpmix.mixing import mix_release, sample_subsets


def reused_subset_epsilon(*, sigma: float, mixture_degree: int, samples_per_class: int, class_size: int, d_x: int,
                          delta: float) -> float:
    """ε at δ of T_c noisy copies (σ per pixel in [0, 1]) of the mean of ONE uniform ℓ-subset of a class of n_c."""
    q = mixture_degree / class_size
    c = d_x * samples_per_class / (mixture_degree * sigma) ** 2  # μ², the whitened shift of the T_c copies
    return dpmix_pld_epsilon(c, q, 1, delta)


def per_class_release(train: ArrayDataset, *, mixture_degree: int, samples_per_class: int, sigma: float,
                      reuse_subset: bool, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """The per-class release, class by class: ``(K·T_c, C, H, W)`` noisy means (unclipped), ``(K·T_c,)`` int64 labels.

    Args:
        train: the members, images ``(N, C, H, W)`` in [0, 1] and labels ``(N,)``; K classes.
        mixture_degree: ℓ, records of one class per mean.
        samples_per_class: T_c, noisy means released per class.
        sigma: the noise std σ per pixel.
        reuse_subset: one ℓ-subset per class for every copy (the source), else a fresh subset per sample.
        generator: the generator every draw comes from.

    Raises:
        ValueError: ℓ larger than a class; with fresh subsets, pixels outside [0, 1].
    """
    xs, ys = [], []
    flat = train.x.flatten(1)
    for c in range(train.num_classes):
        rows = flat[train.y == c]
        if reuse_subset:
            idx = sample_subsets(len(rows), mixture_degree, 1, generator=generator)[0]
            noise = torch.randn((samples_per_class, rows.shape[1]), generator=generator).mul_(sigma)
            xs.append(rows[idx].mean(0) + noise)
        else:
            x, _, _ = mix_release(rows, torch.zeros(len(rows), 0), mixture_degree=mixture_degree,
                                  num_samples=samples_per_class, sigma=sigma, generator=generator)
            xs.append(x)
        ys.append(torch.full((samples_per_class,), c, dtype=torch.int64))
    return torch.cat(xs).view(-1, *train.input_shape), torch.cat(ys)


class DPMixPerClassParams(ModelParams):
    """Per-class DPMix's settings.

    Attributes:
        sigma: the noise std σ per pixel (> 0; required: the source swept σ, not ε).
        mixture_degree: ℓ, records of one class averaged per sample (>= 1).
        samples_per_class: T_c, samples released per class (>= 1).
        reuse_subset: one ℓ-subset per class for every sample (the source), or a fresh one per sample.
        lr_halving_epochs: halve the learner's learning rate every that many epochs (None: never).
    """

    sigma: float | None = Field(None, gt=0)
    mixture_degree: int = Field(128, ge=1)
    samples_per_class: int = Field(1200, ge=1)
    reuse_subset: bool = True
    lr_halving_epochs: int | None = Field(None, ge=1)


class DPMixPerClass(Baseline):
    """Train ``spec.model`` on a per-class DPMix release with a fixed σ (the source swept σ, not ε).

    Settings: ``DPMixPerClassParams``. The learner
    sees the release with pixels clipped to [0, 1] and hard labels (cross-entropy). ``privacy`` is the ε that
    holds; ``claimed_epsilon`` the source's formula (Lee et al. with ℓ/n_c), which is void when subsets are reused.
    """

    name = "dpmix-per-class"
    guarantee = "dp-release"
    needs_epsilon = False
    Params = DPMixPerClassParams

    def check(self, spec: TrainSpec, *, n_members: int) -> None:
        """Refuse, before training, no ``params.sigma`` or a ``params.mixture_degree`` above ``n_members``."""
        if spec.params.sigma is None:
            raise ValueError("params.sigma is missing: dpmix-per-class needs a fixed noise std")
        if spec.params.mixture_degree > n_members:
            raise ValueError(f"params.mixture_degree = {spec.params.mixture_degree!r} must be an integer in "
                             f"[1, n_members={n_members}]")

    def fit(self, train: ArrayDataset, spec: TrainSpec, *, target_epsilon: float | None, delta: float,
            seed: int, device: torch.device, on_epoch: EpochCallback | None = None) -> TrainedModel:
        """Release per-class means at the fixed σ (``per_class_release``) and train ``spec.model`` on them.

        Args:
            train: the members, images ``(N, C, H, W)`` in [0, 1] and labels ``(N,)``.
            spec: the training settings (``spec.params`` an instance of ``Params``).
            target_epsilon: ignored (σ is fixed).
            delta: δ (a probability).
            seed: seeds every draw.
            device: where to train.
            on_epoch: the progress callback.

        Returns:
            The ``TrainedModel`` with its release, samples/s, and the ε that holds beside the source's
                ``claimed_epsilon`` (Lee et al. with ℓ/n_c, void when the subset is reused).

        Raises:
            ValueError: settings ``check`` refuses, or what ``per_class_release`` raises.
        """
        self.check(spec, n_members=len(train))
        p = spec.params
        sigma, ell, t_c, reuse = p.sigma, p.mixture_degree, p.samples_per_class, p.reuse_subset
        class_size = int(torch.bincount(train.y, minlength=train.num_classes).min())
        d_x = math.prod(train.input_shape)
        gen = seed_everything(seed)
        x, y = per_class_release(train, mixture_degree=ell, samples_per_class=t_c, sigma=sigma, reuse_subset=reuse,
                                 generator=gen)
        model = self.build(train.input_shape, train.num_classes, spec)
        hist, seen, secs = fit_supervised(model, x.clamp(0.0, 1.0), y, spec, generator=gen, device=device,
                                          scheduler_step=p.lr_halving_epochs, on_epoch=on_epoch)
        # the label of a per-class mix is its class, released without noise: no label term (label_form "none")
        acc = dict(sigma=sigma, mixture_degree=ell, num_samples=t_c, num_records=class_size, d_x=d_x, d_y=1,
                   delta=delta, label_form="none")
        claimed = dpmix_epsilon(method="closed_form", **acc)  # the source's formula: Lee et al. with ℓ/n_c
        if reuse:
            epsilon = reused_subset_epsilon(sigma=sigma, mixture_degree=ell, samples_per_class=t_c,
                                            class_size=class_size, d_x=d_x, delta=delta)
            note = (f"one {ell}-subset per class reused for all {t_c} samples: amplification by that single "
                    f"subset draw only (q = {ell}/{class_size}), none per sample; ε of the {t_c} copies as one "
                    "Gaussian mechanism, amplified once (PLD of the dominating pair); neighbouring relation: one "
                    "record replaced by another of the same class")
            privacy = PrivacySpent(epsilon, delta, "dpmix-pld", "dp-release", claimed_epsilon=claimed,
                                   note=note, relation="replace-one-same-class")
        else:
            privacy = PrivacySpent(dpmix_epsilon(**acc), delta, "dpmix-pld", "dp-release", claimed_epsilon=claimed,
                                   note="fresh subset per sample, DPMix's tight accountant per class (n = smallest "
                                        "class); "
                                        "neighbouring relation: one record replaced by another of the same class",
                                   relation="replace-one-same-class")
        params = {"sigma": sigma, "mixture_degree": ell, "samples_per_class": t_c, "reuse_subset": reuse,
                  "class_size": class_size, "num_samples": len(y)}
        release = Release(x, y, "dpmix-per-class", {"sigma": sigma, "mixture_degree": ell})
        return TrainedModel(model, privacy, params=params, release=release, train_seconds=secs,
                            samples_per_s=seen / secs, history=hist)
