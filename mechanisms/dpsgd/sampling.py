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
    """One epoch of ``int(1/q)`` Poisson batches' int64 indices ``(B_t,)`` (possibly empty) over ``n`` records.

    Opacus' loader's draws (``UniformWithReplacementSampler``, after the iterator's base seed) from ``generator``.
    """
    from opacus.utils.uniform_sampler import UniformWithReplacementSampler

    torch.empty((), dtype=torch.int64).random_(generator=generator)  # DataLoader iterator's base seed
    for idx in UniformWithReplacementSampler(num_samples=n, sample_rate=sample_rate, generator=generator):
        yield torch.as_tensor(idx, dtype=torch.int64)


def poisson_batches(x: torch.Tensor, y: torch.Tensor, *, sample_rate: float, generator: torch.Generator,
                    observe: Callable[[torch.Tensor], None] | None = None
                    ) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """One epoch of Poisson batches ``(x[idx], y[idx])`` (``poisson_indices``); ``observe`` sees each ``idx`` first."""
    for idx in poisson_indices(len(x), sample_rate=sample_rate, generator=generator):
        if observe is not None:
            observe(idx)
        yield x[idx], y[idx]
