"""Declared post-processing of a private model.

What a mechanism (a plug-in, or DP-SGD's own ``ema_decay``) may do to the parameters outside its private steps without
spending privacy, because it reads nothing but the private iterates.

A mechanism declares it in one class attribute, read by the audit run's parameter-continuity check
(``mechanisms.dpsgd.continuity``)::

    post_processing = (EMA(decay="ema_decay"),)  # the decay: spec.params.ema_decay (None: no average)

Design notes: docs/design-notes.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["EMA", "Pruning", "Quantisation", "declared"]


@dataclass(frozen=True)
class EMA:
    """An exponential moving average of the private iterates, released in place of the last one.

    e_t = d·e_{t−1} + (1 − d)·θ_t after every private step t.

    Attributes:
        decay: d in (0, 1), or the name of a field of the spec's params that holds it (None there: no average).
        first: ``step`` (e_1 = θ_1, ``torch.optim.swa_utils.AveragedModel``'s convention) or ``initial`` (e_0 = the
            parameters the first private step finds, timm's ``ModelEmaV2``).
    """

    decay: float | str
    first: str = "step"

    def __post_init__(self) -> None:
        if self.first not in ("step", "initial"):
            raise ValueError(f"EMA first must be 'step' or 'initial', got {self.first!r}")

    def resolve(self, spec: Any) -> float | None:
        """The decay d of this run.

        Args:
            spec: the run's ``TrainSpec`` (its ``params`` hold a named decay), or None.

        Returns:
            d, or None where the named field is None (no average this run).

        Raises:
            ValueError: d outside (0, 1), or a named field the spec's params lack.
        """
        decay = self.decay
        if isinstance(decay, str):
            params = getattr(spec, "params", None)
            if params is None or not hasattr(params, decay):
                raise ValueError(f"EMA(decay={decay!r}): the run's params have no field {decay!r}")
            decay = getattr(params, decay)
            if decay is None:
                return None
        if not 0.0 < float(decay) < 1.0:
            raise ValueError(f"EMA decay must be in (0, 1), got {decay!r}")
        return float(decay)


@dataclass(frozen=True)
class Pruning:
    """Entries of the released parameters set to zero after the last private step (by magnitude or a fixed mask).

    Declared, not verified.
    """


@dataclass(frozen=True)
class Quantisation:
    """The released parameters rounded to another dtype or grid after the last private step: declared, not verified."""


def declared(mechanism: Any, spec: Any) -> tuple[float | None, str, list[str]]:
    """A mechanism's declared post-processing in this run.

    Args:
        mechanism: the mechanism (class or instance; its ``post_processing``, empty when absent).
        spec: the run's ``TrainSpec``, or None.

    Returns:
        ``(EMA decay or None, the EMA's first iterate convention, the names of the unverified declarations)``.

    Raises:
        ValueError: a declaration that is none of ``EMA``, ``Pruning``, ``Quantisation``, two EMAs, or a bad decay.
    """
    decay, first, unverified = None, "step", []
    for item in getattr(mechanism, "post_processing", ()) or ():
        if isinstance(item, EMA):
            if decay is not None:
                raise ValueError("post_processing declares two EMAs; at most one is released")
            decay, first = item.resolve(spec), item.first
        elif isinstance(item, (Pruning, Quantisation)):
            unverified.append(type(item).__name__.lower())
        else:
            raise ValueError(f"post_processing: {item!r} is none of EMA, Pruning, Quantisation "
                             "(mechanisms.post_processing)")
    return decay, first, unverified
