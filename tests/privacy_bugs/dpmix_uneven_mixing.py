"""DPMix mixing a fifth of the records (the first n/5) at twice the rate of the rest while the accountant assumes
uniform ℓ-subsets (every record at rate ℓ/n): those records spend more than certified; the audit's canary slots sit
among the rest, so the lower bounds see nothing, and the inclusion-dispersion test of its conformance catches it."""

import torch

import mechanisms.dpmix.mixing as mixing


def sample_subsets(n, size, count, *, generator):
    if not 1 <= size <= n:
        raise ValueError(f"mixture degree {size} must be in [1, {n}] (the number of records)")
    weights = torch.ones(n)
    weights[: n // 5] = 2.0
    return torch.multinomial(weights.expand(count, n), size, replacement=False, generator=generator)


mixing.sample_subsets = sample_subsets
