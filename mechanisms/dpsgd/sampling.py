"""DP-SGD's Poisson sampling, drawn exactly as iterating Opacus' ``DPDataLoader`` draws it.

Abadi et al. 2016, §3.1: the accountant's "lots", each record in each lot independently with probability q.

``poisson_indices`` is the sampler (the indices each step's batch holds); ``poisson_batches`` indexes the tensors with
them and, in an audit run, shows each batch's indices to an observer (``CanaryTracker.batch``: every record's
participation count, tested against Poisson(q) by the run's conformance tests) without changing any draw.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import torch

__all__ = ["poisson_batches", "poisson_indices"]


def poisson_indices(n: int, *, sample_rate: float, generator: torch.Generator) -> Iterator[torch.Tensor]:
    """One epoch of Poisson batches' record indices (int64 ``(B_t,)`` each, possibly empty), over ``n`` records.

    Opacus' loader is a torch ``DataLoader`` over ``UniformWithReplacementSampler``: creating its iterator draws one
    int64 base seed from the loader's generator, then each of ``int(1/q)`` steps draws ``torch.rand(n) < q``; the same
    draws here.

    Args:
        n: the number of records N.
        sample_rate: q in (0, 1], each record's probability of being in a batch.
        generator: the generator the loader would use.

    Yields:
        ``int(1/q)`` index tensors ``(B_t,)``, int64, one per step.
    """
    from opacus.utils.uniform_sampler import UniformWithReplacementSampler

    torch.empty((), dtype=torch.int64).random_(generator=generator)  # DataLoader iterator's base seed
    for idx in UniformWithReplacementSampler(num_samples=n, sample_rate=sample_rate, generator=generator):
        yield torch.as_tensor(idx, dtype=torch.int64)


def poisson_batches(x: torch.Tensor, y: torch.Tensor, *, sample_rate: float, generator: torch.Generator,
                    observe: Callable[[torch.Tensor], None] | None = None
                    ) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """One epoch of Poisson-sampled batches ``(x[idx], y[idx])`` of ``x (N, ...)``, ``y (N,)``.

    ``poisson_indices``; no per-sample collation. ``observe``: called with each batch's indices before it is yielded (an
    audit run's observer; the draws are the same with or without it).

    Args:
        x: the records ``(N, ...)``.
        y: their labels ``(N,)``.
        sample_rate: q in (0, 1].
        generator: the sampling generator (``poisson_indices``).
        observe: called with each batch's int64 indices ``(B_t,)``, or None.

    Yields:
        ``(x[idx], y[idx])``, one batch per step (``int(1/q)`` steps), possibly empty.
    """
    for idx in poisson_indices(len(x), sample_rate=sample_rate, generator=generator):
        if observe is not None:
            observe(idx)
        yield x[idx], y[idx]
