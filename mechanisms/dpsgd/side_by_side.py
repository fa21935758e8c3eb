"""Many DP-SGD runs at the cost of one.

R independent runs of a model whose only trainable layer is a final ``nn.Linear`` (``linear``: logistic regression on
pixels; ``scatternet-linear``: Tramèr & Boneh's fixed ScatterNet front), trained side by side — for a multi-run audit
(Jagielski, Ullman, Oprea 2020; Annamalai & De Cristofaro 2024), whose R runs differ only in one canary record and their
seeds.

Design notes: docs/design-notes.md.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from bench.core.training import make_optimizer
from mechanisms.dpsgd import clipping, fast

__all__ = ["RunsResult", "linear_head", "train_runs"]
MEMORY_FLOATS = 1 << 26  # (runs, records, classes) floats per chunk of runs trained at once (256 MiB in float32)


def linear_head(model: nn.Module) -> tuple[Callable[[torch.Tensor], torch.Tensor], nn.Linear]:
    """(front, head) with ``model(x) == head(front(x))``: ``head`` the only trainable layer, an ``nn.Linear``.

    ``front`` is parameter-free (an ``nn.Sequential``'s earlier layers or a ``FrozenFront``'s fixed front), ``(B, ...)``
    to ``(B, d)``. ValueError for any other model (side-by-side training needs one linear layer).
    """
    from bench.core.models import FrozenFront

    if isinstance(model, FrozenFront) and isinstance(model.head, nn.Linear):
        return model.front, model.head
    if isinstance(model, nn.Sequential) and len(model) and isinstance(model[-1], nn.Linear) \
            and not any(p.requires_grad for m in list(model)[:-1] for p in m.parameters()):
        return nn.Sequential(*list(model)[:-1]), model[-1]
    raise ValueError(f"side-by-side DP-SGD runs need a model whose only trainable layer is a final nn.Linear "
                     f"(e.g. 'linear', 'scatternet-linear'), got {type(model).__name__}")


@dataclass
class RunsResult:
    """What ``train_runs`` returns.

    The R final models' parameters, ``weight (R, K, d)`` and ``bias (R, K)``, of the head (``linear_head``), stacked;
    each run's full model is ``θ_0``'s architecture with them loaded.
    """

    weight: torch.Tensor
    bias: torch.Tensor


def _noise_generator(build: Callable[[], nn.Module], seed: int) -> torch.Generator:
    """The global-RNG state run ``seed``'s ``fit`` draws its noise from.

    After ``seed_everything(seed)`` and building its model (whose initialisation it then replaces by θ_0), as a
    generator; the global RNG is left as it was.
    """
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        build()
        gen = torch.Generator()
        gen.set_state(torch.get_rng_state())
    return gen


def _masks(n_base: int, included: Sequence[bool], gens: Sequence[torch.Generator], *, sample_rate: float,
           steps: int) -> torch.Tensor:
    """``(R, steps, n_base + 1)`` bool.

    Record i is in run r's batch at each step of one epoch (the canary is row ``n_base``, only in runs that include it),
    from the mechanism's own ``fast.poisson_batches`` over run r's ``n_base + included[r]`` records (its rows' indices
    stand in for the records) with run r's generator.
    """
    out = torch.zeros(len(gens), steps, n_base + 1, dtype=torch.bool)
    for r, (inc, gen) in enumerate(zip(included, gens, strict=True)):
        if sample_rate >= 1.0:  # q = 1: every record in every batch whatever the draws (rand < 1), which feed nothing
            out[r, :, : n_base + int(inc)] = True
            continue
        rows = torch.arange(n_base + int(inc))
        batches = list(fast.poisson_batches(rows, rows, sample_rate=sample_rate, generator=gen))
        if len(batches) != steps:
            raise ValueError(f"an epoch of Poisson batches has {len(batches)} steps, the run {steps}")
        for t, (idx, _) in enumerate(batches):
            out[r, t, idx] = True
    return out


def _clipped_sums(a: torch.Tensor, y: torch.Tensor, w: torch.Tensor, b: torch.Tensor, mask: torch.Tensor, *,
                  max_grad_norm: float, bias: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """Σ_i c_i g_i of each run for the records in its batch, ``((R, K, d), (R, K))``.

    Features ``a (n, d)``, labels ``y (n,)``, the runs' weights ``(R, K, d)`` and biases ``(R, K)``, batches ``mask (R,
    n)``; the book-keeping rule of one linear layer (the output gradient g = softmax − one-hot, ‖∇_W‖² = ‖g‖²‖a‖²,
    ‖∇_b‖² = ‖g‖²) and Opacus' clip factor.
    """
    logits = torch.einsum("rkd,nd->rkn", w, a) + b[:, :, None]  # (R, K, n): softmax over a contiguous K is fast
    g = torch.softmax(logits, dim=1) - F.one_hot(y, w.shape[1]).t().to(a.dtype)
    sq = g.square().sum(1) * (a.square().sum(1) + (1.0 if bias else 0.0))  # (R, n)
    gc = g * (clipping.clip_factors(sq, max_grad_norm) * mask)[:, None, :]
    return torch.einsum("rkn,nd->rkd", gc, a), gc.sum(2)


def train_runs(model: nn.Module, initial: dict[str, torch.Tensor], x: torch.Tensor, y: torch.Tensor,
               canary: tuple[torch.Tensor, torch.Tensor], included: Sequence[bool], seeds: Sequence[int], spec, *,
               noise_multiplier: float, max_grad_norm: float, sample_rate: float, steps: int,
               expected_batch_size: int, build: Callable[[], nn.Module], device: torch.device) -> RunsResult:
    """R DP-SGD runs side by side (module docstring), in chunks of runs that fit ``MEMORY_FLOATS``.

    Args:
        model: θ_0's architecture (``linear_head`` must accept it).
        initial: θ_0's state dict.
        x: ``(N, ...)`` base records.
        y: ``(N,)`` labels.
        canary: its ``(1, ...)`` input and ``(1,)`` label.
        included: R coins (the canary in run r's data).
        seeds: R training seeds (as ``fit``'s ``seed``).
        spec: the recipe (epochs, lr, optimizer, momentum).
        noise_multiplier: σ (``DPSGD.calibrate`` from the public n).
        max_grad_norm: C.
        sample_rate: q (from the public n).
        steps: T, a whole number of epochs.
        expected_batch_size: int(n·q).
        build: builds the untrained model as ``fit`` does (its draws from the global RNG precede the noise).
        device: where the runs train.

    Returns:
        The R final heads (``RunsResult``).

    Raises:
        ValueError: a model ``linear_head`` refuses, mismatched lengths, or T not a multiple of the epochs.
    """
    if len(included) != len(seeds) or not len(seeds):
        raise ValueError(f"need one coin per seed and at least one run, got {len(included)} coins, {len(seeds)} seeds")
    if steps % spec.epochs:
        raise ValueError(f"T = {steps} steps is not a whole number of epochs ({spec.epochs})")
    from bench.core.models import FrozenFront

    model.load_state_dict(initial)
    front, head = linear_head(model)
    records = torch.cat([x, canary[0]])
    with torch.no_grad():  # the fixed front once, as train_fast computes a FrozenFront's features
        a = (model.features(records, device) if isinstance(model, FrozenFront) else front(records.to(device)))
    a = a.flatten(1).to(device)
    labels = torch.cat([y, canary[1]]).to(device)
    per = max(1, MEMORY_FLOATS // (len(labels) * head.out_features))
    parts = [_train_chunk(head, a, labels, included[i : i + per], seeds[i : i + per], spec,
                          noise_multiplier=noise_multiplier, max_grad_norm=max_grad_norm, sample_rate=sample_rate,
                          steps=steps, expected_batch_size=expected_batch_size, build=build)
             for i in range(0, len(seeds), per)]
    return RunsResult(torch.cat([w for w, _ in parts]), torch.cat([b for _, b in parts]))


def _train_chunk(head: nn.Linear, a: torch.Tensor, y: torch.Tensor, included: Sequence[bool], seeds: Sequence[int],
                 spec, *, noise_multiplier: float, max_grad_norm: float, sample_rate: float, steps: int,
                 expected_batch_size: int, build: Callable[[], nn.Module]) -> tuple[torch.Tensor, torch.Tensor]:
    """One chunk of ``train_runs``' runs; returns their final weights ``(R, K, d)`` and biases ``(R, K)``.

    Each run has its own parameters and optimizer; the clipped sums of all runs come from one batched computation, and
    each run's noise and update from the mechanism's ``fast.noisy_step``.
    """
    bias = head.bias is not None and head.bias.requires_grad
    runs = [[nn.Parameter(p.detach().clone()) for p in ((head.weight, head.bias) if bias else (head.weight,))]
            for _ in seeds]
    optimizers = [make_optimizer(params, spec) for params in runs]
    noise = [_noise_generator(build, int(s)) for s in seeds]
    poisson = [torch.Generator().manual_seed(int(s)) for s in seeds]
    zero = a.new_zeros(head.out_features)
    per_epoch = steps // spec.epochs
    for _ in range(spec.epochs):
        masks = _masks(len(y) - 1, included, poisson, sample_rate=sample_rate, steps=per_epoch).to(a.device)
        for t in range(per_epoch):
            with torch.no_grad():
                w = torch.stack([p[0] for p in runs])
                b = torch.stack([p[1] for p in runs]) if bias else zero.expand(len(runs), -1)
                gw, gb = _clipped_sums(a, y, w, b, masks[:, t].to(a.dtype), max_grad_norm=max_grad_norm, bias=bias)
            for k, (params, optimizer) in enumerate(zip(runs, optimizers, strict=True)):
                optimizer.zero_grad(set_to_none=True)
                sums = {params[0]: gw[k], **({params[1]: gb[k]} if bias else {})}
                fast.noisy_step(optimizer, sums, noise_multiplier=noise_multiplier, max_grad_norm=max_grad_norm,
                                expected_batch_size=expected_batch_size, generator=noise[k])
    weights = torch.stack([p[0].detach() for p in runs])
    biases = torch.stack([p[1].detach() for p in runs]) if bias else zero.expand(len(runs), -1).clone()
    return weights, biases
