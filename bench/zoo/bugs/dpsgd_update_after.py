"""DP-SGD whose ``fit`` takes one non-private step on its members after the private training.

Planted; issue 54: "DP-SGD's own path gets the same check in its audit run, so a future change that updates the model
outside the noisy step is caught in CI". After ``fit``'s training, one plain SGD step on the cross-entropy of every
record, all parameters, no clipping and no noise; the accountant certifies the private steps alone. Its ε is unbounded.
"""

from __future__ import annotations

from typing import Any

from bench.zoo.api import Bug, register_bug
from bench.zoo.bugs._common import unbounded


def apply() -> None:
    """``DPSGD.fit``: its trained model takes one non-private SGD step (lr 0.1) on every record before it returns."""
    from bench.zoo.bugs._common import non_private_step
    from mechanisms.dpsgd.mechanism import DPSGD

    original = DPSGD.fit

    def fit(self: Any, train: Any, spec: Any, **kwargs: Any):  # type: ignore[no-untyped-def]
        trained = original(self, train, spec, **kwargs)
        device = next(trained.model.parameters()).device
        non_private_step(trained.model, train.x.to(device), train.y.to(device), optimizer="sgd", lr=0.1)
        return trained

    DPSGD.fit = fit


BUG = register_bug(Bug(
    name="dpsgd-update-after", mechanism="dpsgd",
    summary="after the private training, one non-private SGD step on every record",
    source="planted (issue 54: a non-private update outside the optimizer, in the mechanism's own code)",
    documented=False,
    changes="mechanisms/dpsgd/mechanism.py DPSGD.fit: + one SGD step (lr 0.1) on all records before it returns",
    claims="ε of σ at q and T (the private steps)", apply=apply, true_epsilon=unbounded,
    true_epsilon_text="unbounded"))
