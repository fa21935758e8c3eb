"""Recipes re-chosen on the run's data (``--tune-recipes``) in results.json.

Per mechanism, every candidate recipe with its validation accuracy (or why it was not tried), the rule, the chosen one,
the time budget and the time spent (``bench.runner.tuning`` chooses).
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from bench.results.base import Model

__all__ = ["RecipeCandidate", "RecipeChoice"]


class RecipeCandidate(Model):
    """One recipe a mechanism's choice was made among."""

    name: str
    """``recipe`` for the profile's own (with the config's ``training:`` settings), else the candidate's name
    (``Mechanism.recipe_candidates``)."""
    changes: dict[str, Any] = Field(default_factory=dict)
    """The ``TrainSpec`` fields the candidate changes in the profile's recipe (empty for ``recipe``)."""
    spec: dict[str, Any] | None = None
    """The whole training spec it stands for (null when it is not valid on this data)."""
    status: str
    """``tried``: trained and measured; ``failed``: its training raised (``note``); ``not tried``: the time budget ran
    out before it started; ``skipped``: not valid on this data or a repeat of an earlier candidate (``note``)."""
    validation_accuracy: float | None = None
    """Accuracy on the validation split (fraction) of its model at the choice's target ε and seed, the mean over
    ``RecipeChoice.target_epsilons`` when there are several (what chose; tried only)."""
    validation_accuracies: list[float] = Field(default_factory=list)
    """Its validation accuracy at each of ``RecipeChoice.target_epsilons``, in that order (tried only)."""
    train_s: float | None = None
    """Seconds its training took, summed over its models (as recorded with them, also when they came from the
    cache)."""
    cached: bool = False
    """Its models came from the cache."""
    note: str | None = None
    """Why it failed or was skipped."""


class RecipeChoice(Model):
    """A mechanism's recipe re-chosen on a validation split of the run's own data.

    The tried candidate with the highest validation accuracy (ties: the earlier candidate, the profile's recipe first).
    Every cell of the mechanism (each ε, seed and the ε = ∞ point) then trains with it.
    """

    dataset: str
    """The data set it was chosen on."""
    mechanism: str
    """The mechanism."""
    target_epsilons: list[float]
    """The target ε values every candidate was trained at: the middle of the run's grid, or the whole grid for a
    mechanism that declares ``tune_over_grid`` (only mechanisms with a target ε are tuned)."""
    delta: float
    """δ of those targets."""
    relation: str | None = None
    """The neighbouring relation of the mechanism's ε at its chosen recipe (null: no guarantee)."""
    seed: int
    """The seed (data split, initialisation, noise) every candidate was trained with."""
    rule: str
    """How the choice was made, in words (split, ε, tie rule, what the printed ε does not include)."""
    chosen: str
    """The chosen candidate's ``name``."""
    validation: str
    """The validation split in words (training images no target trains on; never the test set)."""
    n_validation: int
    """Images in the validation split."""
    budget_s: float
    """The run's time budget for choosing every mechanism's recipe (s)."""
    spent_s: float
    """Wall time of the whole choice, every mechanism's candidates together (s; candidates train side by side)."""
    candidates: list[RecipeCandidate] = Field(default_factory=list)
    """Every candidate in the order they were declared (the profile's recipe first)."""
