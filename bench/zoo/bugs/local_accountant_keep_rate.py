"""Local noise whose randomized response keeps labels at the rate of twice its ε.

(planted; issue 45: a wrong rate inside the accounting code.) The keep-rate formula the mechanism draws with
(``randomized_response_keep``, in the accountant's module) computes e^{2ε}/(e^{2ε} + k − 1), while the accountant
composes randomized response at ε.
"""

from __future__ import annotations

from typing import Any

from bench.zoo.api import Bug, register_bug
from bench.zoo.bugs._accounting import true_local


def apply() -> None:
    """``randomized_response_keep`` (in the accountant's module and as the mechanism calls it) at 2ε."""
    import mechanisms.accounting.gaussian as gaussian
    import mechanisms.local.mechanism as local

    original = gaussian.randomized_response_keep

    def randomized_response_keep(epsilon: float, num_classes: int) -> float:
        return original(2 * epsilon, num_classes)

    gaussian.randomized_response_keep = randomized_response_keep
    local.randomized_response_keep = randomized_response_keep  # type: ignore[attr-defined]


def true_epsilon(params: dict[str, Any], certified: float) -> float:
    """The record's ε with randomized response at 2·ε_label (its keep rate), the recorded σ at sensitivity 2."""
    return true_local(params, label_factor=2.0)


BUG = register_bug(Bug(
    name="local-accountant-keep-rate", mechanism="local-gaussian",
    summary="randomized response keeps labels at the rate of 2ε_label", documented=False,
    source="planted (issue 45: a wrong rate inside the accountant's code)",
    changes="mechanisms/accounting/gaussian.py randomized_response_keep: e^{2ε}/(e^{2ε} + k − 1)",
    claims="ε of σ composed with randomized response at ε_label", apply=apply, true_epsilon=true_epsilon,
    true_epsilon_text="ε(σ) ∘ RR at 2ε_label"))
