"""Local noise accounted at image sensitivity 1 instead of 2.

(planted; issue 45: a wrong sensitivity inside the accounting code; the ``local-gaussian`` sources' own error,
docs/reproductions.md.) Two unit-norm images are up to 2 apart under replace-one, while the accountant's image channel
(``_record_pld_epsilon``) takes them 1 apart, so σ is calibrated half as large as it must be.
"""

from __future__ import annotations

from typing import Any

from bench.zoo.api import Bug, register_bug
from bench.zoo.bugs._accounting import true_local


def apply() -> None:
    """``mechanisms.accounting.gaussian._record_pld_epsilon`` reads σ as 2σ (sensitivity 1 at its fixed 2)."""
    import mechanisms.accounting.gaussian as gaussian

    original = gaussian._record_pld_epsilon

    def _record_pld_epsilon(sigma, delta, label_epsilon, num_classes):  # type: ignore[no-untyped-def]
        return original(2 * sigma, delta, label_epsilon, num_classes)

    gaussian._record_pld_epsilon = _record_pld_epsilon


def true_epsilon(params: dict[str, Any], certified: float) -> float:
    """The record's ε at the recorded σ, sensitivity 2, composed with the recorded label channel."""
    return true_local(params)


BUG = register_bug(Bug(
    name="local-accountant-sensitivity", mechanism="local-gaussian",
    summary="the accountant's image sensitivity is 1, not 2", documented=False,
    source="planted (issue 45: a wrong sensitivity inside the accountant's code; the sources' own)",
    changes="mechanisms/accounting/gaussian.py _record_pld_epsilon: sensitivity 1",
    claims="ε of σ at sensitivity 1 (+ label)", apply=apply, true_epsilon=true_epsilon,
    true_epsilon_text="ε(σ, sensitivity 2) ∘ label channel"))
