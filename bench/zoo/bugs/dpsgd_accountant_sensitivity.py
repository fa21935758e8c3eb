"""DP-SGD whose replace-one accountant uses the add/remove sensitivity (planted; issue 45).

Replacing a record moves the clipped sum by up to 2C, adding or removing one by C; the accountant (``_dpsgd_pld``)
composes the add/remove pair whatever relation it is asked for, so the replace-one ε it calibrates and certifies is
about half the true one.
"""

from __future__ import annotations

from bench.zoo.api import Bug, register_bug
from bench.zoo.bugs._accounting import patch_dpsgd_pld, true_dpsgd


def apply() -> None:
    """``mechanisms.accounting.gaussian._dpsgd_pld`` accounts every relation as add/remove."""
    patch_dpsgd_pld(relation="add-remove")


BUG = register_bug(Bug(
    name="dpsgd-accountant-sensitivity", mechanism="dpsgd",
    summary="replace-one accounted at the add/remove sensitivity C, not 2C",
    source="planted (issue 45: a wrong sensitivity inside the accountant's code)", documented=False,
    changes="mechanisms/accounting/gaussian.py _dpsgd_pld: relation add-remove always",
    claims="replace-one ε of σ, q, T at sensitivity C", apply=apply, true_epsilon=true_dpsgd,
    true_epsilon_text="replace-one ε(σ, q, T)"))
