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
        """One model per independent job, yielded in the order of ``jobs``.

        Every job is submitted before the first model is yielded, so they can train in parallel (the ``ray`` executor)
        or as one vectorised ensemble (non-private shadows, ``bench.execution.ensemble``).

        Args:
            jobs: ``(data, seed)`` pairs: the training records (``(N, C, H, W)`` images and ``(N,)`` labels) and the
                training seed of each model.

        Returns:
            An iterator of the trained models, one per job, in order.
        """
        ...

    def audit_run(self, data: ArrayDataset, *, seed: int, request: AuditRequest) -> TrainedModel:
        """One model on ``data`` with an audit ``request`` passed to ``Mechanism.fit``.

        e.g. white-box gradient canaries. Through the cache like any model.

        Args:
            data: the training records (the members plus any canaries the design includes).
            seed: the training seed.
            request: what the audit run observes (``Mechanism.fit``'s ``audit``).

        Returns:
            The trained model; the run's observations are in ``TrainedModel.audit``.
        """
        ...

    def audit_runs(self, jobs: Sequence[tuple[ArrayDataset, int, AuditRequest | None]]) -> Iterator[TrainedModel]:
        """Models trained like the target.

        All submitted at once (the executor spreads them; Ray runs them in parallel) and yielded in order. Through the
        cache like any model.

        Args:
            jobs: ``(data, seed, request)`` triples; ``request``: ``Mechanism.fit``'s ``audit``, or None.

        Returns:
            An iterator of the trained models, one per job, in order.
        """
        ...

    def release(self, data: ArrayDataset, *, seed: int) -> tuple[Release, PrivacySpent]:
        """The mechanism's own release of ``data`` with the target's settings, ε and δ.

        (``Mechanism.release``, for mechanisms that publish data.)

        Args:
            data: the records released.
            seed: the release's seed.

        Returns:
            The release and the privacy it spent (ε, δ, accountant and neighbouring relation).
        """
        ...

    def prefetch(self, jobs: Sequence[tuple[ArrayDataset, int, AuditRequest | None]]) -> None:
        """Submit models a later call will ask for.

        So that an idle executor trains them while the attacker does other work; returns nothing (a no-op is correct).

        Args:
            jobs: ``(data, seed, audit request or None)`` triples, as ``audit_runs`` takes them.
        """
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
        """``fn`` on each job in turn, lazily.

        Args:
            jobs: ``(data, seed)`` pairs.

        Returns:
            An iterator of ``fn``'s models, one per job, in order.
        """
        return (self.fn(data, seed=seed) for data, seed in jobs)

    def audit_run(self, data: ArrayDataset, *, seed: int, request: AuditRequest) -> TrainedModel:
        """``fn(data, seed=seed, audit=request)``.

        Args:
            data: the training records.
            seed: the training seed.
            request: the audit request passed on as ``audit``.

        Returns:
            ``fn``'s model.
        """
        return self.fn(data, seed=seed, audit=request)

    def audit_runs(self, jobs: Sequence[tuple[ArrayDataset, int, AuditRequest | None]]) -> Iterator[TrainedModel]:
        """``fn`` on each job in turn, lazily, with ``audit=request`` where the request is not None.

        Args:
            jobs: ``(data, seed, request or None)`` triples.

        Returns:
            An iterator of ``fn``'s models, one per job, in order.
        """
        return (self.fn(d, seed=s) if r is None else self.fn(d, seed=s, audit=r) for d, s, r in jobs)

    def prefetch(self, jobs: Sequence[tuple[ArrayDataset, int, AuditRequest | None]]) -> None:
        """Nothing: models are trained one at a time, when asked.

        Args:
            jobs: ``(data, seed, request or None)`` triples (ignored).
        """


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
        """The trained target.

        Raises:
            TargetNotTrained: the context was built before the target exists (a ``prefetch`` at the start of a run
                must not use the target).
        """
        if self.trained is None:
            raise TargetNotTrained("ctx.target is not trained yet: a prefetch at the start of a run sees no target; "
                                   "use it in score or reconstruct only")
        return self.trained

    def sides(self, limit: int | None = None) -> tuple[ArrayDataset, ArrayDataset]:
        """The scored members and non-members.

        Args:
            limit: how many of each side, the first rows of ``member_index`` / ``non_member_index`` (None: all).

        Returns:
            ``(members, non_members)``: two datasets of up to ``limit`` records each.
        """
        m, n = self.member_index[:limit], self.non_member_index[:limit]
        return self.split.members.subset(m), self.split.non_members.subset(n)

    def labels(self, limit: int | None = None) -> np.ndarray:
        """The membership labels of the scored records, in ``candidates``' order.

        Args:
            limit: how many of each side (None: all).

        Returns:
            ``(N,)`` int64, members first: ones, then zeros.
        """
        n = len(self.member_index[:limit])
        return np.concatenate([np.ones(n, np.int64), np.zeros(len(self.non_member_index[:limit]), np.int64)])

    def candidates(self, limit: int | None = None) -> ArrayDataset:
        """The scored records as one dataset.

        Args:
            limit: how many of each side (None: all).

        Returns:
            The ``N`` records, members first (their membership labels: ``labels``).
        """
        from bench.core.data import concat

        return concat(*self.sides(limit))
