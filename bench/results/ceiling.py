"""The non-private ceiling of one dataset in results.json.

The best model the run trained with privacy off (the baseline's recipe or a mechanism's ε = ∞ point), chosen on a
validation split of training images, never the test set (``bench.runner.ceiling`` chooses it).
"""

from __future__ import annotations

from pydantic import Field

from bench.results.base import Model

__all__ = ["Candidate", "Ceiling"]


class Candidate(Model):
    """One non-private recipe the ceiling was chosen among (accuracies: mean over seeds, fractions)."""

    mechanism: str
    """``baseline``, or the mechanism whose ε = ∞ point (its recipe with privacy turned off) this is."""
    off_point: bool
    """True for a mechanism's ε = ∞ point, false for the baseline's own recipe."""
    model: str
    """Its architecture (e.g. ``scatternet-linear``)."""
    validation_accuracy: float
    """Mean accuracy on the validation split over its seeds (what chose)."""
    test_accuracy: float
    """Mean test accuracy over its seeds (recorded; chose nothing)."""
    seeds: list[int]
    """The seeds it was trained with."""


class Ceiling(Model):
    """The non-private ceiling of one dataset.

    The candidate with the highest validation accuracy (ties: the first in run order). A private model above it by more
    than its confidence interval says the ceiling is wrong.
    """

    mechanism: str
    """The chosen candidate's ``mechanism`` (``baseline`` or a mechanism's ε = ∞ point)."""
    off_point: bool
    """True when the chosen candidate is a mechanism's ε = ∞ point."""
    model: str
    """The chosen candidate's architecture."""
    validation_accuracy: float
    """Its mean validation accuracy (fraction)."""
    test_accuracy: float
    """Its mean test accuracy (fraction) over ``n_test`` images per seed."""
    n_test: int
    """Test images per model (the reports' interval of ``test_accuracy``)."""
    validation: str
    """The validation split in words (which training images, how many)."""
    n_validation: int
    """Images in the validation split."""
    candidates: list[Candidate] = Field(default_factory=list)
    """Every non-private recipe of the run, in run order."""
