"""The attack context: what an attack may use on one target, and how it trains models like the target.

The attack context: everything an attack may use on one target (the trained target, its membership split, the
scored rows) and the function that trains shadow, reference and audit models exactly as the target was trained
(``TrainLikeTarget``; the runner implements it, ``OneAtATime`` makes one from a plain function).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import Field, dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    import torch

    from bench.core.data import ArrayDataset, MembershipSplit
    from bench.core.types import PrivacySpent, Release, TrainedModel, TrainSpec


class AuditRequest(Protocol):
    """What an audit run asks of ``Mechanism.fit``.

    (its ``audit`` argument; e.g. ``GradientCanaries``, ``CleanWeights``, ``OpacusCanaries``.) Any dataclass instance,
    frozen by convention, whose fields (``dataclasses.asdict``) enter the audit run's cache key beside its class name. A
    request with an ``observe`` method watches the mechanism's own training from outside instead
    (``bench.execution.trainjob.run_job``).
    """

    __dataclass_fields__: ClassVar[dict[str, Field[Any]]]  # what makes a dataclass instance (typeshed's)


class TrainLikeTarget(Protocol):
    """Trains shadow / reference / canary models exactly as the target was trained on the attacker's data.

    (same mechanism, settings, target ε and δ.) Results go through the model cache (a cached model is loaded, never
    retrained). The runner implements it; ``OneAtATime`` makes one from a plain function. ``batch_size``: the target's
    batch size (None: unknown); ``spec``: the target's training settings (None: unknown), e.g. to build the architecture
    an auditor's initial model must have.
    """

    batch_size: int | None
    spec: TrainSpec | None

    def __call__(self, data: ArrayDataset, *, seed: int) -> TrainedModel:
        """One model on ``data`` with training seed ``seed``."""
        ...

    def many(self, jobs: Sequence[tuple[ArrayDataset, int]]) -> Iterator[TrainedModel]:
        """One model per ``(data, seed)`` job, in order; all are submitted first, so they can train in parallel."""
        ...

    def audit_run(self, data: ArrayDataset, *, seed: int, request: AuditRequest) -> TrainedModel:
        """One model on ``data`` trained with ``Mechanism.fit(audit=request)`` (observed: ``TrainedModel.audit``)."""
        ...

    def audit_runs(self, jobs: Sequence[tuple[ArrayDataset, int, AuditRequest | None]]) -> Iterator[TrainedModel]:
        """One model per ``(data, seed, audit request or None)`` job, all submitted at once, yielded in order."""
        ...

    def release(self, data: ArrayDataset, *, seed: int) -> tuple[Release, PrivacySpent]:
        """The mechanism's release of ``data`` at the target's settings, and its ε, δ, accountant and relation."""
        ...

    def prefetch(self, jobs: Sequence[tuple[ArrayDataset, int, AuditRequest | None]]) -> None:
        """Submit ``(data, seed, audit request or None)`` jobs a later call will ask for (a no-op is correct)."""
        ...


@dataclass(frozen=True)
class OneAtATime:
    """A ``TrainLikeTarget`` from a plain function ``fn(data, *, seed) -> TrainedModel``.

    ``many`` calls it job after job (tests, notebooks); ``spec``: the settings ``fn`` trains with, where an attack needs
    them.
    """

    fn: Callable[..., TrainedModel]
    batch_size: int | None = None
    spec: TrainSpec | None = None

    def __call__(self, data: ArrayDataset, *, seed: int) -> TrainedModel:
        """One model trained like the target on ``data`` with ``seed`` (``fn``)."""
        return self.fn(data, seed=seed)

    def many(self, jobs: Sequence[tuple[ArrayDataset, int]]) -> Iterator[TrainedModel]:
        """``fn`` on each ``(data, seed)`` job in turn, lazily."""
        return (self.fn(data, seed=seed) for data, seed in jobs)

    def audit_run(self, data: ArrayDataset, *, seed: int, request: AuditRequest) -> TrainedModel:
        """``fn(data, seed=seed, audit=request)``."""
        return self.fn(data, seed=seed, audit=request)

    def audit_runs(self, jobs: Sequence[tuple[ArrayDataset, int, AuditRequest | None]]) -> Iterator[TrainedModel]:
        """``fn`` on each job in turn, lazily, with ``audit=request`` where the request is not None."""
        return (self.fn(d, seed=s) if r is None else self.fn(d, seed=s, audit=r) for d, s, r in jobs)

    def prefetch(self, jobs: Sequence[tuple[ArrayDataset, int, AuditRequest | None]]) -> None:
        """Nothing: models are trained one at a time, when asked."""


class TargetNotTrained(RuntimeError):
    """``AttackContext.target`` asked for in a context built before the target exists.

    ``MembershipAttack.prefetch`` at the start of a run.
    """


@dataclass(frozen=True)
class AttackContext:
    """Everything an attack may use on one target.

    Attributes:
        trained: the trained target (and its release, if any); None in the context ``MembershipAttack.prefetch`` gets
            at the start of a run, before the target exists. Attacks read it as ``target``.
        split: the membership split; ``split.population`` is the attacker's own data.
        member_index: ``(n,)`` int64 rows of ``split.members`` scored by every membership attack of the cell
            (balanced, drawn with ``seed``; the same people for every attack, and an attack that scores fewer takes
            the first rows).
        non_member_index: ``(n,)`` int64 rows of ``split.non_members``, drawn the same way.
        seed: the cell's seed.
        device: where to run the target.
        train_like_target: trains shadow models (and, with ``audit_run``, audit runs).
        mechanism: the target's registered mechanism (what audit runs it supports: ``Mechanism.audits``).
    """

    trained: TrainedModel | None
    split: MembershipSplit
    member_index: torch.Tensor
    non_member_index: torch.Tensor
    seed: int
    device: torch.device
    train_like_target: TrainLikeTarget
    mechanism: str = ""

    @property
    def target(self) -> TrainedModel:
        """The trained target; raises ``TargetNotTrained`` before the target exists (in a ``prefetch``)."""
        if self.trained is None:
            raise TargetNotTrained("ctx.target is not trained yet: a prefetch at the start of a run sees no target; "
                                   "use it in score or reconstruct only")
        return self.trained

    def sides(self, limit: int | None = None) -> tuple[ArrayDataset, ArrayDataset]:
        """The scored ``(members, non_members)``: the first ``limit`` rows of each side (None: all)."""
        m, n = self.member_index[:limit], self.non_member_index[:limit]
        return self.split.members.subset(m), self.split.non_members.subset(n)

    def labels(self, limit: int | None = None) -> np.ndarray:
        """``(N,)`` int64 membership labels in ``candidates``' order: ones for the members, then zeros."""
        n = len(self.member_index[:limit])
        return np.concatenate([np.ones(n, np.int64), np.zeros(len(self.non_member_index[:limit]), np.int64)])

    def candidates(self, limit: int | None = None) -> ArrayDataset:
        """The scored records (the first ``limit`` of each side, None: all) as one dataset, members first."""
        from bench.core.data import concat

        return concat(*self.sides(limit))
