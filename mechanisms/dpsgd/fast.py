"""Fast DP-SGD steps with Opacus' exact semantics, without Opacus' module wrappers.

One DP-SGD step (Abadi et al. 2016, Algorithm 1) as Opacus 1.6 does it with flat clipping and
``loss_reduction="mean"`` (``DPOptimizer.clip_and_accumulate`` / ``add_noise`` / ``scale_grad``):

    g_i   = ∇θ loss(x_i, y_i)                                    per-sample gradient over ALL parameters
    c_i   = min(1, C / (‖g_i‖₂ + 1e-6))                          flat clip factor
    grad  = (Σ_i c_i g_i + N(0, (σC)² I)) / expected_batch_size  noise drawn per parameter, in optimizer order
    optimizer.step()

Design notes: docs/design-notes.md.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial

import torch
from torch import nn

from bench.core.training import current_recorder, record_epoch
from mechanisms.dpsgd.augmult import augment_views, augmult_settings
from mechanisms.dpsgd.canaries import CanaryTracker
from mechanisms.dpsgd.canary_placement import GradientCanaries
from mechanisms.dpsgd.clipping import FAST_MODES, make_clipper
from mechanisms.dpsgd.sampling import poisson_batches

__all__ = ["FAST_MODES", "clipped_sum", "dp_step", "fit_fast", "make_clipper", "noisy_step", "poisson_batches",
           "train_fast"]


def noisy_step(optimizer: torch.optim.Optimizer, sums: dict[nn.Parameter, torch.Tensor], *,
               noise_multiplier: float, max_grad_norm: float, expected_batch_size: int,
               generator: torch.Generator | None = None, canaries: CanaryTracker | None = None) -> None:
    """Add N(0, (σC)²) to each summed clipped gradient, divide by the expected batch size (q·N), step.

    Noise is drawn per parameter in the optimizer's order with the same ``torch.normal`` call as Opacus'
    ``_generate_noise`` (non-secure mode; none when σC = 0), so the same ``generator`` state (None: torch's global RNG)
    gives the same noise. ``canaries`` (an audit run): its gradient canaries join the clipped sums
    ``{param: Σ_i c_i g_i}`` before the noise, and it reads every noisy sum.
    """
    std = noise_multiplier * max_grad_norm if noise_multiplier > 0 else 0.0  # σ = 0 and C = ∞: no noise (not NaN)
    if canaries is not None:
        canaries.add(sums, max_grad_norm)
    for group in optimizer.param_groups:
        for p in group["params"]:
            if not p.requires_grad:
                continue
            s = sums[p]
            if std > 0:
                s = s + torch.normal(mean=0, std=std, size=s.shape, device=s.device, generator=generator,
                                     dtype=s.dtype)
            if canaries is not None:
                canaries.observe(p, s, max_grad_norm)
            p.grad = s.view_as(p) / expected_batch_size
    optimizer.step()


def clipped_sum(clipper, x: torch.Tensor, y: torch.Tensor, *, max_grad_norm: float, augment: dict | None = None,
                max_physical_batch_size: int | None = None) -> tuple[dict[nn.Parameter, torch.Tensor], torch.Tensor]:
    """Σ_i c_i g_i over the records ``x (B, ...)``, ``y (B,)`` of one logical batch, and their losses ``(B,)`` (nats).

    Each record is clipped on its own, so pieces of at most ``max_physical_batch_size`` records (Opacus'
    ``BatchMemoryManager``; None: the whole batch) give the same sum. ``augment``: ``augment_views``' settings (each
    piece's records become their K views), or None. ``clipper``: one of ``make_clipper``; C > 0.

    Raises:
        ValueError: what the clipper or ``augment_views`` raise.
        AssertionError: no records (an empty batch is ``dp_step``'s noise-only case).
    """
    step = max_physical_batch_size or len(y)
    total: dict[nn.Parameter, torch.Tensor] | None = None
    losses = []
    for i in range(0, len(y), step):
        xs, ys, k = x[i : i + step], y[i : i + step], 1
        if augment is not None:
            xs, k = augment_views(xs, **augment), augment["augmult"]
        sums, loss = clipper.clipped_sum(xs, ys, max_grad_norm=max_grad_norm, augmult=k)
        total = sums if total is None else {p: total[p] + sums[p] for p in total}
        losses.append(loss)
    assert total is not None, "clipped_sum needs at least one record"
    return total, torch.cat(losses)


def dp_step(clipper, optimizer: torch.optim.Optimizer, x: torch.Tensor, y: torch.Tensor, *,
            noise_multiplier: float, max_grad_norm: float, expected_batch_size: int,
            generator: torch.Generator | None = None, canaries: CanaryTracker | None = None,
            augment: dict | None = None, max_physical_batch_size: int | None = None) -> torch.Tensor:
    """One DP-SGD step on ``x (B, ...)``, ``y (B,)`` (Abadi et al. 2016, Alg. 1): ``clipped_sum`` then ``noisy_step``.

    An empty batch adds the noise alone; returns the per-record losses ``(B,)`` (nats).
    """
    if len(x):
        sums, losses = clipped_sum(clipper, x, y, max_grad_norm=max_grad_norm, augment=augment,
                                   max_physical_batch_size=max_physical_batch_size)
    else:  # an empty Poisson batch: no gradient, the noise alone
        sums, losses = {p: torch.zeros_like(p) for p in clipper.params}, x.new_zeros(0)
    noisy_step(optimizer, sums, noise_multiplier=noise_multiplier, max_grad_norm=max_grad_norm,
               expected_batch_size=expected_batch_size, generator=generator, canaries=canaries)
    return losses


def _step(clipper, optimizer: torch.optim.Optimizer, xb: torch.Tensor, yb: torch.Tensor, step: dict,
          epoch: int) -> float:
    """One DP-SGD step on a batch (possibly empty); its mean loss. Raises TrainingDiverged on a NaN loss."""
    from bench.core.training import TrainingDiverged

    optimizer.zero_grad(set_to_none=True)
    losses = dp_step(clipper, optimizer, xb, yb, **step)
    loss = float(losses.mean()) if len(xb) else 0.0
    if not torch.isfinite(torch.tensor(loss)):
        raise TrainingDiverged(f"training loss became {loss} in epoch {epoch + 1}")
    return loss


def _ema(model: nn.Module, decay: float | None):
    """An exponential moving average of ``model``'s weights at ``decay`` (``torch.optim.swa_utils``), or None."""
    if decay is None:
        return None
    from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn

    return AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(decay), use_buffers=True)


def _update(ema, model: nn.Module) -> None:
    """One step of the weights' moving average, if there is one."""
    if ema is not None:
        ema.update_parameters(model)


def _finish(model: nn.Module, ema, device: torch.device) -> None:
    """End of training: ``model`` takes its moving average's weights (if any).

    A GPU's queued work completes (so the measured time is the training's).
    """
    if ema is not None:
        model.load_state_dict(ema.module.state_dict())
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _epoch(clipper, optimizer: torch.optim.Optimizer, x: torch.Tensor, y: torch.Tensor, step: dict, epoch: int, *,
           sample_rate: float, generator: torch.Generator, device: torch.device, accountant, ema,
           model: nn.Module) -> tuple[float, int]:
    """One epoch of DP-SGD steps on Poisson batches.

    One epoch (0-based ``epoch``) of DP-SGD steps (``dp_step`` with ``step``'s settings) on Poisson batches of
    ``x (N, ...)``, ``y (N,)``, each followed by a step of ``accountant`` (if any) and of the weights' moving average
    ``ema`` of ``model`` (if any).

    Returns:
        (sum over batches of mean loss × batch size (nats), examples processed).

    Raises:
        bench.core.training.TrainingDiverged: on a NaN / infinite batch loss.
    """
    total, count, tracker = 0.0, 0, step["canaries"]
    observe = None if tracker is None else partial(tracker.batch, records=len(x))  # each record's participation
    for xb, yb in poisson_batches(x, y, sample_rate=sample_rate, generator=generator, observe=observe):
        # an empty batch is a step too (noise only), as Opacus' optimizer makes it and its accountant counts it
        loss = _step(clipper, optimizer, xb.to(device, non_blocking=True), yb.to(device, non_blocking=True),
                     step, epoch)
        if accountant is not None:
            accountant.step(noise_multiplier=step["noise_multiplier"], sample_rate=sample_rate)
        _update(ema, model)
        total, count = total + loss * len(xb), count + len(xb)
    return total, count


def _tracker(canaries: GradientCanaries, clipper, optimizer: torch.optim.Optimizer, *, model: nn.Module,
             sample_rate: float, noise_multiplier: float, max_grad_norm: float, expected_batch_size: int,
             ema_decay: float | None) -> CanaryTracker:
    """The run's canary tracker over ``clipper``'s parameters and ``model``'s parameter trail.

    The run's canary tracker over ``clipper``'s parameters (which then keeps the largest clipped per-sample norm,
    ``clipping.observe_clipped``) and ``model``'s parameter trail (``CanaryTracker.follow``); a final-model request
    also fixes the recipe's linear structure (and refuses an optimizer whose final model is not linear in the updates:
    ``CanaryTracker.final_setup``).
    """
    clipper.observe_norms = True  # an audit run: the clip bound's conformance test reads the clipper's output
    tracker = CanaryTracker(canaries, clipper.params, sample_rate=sample_rate, noise_multiplier=noise_multiplier)
    tracker.follow(model, optimizer, ema_decay=ema_decay)
    if tracker.final:
        tracker.final_setup(optimizer, expected_batch_size=expected_batch_size, max_grad_norm=max_grad_norm,
                            ema_decay=ema_decay)
    return tracker


def _audit_result(tracker: CanaryTracker | None, clipper, max_grad_norm: float) -> dict | None:
    """An audit run's observations (``CanaryTracker.result``, with the clipper's largest clipped norm); else None."""
    if tracker is None:
        return None
    tracker.observed_clip(getattr(clipper, "largest_clipped", None), max_grad_norm)
    return tracker.result()


def train_fast(model: nn.Module, optimizer: torch.optim.Optimizer, x: torch.Tensor, y: torch.Tensor, *,
               mode: str, epochs: int, sample_rate: float, noise_multiplier: float, max_grad_norm: float,
               expected_batch_size: int, accountant, generator: torch.Generator, device: torch.device,
               on_epoch: Callable[[int, int, float], None] | None = None, ema_decay: float | None = None,
               canaries: GradientCanaries | None = None, augmult: int | None = None, augmult_flip: bool = True,
               max_physical_batch_size: int | None = None) -> tuple[list[float], int, float, dict | None]:
    """DP-SGD training with a fast clipper; mirrors Opacus + ``bench.core.training.train_loop`` step for step.

    A ``FrozenFront`` model (``scatternet-linear``) has its fixed front applied once to ``x`` and only its head
    trained (Tramèr & Boneh 2021).

    Args:
        model: the module to train, in place.
        optimizer: over its parameters.
        x: ``(N, ...)`` inputs.
        y: ``(N,)`` labels (CPU).
        mode: the clipper, ``"vmap"`` or ``"bk"``.
        epochs: passes over the data, each of round(1/q) Poisson batches.
        sample_rate: q.
        noise_multiplier: σ.
        max_grad_norm: C.
        expected_batch_size: q·N, the divisor of the noisy sum.
        accountant: an Opacus accountant (or None), stepped at every step as Opacus' optimizer does.
        generator: draws the Poisson batches; the noise uses torch's global RNG.
        device: where to train.
        on_epoch: the progress callback ``(epoch, epochs, loss)``.
        ema_decay: in (0, 1): ``model`` ends as the EMA of its weights (De et al. 2022; post-processing).
        canaries: an audit run's white-box gradient canaries.
        augmult: K views per record (None: no augmentation).
        augmult_flip: whether the views are also flipped.
        max_physical_batch_size: records per clipper call (None: the whole Poisson batch).

    Returns:
        (per-epoch mean loss, examples processed, wall seconds, the canaries' scores and coins or None).

    Raises:
        bench.core.training.TrainingDiverged: on a NaN / infinite batch loss.
        ValueError: a model ``mode`` cannot handle, more canaries than coordinates, ``augmult`` where it cannot apply.
    """
    from bench.core.models import FrozenFront

    augment = augmult_settings(model, x, augmult, flip=augmult_flip, generator=generator)
    model.train()
    start = time.perf_counter()  # the wall time (and so samples/s) includes a fixed front's feature pass
    released = model  # raw images -> logits: what an epoch's test accuracy is measured on
    if isinstance(model, FrozenFront):  # a fixed feature extractor: computed once, only the head is trained
        x, model = model.features(x, device), model.head
    ema = _ema(model, ema_decay)  # made before the clipper, so the copy carries none of its hooks
    clipper = make_clipper(mode, model)
    tracker = None if canaries is None else _tracker(canaries, clipper, optimizer, model=released,
                                                     sample_rate=sample_rate, noise_multiplier=noise_multiplier,
                                                     max_grad_norm=max_grad_norm,
                                                     expected_batch_size=expected_batch_size, ema_decay=ema_decay)
    step = dict(noise_multiplier=noise_multiplier, max_grad_norm=max_grad_norm, expected_batch_size=expected_batch_size,
                canaries=tracker, augment=augment, max_physical_batch_size=max_physical_batch_size)
    history, seen = [], 0
    recorder = current_recorder()  # per-epoch records (test accuracy on its probe); training accuracy not known here
    records = None if recorder is None else recorder.start()
    try:
        for epoch in range(epochs):
            total, count = _epoch(clipper, optimizer, x, y, step, epoch, sample_rate=sample_rate, generator=generator,
                                  device=device, accountant=accountant, ema=ema, model=model)
            seen, history = seen + count, [*history, total / max(count, 1)]
            record_epoch(records, recorder, epoch=epoch + 1, loss=history[-1], correct=None, count=count,
                         model=released, device=device)
            if on_epoch is not None:
                on_epoch(epoch + 1, epochs, history[-1])
    finally:
        clipper.close()
        optimizer.zero_grad(set_to_none=True)
    _finish(model, ema, device)
    return history, seen, time.perf_counter() - start, _audit_result(tracker, clipper, max_grad_norm)


def fit_fast(model: nn.Module, optimizer: torch.optim.Optimizer, train, spec, *, mode: str, noise_multiplier: float,
             max_grad_norm: float, generator: torch.Generator, device: torch.device,
             on_epoch: Callable[[int, int, float], None] | None = None,
             canaries: GradientCanaries | None = None, public_size: int | None = None):
    """DP-SGD's training with a fast clipper, the rest as Opacus does it (its module validator, Poisson sampling).

    q = 1/ceil(n / batch_size), n = ``public_size`` (None: ``len(train)``). The caller calibrates σ and accounts the
    result; ValueError for a module Opacus would reject (e.g. BatchNorm) or ``mode`` cannot handle.

    Args:
        model: freshly built module on ``device``.
        optimizer: over its parameters.
        train: an ArrayDataset.
        spec: its TrainSpec.
        mode: ``"vmap"`` or ``"bk"``.
        noise_multiplier: σ (> 0).
        max_grad_norm: C.
        generator: seeded, draws the batches.
        device: where to train.
        on_epoch: the progress callback ``(epoch, epochs, loss)``.
        canaries: an audit run's white-box gradient canaries; their scores go to ``TrainedModel.audit``.
        public_size: n (an audit run's, fixed in advance), or None.
    """
    from opacus.validators import ModuleValidator

    from bench.core.types import PrivacySpent, TrainedModel

    errors = ModuleValidator.validate(model, strict=False)
    if errors:
        raise ValueError(f"dpsgd: the model is not DP-SGD compatible: {errors[0]}")
    n = len(train) if public_size is None else public_size
    sample_rate = 1 / -(-n // spec.batch_size)  # Opacus: 1 / len(DataLoader(batch_size))
    expected_batch_size = int(n * sample_rate)
    hist, seen, secs, audit = train_fast(model, optimizer, train.x, train.y, mode=mode, epochs=spec.epochs,
                                         sample_rate=sample_rate, noise_multiplier=noise_multiplier,
                                         max_grad_norm=max_grad_norm, expected_batch_size=expected_batch_size,
                                         accountant=None, generator=generator, device=device, on_epoch=on_epoch,
                                         ema_decay=spec.params.ema_decay, canaries=canaries,
                                         augmult=spec.params.augmult, augmult_flip=spec.params.augmult_flip,
                                         max_physical_batch_size=spec.params.max_physical_batch_size)
    return TrainedModel(model, PrivacySpent.no_guarantee(), train_seconds=secs, samples_per_s=seen / secs,
                        history=hist, audit=audit)
