"""The non-private ceiling (``bench.runner.ceiling``): chosen among the models trained with privacy off (the baseline
and each mechanism's ε = ∞ point) on a validation split of training images; the test set never reaches the choice —
permuting the test labels of a real run changes every test accuracy and not the choice."""

from __future__ import annotations

import dataclasses
import io
import math

import pytest
import torch
from rich.console import Console

from bench.config.run import build_config
from bench.core.data import ArrayDataset
from bench.results import PrivacyRecord, RunResult, Timings, Utility
from bench.runner.ceiling import VALIDATION_MAX, choose_ceiling, validation_split
from bench.runner.harness import Harness, attack_order
from bench.runner.planning import grid, plan_from_config

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py
OFF = PrivacyRecord(epsilon=None, delta=None, accountant="none", guarantee="none", off=True)
DP = PrivacyRecord(epsilon=1.0, delta=1e-5, accountant="pld", guarantee="central-dp", relation="replace-one")


def _result(mechanism: str, val: float | None, test: float, *, seed: int = 0, off_point: bool = True,
            privacy: PrivacyRecord = OFF) -> RunResult:
    return RunResult(dataset="d", mechanism=mechanism, seed=seed, target_epsilon=None if off_point else 1.0,
                     off_point=off_point and mechanism != "baseline", model="m", spec={}, privacy=privacy,
                     utility=Utility(test_accuracy=test, test_loss=None, train_accuracy=1.0,
                                     validation_accuracy=val), timings=Timings(train_s=1.0))


def _choose(results: list[RunResult]):
    return choose_ceiling(results, n_test=100, validation="v", n_validation=10)


def test_the_choice_follows_validation_not_test():
    results = [_result("baseline", 0.90, 0.99), _result("dpsgd", 0.95, 0.80), _result("dpmix", 0.70, 0.97),
               _result("dpsgd", 0.5, 0.999, off_point=False, privacy=DP)]  # private: never a candidate
    c = _choose(results)
    assert (c.mechanism, c.off_point, c.validation_accuracy, c.test_accuracy) == ("dpsgd", True, 0.95, 0.80)
    assert [x.mechanism for x in c.candidates] == ["baseline", "dpsgd", "dpmix"]
    flipped = [r.model_copy(update={"utility": r.utility.model_copy(
        update={"test_accuracy": 1 - r.utility.test_accuracy})}) for r in results]
    assert _choose(flipped).mechanism == "dpsgd"  # every test number changed, the choice did not


def test_seeds_are_averaged_and_ties_keep_run_order():
    results = [_result("baseline", 0.9, 0.9, seed=0), _result("baseline", 0.6, 0.9, seed=1),  # mean 0.75
               _result("weight-noise", 0.8, 0.5, seed=0), _result("local-gaussian", 0.8, 0.6, seed=0)]
    c = _choose(results)
    assert c.mechanism == "weight-noise" and math.isclose(c.candidates[0].validation_accuracy, 0.75)
    assert c.candidates[0].seeds == [0, 1]
    assert _choose([_result("dpsgd", 0.5, 0.5, off_point=False, privacy=DP)]) is None


def test_validation_split_is_training_images_outside_the_members(digits_split):
    val, words = validation_split(digits_split)
    assert torch.equal(val.x, digits_split.population.x[:VALIDATION_MAX])
    assert "population" in words and f"{len(val):,}" in words
    no_population = dataclasses.replace(digits_split, population=digits_split.population.subset(torch.arange(0)))
    val2, words2 = validation_split(no_population)
    assert torch.equal(val2.x, digits_split.non_members.x[:VALIDATION_MAX]) and "non-members" in words2


def test_grid_adds_each_mechanisms_off_point_once_per_seed():
    cfg = build_config({"seeds": [0, 1]}, {"profile": "smoke", "mechanisms": "baseline,dpsgd,weight-noise"})
    cells = grid(cfg)
    off = [(r.mechanism, seed) for r, seed in cells if r.target_epsilon is not None and math.isinf(r.target_epsilon)]
    assert off == [("dpsgd", 0), ("weight-noise", 0), ("dpsgd", 1), ("weight-noise", 1)]
    cfg = build_config({"privacy_off_points": False}, {"profile": "smoke", "mechanisms": "dpsgd"})
    assert all(not math.isinf(r.target_epsilon or 0) for r, _ in grid(cfg))


def _permuted_test(split):
    perm = torch.randperm(len(split.test), generator=torch.Generator().manual_seed(5))
    test = ArrayDataset(split.test.x, split.test.y[perm], split.test.num_classes, split.test.name)
    return dataclasses.replace(split, test=test)


def test_a_real_runs_ceiling_ignores_the_test_labels(tmp_path):
    cfg = build_config({"mechanisms": ["baseline", "local-gaussian", "weight-noise"], "attacks": ["loss"],
                        "epsilons": [8], "training": {"baseline": {"epochs": 5}, "weight-noise": {"epochs": 5},
                                                      "local-gaussian": {"epochs": 5}}},
                       {"profile": "smoke", "output": str(tmp_path / "a"), "cache_dir": str(tmp_path / "cache"),
                        "device": "cpu"})
    plan = plan_from_config(cfg)
    quiet = Console(file=io.StringIO())
    doc, _ = Harness(plan, console=quiet).run()
    permuted = dataclasses.replace(plan, output=str(tmp_path / "b"),
                                   cells=[dataclasses.replace(pc, split=_permuted_test(pc.split)) for pc in plan.cells])
    doc2, _ = Harness(permuted, console=quiet).run()
    c, c2 = doc.ceilings["digits"], doc2.ceilings["digits"]
    assert {x.mechanism for x in c.candidates} == {"baseline", "local-gaussian", "weight-noise"}
    assert [(x.mechanism, x.validation_accuracy) for x in c.candidates] == \
        [(x.mechanism, x.validation_accuracy) for x in c2.candidates]
    assert c2.mechanism == c.mechanism
    assert c2.test_accuracy < c.test_accuracy - 0.3  # the test labels really changed what the test set says
    # trained and attacked with the ε = ∞ points last (attack_order), recorded in the plan's order
    assert [pc.recipe.mechanism for pc in attack_order(plan.cells)] == \
        ["baseline", "local-gaussian", "weight-noise", "local-gaussian", "weight-noise"]
    assert [(r.mechanism, r.off_point) for r in doc.results] == \
        [("baseline", False), ("local-gaussian", False), ("local-gaussian", True), ("weight-noise", False),
         ("weight-noise", True)]
    off = [r for r in doc.results if r.off_point]
    assert {r.mechanism for r in off} == {"local-gaussian", "weight-noise"}
    assert all(r.target_epsilon is None and r.privacy.off and "loss" in r.attacks for r in off)
    private = [r for r in doc.results if not r.privacy.off]
    assert private and all(r.utility.validation_accuracy is None for r in private)  # only candidates are measured
