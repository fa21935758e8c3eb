"""The bug zoo end to end at ``ci`` size (issue 39): a three-case zoo (DP-SGD correct, with half its noise, and a
user's own bug module) against two auditors; the correct mechanism passes, a bug is caught, every cell of the report
is drawn from zoo.json, and a run resumed after an interruption gives the same document as an uninterrupted one."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bench.zoo.document import without_times

REPO = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.slow, pytest.mark.long]
ARGS = ["--profile", "ci", "--bugs", "dpsgd-half-noise,test-stale-sigma", "--auditors",
        "privbench-whitebox,privbench-conformance", "--seeds", "1", "--plugins", "tests.zoo.plugin_bug"]


def _zoo(folder: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bench", "zoo", "run", *ARGS, "--output", str(folder)],
                          cwd=REPO, capture_output=True, text=True, timeout=900)


@pytest.fixture(scope="module")
def zoo(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("zoo") / "z"
    done = _zoo(folder)
    assert done.returncode == 0, done.stderr[-2000:]
    return folder


def _summary(folder: Path) -> dict[tuple[str, str], dict]:
    doc = json.loads((folder / "zoo.json").read_text())
    return {(s["case"], s["auditor"]): s for s in doc["summary"]}


def test_the_correct_mechanism_passes_and_a_bug_is_caught(zoo):
    s = _summary(zoo)
    assert {case for case, _ in s} == {"dpsgd:correct", "dpsgd-half-noise", "test-stale-sigma"}
    for auditor in ("privbench-whitebox", "privbench-conformance"):
        assert s[("dpsgd:correct", auditor)]["caught"] == 0 and s[("dpsgd:correct", auditor)]["verdicts"] == 1
    assert s[("dpsgd-half-noise", "privbench-whitebox")]["caught"] == 1  # σ/2 moves the canaries' scores
    assert s[("test-stale-sigma", "privbench-conformance")]["caught"] == 1  # 0.9·σ: the noise tests see it
    doc = json.loads((zoo / "zoo.json").read_text())
    assert doc["bugs"]["test-stale-sigma"]["source"] == "planted (a test's own plug-in)"  # the plug-in's own row
    half = next(r for r in doc["rows"] if r["case"] == "dpsgd-half-noise")
    assert half["true_epsilon"] > 1.2 * half["certified_epsilon"]  # ε(σ/2) by dp_accounting
    md = (zoo / "zoo.md").read_text()
    assert "| dpsgd:correct | dpsgd | 1× | 0/1 (0–98%) | 0/1 (0–98%) |" in md
    assert (zoo / "zoo_cost.png").stat().st_size > 1000


def test_a_resumed_zoo_gives_the_same_document(zoo, tmp_path):
    """Interrupted before its last run finished (that run's record and results gone, its models possibly cached):
    the same command finishes it, and zoo.json equals the uninterrupted run's but for times."""
    resumed = tmp_path / "z"
    shutil.copytree(zoo, resumed)
    last = resumed / "runs" / "test-stale-sigma" / "seed-0"
    (last / "zoo-run.json").unlink()
    shutil.rmtree(last / "run")
    (resumed / "zoo.json").unlink()
    done = _zoo(resumed)
    assert done.returncode == 0, done.stderr[-2000:]
    first = without_times(json.loads((zoo / "zoo.json").read_text()))
    again = without_times(json.loads((resumed / "zoo.json").read_text()))
    assert again == first


def test_bad_input_is_one_line():
    done = subprocess.run([sys.executable, "-m", "bench", "zoo", "run", "--bugs", "no-such-bug"], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "no-such-bug" in done.stderr


def test_a_profile_the_mechanism_has_no_settings_for_stops_the_zoo_in_one_line(tmp_path):
    """The example Opacus loop has a recipe for the smoke (and so ci) profile only: at ``default`` its first run
    refuses its configuration, and the zoo stops there with that reason in one line, exit status 2, instead of
    judging every seed's missing result."""
    args = ["--profile", "default", "--bugs", "opacus-no-noise", "--auditors", "privbench", "--seeds", "3"]
    done = subprocess.run([sys.executable, "-m", "bench", "zoo", "run", *args, "--output", str(tmp_path / "z")],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stderr[-2000:]
    line = done.stderr.strip().splitlines()[-1]
    assert "opacus-example:correct (seed 0) at --profile default refused its configuration" in line
    assert "training.opacus-dpsgd is missing" in line and "Traceback" not in done.stderr
    assert not (tmp_path / "z" / "runs" / "opacus-no-noise").exists()  # the bug's runs never started
