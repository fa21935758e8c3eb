"""DP-SGD (Abadi et al. 2016) through Opacus, calibrated to a target (ε, δ) with Poisson sampling."""

from __future__ import annotations

import warnings

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from bench.core.data import ArrayDataset
from bench.core.training import EpochCallback, make_optimizer, seed_everything, train_loop
from bench.core.types import PrivacySpent, TrainedModel, TrainSpec
from mechanisms.baseline import Baseline
from mechanisms.fast_dpsgd import FAST_MODES, fit_fast

ACCOUNTANTS = ("prv", "rdp", "gdp")
# Opacus' per-sample gradient modes this training loop drives, and ours (mechanisms/fast_dpsgd.py)
GRAD_SAMPLE_MODES = ("hooks", "functorch", "ew", *FAST_MODES)



class DPSGD(Baseline):
    """Per-sample clipping to ``max_grad_norm`` C and Gaussian noise σ·C on the summed gradient
    (Abadi et al. 2016, Algorithm 1), via Opacus' ``PrivacyEngine.make_private_with_epsilon``.

    Batches are drawn by Poisson sampling with rate q = 1/ceil(n / batch_size) (Opacus derives it from
    the loader length; equal to batch_size / n when batch_size divides n), which is what Opacus'
    accountants certify. ``spec.params``: ``max_grad_norm`` (C, default 1.0), ``accountant``
    (``prv`` | ``rdp`` | ``gdp``, default ``prv``), ``grad_sample_mode`` (default ``hooks``): Opacus'
    ``hooks`` | ``functorch`` | ``ew``, or our equivalent faster ``bk`` | ``vmap`` (mechanisms/fast_dpsgd.py);
    ``noise_multiplier`` (a fixed σ, as a source system set it: the target ε is then ignored and may be None);
    ``ema_decay`` (fast modes: finish with the exponential moving average of the weights, De et al. 2022).
    The reported ε is the accountant's after training, at the requested δ.
    """

    name = "dpsgd"
    guarantee = "central-dp"
    needs_epsilon = True

    def fit(self, train: ArrayDataset, spec: TrainSpec, *, target_epsilon: float | None, delta: float,
            seed: int, device: torch.device, on_epoch: EpochCallback | None = None) -> TrainedModel:
        from opacus import PrivacyEngine

        fixed_sigma = spec.params.get("noise_multiplier")
        if fixed_sigma is None and (target_epsilon is None or target_epsilon <= 0):
            raise ValueError(f"dpsgd needs a target epsilon > 0 or a noise_multiplier, got {target_epsilon}")
        accountant = spec.params.get("accountant", "prv")
        if accountant not in ACCOUNTANTS:
            raise ValueError(f"dpsgd accountant {accountant!r} not in {ACCOUNTANTS}")
        max_grad_norm = float(spec.params.get("max_grad_norm", 1.0))
        mode = spec.params.get("grad_sample_mode", "hooks")
        if mode not in GRAD_SAMPLE_MODES:
            raise ValueError(f"dpsgd grad_sample_mode {mode!r} not in {GRAD_SAMPLE_MODES}")
        if spec.params.get("ema_decay") is not None and mode not in FAST_MODES:
            raise ValueError(f"dpsgd ema_decay needs grad_sample_mode in {FAST_MODES}, got {mode!r}")
        gen = seed_everything(seed)
        model = self.build(train.input_shape, train.num_classes, spec).to(device)
        optimizer = make_optimizer(model.parameters(), spec)
        if mode in FAST_MODES:  # our per-sample clipping; Opacus' sampling, calibration and accountant
            return fit_fast(model, optimizer, train, spec, mode=mode, target_epsilon=target_epsilon, delta=delta,
                            accountant=accountant, max_grad_norm=max_grad_norm, generator=gen, device=device,
                            on_epoch=on_epoch)
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
        gsm._close()  # remove Opacus' hooks; the plain module is what we evaluate, cache and attack
        plain: nn.Module = gsm._module
        params = {"noise_multiplier": float(dp_opt.noise_multiplier), "max_grad_norm": max_grad_norm,
                  "sample_rate": float(dp_loader.sample_rate), "accountant": accountant,
                  "steps": int(spec.epochs * len(dp_loader)), "grad_sample_mode": mode}
        privacy = PrivacySpent(epsilon, delta, f"opacus-{accountant}", "central-dp")
        return TrainedModel(plain, privacy, params=params, train_seconds=secs,
                            samples_per_s=seen / secs, history=hist)
