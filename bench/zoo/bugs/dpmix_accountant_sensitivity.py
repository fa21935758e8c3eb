"""DPMix accounted without its label channel (planted; issue 45: a wrong sensitivity inside the accounting code).

The accountant's Δ² = d_x/σ_x² + Δ_y²/σ_y² loses the label's Δ_y² = 2 (``label_sensitivity`` returns 0), while every
mixture releases the noisy mean of its records' one-hot labels.
"""

from __future__ import annotations

from bench.zoo.api import Bug, register_bug
from bench.zoo.bugs._accounting import true_dpmix


def apply() -> None:
    """``mechanisms.accounting.dpmix.label_sensitivity`` returns 0."""
    import mechanisms.accounting.dpmix as accounting

    def label_sensitivity(label_form, d_y):  # type: ignore[no-untyped-def]
        return 0.0

    accounting.label_sensitivity = label_sensitivity


BUG = register_bug(Bug(
    name="dpmix-accountant-sensitivity", mechanism="dpmix", summary="the accountant's sensitivity leaves the label out",
    source="planted (issue 45: a wrong sensitivity inside the accountant's code)", documented=False,
    changes="mechanisms/accounting/dpmix.py label_sensitivity: 0", claims="DPMix's ε at Δ² = d_x/σ_x²",
    apply=apply, true_epsilon=true_dpmix, true_epsilon_text="DPMix ε at Δ² = d_x/σ_x² + 2/σ_y²"))
