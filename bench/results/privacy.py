"""A model's privacy in results.json: the accountant's ε with its δ and neighbouring relation, and the same guarantee
under other relations (``bench.core.types.PrivacySpent``)."""

from __future__ import annotations

from pydantic import Field

from bench.results.base import Model

__all__ = ["OtherRelation", "Privacy"]


class OtherRelation(Model):
    """The same guarantee under another neighbouring relation, at the same δ (e.g. DP-SGD's add/remove ε)."""

    relation: str
    """``add-remove``, ``replace-one`` or ``replace-one-same-class``."""
    epsilon: float
    """ε (unitless) under ``relation``, at the guarantee's δ."""
    accountant: str
    """The accountant that certified it."""
    profile: list[list[float]] = Field(default_factory=list)
    """``[[ε, δ], ...]`` under ``relation``."""


class Privacy(Model):
    """What a model's mechanism spent, as certified by a named accountant (``bench.core.types.PrivacySpent``).

    ``epsilon``, ``delta`` and ``relation`` are null without a formal guarantee (``guarantee: "none"``; ``off``: ε = ∞);
    ``claimed_epsilon`` is a source's claim shown beside, never instead; ``weak_delta``: δ >= 1 / n_members."""

    epsilon: float | None
    """The accountant's ε at ``delta``; null without a formal guarantee."""
    delta: float | None
    """δ of the guarantee; null without one."""
    accountant: str
    """The accountant that certified ``epsilon`` (e.g. ``opacus-prv``, ``dpmix-closed-form``); ``none`` without a
    guarantee."""
    guarantee: str
    """``central-dp`` (the trained model), ``local-dp`` (every record noised before training), ``dp-release`` (the
    released data set) or ``none``."""
    claimed_epsilon: float | None = None
    """The ε a source claimed for a mechanism without a guarantee: shown beside, never instead."""
    note: str = ""
    """One line on how the privacy was accounted (shown in the reports' notes)."""
    relation: str | None = None
    """The neighbouring relation of ``epsilon``: ``add-remove``, ``replace-one`` or ``replace-one-same-class``; null
    without a guarantee."""
    weak_delta: bool = False
    """True when δ >= 1 / n_members (releasing one record outright satisfies such a δ)."""
    profile: list[list[float]] = Field(default_factory=list)
    """The accountant's privacy profile ``[[ε, δ], ...]``: the mechanism is (ε, δ)-DP at each point (under
    ``relation``); one-run audits test the whole curve. Empty without a guarantee."""
    other_relations: list[OtherRelation] = Field(default_factory=list)
    """The same guarantee under other neighbouring relations (DP-SGD: its add/remove ε, the figure papers quote, beside
    the replace-one ε every mechanism's budget is matched on)."""
    off: bool = False
    """True for a model trained with privacy turned off (the baseline, a mechanism's ε = ∞ point): its ε is ∞, written
    as this flag (strict JSON has no infinity) with ``epsilon`` null and ``guarantee`` ``none``; reports print
    "ε = ∞ (privacy off)", never "no guarantee"."""

    @property
    def has_guarantee(self) -> bool:
        """Whether this record carries a formal guarantee with an ε (not "none", not privacy off)."""
        return self.guarantee != "none" and self.epsilon is not None

    def under(self, relation: str | None) -> Privacy | None:
        """This record stated under ``relation`` (that relation's ε, accountant and profile), or None without one."""
        if self.epsilon is None or relation is None:
            return None
        if relation == self.relation:
            return self
        for o in self.other_relations:
            if o.relation == relation:
                return self.model_copy(update={"epsilon": o.epsilon, "accountant": o.accountant,
                                               "relation": o.relation, "profile": o.profile, "other_relations": []})
        return None
