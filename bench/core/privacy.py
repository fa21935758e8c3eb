"""What privacy a mechanism spent, defined once.

The accountant's ε with its δ, accountant and neighbouring relation, and the same guarantee under other relations.
Mechanisms construct ``PrivacySpent``; results.json stores it as ``bench.results.PrivacyRecord``, the same type plus
the results-only ``weak_delta`` (a subclass, converted with ``PrivacyRecord(**spent.model_dump(), weak_delta=...)``).
Frozen, validated on construction. No torch import (the results contract imports this module).
"""

from __future__ import annotations

import math
from typing import TypeVar

from pydantic import BaseModel, ConfigDict, model_validator

__all__ = ["GUARANTEES", "HeuristicEpsilon", "LAST_ITERATE_LABEL", "RELATIONS", "PrivacySpent", "RelationEpsilon"]

GUARANTEES = ("none", "central-dp", "local-dp", "dp-release")
RELATIONS = ("add-remove", "replace-one", "replace-one-same-class")
_POSITIONAL = ("epsilon", "delta", "accountant", "guarantee")  # PrivacySpent(ε, δ, accountant, guarantee, ...)

P = TypeVar("P", bound="PrivacySpent")

LAST_ITERATE_LABEL = "last-iterate heuristic (Steinke et al. 2025): not a bound"
"""How every last-iterate ε is labelled, wherever it is written or shown."""


class HeuristicEpsilon(BaseModel):
    """An ε that is **not a bound**.

    DP-SGD's last-iterate heuristic (Steinke et al., ICLR 2025) — what an attacker who sees only the final model could
    learn if every loss were linear (``mechanisms.accounting.last_iterate``).
    """

    model_config = ConfigDict(extra="forbid", frozen=True, ser_json_inf_nan="null", use_attribute_docstrings=True)

    relation: str
    """``add-remove`` or ``replace-one``."""
    epsilon: float
    """The heuristic ε (unitless) at ``delta`` under ``relation``."""
    delta: float
    """δ of the heuristic ε (the guarantee's δ)."""
    label: str = LAST_ITERATE_LABEL
    """What it is: ``last-iterate heuristic (Steinke et al. 2025): not a bound``."""
    basis: str = ""
    """The σ, q, T it was computed from (e.g. "the run's σ = 10.1, q = 0.333, T = 120")."""

    @model_validator(mode="after")
    def _known_relation(self) -> HeuristicEpsilon:
        if self.relation not in RELATIONS:
            raise ValueError(f"relation {self.relation!r} not in {RELATIONS}")
        return self

    def describe(self) -> str:
        """``ε ≈ … (δ = …, relation; last-iterate heuristic (Steinke et al. 2025): not a bound)``."""
        return f"ε ≈ {self.epsilon:.3g} (δ = {self.delta:.0e}, {self.relation}; {self.label})"


class RelationEpsilon(BaseModel):
    """The same guarantee under another neighbouring relation, at the same δ (e.g. DP-SGD's add/remove ε)."""

    model_config = ConfigDict(extra="forbid", frozen=True, ser_json_inf_nan="null", use_attribute_docstrings=True)

    relation: str
    """``add-remove``, ``replace-one`` or ``replace-one-same-class``."""
    epsilon: float
    """ε (unitless) under ``relation``, at the guarantee's δ."""
    accountant: str
    """The accountant that certified it."""
    profile: tuple[tuple[float, float], ...] = ()
    """``[[ε, δ], ...]`` under ``relation``."""

    def __init__(self, *args: object, **data: object) -> None:
        """Keywords, or positionally in the order ``(relation, epsilon, accountant, profile)``.

        Args:
            args: ``relation``, ``epsilon``, ``accountant``, ``profile`` by position (a prefix of them).
            data: the fields by keyword (see the attributes).

        Raises:
            pydantic.ValidationError (a ValueError): a relation not in ``RELATIONS``, or a value of the wrong type.
            TypeError: more positional arguments than fields, or a field given twice.
        """
        super().__init__(**by_position(type(self).__name__, ("relation", "epsilon", "accountant", "profile"),
                                        args, data))

    @model_validator(mode="after")
    def _known_relation(self) -> RelationEpsilon:
        if self.relation not in RELATIONS:
            raise ValueError(f"relation {self.relation!r} not in {RELATIONS}")
        return self


class PrivacySpent(BaseModel):
    """The privacy a mechanism actually spent, as certified by a named accountant.

    ``epsilon``, ``delta`` and ``relation`` are None without a formal guarantee (``guarantee`` ``"none"``; ``off``:
    ε = ∞). Construct positionally ``PrivacySpent(ε, δ, accountant, guarantee, relation=...)`` or by keywords; the
    helpers ``no_guarantee`` and ``privacy_off`` build the two records without an ε.

    Raises:
        pydantic.ValidationError (a ValueError): unknown guarantee or relation, an ε without δ, accountant and
            relation, an ε without a guarantee, or privacy off with a guarantee or a claimed ε.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, ser_json_inf_nan="null", use_attribute_docstrings=True)

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
    profile: tuple[tuple[float, float], ...] = ()
    """The accountant's privacy profile ``[[ε, δ], ...]``: the mechanism is (ε, δ)-DP at each point (under
    ``relation``); one-run audits test the whole curve. Empty without a guarantee."""
    other_relations: tuple[RelationEpsilon, ...] = ()
    """The same guarantee under other neighbouring relations (DP-SGD: its add/remove ε, the figure papers quote, beside
    the replace-one ε every mechanism's budget is matched on)."""
    heuristics: tuple[HeuristicEpsilon, ...] = ()
    """Heuristic ε beside the guarantee, **not bounds** (DP-SGD: the last-iterate heuristic of Steinke et al. 2025 under
    each relation the run states, for an attacker who sees only the final model); empty where none applies."""
    off: bool = False
    """True for a model trained with privacy turned off (the baseline, a mechanism's ε = ∞ point): its ε is ∞, written
    as this flag (strict JSON has no infinity) with ``epsilon`` null and ``guarantee`` ``none``; reports print
    "ε = ∞ (privacy off)", never "no guarantee"."""

    def __init__(self, *args: object, **data: object) -> None:
        """Keywords, or ``(epsilon, delta, accountant, guarantee)`` positionally and the rest by keyword.

        Args:
            args: ``epsilon`` (unitless), ``delta`` (a probability), ``accountant``, ``guarantee`` by position.
            data: the fields by keyword (see the attributes).

        Raises:
            pydantic.ValidationError (a ValueError): see the class.
            TypeError: more than four positional arguments, or a field given twice.
        """
        super().__init__(**by_position(type(self).__name__, _POSITIONAL, args, data))

    @model_validator(mode="after")
    def _consistent(self: P) -> P:
        if self.guarantee not in GUARANTEES:
            raise ValueError(f"guarantee {self.guarantee!r} not in {GUARANTEES}")
        if self.off and (self.guarantee != "none" or self.claimed_epsilon is not None):
            raise ValueError("privacy turned off (ε = ∞) has guarantee 'none' and no claimed epsilon")
        if self.guarantee == "none":
            if self.epsilon is not None:
                raise ValueError("a mechanism with no guarantee cannot report an epsilon")
        elif self.epsilon is None or self.delta is None or self.accountant in ("", "none"):
            raise ValueError("a formal guarantee needs epsilon, delta and an accountant name")
        elif self.relation not in RELATIONS:
            raise ValueError(f"a formal guarantee needs its neighbouring relation in {RELATIONS}, "
                             f"got {self.relation!r}")
        return self

    @property
    def has_guarantee(self) -> bool:
        """Whether this record carries a formal guarantee with an ε (not "none", not privacy off)."""
        return self.guarantee != "none" and self.epsilon is not None

    def under(self: P, relation: str | None) -> P | None:
        """This guarantee stated under another neighbouring relation ``relation`` (None gives None).

        Returns:
            A copy with that relation's ε, accountant and profile and no other relations (every other field, e.g.
            ``PrivacyRecord.weak_delta``, kept); itself when ``relation`` is its own; None when it states no ε for that
            relation (or has no guarantee at all).
        """
        if self.epsilon is None or relation is None:
            return None
        if relation == self.relation:
            return self
        for o in self.other_relations:
            if o.relation == relation:
                return self.model_copy(update={"epsilon": o.epsilon, "accountant": o.accountant,
                                               "relation": o.relation, "profile": o.profile, "other_relations": ()})
        return None

    def heuristic(self, relation: str | None) -> HeuristicEpsilon | None:
        """The last-iterate heuristic ε (not a bound) under ``relation``, or None where none was computed."""
        for h in self.heuristics:
            if h.relation == relation:
                return h
        return None

    @classmethod
    def no_guarantee(cls, *, claimed_epsilon: float | None = None, note: str = "") -> PrivacySpent:
        """A mechanism without a formal guarantee: no ε, δ or relation; ``claimed_epsilon``: claimed, not certified."""
        return cls(None, None, "none", "none", claimed_epsilon=claimed_epsilon, note=note)

    @classmethod
    def privacy_off(cls, *, note: str = "") -> PrivacySpent:
        """A model trained with privacy off: ε = ∞ (``off``), no accountant, no neighbouring relation."""
        return cls(None, None, "none", "none", note=note, off=True)

    def describe(self) -> str:
        """The guarantee in words, for reports and logs.

        Returns:
            ``ε = … (δ = …, accountant, relation; other relations)``, ``ε = ∞ (privacy off)`` or ``no guarantee``.
        """
        if self.off:
            return "ε = ∞ (privacy off)"
        if self.epsilon is None:
            return "no guarantee"
        eps = "∞" if math.isinf(self.epsilon) else f"{self.epsilon:.3g}"
        other = "".join(f"; {o.relation}: ε = {o.epsilon:.3g}, {o.accountant}" for o in self.other_relations)
        return f"ε = {eps} (δ = {self.delta:.0e}, {self.accountant}, {self.relation}{other})"


def by_position(owner: str, names: tuple[str, ...], args: tuple[object, ...], data: dict[str, object]
                 ) -> dict[str, object]:
    """The keyword arguments ``data``, updated in place with ``args`` assigned to the fields ``names`` in order.

    The dataclass-style constructor of class ``owner`` (named in errors).

    Raises:
        TypeError: more positional arguments than ``names``, or a field given both by position and by keyword.
    """
    if len(args) > len(names):
        raise TypeError(f"{owner} takes at most {len(names)} positional arguments ({', '.join(names)}), "
                        f"got {len(args)}")
    for name, value in zip(names, args, strict=False):  # fewer args than names: the rest by keyword
        if name in data:
            raise TypeError(f"{owner} got {name!r} both by position and by keyword")
        data[name] = value
    return data
