"""DP-SGD (Abadi et al. 2016) through Opacus, calibrated to a target (ε, δ) with Poisson sampling."""

from __future__ import annotations

import dataclasses
import math
import warnings
from typing import Any, ClassVar, Literal

import torch
from pydantic import Field
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from bench.core.data import ArrayDataset
from bench.core.training import EpochCallback, make_optimizer, seed_everything, train_loop
from bench.core.types import PrivacySpent, TrainedModel, TrainSpec
from mechanisms.accounting import dpsgd_profile, gaussian_epsilon
from mechanisms.base import ModelParams
from mechanisms.baseline import Baseline
from mechanisms.dpsgd_canaries import GradientCanaries
from mechanisms.fast_dpsgd import FAST_MODES, fit_fast

ACCOUNTANTS = ("prv", "rdp", "gdp")
# Opacus' per-sample gradient modes this training loop drives, and ours (mechanisms/fast_dpsgd.py)
GRAD_SAMPLE_MODES = ("hooks", "functorch", "ew", *FAST_MODES)


class DPSGDParams(ModelParams):
    """DP-SGD's settings.

    Attributes:
        max_grad_norm: C, the per-sample clipping norm (> 0, in gradient-norm units).
        accountant: Opacus' accountant that calibrates σ and certifies ε: ``prv``, ``rdp`` or ``gdp``.
        grad_sample_mode: per-sample clipping: ours (``bk`` book-keeping, ``vmap``) or Opacus' (``hooks``,
            ``functorch``, ``ew``); all give the same update (mechanisms/fast_dpsgd.py).
        noise_multiplier: a fixed σ (> 0), as a source system set it; the target ε is then ignored.
        ema_decay: end with the exponential moving average of the weights at this decay (in (0, 1); ``bk`` or
            ``vmap`` only; De et al. 2022) — post-processing, no privacy cost.
    """

    max_grad_norm: float = Field(1.0, gt=0)
    accountant: Literal["prv", "rdp", "gdp"] = "prv"
    grad_sample_mode: Literal["hooks", "functorch", "ew", "bk", "vmap"] = "bk"
    noise_multiplier: float | None = Field(None, gt=0)
    ema_decay: float | None = Field(None, gt=0, lt=1)


_CNN = {"model": "cnn-small", "optimizer": "sgd", "momentum": 0.0}
_CLIP = {"max_grad_norm": 1.0, "accountant": "prv", "grad_sample_mode": "bk"}


class DPSGD(Baseline):
    """Per-sample clipping to ``max_grad_norm`` C and Gaussian noise σ·C on the summed gradient
    (Abadi et al. 2016, Algorithm 1), via Opacus' ``PrivacyEngine.make_private_with_epsilon``.

    Batches are drawn by Poisson sampling with rate q = 1/ceil(n / batch_size) (Opacus derives it from
    the loader length; equal to batch_size / n when batch_size divides n), which is what Opacus'
    accountants certify. Settings: ``DPSGDParams``. The reported ε is the accountant's after training, at the
    requested δ, for the add/remove-one relation (Opacus' accountants, Poisson sampling).
    """

    name = "dpsgd"
    guarantee = "central-dp"
    needs_epsilon = True
    audits = frozenset({"gradient-canaries"})
    Params = DPSGDParams
    recipes: ClassVar[dict[str, dict[str, Any]]] = {
        "smoke": {"model": "mlp", "epochs": 15, "batch_size": 100, "lr": 0.5, "optimizer": "sgd",
                  "params": {"max_grad_norm": 1.0, "grad_sample_mode": "bk"}},
        "default": {**_CNN, "epochs": 8, "batch_size": 256, "lr": 0.5, "params": _CLIP},
        "full": {**_CNN, "epochs": 15, "batch_size": 256, "lr": 0.5, "params": _CLIP},
    }

    def check(self, spec: TrainSpec, *, n_members: int) -> None:
        p = spec.params
        if p.ema_decay is not None and p.grad_sample_mode not in FAST_MODES:
            raise ValueError(f"params.ema_decay = {p.ema_decay!r} needs grad_sample_mode in {FAST_MODES}, "
                             f"got {p.grad_sample_mode!r}")

    def fit(self, train: ArrayDataset, spec: TrainSpec, *, target_epsilon: float | None, delta: float,
            seed: int, device: torch.device, on_epoch: EpochCallback | None = None,
            audit: GradientCanaries | None = None) -> TrainedModel:
        """As ``Mechanism.fit``; ``audit``: an audit run with white-box gradient canaries (their scores in
        ``TrainedModel.audit``), trained by our step (``bk`` where the settings name an Opacus mode: tests show the
        two give the same updates)."""
        from opacus import PrivacyEngine

        p = spec.params
        fixed_sigma = p.noise_multiplier
        if fixed_sigma is None and (target_epsilon is None or target_epsilon <= 0):
            raise ValueError(f"dpsgd needs a target epsilon > 0 or a noise_multiplier, got {target_epsilon}")
        self.check(spec, n_members=len(train))
        accountant, max_grad_norm, mode = p.accountant, p.max_grad_norm, p.grad_sample_mode
        gen = seed_everything(seed)
        model = self.build(train.input_shape, train.num_classes, spec).to(device)
        optimizer = make_optimizer(model.parameters(), spec)
        if mode in FAST_MODES or audit is not None:  # our per-sample clipping; Opacus' sampling and accountant
            return self._with_note(fit_fast(model, optimizer, train, spec, mode=mode if mode in FAST_MODES else "bk",
                                            target_epsilon=target_epsilon, delta=delta, accountant=accountant,
                                            max_grad_norm=max_grad_norm, generator=gen, device=device,
                                            on_epoch=on_epoch, canaries=audit), spec)
        loader = DataLoader(TensorDataset(train.x, train.y), batch_size=spec.batch_size, generator=gen)
        with warnings.catch_warnings():  # Opacus warns about secure RNG; we want seeded, reproducible runs
            warnings.simplefilter("ignore")
            engine = PrivacyEngine(accountant=accountant)
            common = dict(module=model, optimizer=optimizer, data_loader=loader, max_grad_norm=max_grad_norm,
                          poisson_sampling=True, grad_sample_mode=mode)
            if fixed_sigma is None:
                gsm, dp_opt, dp_loader = engine.make_private_with_epsilon(
                    target_epsilon=target_epsilon, target_delta=delta, epochs=spec.epochs, **common)
            else:
                gsm, dp_opt, dp_loader = engine.make_private(noise_multiplier=float(fixed_sigma), **common)
            hist, seen, secs = train_loop(gsm, dp_opt, dp_loader, epochs=spec.epochs, device=device,
                                          on_epoch=on_epoch)
            epsilon = float(engine.get_epsilon(delta))
        plain: nn.Module = gsm.to_standard_module()  # hooks removed: what we evaluate, cache and attack
        params = {"noise_multiplier": float(dp_opt.noise_multiplier), "max_grad_norm": max_grad_norm,
                  "sample_rate": float(dp_loader.sample_rate), "accountant": accountant,
                  "steps": int(spec.epochs * len(dp_loader)), "grad_sample_mode": mode}
        privacy = PrivacySpent(epsilon, delta, f"opacus-{accountant}", "central-dp", relation="add-remove")
        return self._with_note(TrainedModel(plain, privacy, params=params, train_seconds=secs,
                                            samples_per_s=seen / secs, history=hist), spec)

    @staticmethod
    def _with_note(trained: TrainedModel, spec: TrainSpec) -> TrainedModel:
        """Add the privacy profile (``dpsgd_profile``: audits test the whole certified curve) and, with a fixed σ (a
        source's setting), a note on what shuffled fixed-size batches — each record in one batch per epoch, as such
        sources trained — would certify: only the ``epochs``-fold composition of the Gaussian mechanism, without
        amplification by sampling (analytic Gaussian, sensitivity √epochs)."""
        p, params = trained.privacy, trained.params
        profile = dpsgd_profile(noise_multiplier=params["noise_multiplier"], sample_rate=params["sample_rate"],
                                steps=params["steps"], delta=p.delta, relation=p.relation)
        note, sigma = p.note, spec.params.noise_multiplier
        if sigma is not None:
            shuffled = gaussian_epsilon(sigma=sigma, delta=p.delta, sensitivity=math.sqrt(spec.epochs))
            note = (f"For shuffled batches (each record in one batch per epoch) only the {spec.epochs}-fold "
                    f"composition of the Gaussian mechanism is certain, without amplification: ε = {shuffled:.3g} "
                    f"(δ = {p.delta:.0e}, analytic Gaussian)")
        trained.privacy = dataclasses.replace(p, note=note, profile=profile)
        return trained
