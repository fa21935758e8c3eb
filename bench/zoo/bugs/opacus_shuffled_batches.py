"""The example Opacus loop on shuffled fixed-size batches, accounted as Poisson sampling.

Source: Opacus issue #80 and PR #128 (see ``dpsgd_shuffled_batches``); Chua et al., ICML 2024. The loop's own
setting ``poisson_sampling: false`` keeps the DataLoader's shuffled batches of ``batch_size`` while
``make_private_with_epsilon`` calibrates σ and the PRV accountant certifies ε for Poisson sampling at
q = 1/len(loader). The true ε is not known in closed form.
"""

from __future__ import annotations

from bench.zoo.api import Bug, register_bug


def apply() -> None:
    """``train_with_opacus`` always runs with ``poisson_sampling=False``."""
    from bench.zoo.bugs._opacus import force_loop_settings

    force_loop_settings(poisson_sampling=False)


BUG = register_bug(Bug(
    name="opacus-shuffled-batches", mechanism="opacus-example",
    summary="the loop's DataLoader shuffles fixed-size batches; the accountant assumes Poisson sampling",
    source="Opacus issue #80 and PR #128; Chua et al., ICML 2024", documented=True,
    changes="examples/opacus_plugin.py train_with_opacus: poisson_sampling=False",
    claims="Opacus PRV ε of the Poisson-subsampled Gaussian at σ, q = 1/len(loader), T", apply=apply,
    true_epsilon=None, true_epsilon_text="unknown: between ε(σ, q, T) and the E-fold Gaussian without amplification"))
