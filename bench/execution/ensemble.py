"""Train many small models at once.

A vectorised ensemble (``torch.func.stack_module_state`` + ``vmap``) with exactly the per-model batching of sequential
training, for shadow / reference models.

Model k sees the same batches as ``Baseline.fit`` / ``fit_supervised`` would give it with seed ``seeds[k]``
(one ``torch.randperm`` per epoch from ``torch.Generator().manual_seed(seeds[k])``), its loss is its own batch
mean, and the optimizer (SGD with momentum, or Adam) acts element-wise on the stacked parameters, so each
model ends with the weights sequential training gives it, to float tolerance (tests/bench/execution/test_ensemble.py).

Design notes: docs/design-notes.md.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from bench.core.training import TrainingDiverged, make_optimizer, seed_everything
from bench.core.types import TrainedModel, TrainSpec

Data = Any  # an ArrayDataset (``.x``, ``.y``) or an ``(x, y)`` pair of tensors

# From ``python -m bench perf`` (docs/performance.md): on the project's idle 2-core CPU, which is compute-bound,
# the vectorised ensemble of cnn-small shadows at batch 64 is slower than one model after another (0.6-0.9x for
# K = 16-64, 1 or 2 threads); it only won (~3x) when other jobs oversubscribed the cores and per-step overhead
# dominated. On CUDA vectorising is what makes many small models fill the GPU. The rule is fixed per device
# type, not timed at run time, so a seeded run's numbers never depend on the machine's load.
PREFERRED_PATH = {"cpu": "sequential", "cuda": "ensemble"}


def _xy(d: Data) -> tuple[torch.Tensor, torch.Tensor]:
    return (d.x, d.y) if hasattr(d, "x") else (d[0], d[1])


def init_model(build: Callable[[], nn.Module], seed: int) -> nn.Module:
    """``build()`` after ``seed_everything(seed)``: the initial weights ``Baseline.fit(seed=seed)`` starts from."""
    seed_everything(seed)
    return build()


def choose_path(device: torch.device | str) -> str:
    """``"ensemble"`` or ``"sequential"``.

    The faster way to train many small models on ``device``'s type, by the rule ``PREFERRED_PATH`` (from ``bench perf``
    measurements; unknown device types: sequential).
    """
    return PREFERRED_PATH.get(torch.device(device).type, "sequential")


def _check(models: Sequence[nn.Module], datasets: Sequence[Data], seeds: Sequence[int]) -> None:
    if not (len(models) == len(datasets) == len(seeds)):
        raise ValueError(f"need one dataset and one seed per model, got {len(models)} models, "
                         f"{len(datasets)} datasets, {len(seeds)} seeds")


def train_sequential(models: Sequence[nn.Module], datasets: Sequence[Data], spec: TrainSpec,
                     seeds: Sequence[int], device: torch.device | str, *, return_history: bool = False
                     ) -> list[nn.Module] | tuple[list[nn.Module], list[list[float]]]:
    """Train each model on its dataset with ``fit_supervised`` (cross-entropy, ``spec``'s optimizer), one after another.

    Batches from ``torch.Generator().manual_seed(seed)``. Models are trained in place.

    Args:
        models: K untrained modules.
        datasets: K datasets (``(N_k, C, H, W)`` images, ``(N_k,)`` labels).
        spec: the optimizer, batch size and epochs, shared by every model.
        seeds: K batch-order seeds.
        device: where to train.
        return_history: also return each model's training loss per epoch.

    Returns:
        The K trained models (the same objects, on ``device``); with ``return_history``, ``(models, history)``,
        ``history[k]`` model k's mean training loss per epoch (nats).

    Raises:
        ValueError: mismatched lengths.
        TrainingDiverged: a NaN / infinite loss.
    """
    from mechanisms.baseline import fit_supervised

    _check(models, datasets, seeds)
    device = torch.device(device)
    history = []
    for model, data, seed in zip(models, datasets, seeds, strict=True):
        x, y = _xy(data)
        history.append(fit_supervised(model, x, y, spec, generator=torch.Generator().manual_seed(int(seed)),
                                      device=device)[0])
    return (list(models), history) if return_history else list(models)


def train_ensemble(models: Sequence[nn.Module], datasets: Sequence[Data], spec: TrainSpec,
                   seeds: Sequence[int], device: torch.device | str, *, return_history: bool = False
                   ) -> list[nn.Module] | tuple[list[nn.Module], list[list[float]]]:
    """Train K models of one architecture as one vectorised model.

    Parameters stacked to ``(K, ...)`` (``torch.func.stack_module_state``), forward ``vmap``-ed over models, one
    backward for all, the optimizer stepping the stacked tensors. Models whose datasets differ in size are trained in
    groups of equal size (a step needs one batch size for all). Results equal ``train_sequential``'s per model.

    Args / Returns / Raises: as ``train_sequential``; also ValueError if the models' parameter shapes
    differ or a model has buffers (e.g. BatchNorm statistics, not supported under ``vmap``).
    With ``return_history``: ``(models, history)``, ``history[k]`` model k's mean training loss per epoch (nats),
    as ``fit_supervised`` reports it.
    """
    _check(models, datasets, seeds)
    device = torch.device(device)
    groups: dict[int, list[int]] = {}
    for k, data in enumerate(datasets):
        groups.setdefault(len(_xy(data)[1]), []).append(k)
    history: list[list[float]] = [[] for _ in models]
    for members in groups.values():
        losses = _train_group([models[k] for k in members], [datasets[k] for k in members],
                              [int(seeds[k]) for k in members], spec, device)
        for k, h in zip(members, losses, strict=True):
            history[k] = h
    return (list(models), history) if return_history else list(models)


def _train_group(models: list[nn.Module], datasets: list[Data], seeds: list[int], spec: TrainSpec,
                 device: torch.device) -> list[list[float]]:
    """Train one group of equal-size datasets; returns each model's per-epoch mean loss."""
    from torch.func import functional_call, stack_module_state, vmap

    shapes = [tuple((n, p.shape) for n, p in m.named_parameters()) for m in models]
    if len(set(shapes)) != 1:
        raise ValueError("train_ensemble needs models of one architecture (equal parameter names and shapes)")
    if any(True for m in models for _ in m.buffers()):
        raise ValueError("train_ensemble does not support modules with buffers (e.g. BatchNorm); "
                         "use train_sequential")
    k = len(models)
    for m in models:
        m.to(device).train()
    params, _ = stack_module_state(models)  # fresh leaf tensors (K, ...), requires_grad=True
    skeleton = copy.deepcopy(models[0]).to("meta")

    def forward(p: dict[str, torch.Tensor], x: torch.Tensor) -> torch.Tensor:
        return functional_call(skeleton, p, (x,))

    batched = vmap(forward)
    opt = make_optimizer(params.values(), spec)
    xs = torch.stack([_xy(d)[0] for d in datasets])  # (K, N, ...) on CPU, like TensorBatches' source
    ys = torch.stack([_xy(d)[1] for d in datasets])
    n = ys.shape[1]
    gens = [torch.Generator().manual_seed(s) for s in seeds]
    rows = torch.arange(k).unsqueeze(1)
    epoch_loss: list[list[float]] = []
    for epoch in range(spec.epochs):
        total = torch.zeros(k, dtype=torch.float64, device=device)  # Σ batch mean loss · batch size, per model
        perm = torch.stack([torch.randperm(n, generator=g) for g in gens])  # (K, N), as TensorBatches
        for i in range(0, n, spec.batch_size):
            idx = perm[:, i : i + spec.batch_size]
            xb = xs[rows, idx].to(device, non_blocking=True)  # (K, B, ...)
            yb = ys[rows, idx].to(device, non_blocking=True)
            opt.zero_grad(set_to_none=True)
            out = batched(params, xb)  # (K, B, classes)
            losses = F.cross_entropy(out.flatten(0, 1), yb.flatten(), reduction="none").view(k, -1).mean(1)
            if not torch.isfinite(losses).all():
                raise TrainingDiverged(f"training loss became non-finite in epoch {epoch + 1}")
            losses.sum().backward()  # model k's parameters get exactly d(loss_k)
            opt.step()
            total += losses.detach().double() * idx.shape[1]
        epoch_loss.append((total / n).tolist())
    with torch.no_grad():
        for j, m in enumerate(models):
            for name, p in m.named_parameters():
                p.copy_(params[name][j])
    return [list(h) for h in zip(*epoch_loss, strict=True)] if epoch_loss else [[] for _ in models]


def ensemble_supported(mechanism: Any, model: nn.Module) -> bool:
    """Whether ``fit_ensemble`` reproduces ``mechanism.fit``.

    The mechanism trains by ``Baseline.fit`` itself (plain supervised training: a subclass that overrides ``fit`` adds
    noise, a release or per-run privacy accounting) and ``model``, its architecture, has no buffers (``vmap`` over
    stacked parameters cannot update e.g. BatchNorm statistics).
    """
    from mechanisms.baseline import Baseline

    return type(mechanism).fit is Baseline.fit and not any(True for _ in model.buffers())


def fit_ensemble(mechanism: Any, datasets: Sequence[Any], spec: TrainSpec, seeds: Sequence[int],
                 device: torch.device | str) -> list[TrainedModel]:
    """``mechanism.fit(datasets[k], spec, seed=seeds[k])`` for every k, trained together.

    As one vectorised ensemble (``train_ensemble``) where ``choose_path(device)`` says so, else one after another. Same
    initial weights (``init_model``), batches and optimizer as ``Baseline.fit``, so the same weights to float tolerance.

    Args:
        mechanism: a mechanism for which ``ensemble_supported`` holds.
        datasets: K ``ArrayDataset``.
        spec: the recipe, shared by every model.
        seeds: K training seeds.
        device: where to train.

    Returns:
        K TrainedModels as ``Baseline.fit`` makes them; ``train_seconds`` is the batch's wall time / K.

    Raises:
        ValueError: ``ensemble_supported`` does not hold. TrainingDiverged: a non-finite loss.
    """
    device = torch.device(device)
    models = [init_model(lambda d=d: mechanism.build(d.input_shape, d.num_classes, spec), s)
              for d, s in zip(datasets, seeds, strict=True)]
    if not ensemble_supported(mechanism, models[0]):
        raise ValueError(f"mechanism {mechanism.name!r} with model {spec.model!r} cannot be trained as an ensemble")
    train = train_ensemble if choose_path(device) == "ensemble" else train_sequential
    start = time.perf_counter()
    models, history = train(models, datasets, spec, seeds, device, return_history=True)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    seconds = (time.perf_counter() - start) / len(models)
    return [mechanism.trained_model(m, history=h, seen=len(d) * spec.epochs, seconds=seconds)
            for m, h, d in zip(models, history, datasets, strict=True)]
