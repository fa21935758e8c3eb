"""The `ci` profile guards a mechanism in a CI job: at its size, each built-in mechanism family drawing half the noise
its accountant certifies (σ × 0.5, the zoo's ``*-half-noise`` bugs) ends ``bench run --profile ci`` with exit status
3, refuted by that mechanism's own audit, and the correct mechanism exits 0 (the false-alarm rate over seeds:
``scripts/null_test.py``). A mechanism without a ``ci`` recipe trains with its ``smoke`` one (``recipes_from``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import planted

from bench.config.run import build_config
from bench.core.errors import ConfigError
from mechanisms.dpsgd.mechanism import DPSGD
from mechanisms.local.mechanism import LocalGaussian

REPO = Path(__file__).resolve().parents[3]
CI = ["--profile", "ci", "--no-cache", "--device", "cpu"]
AUDIT = {"dpsgd": "canary-whitebox", "local-gaussian": "local-canary", "dpmix": "dpmix-canary"}
BUGS = {"dpsgd": "dpsgd-half-noise", "local-gaussian": "local-half-noise", "dpmix": "dpmix-half-noise"}


def _ci_run(mechanism: str, out: Path, plugin: str | None) -> subprocess.CompletedProcess:
    extra, env = planted(plugin)
    return subprocess.run([sys.executable, "-m", "bench", "run", *CI, "--mechanisms", mechanism, *extra,
                           "--output", str(out)], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=600)


@pytest.mark.long  # CI runs it in its second pytest command (pytest -m long)
@pytest.mark.slow  # a whole CLI job, about 30 s
@pytest.mark.parametrize("mechanism", sorted(BUGS))
def test_half_the_noise_exits_3_at_ci_size(mechanism, tmp_path):
    done = _ci_run(mechanism, tmp_path / "run", BUGS[mechanism])
    assert done.returncode == 3, done.stdout[-3000:] + done.stderr[-3000:]
    doc = json.loads((tmp_path / "run" / "results.json").read_text())
    assert {b["attack"] for b in doc["privacy_bugs"]} == {AUDIT[mechanism]}
    assert [r["target_epsilon"] for r in doc["results"]] == [2.0]  # the profile's ε, no ε = ∞ point


@pytest.mark.long  # CI runs it in its second pytest command (pytest -m long)
@pytest.mark.slow  # a whole CLI job, about 30 s
@pytest.mark.parametrize("mechanism", sorted(BUGS))
def test_the_correct_mechanism_exits_0_at_ci_size(mechanism, tmp_path):
    done = _ci_run(mechanism, tmp_path / "run", None)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    doc = json.loads((tmp_path / "run" / "results.json").read_text())
    [result] = doc["results"]
    audit = result["attacks"][AUDIT[mechanism]]["audit"]
    assert doc["privacy_bugs"] == [] and doc["audit"]["comparisons"] >= 3
    assert 0 < audit["epsilon_lb"] < 2.0  # the audit sees the mechanism, and stays below its ε


def test_ci_takes_each_mechanisms_smoke_recipe_with_its_own_settings_on_top():
    cfg = build_config(cli_values={"profile": "ci", "mechanisms": ("dpsgd", "local-gaussian")})
    smoke = DPSGD.spec(**DPSGD.recipes["smoke"])
    assert cfg.spec_for("dpsgd").epochs == smoke.epochs and cfg.spec_for("dpsgd").lr == smoke.lr
    assert cfg.spec_for("dpsgd").params.model_kwargs == {"hidden": 1024}  # the profile's change
    assert cfg.spec_for("local-gaussian") == LocalGaussian.spec(**LocalGaussian.recipes["smoke"])


def test_recipes_from_must_name_another_profile():
    with pytest.raises(ConfigError, match="recipes_from = 'nope' must name another profile: .*smoke"):
        build_config(yaml_values={"recipes_from": "nope"})


@pytest.mark.long  # CI runs it in its second pytest command (pytest -m long)
@pytest.mark.slow  # two ci runs of local noise, about 40 s
def test_the_null_test_judges_each_mechanism_and_seed_alone(tmp_path):
    """The feasible part of the null test (``scripts/null_test.py``; its 20-seed count is in docs/detection_power.md):
    correct local noise at two seeds of the ci profile, each seed judged as its own CI job, no false alarm."""
    done = subprocess.run([sys.executable, "-m", "scripts.null_test", "--seeds", "2", "--mechanisms", "local-gaussian",
                           "--output", str(tmp_path / "run")], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert done.stdout.startswith("local-gaussian: 0 false alarms in 2 seeds"), done.stdout
    doc = json.loads((tmp_path / "run" / "results.json").read_text())
    assert sorted(r["seed"] for r in doc["results"]) == [0, 1]


MY_MECHANISM = '''
"""A user's mechanism built on the library's local randomiser, with only a smoke recipe."""
from mechanisms import MECHANISMS
from mechanisms.local.mechanism import LocalGaussian


class MyLocal(LocalGaussian):
    name = "my-local"
    recipes = {"smoke": LocalGaussian.recipes["smoke"]}


MECHANISMS.add("my-local", MyLocal)
'''


@pytest.mark.long  # CI runs it in its second pytest command (pytest -m long)
@pytest.mark.slow  # two CLI jobs, about 20 s each
def test_the_guides_command_guards_a_plugin_mechanism(tmp_path):
    """docs/guides/ci-guard.md, "Guard your mechanism in CI": `run --profile ci --plugins my_mechanism --mechanisms
    my-mechanism` trains the plug-in with its smoke recipe, audits it, exits 0; with its noise halved (the library's
    randomiser patched by the zoo bug local-half-noise) it exits 3."""
    (tmp_path / "my_mechanism.py").write_text(MY_MECHANISM)
    for bug, status in ((None, 0), ("local-half-noise", 3)):
        plugins, env = planted(bug, "my_mechanism")
        env["PYTHONPATH"] = f"{tmp_path}{os.pathsep}{REPO}"
        out = tmp_path / f"run-{status}"
        done = subprocess.run([sys.executable, "-m", "bench", "run", *CI, *plugins, "--mechanisms",
                               "my-local", "--epsilons", "2", "--output", str(out)], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == status, done.stdout[-3000:] + done.stderr[-3000:]
        doc = json.loads((out / "results.json").read_text())
        assert doc["results"][0]["attacks"]["local-canary"]["audit"]["epsilon_lb"] > 0
        assert {b["attack"] for b in doc["privacy_bugs"]} == ({"local-canary"} if status else set())


@pytest.mark.long  # CI runs it in its second pytest command (pytest -m long)
@pytest.mark.slow  # a whole CLI job each, about 35 CPU-s (4,000 side-by-side runs)
@pytest.mark.parametrize(("plugin", "code"), [(None, 0), ("dpsgd-half-noise", 3), ("dpsgd-no-noise", 3)])
def test_the_crafted_black_box_audit_at_ci_size(plugin, code, tmp_path):
    """``--attacks multi-run-crafted`` at the ci profile's size (4,000 runs of the auditor's logistic regression at
    q = 1): σ × 0.5 and no noise exit 3, the correct DP-SGD exits 0."""
    extra, env = planted(plugin)
    done = subprocess.run([sys.executable, "-m", "bench", "run", *CI, "--mechanisms", "dpsgd", "--attacks",
                           "multi-run-crafted", *extra, "--output", str(tmp_path / "run")], cwd=REPO,
                          env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == code, done.stdout[-3000:] + done.stderr[-3000:]
    doc = json.loads((tmp_path / "run" / "results.json").read_text())
    audit = doc["results"][0]["attacks"]["multi-run-crafted"]["audit"]
    assert audit["design"]["threat_model"] == "black-box-crafted" and audit["design"]["gaussian"]
    assert {b["attack"] for b in doc["privacy_bugs"]} == ({"multi-run-crafted"} if code else set())
