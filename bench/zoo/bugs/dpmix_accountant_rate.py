"""DPMix accounted at the sampling rate 1/n instead of ℓ/n.

(planted; issue 45: a wrong rate inside the accounting code; the rate a source's formula used,
``mechanisms.accounting.dpmix``'s ``sample_rate`` option.) The accountant that calibrates σ, certifies ε and records the
profile takes a record to be in a mixture with probability 1/n, while each mixture of ℓ records holds it with
probability ℓ/n.
"""

from __future__ import annotations

from typing import Any

from bench.zoo.api import Bug, register_bug
from bench.zoo.bugs._accounting import true_dpmix


def apply() -> None:
    """``dpmix_epsilon`` (in the accountant's module and as the mechanism calls it) reads n·ℓ records: q = 1/n."""
    import mechanisms.accounting.dpmix as accounting
    import mechanisms.dpmix.mechanism as mechanism

    original = accounting.dpmix_epsilon

    def dpmix_epsilon(**kwargs: Any) -> float:
        return original(**{**kwargs, "num_records": kwargs["num_records"] * kwargs["mixture_degree"]})

    accounting.dpmix_epsilon = dpmix_epsilon
    mechanism.dpmix_epsilon = dpmix_epsilon  # type: ignore[attr-defined]


BUG = register_bug(Bug(
    name="dpmix-accountant-rate", mechanism="dpmix", summary="the accountant's sampling rate is 1/n, not ℓ/n",
    source="planted (issue 45: a wrong rate inside the accountant's code; a source's 1/n)", documented=False,
    changes="mechanisms/accounting/dpmix.py dpmix_epsilon: q = 1/n", claims="DPMix's ε at σ, σ_y, ℓ, T, rate 1/n",
    apply=apply, true_epsilon=true_dpmix, true_epsilon_text="DPMix ε at rate ℓ/n"))
