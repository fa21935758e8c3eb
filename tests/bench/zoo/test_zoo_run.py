"""The bug zoo end to end at ``ci`` size (issues 39 and 49): a three-case zoo (DP-SGD correct, with half its noise,
and a user's own bug module) against two auditors, run and judged in two local worker processes; the correct
mechanism passes, a bug is caught, every cell of the report is drawn from zoo.json, the rows the workers judged are
the rows this process judges from the same runs, a zoo killed with SIGKILL resumes to the same document computing
only what was missing, and Ray tasks judge the same rows."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import every_cpu

from bench.zoo.document import without_times

REPO = Path(__file__).resolve().parents[3]
pytestmark = [pytest.mark.slow, pytest.mark.long]
ARGS = ["--profile", "ci", "--bugs", "dpsgd-half-noise,test-stale-sigma", "--auditors",
        "privbench-whitebox,privbench-conformance", "--seeds", "1", "--plugins", "tests.bench.zoo.plugin_bug"]


def _command(folder: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "bench", "zoo", "run", *ARGS, "--output", str(folder), *extra]


def _zoo(folder: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(_command(folder, *extra), cwd=REPO, capture_output=True, text=True, timeout=900)


@pytest.fixture(scope="module")
def zoo(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("zoo") / "z"
    done = _zoo(folder, "--jobs", "2")
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
    cost = doc["cost"]  # the driver collected rows only: its own CPU a small part of what the workers spent
    assert cost["runs_computed"] == 3 and cost["driver_cpu_s"] < cost["runs_cpu_s"]


def test_the_workers_rows_are_the_rows_this_process_judges(zoo, monkeypatch):
    """Each run was judged in the worker process that ran it; judging the same run folders here, in one process
    as the driver once did, gives the same rows (times aside)."""
    from bench.zoo.cli import _load
    from bench.zoo.runner import ZooOptions, plan
    from bench.zoo.worker import judge_rows

    monkeypatch.syspath_prepend(str(REPO))
    plugins = _load("tests.bench.zoo.plugin_bug")
    options = ZooOptions(profile="ci", bugs=("dpsgd-half-noise", "test-stale-sigma"),
                         auditors=("privbench-whitebox", "privbench-conformance"), seeds=1, output=zoo,
                         plugins=plugins, jobs=2)
    doc = json.loads((zoo / "zoo.json").read_text())
    here = []
    for spec in plan(options):
        record = json.loads(spec.record_path.read_text())
        assert record["key"] == spec.key  # the worker ran exactly what this plan orders
        here += judge_rows(spec, record)
    from bench.zoo.document import finite

    assert without_times({"rows": finite(here)}) == without_times({"rows": doc["rows"]})
    assert len(here) == 6 and all("caught" in r for r in here)


def _gone(group: int, timeout: float = 60.0) -> bool:
    """Whether every process of ``group`` has ended within ``timeout`` seconds."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            os.killpg(group, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.2)
    return False


def test_a_zoo_killed_with_sigkill_resumes_to_the_same_document(zoo, tmp_path):
    """SIGKILL to the driver once its first run is judged and kept: its workers and their runs die with it (none
    is left writing), the rerun of the same command computes only the runs not kept, and zoo.json equals the
    uninterrupted zoo's but for times."""
    folder = tmp_path / "z"
    proc = subprocess.Popen(_command(folder, "--jobs", "2"), cwd=REPO, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        end = time.monotonic() + 600
        while not list(folder.glob("runs/*/seed-0/zoo-run.json")) and time.monotonic() < end:
            assert proc.poll() is None, "the zoo ended before it was killed"
            time.sleep(0.2)
        kept = list(folder.glob("runs/*/seed-0/zoo-run.json"))
        assert kept, "no run was judged in 10 minutes"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        assert _gone(proc.pid), "a worker or a run outlived the killed zoo"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    kept = {p: p.stat().st_mtime_ns for p in folder.glob("runs/*/seed-0/zoo-run.json")}
    assert 1 <= len(kept) < 3
    done = _zoo(folder, "--jobs", "2")
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"3 runs: {len(kept)} already judged" in done.stdout
    assert all(p.stat().st_mtime_ns == t for p, t in kept.items())  # kept runs were not run again
    first = without_times(json.loads((zoo / "zoo.json").read_text()))
    assert without_times(json.loads((folder / "zoo.json").read_text())) == first


def test_another_code_version_is_run_again_never_mixed(zoo, tmp_path):
    """A run kept under another key (here: another code version's, as its files say) is run again, its folder
    emptied first; the others are reused."""
    folder = tmp_path / "z"
    shutil.copytree(zoo, folder)
    stale = folder / "runs" / "test-stale-sigma" / "seed-0" / "zoo-run.json"
    record = json.loads(stale.read_text())
    stale.write_text(json.dumps({**record, "key": "another code version"}))
    (stale.parent / "zoo-run.key").write_text("another code version\n")
    done = _zoo(folder)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "3 runs: 2 already judged" in done.stdout
    assert json.loads(stale.read_text())["key"] == record["key"]
    assert without_times(json.loads((folder / "zoo.json").read_text())) == without_times(
        json.loads((zoo / "zoo.json").read_text()))


def test_ray_tasks_judge_the_same_rows(zoo, tmp_path):
    """``--executor ray``: each run a Ray task on a local Ray instance, judged in the task; the same rows."""
    pytest.importorskip("ray")
    folder = tmp_path / "z"
    with every_cpu():
        done = _zoo(folder, "--executor", "ray", "--jobs", "2")
    assert done.returncode == 0, done.stderr[-2000:]
    ours, theirs = (json.loads((f / "zoo.json").read_text()) for f in (folder, zoo))
    assert ours["executor"] == "ray"
    assert without_times({"rows": ours["rows"]}) == without_times({"rows": theirs["rows"]})


def test_bad_input_is_one_line():
    done = subprocess.run([sys.executable, "-m", "bench", "zoo", "run", "--bugs", "no-such-bug"], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "no-such-bug" in done.stderr


def test_a_run_that_refuses_its_configuration_stops_the_zoo_in_one_line(tmp_path):
    """A run whose ``bench run`` refuses its configuration (exit status 2: here a user's auditor asks for an attack
    privbench does not have) stops the zoo there with that reason in one line, exit status 2, instead of judging
    every seed's missing result; the runs not started never start."""
    (tmp_path / "odd_auditor_49.py").write_text(
        "from bench.zoo.api import Auditor, Verdict, register_auditor\n"
        "register_auditor(Auditor(name='test-odd', threat_model='black-box', source='a test', mechanisms=('dpsgd',),"
        " attacks=('no-such-attack-49',), judge=lambda inp: Verdict(False)))\n", encoding="utf-8")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join((str(tmp_path), str(REPO), os.environ.get("PYTHONPATH", ""))))
    args = ["--bugs", "dpsgd-no-noise", "--auditors", "test-odd", "--seeds", "3", "--plugins", "odd_auditor_49",
            "--output", str(tmp_path / "z")]
    done = subprocess.run([sys.executable, "-m", "bench", "zoo", "run", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stderr[-2000:]
    line = done.stderr.strip().splitlines()[-1]
    assert "the run of dpsgd:correct (seed 0) at --profile ci refused its configuration" in line, line
    assert "no-such-attack-49" in line and "Traceback" not in done.stderr
    assert not (tmp_path / "z" / "runs" / "dpsgd-no-noise").exists()  # the bug's runs never started
