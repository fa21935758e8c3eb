"""DP-SGD on shuffled fixed-size batches accounted as Poisson sampling.

Source: Opacus issue #80 ("Effect of constant batch size to the privacy calculation": the accountant assumes each
record is sampled independently with probability q, the tutorials used constant-size shuffled batches) and PR #128
(which moved the examples to Poisson batches for that reason); Chua et al., "How Private are DP-SGD
Implementations?" (ICML 2024) show shuffled batches can spend far more than the Poisson ε. Each epoch is one random
permutation cut into ⌊1/q⌋ batches of (about) n·q records: a record is in exactly one batch per epoch, not in each
with probability q, and the accountant still certifies Poisson subsampling at q. No tight accountant for shuffling
is known: the true ε lies between the Poisson ε and the E-fold composition of the Gaussian mechanism without
amplification (``DPSGD.privacy``'s note).
"""

from __future__ import annotations

from bench.zoo.api import Bug, register_bug


def apply() -> None:
    """``fast.poisson_batches``: a permutation per epoch, cut into ⌊1/q⌋ equal batches (the same number of steps)."""
    import torch

    import mechanisms.dpsgd.fast as fast

    def poisson_batches(x, y, *, sample_rate, generator, observe=None):  # type: ignore[no-untyped-def]
        perm = torch.randperm(len(x), generator=generator)
        for idx in torch.tensor_split(perm, int(1 / sample_rate)):
            if observe is not None:  # the audit run's observer sees the batches the mutant really draws
                observe(idx)
            yield x[idx], y[idx]

    fast.poisson_batches = poisson_batches


BUG = register_bug(Bug(
    name="dpsgd-shuffled-batches", mechanism="dpsgd",
    summary="shuffled fixed-size batches, accounted as Poisson sampling at q",
    source="Opacus issue #80 and PR #128; Chua et al., ICML 2024", documented=True,
    changes="mechanisms/dpsgd/fast.py poisson_batches: one permutation per epoch cut into ⌊1/q⌋ batches",
    claims="ε of the Poisson-subsampled Gaussian at σ, q, T", apply=apply, true_epsilon=None,
    true_epsilon_text="unknown: between ε(σ, q, T) and the E-fold Gaussian without amplification"))
