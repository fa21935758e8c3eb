"""Recipes that follow the data (``--tune-recipes``, ``bench.runner.tuning``): each mechanism's recipe re-chosen among
its declared candidates on the validation split of real data (digits), never the test set, within a time budget,
and recorded in results.json. Bad flag values: tests/bench/test_cli.py."""

from __future__ import annotations

import dataclasses
import io

import pytest
import torch
from rich.console import Console

from bench.config.run import build_config
from bench.core.data import ArrayDataset
from bench.results import read
from bench.runner import tuning
from bench.runner.ceiling import validation_split
from bench.runner.harness import Harness, curve_probe
from bench.runner.planning import plan_from_config
from bench.runner.tuning import plan_candidates, run_tuning, tuning_epsilon
from reports.ceiling import recipes_line

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py
QUIET = Console(file=io.StringIO())


def _plan(tmp_path, out: str, **over):
    values = {"mechanisms": ["local-gaussian", "dpmix"], "attacks": ["loss"], "epsilons": [4, 16],
              "privacy_off_points": False, "tune_recipes": True, **over,
              "training": {"local-gaussian": {"epochs": 3}, "dpmix": {"epochs": 3}}}
    cli = {"profile": "smoke", "output": str(tmp_path / out), "cache_dir": str(tmp_path / "cache"), "device": "cpu"}
    return plan_from_config(build_config(values, cli))


def _poisoned(split):
    """The test split with its labels permuted and its images replaced by noise: nothing in it is real."""
    gen = torch.Generator().manual_seed(7)
    x = torch.rand(split.test.x.shape, generator=gen)
    y = split.test.y[torch.randperm(len(split.test), generator=gen)]
    return dataclasses.replace(split, test=ArrayDataset(x, y, split.test.num_classes, split.test.name))


def test_tuning_epsilon_is_the_middle_of_the_grid():
    assert tuning_epsilon((1.0, 3.0, 8.0)) == 3.0
    assert tuning_epsilon((16.0, 1.0, 4.0)) == 4.0
    assert tuning_epsilon((1.0, 8.0)) == 1.0  # an even grid: the lower middle value
    assert tuning_epsilon((2.0,)) == 2.0


def test_every_declared_candidate_is_a_valid_recipe_of_its_profile():
    """The candidates of the default profile (MNIST-sized images) and of smoke (digits) all validate like
    ``training:`` and build their model: none is silently skipped."""
    from mechanisms import MECHANISMS

    for profile, shape in (("default", (1, 28, 28)), ("smoke", (1, 8, 8))):
        cfg = build_config({}, {"profile": profile})
        names = [m for m in cfg.mechanisms if MECHANISMS.get(m).recipe_candidates.get(profile)]
        assert names, profile
        for name in names:
            planned = plan_candidates(cfg, name, shape, 10)
            assert planned[0].name == tuning.OWN and planned[0].spec == cfg.spec_for(name)
            assert len(planned) == 1 + len(MECHANISMS.get(name).recipe_candidates[profile])
            assert all(c.spec is not None and c.note is None for c in planned), [c.note for c in planned]
            assert len({repr(c.spec.to_dict()) for c in planned}) == len(planned)  # each one a different recipe


def test_a_candidate_that_does_not_fit_the_data_is_recorded_not_run():
    cfg = build_config({"n_members": 12}, {"profile": "smoke", "mechanisms": "dpmix"})  # ℓ = 16 > 12 members
    planned = {c.name: c for c in plan_candidates(cfg, "dpmix", (1, 8, 8), 10)}
    bad = planned["class-means, ℓ = 16"]
    assert bad.spec is None and "mixture_degree = 16" in bad.note
    assert planned["class-means, ℓ = 8"].spec is not None


def test_the_choice_uses_no_test_data_and_lands_in_results_json(tmp_path):
    plan = _plan(tmp_path, "a", mechanisms=["local-gaussian"])
    # local noise trains in seconds: its candidates are scored over the whole grid (tune_over_grid)
    assert plan.tuning is not None and plan.tuning.seed == 0 and plan.tuning.epsilons == {"local-gaussian": (4, 16)}
    doc, out = Harness(plan, console=QUIET).run()
    poisoned = _plan(tmp_path, "b", mechanisms=["local-gaussian"])
    poisoned.cells = [dataclasses.replace(pc, split=_poisoned(pc.split)) for pc in poisoned.cells]
    doc2, _ = Harness(poisoned, console=QUIET).run()

    saved = read(out / "results.json")  # the record is in results.json, typed
    assert [c.mechanism for c in saved.recipe_choices] == ["local-gaussian"]
    for c, c2 in zip(saved.recipe_choices, doc2.recipe_choices, strict=True):
        assert c.chosen == c2.chosen and c.target_epsilons == [4.0, 16.0] and c.relation == "replace-one"
        assert [(x.name, x.status, x.validation_accuracies) for x in c.candidates] == \
            [(x.name, x.status, x.validation_accuracies) for x in c2.candidates]  # the same choice, to the bit
        assert all(x.status == "tried" and len(x.validation_accuracies) == 2 for x in c.candidates)
        assert all(x.validation_accuracy == pytest.approx(sum(x.validation_accuracies) / 2) for x in c.candidates)
        assert c.n_validation == len(validation_split(plan.cells[0].split)[0]) and "test set" in c.rule
        best = max(c.candidates, key=lambda x: x.validation_accuracy)
        assert next(x for x in c.candidates if x.name == c.chosen).validation_accuracy == best.validation_accuracy
        chosen_spec = next(x.spec for x in c.candidates if x.name == c.chosen)
        runs = [r for r in saved.results if r.mechanism == c.mechanism]
        assert len(runs) == 2 and all(r.spec == chosen_spec for r in runs)  # every cell trains the chosen recipe
        assert saved.config["training"][c.mechanism] == chosen_spec
        assert all(r.timings.cached for r in runs)  # the chosen candidate's models are the cells' own, trained once
    for r, r2 in zip(doc.results, doc2.results, strict=True):  # the poison is real: the same models (same cells,
        assert r.spec == r2.spec and r.utility.test_loss != r2.utility.test_loss  # same recipe) score otherwise on it
    line = recipes_line(saved, "digits")
    assert "--tune-recipes" in line and "never the test set" in line and "Papernot & Steinke" in line
    for c in saved.recipe_choices:
        assert c.mechanism in line and (c.chosen in line or "profile's recipe" in line)


class _Clock:
    """A clock that advances ``step`` seconds at every reading: a budget test that does not depend on speed."""

    def __init__(self, step: float) -> None:
        self.now, self.step = 0.0, step

    def __call__(self) -> float:
        self.now += self.step
        return self.now


def test_the_budget_is_honoured_and_the_rest_recorded_as_not_tried(tmp_path):
    plan = _plan(tmp_path, "c", tune_budget="25s")
    harness = Harness(plan, console=QUIET)
    split = plan.cells[0].split
    try:  # 10 s per reading of the clock: two candidates start within 25 s
        choices = run_tuning(plan.tuning, harness.trainer, split, dataset="digits", delta=plan.cells[0].recipe.delta,
                             validation=validation_split(split), probe=curve_probe(split), window=1,
                             clock=_Clock(10.0))
    finally:
        harness.executor.close()
    status = {(c.mechanism, x.name): x.status for c in choices for x in c.candidates}
    # round-robin: each mechanism's own recipe first, so a short budget still measures every mechanism's recipe
    assert status == {("local-gaussian", "recipe"): "tried", ("dpmix", "recipe"): "tried",
                      **{(c.mechanism, x.name): "not tried" for c in choices for x in c.candidates[1:]}}
    assert all(c.chosen == "recipe" and c.budget_s == 25.0 and c.spent_s >= 25.0 for c in choices)
    assert all(x.validation_accuracy is None for c in choices for x in c.candidates[1:])


def test_without_the_flag_nothing_is_tuned_and_a_budget_is_named_in_a_warning(tmp_path, caplog):
    plan = _plan(tmp_path, "d", tune_recipes=False)
    assert plan.tuning is None
    with caplog.at_level("WARNING", logger="privbench.config"):
        cfg = build_config({}, {"profile": "smoke", "tune_budget": "5m"})
    assert not cfg.tune_recipes and cfg.tune_budget == 300.0
    assert "tune_budget is set but tune_recipes is not" in caplog.text
