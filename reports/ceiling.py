"""The non-private ceiling and the cost of privacy in words and numbers.

Each mechanism's accuracy lost against its own ε = ∞ point (its recipe with privacy turned off), the run's ceiling
(``Results.ceilings``: the best model trained with privacy off, chosen on a validation split, never the test set) with
its interval, any private model above it, and whether the profile's recipes were chosen on another data set. Reads a
``bench.results.Results``.
"""

from __future__ import annotations

import math

from bench.results import Results, RunResult
from reports.common import DASH, is_failed

Z95 = 1.959964  # two-sided 95 % normal quantile


def accuracy_interval(accuracy: float, n: int) -> float:
    """Half-width 1.96·√(p(1 − p)/n) (fraction) of the 95 % normal interval of an accuracy on n images; 0 if n < 1."""
    return Z95 * math.sqrt(max(accuracy * (1.0 - accuracy), 0.0) / n) if n >= 1 else 0.0


def off_point_accuracy(results: Results, r: RunResult) -> float | None:
    """Test accuracy (fraction) of ``r``'s mechanism at its ε = ∞ point on ``r``'s dataset.

    The same seed's where it ran, else the mean over seeds; None without one (or for the baseline and the ε = ∞ point
    itself).
    """
    if r.off_point or r.mechanism == "baseline" or r.row:
        return None
    found = {x.seed: x.utility.test_accuracy for x in results.results
             if x.off_point and not is_failed(x) and x.utility is not None and x.dataset == r.dataset
             and x.mechanism == r.mechanism and x.row == r.row}
    if not found:
        return None
    return found.get(r.seed, sum(found.values()) / len(found))


def cost_of_privacy(results: Results, r: RunResult) -> float | None:
    """Points of test accuracy (%) ``r`` loses against its mechanism's ε = ∞ point (positive: privacy costs).

    None where there is no such pair.
    """
    off = off_point_accuracy(results, r)
    if off is None or is_failed(r) or r.utility is None:
        return None
    return 100.0 * (off - r.utility.test_accuracy)


def cost_text(results: Results, r: RunResult) -> str:
    """The verdict table's cell: ``"12.3 pts (of 97.7%)"``, ``"ε = ∞ point"`` for the point itself, ``"—"``."""
    if r.off_point:
        return "its ε = ∞ point"
    cost, off = cost_of_privacy(results, r), off_point_accuracy(results, r)
    if cost is None or off is None:
        return DASH
    return f"{round(cost, 1) + 0.0:.1f} pts (of {100 * off:.1f}%)"  # + 0.0: no "-0.0"


def ceiling_line(results: Results, dataset: str) -> str | None:
    """The headline's sentence on the non-private ceiling of ``dataset``.

    The headline's sentence on the non-private ceiling of ``dataset`` (which model, its test accuracy with its
    95 % interval, how it was chosen), followed by every private model above it by more than that interval (a sign
    that the ceiling is wrong). None when the run trained no model with privacy off.
    """
    c = results.ceilings.get(dataset)
    if c is None:
        return None
    half = accuracy_interval(c.test_accuracy, c.n_test)
    which = f"{c.mechanism}'s ε = ∞ point ({c.model}, its recipe with privacy off)" if c.off_point \
        else f"the baseline ({c.model})"
    others = ", ".join(f"{x.mechanism}{' ε = ∞' if x.off_point else ''} {100 * x.validation_accuracy:.1f}%"
                       for x in c.candidates if x.mechanism != c.mechanism)
    line = (f"The non-private ceiling is {which}: {100 * c.test_accuracy:.1f}% test accuracy (± {100 * half:.1f}, "
            f"95%), the best on validation ({100 * c.validation_accuracy:.1f}% on {c.validation}; never the test set)"
            + (f" of the models trained with privacy off (also: {others})." if others else "."))
    above = [f"{r.mechanism} at target ε {r.target_epsilon:g} ({100 * r.utility.test_accuracy:.1f}%)"
             for r in results.results if r.dataset == dataset and not is_failed(r) and r.utility is not None
             and r.privacy is not None and not r.privacy.off and r.preset is None
             and r.utility.test_accuracy > c.test_accuracy + half and r.target_epsilon is not None]
    if above:
        line += f" Above it by more than its interval (the ceiling is then not one): {'; '.join(above)}."
    return line


def recipes_line(results: Results, dataset: str) -> str | None:
    """Which recipe each mechanism used on ``dataset`` and whether it was re-chosen there (``tuning_line``).

    Else a warning when the profile's recipes were chosen on another data set (``recipes_chosen_on`` of the run's
    configuration); None otherwise.
    """
    if any(c.dataset == dataset for c in results.recipe_choices):
        return tuning_line(results, dataset)
    chosen = results.config.get("recipes_chosen_on")
    if not chosen or chosen == dataset:
        return None
    return (f"The {results.config.get('profile', '')} profile's recipes were chosen on {chosen}'s validation split "
            f"(docs/recipes.md), not on {dataset}, and were not re-chosen here (--tune-recipes does): each mechanism "
            "may do better here with another recipe; its ε = ∞ point shows what its recipe gives without privacy, "
            "and the cost of privacy what privacy takes from it.")


def tuning_line(results: Results, dataset: str) -> str:
    """The recipe of every mechanism of the run on ``dataset``.

    For each one re-chosen (``Results.recipe_choices``), the chosen candidate, how many were tried on validation at
    which target ε, how many the time budget left out; for the others, the profile's recipe, not tuned.
    """
    choices = {c.mechanism: c for c in results.recipe_choices if c.dataset == dataset}
    profile = results.config.get("profile", "")
    parts = []
    for mech in results.config.get("mechanisms") or list(choices):
        c = choices.get(mech)
        if c is None:
            parts.append(f"{mech}: the {profile} profile's recipe (not tuned: no candidates)")
            continue
        tried = [x for x in c.candidates if x.status == "tried"]
        left = sum(x.status == "not tried" for x in c.candidates)
        best = next(x for x in c.candidates if x.name == c.chosen)
        name = f"the {profile} profile's recipe" if c.chosen == "recipe" else f"'{c.chosen}'"
        eps = c.target_epsilons
        at = f"at target ε = {eps[0]:g}" if len(eps) == 1 else \
            f"by the mean over target ε {' / '.join(f'{e:g}' for e in eps)}"
        acc = f", {100 * best.validation_accuracy:.1f}%{' mean' if len(eps) > 1 else ''} on validation" \
            if best.validation_accuracy is not None else ""
        parts.append(f"{mech}: {name} (tuned{acc}; best of {len(tried)} tried {at}"
                     + (f", {left} not tried within the {c.budget_s:g} s budget" if left else "") + ")")
    first = next(iter(choices.values()))
    return (f"Recipes, re-chosen on a validation split of {dataset} ({first.validation}; never the test set) with "
            f"--tune-recipes: {'; '.join(parts)}. The choice is not included in any printed ε (tuning on DP training "
            "runs over the members; Liu & Talwar 2019, Papernot & Steinke 2022); candidates and their validation "
            "accuracies are in results.json (recipe_choices).")
