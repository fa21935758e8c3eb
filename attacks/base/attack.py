"""The attack base classes: ``Attack``, and the two kinds a new attack subclasses.

``MembershipAttack`` (scores records for membership) and ``ReconstructionAttack`` (reconstructs data from a model or its
release).

A new attack is one module: a subclass of ``MembershipAttack`` or ``ReconstructionAttack`` with its ``Params``,
registered in one line (``ATTACKS.add_lazy`` in ``attacks/__init__.py``, or ``ATTACKS.add(Class)`` in a
plug-in module loaded with ``--plugins``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from attacks.base.context import AttackContext
from attacks.base.outputs import MembershipScores, Reconstruction
from bench.core.params import NoParams, Params

if TYPE_CHECKING:  # pragma: no cover
    from bench.core.types import TrainedModel


def at_most(attack: str, setting: str, value: int | None, limit: int, what: str) -> str | None:
    """``"attack_params.<attack>.<setting> = v exceeds <what> (limit); ..."`` when ``value`` > ``limit``, else None."""
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
        params: the attack's settings (None: ``Params``' defaults).
    """

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
        """One line naming a count setting too large for the data (``at_most``), or None; checked before training."""
        return None

    def applies_to(self, target: TrainedModel) -> bool:
        """Whether the attack can run on ``target`` (not if it needs a release, ``release_kind``, the target lacks)."""
        return self.release_kind is None or (target.release is not None and target.release.kind == self.release_kind)


class MembershipAttack(Attack):
    """Scores records for membership; metrics and ε lower bounds are computed by the runner.

    ``score`` raises ValueError where the attack cannot run on the data.
    """

    kind = "membership"

    def prefetch(self, ctx: AttackContext) -> None:
        """Submit the models ``score`` will train (``ctx.train_like_target.prefetch``) before the cell's attacks run.

        So that an idle training worker trains them meanwhile; the default submits nothing. Called by the runner before
        the cell's attacks, and for attacks that apply to every model (``release_kind`` None) also when the run starts,
        before the target exists (``ctx.trained`` None; ``ctx.target`` raises ``TargetNotTrained``): it must not use the
        target. An error here is ignored (``score`` meets it again).

        Args:
            ctx: the cell's context (``ctx.trained`` None at the start of a run).
        """

    def score(self, ctx: AttackContext) -> MembershipScores | dict[str, MembershipScores]:
        """``MembershipScores`` of ``ctx``'s candidates or own canaries (larger: member), or several by design name."""
        raise NotImplementedError


class ReconstructionAttack(Attack):
    """Reconstructs data from the target or its release (``reconstruct`` raises ValueError where it cannot run)."""

    kind = "reconstruction"

    def reconstruct(self, ctx: AttackContext) -> Reconstruction:
        """The ``Reconstruction`` (images, their labels, the metrics) from ``ctx.target`` or its release."""
        raise NotImplementedError
