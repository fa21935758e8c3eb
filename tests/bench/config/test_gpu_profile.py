"""The ``gpu`` profile (issue 21): Carlini et al. 2022's LiRA setting on CIFAR-10 with WRN-16-4 / GroupNorm models,
checked as configured, planned on a tiny CIFAR-10 the test writes in torchvision's format, and run on CPU at tiny
sizes (slow)."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest
from datafiles import write_cifar10

from bench.config.run import build_config
from bench.runner.planning import plan_from_config

# tiny sizes over the profile's: 2 × 20 candidates, 4 online shadows, one epoch; DP-SGD with augmentation
# multiplicity K = 2 (De et al. 2022's option for WRN-16-4), 4 records per forward/backward pass
TINY = {"n_members": 20, "n_non_members": 20, "n_test": 10, "max_attack_examples": 20, "epsilons": [8],
        "attack_params": {"lira": {"num_shadow": 4, "shadow_size": 20}},
        "training": {"baseline": {"epochs": 1, "batch_size": 10},
                     "dpsgd": {"epochs": 1, "batch_size": 10, "params": {"augmult": 2, "max_physical_batch_size": 4}}}}


def test_gpu_profile_is_the_lira_setting():
    cfg = build_config({}, {"profile": "gpu"})
    assert cfg.dataset == "cifar10" and set(cfg.mechanisms) == {"baseline", "dpsgd"}
    # each model trains on half of CIFAR-10's 50,000 training images; the other half are the non-members
    assert cfg.n_members == cfg.n_non_members == 25_000 and cfg.n_population == 0 and cfg.n_test == 10_000
    lira = cfg.attack_params["lira"]
    assert lira.num_shadow == 256 and lira.shadow_size == 25_000 and lira.augment
    assert {cfg.spec_for(m).model for m in cfg.mechanisms} == {"wrn-16-4"}


def test_gpu_profile_plans_on_cifar10_files(tmp_path):
    root = write_cifar10(tmp_path, per_batch=10, n_test=10)
    cfg = build_config(TINY, {"profile": "gpu", "data_root": str(root), "output": str(tmp_path / "out")})
    plan = plan_from_config(cfg)
    info = plan.datasets["cifar10"]
    assert info.input_shape == [3, 32, 32] and info.num_classes == 10 and info.format == "torchvision"
    assert [(c.recipe.mechanism, c.recipe.target_epsilon) for c in plan.cells] == [
        ("baseline", None), ("dpsgd", 8.0), ("dpsgd", math.inf)]  # DP-SGD's ε = ∞ point: its recipe, privacy off
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
@pytest.mark.long  # tests/conftest.py: left out of the default run, CI runs it with `pytest -m long`
def test_gpu_profile_runs_on_cpu_at_tiny_sizes(tmp_path):
    import yaml

    root = write_cifar10(tmp_path / "data", per_batch=10, n_test=10)
    cfg = tmp_path / "tiny.yaml"
    cfg.write_text(yaml.safe_dump(TINY))
    out = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-m", "bench", "all", "--profile", "gpu", "--device", "cpu", "--config",
                           str(cfg), "--data-root", str(root), "--output", str(out), "--cache-dir",
                           str(tmp_path / "cache")], capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads((out / "results.json").read_text())
    assert all(r["status"] == "ok" and not r["attack_errors"] for r in doc["results"])
    dpsgd = next(r for r in doc["results"] if r["mechanism"] == "dpsgd")
    assert dpsgd["spec"]["params"]["augmult"] == 2 and dpsgd["params"]["augmult"] == 2
    for r in doc["results"]:
        lira = r["attacks"]["lira"]
        assert lira["n_members"] == lira["n_non_members"] == 20 and 0 <= lira["metrics"]["auc"] <= 1
