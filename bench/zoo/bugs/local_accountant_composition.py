"""Local noise accounted for its image channel only.

(planted; issue 45: a wrong composition count inside the accounting code.) Each record releases its image and its
randomized-response label, while the accountant (``_record_pld_epsilon``) composes one mechanism, the image's, so σ is
calibrated to the whole ε and the label's ε_label comes on top.
"""

from __future__ import annotations

from typing import Any

from bench.zoo.api import Bug, register_bug
from bench.zoo.bugs._accounting import true_local


def apply() -> None:
    """``mechanisms.accounting.gaussian._record_pld_epsilon`` returns the image channel's ε alone."""
    import mechanisms.accounting.gaussian as gaussian

    def _record_pld_epsilon(sigma, delta, label_epsilon, num_classes):  # type: ignore[no-untyped-def]
        return gaussian.gaussian_epsilon(sigma=sigma, delta=delta, sensitivity=2.0)

    gaussian._record_pld_epsilon = _record_pld_epsilon


def true_epsilon(params: dict[str, Any], certified: float) -> float:
    """The record's ε: the recorded σ at sensitivity 2 composed with the recorded label channel."""
    return true_local(params)


BUG = register_bug(Bug(
    name="local-accountant-composition", mechanism="local-gaussian",
    summary="the accountant composes the image channel alone, not the label", documented=False,
    source="planted (issue 45: a wrong composition count inside the accountant's code)",
    changes="mechanisms/accounting/gaussian.py _record_pld_epsilon: image channel only",
    claims="ε of σ at sensitivity 2, label left out", apply=apply, true_epsilon=true_epsilon,
    true_epsilon_text="ε(σ) ∘ label channel"))
