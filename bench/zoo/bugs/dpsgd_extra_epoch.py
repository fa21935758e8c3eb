"""DP-SGD that trains one epoch more than it accounts for (planted).

``train_fast`` runs E + 1 epochs of Poisson steps while the accountant certifies the E·⌈n/b⌉ steps of ``spec.epochs``
(``params['steps']``).
"""

from __future__ import annotations

from typing import Any

from bench.zoo.api import Bug, register_bug
from bench.zoo.bugs._common import dpsgd_epsilon


def apply() -> None:
    """``fast.train_fast`` (which ``fit_fast`` calls) gets ``epochs + 1``."""
    import mechanisms.dpsgd.fast as fast

    original = fast.train_fast

    def train_fast(*args, epochs, **kwargs):  # type: ignore[no-untyped-def]
        return original(*args, epochs=epochs + 1, **kwargs)

    fast.train_fast = train_fast


def true_epsilon(params: dict[str, Any], certified: float) -> float | None:
    """ε(σ, q, T + 1/q): one epoch is round(1/q) steps."""
    return dpsgd_epsilon(params, steps=int(params["steps"]) + round(1 / float(params["sample_rate"])))


BUG = register_bug(Bug(
    name="dpsgd-extra-epoch", mechanism="dpsgd", summary="one epoch of steps more than the accountant counts",
    source="planted (issue 38's conformance tests: T + 1 steps)", documented=False,
    changes="mechanisms/dpsgd/fast.py train_fast: epochs + 1", claims="ε of σ at q and the recorded T steps",
    apply=apply, true_epsilon=true_epsilon, true_epsilon_text="ε(σ, q, T + 1/q)"))
