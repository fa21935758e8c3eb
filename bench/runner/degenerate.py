"""Models that learned nothing (issue 40, item 1).

After training, every model is checked against what a model that learned nothing scores, and marked ``degenerate`` in
results.json (``bench.results.Degenerate``), so that its attack results — an AUC of 0.50 on a collapsed model — are
never read as privacy.

Design notes: docs/design-notes.md.
"""

from __future__ import annotations

import torch

from attacks.analysis.statistics.confidence import clopper_pearson
from bench.results import Degenerate, RunResult

CONFIDENCE = 0.95


def check_predictions(predicted: torch.Tensor, y: torch.Tensor) -> Degenerate | None:
    """Whether a model's test predictions are those of a model that learned nothing (module docstring).

    Args:
        predicted: ``(N,)`` int64 predicted class of every test record.
        y: ``(N,)`` int64 true classes.

    Returns:
        The ``Degenerate`` record (its ``cause`` left unset: ``assign_causes``), or None for a model that learned.

    Raises:
        ValueError: ``predicted`` and ``y`` differ in length, or are empty.
    """
    if predicted.shape != y.shape or not len(y):
        raise ValueError(f"predictions {tuple(predicted.shape)} and labels {tuple(y.shape)} must be one non-empty "
                         "vector each, of the same length")
    n, k = len(y), int((predicted == y).sum())
    counts = torch.bincount(y)
    chance_class = int(counts.argmax())
    chance = float(counts[chance_class]) / n
    lower, upper = clopper_pearson(k, n, confidence=CONFIDENCE)
    classes = torch.unique(predicted)
    acc = k / n
    numbers = (f"test accuracy {100 * acc:.1f}% [{100 * lower:.1f}, {100 * upper:.1f}], the best constant "
               f"prediction {100 * chance:.1f}% (class {chance_class})")
    if len(classes) == 1:
        reason, text = "constant", f"collapsed: predicts class {int(classes[0])} for every test record ({numbers})"
    elif lower <= chance:
        reason, text = "at-chance", f"at chance: {numbers}"
    else:
        return None
    return Degenerate(reason=reason, text=text, test_accuracy=acc, lower=lower, upper=upper, chance_accuracy=chance,
                      chance_class=chance_class, predicted_classes=len(classes))


def _cell(r: RunResult) -> tuple[str, str, int, str | None, str | None]:
    return r.dataset, r.mechanism, r.seed, r.preset, r.row


def assign_causes(results: list[RunResult]) -> None:
    """Set ``cause`` (and complete ``text``) of every degenerate model in ``results``, in place.

    ``noise`` where the same mechanism's ε = ∞ point (same data set, seed, preset row) learned, ``recipe`` for a model
    trained with privacy off or one whose ε = ∞ point is degenerate too, None without an ε = ∞ point (module docstring).
    """
    off = {_cell(r): r for r in results if r.off_point and r.ok}
    for r in results:
        d = r.degenerate
        if d is None or d.cause is not None:
            continue
        if r.off_point or r.target_epsilon is None:
            d.cause = "recipe"
            d.text += "; trained with privacy off, so the recipe itself collapsed"
            continue
        point = off.get(_cell(r))
        if point is None or point.utility is None:
            d.text += "; no ε = ∞ point in this run tells the noise from the recipe"
        elif point.degenerate is None:
            d.cause = "noise"
            d.text += (f"; its ε = ∞ point learns ({100 * point.utility.test_accuracy:.1f}%): the noise at this ε, not "
                       "the recipe")
        else:
            d.cause = "recipe"
            d.text += "; its ε = ∞ point is degenerate too: the recipe collapsed"
