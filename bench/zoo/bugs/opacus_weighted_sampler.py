"""The example Opacus loop with a ``WeightedRandomSampler`` whose sampling rate is not the accountant's.

Source: Opacus issue #813 ("WeightedRandomSampler causes silent epsilon miscalculation") and PR #815: with a
``WeightedRandomSampler`` Opacus derives the accountant's rate from ``1/len(data_loader)``, which is not the rate the
sampler draws records at. In #813 the error overstated ε; with unequal weights it understates it for the heavy
records. The loop's own setting ``oversample: true`` keeps such a sampler (every other record weight 2, drawn with
replacement, n draws per epoch): a heavy record is drawn at 4/3 of the rate q the accountant is told, and may appear
twice in a batch. No accountant covers weighted sampling with replacement: the true ε is left unknown.
"""

from __future__ import annotations

from bench.zoo.api import Bug, register_bug


def apply() -> None:
    """``train_with_opacus`` always runs with ``oversample=True``."""
    from bench.zoo.bugs._opacus import force_loop_settings

    force_loop_settings(oversample=True)


BUG = register_bug(Bug(
    name="opacus-weighted-sampler", mechanism="opacus-example",
    summary="a WeightedRandomSampler draws half the records at 4/3 of the rate the accountant is told",
    source="Opacus issue #813, PR #815", documented=True,
    changes="examples/opacus_plugin.py train_with_opacus: oversample=True (WeightedRandomSampler, weights 2 and 1)",
    claims="Opacus PRV ε at σ, q = 1/len(loader), T", apply=apply, true_epsilon=None,
    true_epsilon_text="unknown: above ε(σ, 4q/3, T) for the heavy records (drawn with replacement)"))
