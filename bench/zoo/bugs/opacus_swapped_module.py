"""The example Opacus loop returning another module than the one it trained privately.

(planted; issue 54: "a loop that returns a different module from the one it trained".) A copy of the initial model is
trained by the same epochs of plain SGD (no clipping, no noise) and returned in place of the private model, with the
private loop's ε — the user's script kept a non-private reference model and returned the wrong variable. Its ε is
unbounded.
"""

from __future__ import annotations

import copy
from typing import Any

from bench.zoo.api import Bug, register_bug
from bench.zoo.bugs._common import unbounded


def apply() -> None:
    """``train_with_opacus`` returns a non-privately trained copy of its initial model."""
    import opacus_plugin  # type: ignore[import-not-found]

    from bench.zoo.bugs._common import non_private_step

    loop = opacus_plugin.train_with_opacus

    def train_with_opacus(model: Any, x: Any, y: Any, **kwargs: Any):  # type: ignore[no-untyped-def]
        reference = copy.deepcopy(model)
        _, epsilon, facts = loop(model, x, y, **kwargs)
        for _ in range(int(kwargs.get("epochs", 1))):
            non_private_step(reference, x, y, optimizer="sgd", lr=float(kwargs.get("lr", 0.1)))
        return reference, epsilon, facts

    opacus_plugin.train_with_opacus = train_with_opacus


BUG = register_bug(Bug(
    name="opacus-swapped-module", mechanism="opacus-example",
    summary="returns a copy of the initial model trained without privacy instead of the private model",
    source="planted (issue 54: the released module is not the one the private steps trained)", documented=False,
    changes="examples/opacus_plugin.py train_with_opacus: returns a deep copy of its initial model, trained by one "
            "plain full-batch SGD step per epoch", claims="Opacus PRV ε of the private epochs", apply=apply,
    true_epsilon=unbounded, true_epsilon_text="unbounded"))
