"""The reports' non-private ceiling and cost of privacy (``reports.ceiling``): each mechanism's ε = ∞ point in the
verdict table as its own ceiling, the accuracy each private model loses against it, the ceiling with its interval
and every private model above it, the note when the profile's recipes were chosen on another data set, and each
mechanism's recipe when ``--tune-recipes`` re-chose it."""

from __future__ import annotations

import pytest

from bench.results import RecipeChoice
from reports.ceiling import accuracy_interval, ceiling_line, cost_of_privacy, recipes_line
from reports.common import format_privacy
from reports.sections.verdict.notes import verdict_headline, verdict_notes
from reports.sections.verdict.table import VERDICT_HEADERS, verdict_tables

OFF = {"epsilon": None, "delta": None, "accountant": "none", "guarantee": "none", "off": True}


def _doc(build, dataset: str = "fashion-mnist", ceiling: str = "baseline"):
    dp = lambda e: build.privacy(e, 1e-5, "dp_accounting-pld", "central-dp", relation="replace-one")  # noqa: E731
    runs = [build.run("baseline", None, OFF, 0.841, {}),
            *[build.run("dpsgd", e, dp(e), acc, {}) for e, acc in ((1.0, 0.758), (3.0, 0.838), (8.0, 0.867))],
            build.run("dpsgd", None, OFF, 0.905, {}, off_point=True, model="scatternet-linear")]
    runs = [{**r, "dataset": dataset} for r in runs]
    chosen = {"baseline": ("baseline", False, 0.841), "dpsgd": ("dpsgd", True, 0.905)}[ceiling]
    cands = [{"mechanism": "baseline", "off_point": False, "model": "cnn-small", "validation_accuracy": 0.85,
              "test_accuracy": 0.841, "seeds": [0]},
             {"mechanism": "dpsgd", "off_point": True, "model": "scatternet-linear", "validation_accuracy": 0.90,
              "test_accuracy": 0.905, "seeds": [0]}]
    ceilings = {dataset: {"mechanism": chosen[0], "off_point": chosen[1], "model": "m",
                          "validation_accuracy": 0.9, "test_accuracy": chosen[2], "n_test": 5000,
                          "validation": "the first 5,000 images of the attacker's population", "n_validation": 5000,
                          "candidates": cands}}
    return build.results(runs, ceilings=ceilings, config={"profile": "default", "recipes_chosen_on": "mnist"})


def test_off_point_row_and_cost_of_privacy_in_the_verdict_table(build):
    doc = _doc(build)
    (table,) = verdict_tables(doc)
    col = VERDICT_HEADERS.index("cost of privacy (test acc. lost vs its ε = ∞ point)")
    rows = {(r["cells"][0], r["cells"][1]): r["cells"] for r in table["rows"]}
    assert rows[("dpsgd", "∞")][3] == "ε = ∞ (privacy off)" and rows[("dpsgd", "∞")][col] == "its ε = ∞ point"
    assert rows[("dpsgd", "1")][col] == f"{100 * (0.905 - 0.758):.1f} pts (of 90.5%)"
    assert rows[("dpsgd", "8")][col] == f"{100 * (0.905 - 0.867):.1f} pts (of 90.5%)"
    assert rows[("baseline", "—")][3] == "ε = ∞ (privacy off)" and rows[("baseline", "—")][col] == "—"
    assert cost_of_privacy(doc, doc.results[1]) == pytest.approx(100 * (0.905 - 0.758))
    note = next(n for n in verdict_notes(doc)["fashion-mnist"] if n.startswith("dpsgd:"))
    assert "cost of privacy 14.7 / 6.7 / 3.8 points of test accuracy at target ε 1 / 3 / 8" in note


def test_a_private_model_above_the_ceiling_beyond_its_interval_is_named(build):
    doc = _doc(build, ceiling="baseline")
    half = accuracy_interval(0.841, 5000)
    assert 0.838 < 0.841 + half < 0.867  # ε = 3 within the interval, ε = 8 beyond it
    line = ceiling_line(doc, "fashion-mnist")
    assert line.startswith("The non-private ceiling is the baseline (m): 84.1% test accuracy (± 1.0, 95%)")
    assert "never the test set" in line and "also: dpsgd ε = ∞ 90.0%" in line
    assert "dpsgd at target ε 8 (86.7%)" in line and "target ε 3" not in line
    good = ceiling_line(_doc(build, ceiling="dpsgd"), "fashion-mnist")
    assert good.startswith("The non-private ceiling is dpsgd's ε = ∞ point (m, its recipe with privacy off): 90.5%")
    assert "Above it" not in good


def test_the_recipes_note_appears_only_on_another_data_set(build):
    assert "chosen on mnist's validation split" in recipes_line(_doc(build), "fashion-mnist")
    assert recipes_line(_doc(build, dataset="mnist"), "mnist") is None
    headline = verdict_headline(_doc(build))["fashion-mnist"]
    assert any("non-private ceiling" in h for h in headline) and any("not on fashion-mnist" in h for h in headline)


def test_privacy_off_is_printed_as_infinite_epsilon(build):
    doc = _doc(build)
    assert format_privacy(doc.results[0].privacy) == "ε = ∞ (privacy off)"
    assert format_privacy(doc.results[0].privacy.model_copy(update={"off": False})) == "no guarantee"


def _choice(mechanism: str, chosen: str, accs: dict[str, float | None], eps: list[float]) -> dict:
    """A ``RecipeChoice`` dict at target ``eps``: ``accs`` maps each candidate to its validation accuracy (None: not
    tried)."""
    cands = [{"name": n, "status": "tried" if a is not None else "not tried", "validation_accuracy": a}
             for n, a in accs.items()]
    return {"dataset": "fashion-mnist", "mechanism": mechanism, "target_epsilons": eps, "delta": 1e-5,
            "relation": "replace-one", "seed": 0, "rule": "r", "chosen": chosen, "validation": "the first 5,000",
            "n_validation": 5000, "budget_s": 300.0, "spent_s": 310.0, "candidates": cands}


def test_the_verdict_names_each_recipe_and_whether_it_was_tuned(build):
    doc = _doc(build)
    choices = [_choice("dpsgd", "scatternet b512", {"recipe": 0.80, "scatternet b512": 0.83, "cnn": None}, [3.0]),
               _choice("dpmix", "recipe", {"recipe": 0.70, "l32": 0.69}, [1.0, 3.0, 8.0])]
    tuned = doc.model_copy(update={"recipe_choices": [RecipeChoice.model_validate(c) for c in choices],
                                   "config": {**doc.config, "mechanisms": ["baseline", "dpsgd", "dpmix"]}})
    line = recipes_line(tuned, "fashion-mnist")
    assert line.startswith("Recipes, re-chosen on a validation split of fashion-mnist (the first 5,000; never the "
                           "test set) with --tune-recipes")
    assert "baseline: the default profile's recipe (not tuned: no candidates)" in line
    assert ("dpsgd: 'scatternet b512' (tuned, 83.0% on validation; best of 2 tried at target ε = 3, 1 not tried "
            "within the 300 s budget)") in line
    assert ("dpmix: the default profile's recipe (tuned, 70.0% mean on validation; best of 2 tried by the mean over "
            "target ε 1 / 3 / 8)") in line
    assert "not included in any printed ε" in line and "chosen on mnist's" not in line  # replaces the warning
    assert any(h == line for h in verdict_headline(tuned)["fashion-mnist"])
