"""The attack base classes and what attacks produce: membership scores (with the design that decided who is a
member) or reconstructions. Attacks compute no metrics: the runner applies ``attacks.analysis.metrics`` and
``attacks.analysis`` to every attack's scores in one place.

A new attack is one module: a subclass of ``MembershipAttack`` or ``ReconstructionAttack`` with its ``Params``,
registered in one line (``ATTACKS.add_lazy`` in ``attacks/__init__.py``, or ``ATTACKS.add(Class)`` in a
plug-in module loaded with ``--plugins``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import Field, dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

import numpy as np

from bench.core.design import AuditDesign  # re-exported: attacks build their design from here
from bench.core.params import NoParams, Params

if TYPE_CHECKING:  # pragma: no cover
    import torch

    from bench.core.data import ArrayDataset, MembershipSplit
    from bench.core.types import PrivacySpent, Release, TrainedModel, TrainSpec

@dataclass
class MembershipScores:
    """What a membership attack returns.

    Attributes:
        scores: ``(N,)`` float, larger means "member" (±inf allowed; NaN is not).
        labels: ``(N,)`` int in {0, 1}, 1 for members (or canaries included).
        design: how ``labels`` were decided (the audit reads it).
        extra: JSON-able facts the attack wants recorded (e.g. how many shadows it trained).
        privacy: the certified privacy of the run that produced the scores, when it is not the target (an audit run
            on the members plus canaries): audits are compared with it.
        label_outcomes: ``(N,)`` int in {−1, 0, 1} for a design whose ``channels`` hold ``"label"``: the release
            labelled canary i with its pair's first label (1; the first record is present where ``labels`` is 1),
            its second (−1) or another (0).
        conformance: the audit run's conformance tests to its certified mechanism, ``{"tests": [...],
            "measured_epsilon": {...} | None}`` (``attacks.analysis.conformance``; ``bench.results.Conformance``'s
            fields); None where the attack measures none.
    """

    scores: np.ndarray
    labels: np.ndarray
    design: AuditDesign = field(default_factory=AuditDesign)
    extra: dict[str, Any] = field(default_factory=dict)  # free-form JSON, recorded as it is
    privacy: PrivacySpent | None = None
    label_outcomes: np.ndarray | None = None
    conformance: dict[str, Any] | None = None


@dataclass
class Reconstruction:
    """What a reconstruction (inversion or release) attack returns.

    Attributes:
        images: ``(K, H, W)`` float in [0, 1], one reconstruction per class (or per target record).
        labels: ``(K,)`` int, the class (or record label) each image reconstructs.
        metrics: JSON-able scores (attack accuracy, SSIM / MSE to class means, ...).
    """

    images: np.ndarray
    labels: np.ndarray
    metrics: dict[str, Any] = field(default_factory=dict)  # free-form JSON, recorded as it is


class AuditRequest(Protocol):
    """What an audit run asks of ``Mechanism.fit`` (its ``audit`` argument; e.g. ``GradientCanaries``,
    ``CleanWeights``, ``OpacusCanaries``): any dataclass instance, frozen by convention, whose fields
    (``dataclasses.asdict``) enter the audit run's cache key beside its class name. A request with an ``observe``
    method watches the mechanism's own training from outside instead (``bench.execution.trainjob.run_job``)."""

    __dataclass_fields__: ClassVar[dict[str, Field[Any]]]  # what makes a dataclass instance (typeshed's)


class TrainLikeTarget(Protocol):
    """Trains shadow / reference / canary models exactly as the target was trained (same mechanism, settings,
    target ε and δ) on the attacker's data; results go through the model cache (a cached model is loaded,
    never retrained). The runner implements it; ``OneAtATime`` makes one from a plain function. ``batch_size``:
    the target's batch size (None: unknown); ``spec``: the target's training settings (None: unknown), e.g. to build
    the architecture an auditor's initial model must have."""

    batch_size: int | None
    spec: TrainSpec | None

    def __call__(self, data: ArrayDataset, *, seed: int) -> TrainedModel:
        """One model on ``data`` with training seed ``seed``."""
        ...

    def many(self, jobs: Sequence[tuple[ArrayDataset, int]]) -> Iterator[TrainedModel]:
        """One model per independent ``(data, seed)`` job, yielded in the order of ``jobs``. Every job is
        submitted before the first model is yielded, so they can train in parallel (the ``ray`` executor) or
        as one vectorised ensemble (non-private shadows, ``bench.execution.ensemble``)."""
        ...

    def audit_run(self, data: ArrayDataset, *, seed: int, request: AuditRequest) -> TrainedModel:
        """One model on ``data`` with an audit ``request`` passed to ``Mechanism.fit`` (e.g. white-box gradient
        canaries); its observations are in ``TrainedModel.audit``. Through the cache like any model."""
        ...

    def audit_runs(self, jobs: Sequence[tuple[ArrayDataset, int, AuditRequest | None]]) -> Iterator[TrainedModel]:
        """Models trained like the target, one per ``(data, seed, request)`` (``request``: ``Mechanism.fit``'s
        ``audit``, or None), all submitted at once (the executor spreads them; Ray runs them in parallel) and
        yielded in order. Through the cache like any model."""
        ...

    def release(self, data: ArrayDataset, *, seed: int) -> tuple[Release, PrivacySpent]:
        """The mechanism's own release of ``data`` (``Mechanism.release``, for mechanisms that publish data) with
        the target's settings, ε and δ, and the privacy that release spent."""
        ...

    def prefetch(self, jobs: Sequence[tuple[ArrayDataset, int, AuditRequest | None]]) -> None:
        """Submit models a later call will ask for, one per ``(data, seed, audit request or None)``, so that an idle
        executor trains them while the attacker does other work; returns nothing (a no-op is correct)."""
        ...


@dataclass(frozen=True)
class OneAtATime:
    """A ``TrainLikeTarget`` from a plain function ``fn(data, *, seed) -> TrainedModel``: ``many`` calls it
    job after job (tests, notebooks); ``spec``: the settings ``fn`` trains with, where an attack needs them."""

    fn: Callable[..., TrainedModel]
    batch_size: int | None = None
    spec: TrainSpec | None = None

    def __call__(self, data: ArrayDataset, *, seed: int) -> TrainedModel:
        return self.fn(data, seed=seed)

    def many(self, jobs: Sequence[tuple[ArrayDataset, int]]) -> Iterator[TrainedModel]:
        return (self.fn(data, seed=seed) for data, seed in jobs)

    def audit_run(self, data: ArrayDataset, *, seed: int, request: AuditRequest) -> TrainedModel:
        return self.fn(data, seed=seed, audit=request)

    def audit_runs(self, jobs: Sequence[tuple[ArrayDataset, int, AuditRequest | None]]) -> Iterator[TrainedModel]:
        return (self.fn(d, seed=s) if r is None else self.fn(d, seed=s, audit=r) for d, s, r in jobs)

    def prefetch(self, jobs: Sequence[tuple[ArrayDataset, int, AuditRequest | None]]) -> None:
        pass  # one model at a time, when asked


class TargetNotTrained(RuntimeError):
    """``AttackContext.target`` asked for in a context built before the target exists (``MembershipAttack.prefetch``
    at the start of a run)."""


@dataclass(frozen=True)
class AttackContext:
    """Everything an attack may use on one target.

    Attributes:
        trained: the trained target (and its release, if any); None in the context ``MembershipAttack.prefetch`` gets
            at the start of a run, before the target exists. Attacks read it as ``target``.
        split: the membership split; ``split.population`` is the attacker's own data.
        member_index, non_member_index: ``(n,)`` int64 rows of ``split.members`` / ``split.non_members``
            scored by every membership attack of the cell (balanced, drawn with ``seed``; the same people for
            every attack, and an attack that scores fewer takes the first rows).
        seed: the cell's seed. device: where to run the target. train_like_target: trains shadow models (and, with
            ``audit_run``, audit runs). mechanism: the target's registered mechanism (what audit runs it supports:
            ``Mechanism.audits``).
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
        """The scored members and non-members, the first ``limit`` of each (None: all)."""
        m, n = self.member_index[:limit], self.non_member_index[:limit]
        return self.split.members.subset(m), self.split.non_members.subset(n)

    def labels(self, limit: int | None = None) -> np.ndarray:
        """``(N,)`` int64 membership labels of the scored records, members first: ones then zeros."""
        n = len(self.member_index[:limit])
        return np.concatenate([np.ones(n, np.int64), np.zeros(len(self.non_member_index[:limit]), np.int64)])

    def candidates(self, limit: int | None = None) -> ArrayDataset:
        """The scored records as one dataset, members first (labels: ``labels``)."""
        from bench.core.data import concat

        return concat(*self.sides(limit))


def at_most(attack: str, setting: str, value: int | None, limit: int, what: str) -> str | None:
    """``"attack_params.<attack>.<setting> = v exceeds <what> (limit)"`` when ``value`` > ``limit``, else None."""
    if value is None or value <= limit:
        return None
    return f"attack_params.{attack}.{setting} = {value} exceeds {what} ({limit}); lower it or enlarge the data"


class Attack:
    """Base of every attack (subclass ``MembershipAttack`` or ``ReconstructionAttack``).

    Class attributes:
        name: the registered name. kind: ``"membership"`` or ``"reconstruction"``.
        Params: its settings (validated from the config's ``attack_params.<name>``).
        needs_population: it trains or fits on the attacker's population (a config with ``n_population`` 0
            is an error when it runs).
        release_kind: the release it attacks (e.g. ``"dpmix"``); it applies only to targets that published one.
        needs_images: it scores images as images (SSIM, total variation), so it does not run on tabular data
            (the runner skips it there, with a warning).
        audit: it tests a model's ε with a design of its own (canaries with random inclusion, repeated runs); it
            does not run on a mechanism's ε = ∞ point (privacy off: no ε to test, and e.g. DP-SGD's gradient
            canaries are scaled to a clipping norm that is then off).

    Args:
        params: the attack's settings (None: ``Params``' defaults)."""

    name: ClassVar[str] = ""
    kind: ClassVar[str] = "membership"
    Params: ClassVar[type[Params]] = NoParams
    needs_population: ClassVar[bool] = False
    release_kind: ClassVar[str | None] = None
    needs_images: ClassVar[bool] = False
    audit: ClassVar[bool] = False

    def __init__(self, params: Params | None = None) -> None:
        self.params = params if params is not None else self.Params()

    def size_problem(self, *, n_members: int, n_population: int) -> str | None:
        """Why this attack's settings do not fit the run's data (one line naming the setting, its value and what is
        allowed), or None. Checked before any training: a count is never silently clipped to the data."""
        return None

    def applies_to(self, target: TrainedModel) -> bool:
        """Whether the attack can run on ``target`` (a release attack needs its kind of release)."""
        return self.release_kind is None or (target.release is not None and target.release.kind == self.release_kind)


class MembershipAttack(Attack):
    """Scores records for membership; metrics and ε lower bounds are computed by the runner."""

    kind = "membership"

    def prefetch(self, ctx: AttackContext) -> None:
        """Submit the models ``score`` will train (``ctx.train_like_target.prefetch``) before the cell's attacks run,
        so that an idle training worker trains them meanwhile; the default submits nothing. Called by the runner
        before the cell's attacks, and for attacks that apply to every model (``release_kind`` None) also when the
        run starts, before the target exists (``ctx.trained`` None; ``ctx.target`` raises ``TargetNotTrained``): it
        must not use the target. An error here is ignored (``score`` meets it again).

        Args:
            ctx: the cell's context (``ctx.trained`` None at the start of a run)."""

    def score(self, ctx: AttackContext) -> MembershipScores | dict[str, MembershipScores]:
        """Score ``ctx``'s candidates (or the attack's own canaries) against ``ctx.target``.

        Args:
            ctx: the target, its split, the scored rows and the attacker's data and training function.

        Returns:
            ``MembershipScores`` (``(N,)`` scores, larger: member); an audit that gets two designs from one run
            returns them by name (the first under the attack's own name).

        Raises:
            NotImplementedError: here; subclasses raise ValueError when they cannot run on this data."""
        raise NotImplementedError


class ReconstructionAttack(Attack):
    """Reconstructs data from the target or its release."""

    kind = "reconstruction"

    def reconstruct(self, ctx: AttackContext) -> Reconstruction:
        """Reconstruct from ``ctx.target`` (or its release).

        Args:
            ctx: the target, its split, the scored rows and the attacker's data.

        Returns:
            The ``Reconstruction``: images, their labels and the metrics.

        Raises:
            NotImplementedError: here; subclasses raise ValueError where they cannot run on this data."""
        raise NotImplementedError
