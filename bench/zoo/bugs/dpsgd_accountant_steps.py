"""DP-SGD whose accountant composes half the steps.

(planted; issue 45: a wrong composition count inside the accounting code.) The mechanism takes T = E·⌈n/b⌉ noisy steps
and records T, while its PLD accountant (``_dpsgd_pld``) composes T/2, so σ is calibrated too small and the certified ε
understates.
"""

from __future__ import annotations

from bench.zoo.api import Bug, register_bug
from bench.zoo.bugs._accounting import patch_dpsgd_pld, true_dpsgd


def apply() -> None:
    """``mechanisms.accounting.gaussian._dpsgd_pld`` composes ⌊T/2⌋ steps."""
    patch_dpsgd_pld(steps=0.5)


BUG = register_bug(Bug(
    name="dpsgd-accountant-steps", mechanism="dpsgd", summary="the accountant composes half the steps",
    source="planted (issue 45: a wrong composition count inside the accountant's code)", documented=False,
    changes="mechanisms/accounting/gaussian.py _dpsgd_pld: T/2 steps", claims="ε of σ, q at T/2 steps",
    apply=apply, true_epsilon=true_dpsgd, true_epsilon_text="ε(σ, q, T)"))
