"""DP-SGD whose accountant is told half the sample rate (planted; issue 45: a bug inside the accounting code).

The mechanism samples at q = 1/⌈n/b⌉ and records it, while its PLD accountant (``_dpsgd_pld``, which calibrates σ and
certifies ε under replace-one) composes steps at q/2, so σ is calibrated too small and the certified ε understates.
"""

from __future__ import annotations

from bench.zoo.api import Bug, register_bug
from bench.zoo.bugs._accounting import patch_dpsgd_pld, true_dpsgd


def apply() -> None:
    """``mechanisms.accounting.gaussian._dpsgd_pld`` composes at q/2."""
    patch_dpsgd_pld(rate=0.5)


BUG = register_bug(Bug(
    name="dpsgd-accountant-rate", mechanism="dpsgd", summary="the accountant composes at half the sample rate",
    source="planted (issue 45: a wrong rate inside the accountant's code)", documented=False,
    changes="mechanisms/accounting/gaussian.py _dpsgd_pld: q/2", claims="ε of σ at q/2, T steps",
    apply=apply, true_epsilon=true_dpsgd, true_epsilon_text="ε(σ, q, T)"))
