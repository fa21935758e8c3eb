"""DPMix accounted for half its mixtures (planted; issue 45: a wrong composition count inside the accounting code).

The release holds T mixtures while the accountant's PLD (``dpmix_pld_epsilon``) composes T/2 of them.
"""

from __future__ import annotations

from bench.zoo.api import Bug, register_bug
from bench.zoo.bugs._accounting import true_dpmix


def apply() -> None:
    """``mechanisms.accounting.dpmix.dpmix_pld_epsilon`` composes ⌊T/2⌋ releases."""
    import mechanisms.accounting.dpmix as accounting

    original = accounting.dpmix_pld_epsilon

    def dpmix_pld_epsilon(c, q, num_samples, delta):  # type: ignore[no-untyped-def]
        return original(c, q, max(1, num_samples // 2), delta)

    accounting.dpmix_pld_epsilon = dpmix_pld_epsilon


BUG = register_bug(Bug(
    name="dpmix-accountant-count", mechanism="dpmix", summary="the accountant composes half the mixtures",
    source="planted (issue 45: a wrong composition count inside the accountant's code)", documented=False,
    changes="mechanisms/accounting/dpmix.py dpmix_pld_epsilon: T/2", claims="DPMix's ε at σ, σ_y, ℓ, T/2",
    apply=apply, true_epsilon=true_dpmix, true_epsilon_text="DPMix ε at T"))
