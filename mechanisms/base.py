"""The mechanism protocol: a way of training on private data."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:  # pragma: no cover
    import torch
    from torch import nn

    from bench.core.data import ArrayDataset
    from bench.core.types import TrainedModel, TrainSpec


class Mechanism(Protocol):
    """A way of training on private data. One module, one registration line, one test file.

    ``fit`` must be deterministic given ``seed`` on CPU.
    """

    name: str
    guarantee: str

    def build(self, input_shape: tuple[int, ...], num_classes: int, spec: TrainSpec) -> nn.Module:
        """The untrained architecture of the model ``fit`` returns (used to reload cached weights)."""
        ...

    def fit(
        self,
        train: ArrayDataset,
        spec: TrainSpec,
        *,
        target_epsilon: float | None,
        delta: float,
        seed: int,
        device: torch.device,
    ) -> TrainedModel:
        """Train on ``train`` so that the result is (target ε, δ)-DP where the mechanism gives a guarantee.

        Raises:
            ValueError: if the target cannot be met (e.g. ε <= 0).
        """
        ...
