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
    """The size problem of a count setting larger than the data allows (``Attack.size_problem``'s line).

    Args:
        attack: the attack's registered name.
        setting: the setting's name in ``attack_params.<attack>``.
        value: the setting's value (None: unset, never a problem).
        limit: the largest value allowed.
        what: what ``limit`` counts (e.g. ``"the population"``).

    Returns:
        ``"attack_params.<attack>.<setting> = v exceeds <what> (limit); ..."`` when ``value`` > ``limit``, else
        None.
    """
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
        """Why this attack's settings do not fit the run's data.

        Checked before any training: a count is never silently clipped to the data.

        Args:
            n_members: the records the target trains on (members).
            n_population: the attacker's own records (``split.population``).

        Returns:
            One line naming the setting, its value and what is allowed (``at_most``), or None where it fits (the
            default).
        """
        return None

    def applies_to(self, target: TrainedModel) -> bool:
        """Whether the attack can run on ``target``.

        Args:
            target: the trained target and its release, if any.

        Returns:
            True unless the attack needs a release (``release_kind``) that ``target`` did not publish.
        """
        return self.release_kind is None or (target.release is not None and target.release.kind == self.release_kind)


class MembershipAttack(Attack):
    """Scores records for membership; metrics and ε lower bounds are computed by the runner."""

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
        """Score ``ctx``'s candidates (or the attack's own canaries) against ``ctx.target``.

        Args:
            ctx: the target, its split, the scored rows and the attacker's data and training function.

        Returns:
            ``MembershipScores`` (``(N,)`` scores, larger: member); an audit that gets two designs from one run
            returns them by name (the first under the attack's own name).

        Raises:
            NotImplementedError: here; subclasses raise ValueError when they cannot run on this data.
        """
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
            NotImplementedError: here; subclasses raise ValueError where they cannot run on this data.
        """
        raise NotImplementedError
