"""The example Opacus loop followed by a non-private step on the members.

Planted; issue 54: "a loop that trains privately through Opacus and then changes the model's parameters with an ordinary
optimizer on the members — the kind of step people add to fix up a model — reports Opacus' ε and passes the ci profile
with exit 0". After the private epochs, one Adam step on the cross-entropy of every record, all parameters, no clipping
and no noise; the ε of the private epochs is reported. A record's influence on that step is unbounded, so is the
released model's ε.
"""

from __future__ import annotations

from typing import Any

from bench.zoo.api import Bug, register_bug
from bench.zoo.bugs._common import unbounded


def apply() -> None:
    """``train_with_opacus``: its model, once trained, takes one non-private Adam step on every record."""
    import opacus_plugin  # type: ignore[import-not-found]

    from bench.zoo.bugs._common import non_private_step

    loop = opacus_plugin.train_with_opacus

    def train_with_opacus(model: Any, x: Any, y: Any, **kwargs: Any):  # type: ignore[no-untyped-def]
        trained, epsilon, facts = loop(model, x, y, **kwargs)
        non_private_step(trained, x, y, optimizer="adam", lr=0.01)
        return trained, epsilon, facts

    opacus_plugin.train_with_opacus = train_with_opacus


BUG = register_bug(Bug(
    name="opacus-update-after", mechanism="opacus-example",
    summary="after the private epochs, one non-private Adam step on every record (a fix-up step)",
    source="planted (issue 54: a non-private update outside the optimizer, after the private steps)",
    documented=False,
    changes="examples/opacus_plugin.py train_with_opacus: + one Adam step (lr 0.01) on all records after training",
    claims="Opacus PRV ε of the private epochs", apply=apply, true_epsilon=unbounded,
    true_epsilon_text="unbounded"))
