"""DP-SGD (Abadi et al. 2016) through Opacus, calibrated to a target (ε, δ) with Poisson sampling."""

from __future__ import annotations

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
from mechanisms.base import InitialModel, ModelParams
from mechanisms.baseline import Baseline
from mechanisms.dpsgd.canary_placement import GradientCanaries
from mechanisms.dpsgd.fast import FAST_MODES, fit_fast
from mechanisms.dpsgd.privacy import calibrate, certify, epsilon_by_epoch

ACCOUNTANTS = ("prv", "rdp", "gdp")


class DPSGDParams(ModelParams):
    """DP-SGD's settings.

    Attributes:
        max_grad_norm: C, the per-sample clipping norm (> 0, in gradient-norm units).
        accountant: Opacus' accountant that calibrates σ and certifies ε: ``prv``, ``rdp`` or ``gdp``.
        grad_sample_mode: per-sample clipping: ours (``bk`` book-keeping, ``vmap``) or Opacus' (``hooks``,
            ``functorch``, ``ew``); all give the same update (mechanisms/dpsgd/fast.py).
        noise_multiplier: a fixed σ (> 0), as a source system set it; the target ε is then ignored.
        ema_decay: end with the exponential moving average of the weights at this decay (in (0, 1); ``bk`` or ``vmap``
            only; De et al. 2022) — post-processing, no privacy cost.
        relation: the neighbouring relation σ is calibrated and ε certified under. ``replace-one`` (default): the
            relation every mechanism of the suite is matched on, by dp_accounting's PLD accountant
            (``NeighboringRelation.REPLACE_ONE``); ``add-remove``: Opacus' ``accountant``, as papers and the source
            systems quote. The other relation's ε is reported beside either way.
        augmult: K ≥ 1, augmentation multiplicity (De et al. 2022, §3.1): each record of a batch is trained on K random
            crops (reflection padding of 1/8 of the image side: 4 on 32 × 32) and flips of itself, its gradient the mean
            over the K views, clipped as one, so σ and ε do not change; compute grows K-fold. Images and ``bk`` /
            ``vmap`` only, and a model trained end to end (not ``scatternet-linear``). None (default): no augmentation.
        augmult_flip: with ``augmult``, also flip views horizontally (half of them); false for data a mirror changes
            (digits, text).
        max_physical_batch_size: at most this many records (× K views) per forward/backward pass, as Opacus'
            ``BatchMemoryManager``: the Poisson batch's clipped sums add up piece by piece, so the update is the same to
            float rounding and memory follows this size (``bk`` / ``vmap`` only). None: the whole batch.
    """

    max_grad_norm: float = Field(1.0, gt=0)
    accountant: Literal["prv", "rdp", "gdp"] = "prv"
    grad_sample_mode: Literal["hooks", "functorch", "ew", "bk", "vmap"] = "bk"
    noise_multiplier: float | None = Field(None, gt=0)
    ema_decay: float | None = Field(None, gt=0, lt=1)
    relation: Literal["replace-one", "add-remove"] = "replace-one"
    augmult: int | None = Field(None, ge=1)
    augmult_flip: bool = True
    max_physical_batch_size: int | None = Field(None, ge=1)


_CNN = {"model": "cnn-small", "optimizer": "sgd", "momentum": 0.0}
_CLIP = {"max_grad_norm": 1.0, "accountant": "prv", "grad_sample_mode": "bk"}


class DPSGD(Baseline):
    """DP-SGD through Opacus (Abadi et al. 2016, Algorithm 1).

    Per-sample clipping to ``max_grad_norm`` C and Gaussian noise σ·C on the summed gradient
    (Abadi et al. 2016, Algorithm 1), via Opacus' ``PrivacyEngine.make_private_with_epsilon``.

    Batches are drawn by Poisson sampling with rate q = 1/ceil(n / batch_size) (Opacus derives it from the loader
    length; equal to batch_size / n only when batch_size divides n), which is what the accountants certify. Settings:
    ``DPSGDParams``. σ is calibrated to the target (ε, δ) under ``params.relation``: replace-one by dp_accounting's PLD
    accountant (``accounting.pld_noise_multiplier``; the default, so that DP-SGD is compared with DPMix and local noise
    at the same ε under the same relation), add/remove by Opacus' accountant. The reported ε is certified after training
    under that relation, with the other relation's ε beside it (``PrivacySpent.other_relations``): add/remove by Opacus'
    ``accountant``, replace-one by the PLD accountant.
    """

    name = "dpsgd"
    guarantee = "central-dp"
    needs_epsilon = True
    audits = frozenset({"gradient-canaries", "initial-model", "side-by-side"})
    off_point = "no clipping, no noise: plain SGD on the same Poisson batches (our step, whatever grad_sample_mode)"
    Params = DPSGDParams
    recipes: ClassVar[dict[str, dict[str, Any]]] = {
        "smoke": {"model": "mlp", "epochs": 15, "batch_size": 100, "lr": 0.5, "optimizer": "sgd",
                  "params": {"max_grad_norm": 1.0, "grad_sample_mode": "bk"}},
        # Tramèr & Boneh's (ICLR 2021, §3) ScatterNet + linear: the best validation accuracy at the default profile's
        # 10,000 members (docs/recipes.md), and the scattering is computed once per training run
        "default": {"model": "scatternet-linear", "epochs": 40, "batch_size": 4096, "lr": 8.0, "optimizer": "sgd",
                    "momentum": 0.9, "params": {**_CLIP, "max_grad_norm": 0.1}},
        "full": {**_CNN, "epochs": 15, "batch_size": 256, "lr": 0.5, "params": _CLIP},
    }
    # what --tune-recipes chooses among besides the default recipe: docs/recipes.md's MNIST probe at ε = 3 (the two
    # best other ScatterNet settings and the cheapest tanh CNN + EMA, Tramèr & Boneh 2021, §3 and §4) and their
    # Fashion-MNIST ScatterNet setting (the dpsgd-best-fashion preset's scatternet row)
    recipe_candidates: ClassVar[dict[str, dict[str, dict[str, Any]]]] = {
        "default": {
            "scatternet-linear, batch 512, 30 epochs, lr 2": {"batch_size": 512, "epochs": 30, "lr": 2.0},
            "scatternet-linear, batch 1024, 40 epochs, lr 4": {"batch_size": 1024, "lr": 4.0},
            "scatternet-linear, batch 8192, 40 epochs, lr 16": {"batch_size": 8192, "lr": 16.0},
            "tanh cnn-small + EMA 0.999, batch 512, 20 epochs, lr 0.5": {
                "model": "cnn-small", "epochs": 20, "batch_size": 512, "lr": 0.5,
                "params": {"ema_decay": 0.999, "model_kwargs": {"activation": "tanh", "standardize": [0.5, 0.5]}}},
        },
    }

    def check(self, spec: TrainSpec, *, n_members: int) -> None:
        """Refuse, before training, settings the chosen clipper or model cannot honour (``n_members`` is unused).

        Raises:
            ValueError: ``ema_decay``, ``augmult`` or ``max_physical_batch_size`` with an Opacus mode; ``augmult`` on
                ``scatternet-linear``.
        """
        p = spec.params
        for name in ("ema_decay", "augmult", "max_physical_batch_size"):
            if getattr(p, name) is not None and p.grad_sample_mode not in FAST_MODES:
                raise ValueError(f"params.{name} = {getattr(p, name)!r} needs grad_sample_mode in {FAST_MODES}, "
                                 f"got {p.grad_sample_mode!r}")
        if p.augmult is not None and spec.model == "scatternet-linear":
            raise ValueError(f"params.augmult = {p.augmult} needs a model trained end to end, not "
                             "'scatternet-linear' (its scattering is computed once per image, not per view)")

    def calibrate(self, spec: TrainSpec, *, n: int, target_epsilon: float | None, delta: float
                  ) -> tuple[float, float, int]:
        """(σ, q, T) of a run on ``n`` public records: the one calibration of ``fit`` and the side-by-side runs."""
        return calibrate(spec, n=n, target_epsilon=target_epsilon, delta=delta)

    def fit(self, train: ArrayDataset, spec: TrainSpec, *, target_epsilon: float | None, delta: float,
            seed: int, device: torch.device, on_epoch: EpochCallback | None = None,
            audit: GradientCanaries | InitialModel | None = None) -> TrainedModel:
        """As ``Mechanism.fit``; ``audit``.

        An audit run with white-box gradient canaries (their scores in ``TrainedModel.audit``) or from the auditor's
        initial model (``InitialModel``: its weights replace the initialisation, drawn all the same so that the noise is
        the same draws) and, where it names one, the public record count that fixes q, the steps and the expected batch
        (``public_size``), trained by our step (``bk`` where the settings name an Opacus mode: tests show the two give
        the same updates).

        Args:
            train: as ``Mechanism.fit``.
            spec: as ``Mechanism.fit``.
            target_epsilon: as ``Mechanism.fit``.
            delta: as ``Mechanism.fit``.
            seed: as ``Mechanism.fit``.
            device: as ``Mechanism.fit``.
            on_epoch: as ``Mechanism.fit``.
            audit: as above.

        Returns:
            The ``TrainedModel`` with samples/s; its privacy from ``privacy`` ("no guarantee" at ε = ∞).
        """
        from opacus import PrivacyEngine

        p = spec.params
        off = target_epsilon is not None and math.isinf(target_epsilon)
        self.check(spec, n_members=len(train))
        accountant, max_grad_norm, mode = p.accountant, math.inf if off else p.max_grad_norm, p.grad_sample_mode
        n = audit.public_size if audit is not None and audit.public_size is not None else len(train)
        sigma, sample_rate, steps = self.calibrate(spec, n=n, target_epsilon=target_epsilon, delta=delta)
        gen = seed_everything(seed)
        model = self.build(train.input_shape, train.num_classes, spec).to(device)
        if isinstance(audit, InitialModel):
            model.load_state_dict(audit.weights.state)
        canaries = audit if isinstance(audit, GradientCanaries) and audit.active else None
        optimizer = make_optimizer(model.parameters(), spec)
        if mode in FAST_MODES or audit is not None or off:  # our per-sample clipping; Opacus' sampling
            trained = fit_fast(model, optimizer, train, spec, mode=mode if mode in FAST_MODES else "bk",
                               noise_multiplier=sigma, max_grad_norm=max_grad_norm, generator=gen, device=device,
                               on_epoch=on_epoch, canaries=canaries, public_size=n)
        else:
            loader = DataLoader(TensorDataset(train.x, train.y), batch_size=spec.batch_size, generator=gen)
            with warnings.catch_warnings():  # Opacus warns about secure RNG; we want seeded, reproducible runs
                warnings.simplefilter("ignore")
                engine = PrivacyEngine(accountant=accountant)
                gsm, dp_opt, dp_loader = engine.make_private(
                    module=model, optimizer=optimizer, data_loader=loader, max_grad_norm=max_grad_norm,
                    poisson_sampling=True, grad_sample_mode=mode, noise_multiplier=sigma)
                hist, seen, secs = train_loop(gsm, dp_opt, dp_loader, epochs=spec.epochs, device=device,
                                              on_epoch=on_epoch)
            plain: nn.Module = gsm.to_standard_module()  # hooks removed: what we evaluate, cache and attack
            trained = TrainedModel(plain, PrivacySpent.no_guarantee(), train_seconds=secs,
                                   samples_per_s=seen / secs, history=hist)
        trained.params = self.run_params(spec, sigma=sigma, sample_rate=sample_rate, steps=steps, n=n, off=off)
        if off:  # nothing to account: fit_privacy_off states ε = ∞
            return trained
        trained.privacy = self.privacy(sigma=sigma, sample_rate=sample_rate, steps=steps, delta=delta, spec=spec)
        return trained

    def fit_runs(self, base: ArrayDataset, canary: ArrayDataset, spec: TrainSpec, *, included: tuple[bool, ...],
                 seeds: tuple[int, ...], target_epsilon: float | None, delta: float, initial: InitialModel,
                 device: torch.device) -> tuple[Any, PrivacySpent, dict[str, Any]]:
        """R runs side by side: run r is ``fit(base + canary if included[r] else base, seed=seeds[r], audit=initial)``.

        Args:
            base: the records of every run.
            canary: the canary record(s) of the runs that include them.
            spec: the training settings.
            included: per run r, whether it includes the canary (R coins).
            seeds: per run r, its training seed.
            target_epsilon: ε to calibrate to, as ``fit``'s.
            delta: δ.
            initial: the auditor's initial model; its ``public_size`` (required) fixes σ, q, T for every run.
            device: where to train.

        Returns:
            (the R final heads, ``RunsResult``; the privacy each run certifies; the runs' recorded parameters). Raises
            ValueError without a public size or for a model that is not one linear layer on a fixed front.
        """
        from mechanisms.dpsgd.side_by_side import train_runs

        if initial.public_size is None:
            raise ValueError("side-by-side runs need the public record count (InitialModel.public_size)")
        n, p = initial.public_size, spec.params
        off = target_epsilon is not None and math.isinf(target_epsilon)
        self.check(spec, n_members=n)
        sigma, sample_rate, steps = self.calibrate(spec, n=n, target_epsilon=target_epsilon, delta=delta)
        shape, classes = base.input_shape, base.num_classes
        heads = train_runs(self.build(shape, classes, spec), initial.weights.state, base.x, base.y,
                           (canary.x, canary.y), included, seeds, spec, noise_multiplier=sigma,
                           max_grad_norm=math.inf if off else p.max_grad_norm, sample_rate=sample_rate, steps=steps,
                           expected_batch_size=int(n * sample_rate), build=lambda: self.build(shape, classes, spec),
                           device=device)
        privacy = PrivacySpent.no_guarantee() if off else self.privacy(sigma=sigma, sample_rate=sample_rate,
                                                                       steps=steps, delta=delta, spec=spec)
        return heads, privacy, self.run_params(spec, sigma=sigma, sample_rate=sample_rate, steps=steps, n=n, off=off)

    @staticmethod
    def run_params(spec: TrainSpec, *, sigma: float, sample_rate: float, steps: int, n: int, off: bool
                   ) -> dict[str, Any]:
        """The JSON-able parameters a run records (``TrainedModel.params``): σ, C (∞ when ``off``), q, T, n and more."""
        p = spec.params
        return {"noise_multiplier": sigma, "max_grad_norm": math.inf if off else p.max_grad_norm,
                "sample_rate": sample_rate, "accountant": p.accountant, "steps": steps,
                "grad_sample_mode": p.grad_sample_mode, "relation": p.relation, "augmult": p.augmult,
                "public_size": n, "expected_batch_size": int(n * sample_rate)}

    def epsilon_by_epoch(self, params: dict[str, Any], spec: TrainSpec, *, delta: float) -> list[float] | None:
        """ε after each epoch under the final ε's relation and accountant (``privacy.epsilon_by_epoch``), or None."""
        return epsilon_by_epoch(params, spec, delta=delta)

    @staticmethod
    def privacy(*, sigma: float, sample_rate: float, steps: int, delta: float, spec: TrainSpec) -> PrivacySpent:
        """``PrivacySpent`` (central-dp) of ``steps`` DP-SGD steps at (σ, q, δ): ``privacy.certify``."""
        return certify(sigma=sigma, sample_rate=sample_rate, steps=steps, delta=delta, spec=spec)
