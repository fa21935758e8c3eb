"""DP-SGD sampling records unevenly (planted; issue 38's conformance violation "a fifth of records at twice the rate").

The first fifth of the records join each Poisson batch with probability 2q, the rest with q, while the accountant
certifies q for everyone; the records sampled at 2q spend ε(σ, 2q, T).
"""

from __future__ import annotations

from typing import Any

from bench.zoo.api import Bug, register_bug
from bench.zoo.bugs._common import dpsgd_epsilon


def apply() -> None:
    """``fast.poisson_batches``: the same number of steps, each record i < n/5 drawn at rate 2q."""
    import torch

    import mechanisms.dpsgd.fast as fast

    def poisson_batches(x, y, *, sample_rate, generator, observe=None):  # type: ignore[no-untyped-def]
        n = len(x)
        rate = torch.full((n,), float(sample_rate))
        rate[: n // 5] = min(2 * sample_rate, 1.0)
        torch.empty((), dtype=torch.int64).random_(generator=generator)  # as the loader's base seed
        for _ in range(int(1 / sample_rate)):
            idx = torch.nonzero(torch.rand(n, generator=generator) < rate).flatten()
            if observe is not None:  # the audit run's observer sees the batches the mutant really draws
                observe(idx)
            yield x[idx], y[idx]

    fast.poisson_batches = poisson_batches


def true_epsilon(params: dict[str, Any], certified: float) -> float | None:
    """ε(σ, 2q, T): the fifth sampled at twice the rate."""
    return dpsgd_epsilon(params, sample_rate=2 * float(params["sample_rate"]))


BUG = register_bug(Bug(
    name="dpsgd-uneven-sampling", mechanism="dpsgd", summary="a fifth of the records is sampled at twice the rate",
    source="planted (issue 38: a fifth of records at twice the rate)", documented=False,
    changes="mechanisms/dpsgd/fast.py poisson_batches: records i < n/5 at rate 2q",
    claims="ε of σ at rate q for every record", apply=apply, true_epsilon=true_epsilon,
    true_epsilon_text="ε(σ, 2q, T)"))
