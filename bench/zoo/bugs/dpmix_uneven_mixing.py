"""DPMix mixing a fifth of the records at twice the rate of the rest.

DPMix mixing a fifth of the records (the first n/5) at twice the rate of the rest (planted; issue 38) while the
accountant assumes uniform ℓ-subsets (every record at rate ℓ/n): those records spend more than certified; the audit's
canary slots sit among the rest, so the lower bounds see nothing, and the inclusion-dispersion test of its
conformance catches it.
"""

from __future__ import annotations

from bench.zoo.api import Bug, register_bug


def apply() -> None:
    """``sample_subsets`` draws its ℓ-subsets with the first n/5 records at weight 2, the rest at 1."""
    import torch

    import mechanisms.dpmix.mixing as mixing

    def sample_subsets(n, size, count, *, generator):  # type: ignore[no-untyped-def]
        if not 1 <= size <= n:
            raise ValueError(f"mixture degree {size} must be in [1, {n}] (the number of records)")
        weights = torch.ones(n)
        weights[: n // 5] = 2.0
        return torch.multinomial(weights.expand(count, n), size, replacement=False, generator=generator)

    mixing.sample_subsets = sample_subsets


BUG = register_bug(Bug(
    name="dpmix-uneven-mixing", mechanism="dpmix", summary="a fifth of the records is mixed at twice the rate",
    source="planted (issue 38: a fifth of the records at twice the rate)", documented=False,
    changes="mechanisms/dpmix/mixing.py sample_subsets: the first n/5 records at weight 2",
    claims="DPMix's ε at σ, σ_y, ℓ, T (every record at rate ℓ/n)", apply=apply, true_epsilon=None,
    true_epsilon_text="unknown"))
