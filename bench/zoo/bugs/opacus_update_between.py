"""The example Opacus loop with a non-private step on the members between its first and second private epochs.

Planted; issue 54: "the same step between two private epochs". When the loader's first epoch ends, one plain SGD step on
the cross-entropy of every record, all parameters, no clipping and no noise; the private epochs go on from there and
their ε is reported. A record's influence on that step is unbounded, so is the released model's ε.
"""

from __future__ import annotations

from typing import Any

from bench.zoo.api import Bug, register_bug
from bench.zoo.bugs._common import unbounded


class _AfterFirstEpoch:
    """The private loader, with a non-private step on the module once its first epoch has been iterated."""

    def __init__(self, loader: Any, module: Any) -> None:
        self.loader, self.module, self.epochs = loader, module, 0

    def __len__(self) -> int:
        return len(self.loader)

    def __iter__(self):  # type: ignore[no-untyped-def]
        from bench.zoo.bugs._common import non_private_step

        yield from self.loader
        self.epochs += 1
        if self.epochs == 1:
            x, y = self.loader.dataset.tensors
            non_private_step(self.module, x, y, optimizer="sgd", lr=0.5)


def apply() -> None:
    """Patch ``PrivacyEngine.make_private`` (which ``make_private_with_epsilon`` calls).

    Its loader then steps the module non-privately after the first epoch.
    """
    from opacus import PrivacyEngine

    original = PrivacyEngine.make_private

    def make_private(self, *args: Any, **kwargs: Any):  # type: ignore[no-untyped-def]
        module, optimizer, loader = original(self, *args, **kwargs)
        return module, optimizer, _AfterFirstEpoch(loader, module)

    PrivacyEngine.make_private = make_private


BUG = register_bug(Bug(
    name="opacus-update-between", mechanism="opacus-example",
    summary="between the first and second private epochs, one non-private SGD step on every record",
    source="planted (issue 54: a non-private update outside the optimizer, between two private epochs)",
    documented=False,
    changes="opacus.PrivacyEngine.make_private: its loader, after its first epoch, takes one SGD step (lr 0.5) on "
            "all records", claims="Opacus PRV ε of the private epochs", apply=apply, true_epsilon=unbounded,
    true_epsilon_text="unbounded"))
