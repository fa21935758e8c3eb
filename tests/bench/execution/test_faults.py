"""Fault injection: kills, corrupt cache entries, divergence, full disks. Nothing is lost or half-written."""

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

from bench.config.run import build_config
from bench.runner.harness import Harness
from bench.runner.planning import plan_from_config

# the attacks: LOSS and RMIA (its reference models are cached and reused on resume like the targets); every other
# attack's determinism across a rerun: tests/bench/runner/test_end_to_end.py's rerun test
FAST = ["--profile", "smoke", "--mechanisms", "baseline,local-gaussian,weight-noise", "--epsilons", "2,8",
        "--attacks", "loss,rmia"]


def _default_sigint() -> None:
    """In the child: SIGINT back to its default. A shell that starts a job in the background (``cmd &``) ignores
    SIGINT for it and its children inherit that, so without this the test's Ctrl-C would never arrive."""
    signal.signal(signal.SIGINT, signal.default_int_handler)


def _start(out: Path, cache: Path, *extra: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "bench", "run", *FAST, "--output", str(out),
                             "--cache-dir", str(cache), *extra], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, preexec_fn=_default_sigint)


def _wait_for_results(out: Path, n: int, proc: subprocess.Popen, timeout: float = 300) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        f = out / "results.json"
        if f.exists() and len(json.loads(f.read_text())["results"]) >= n:
            return
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.2)
    raise AssertionError("no results appeared")


def _numbers(doc: dict) -> list:
    return [(r["mechanism"], r["target_epsilon"], r["privacy"], r["utility"], r["attacks"]) for r in doc["results"]]


@pytest.fixture(scope="module")
def reference_run(tmp_path_factory):
    """An uninterrupted run of the same grid from an empty cache: (its results.json, the cache it filled)."""
    folder = tmp_path_factory.mktemp("ref")
    out, cache = folder / "run", folder / "cache"
    proc = subprocess.run([sys.executable, "-m", "bench", "run", *FAST, "--output", str(out), "--cache-dir",
                           str(cache)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    doc = json.loads((out / "results.json").read_text())
    assert not any(r["timings"]["cached"] for r in doc["results"])
    return doc, cache


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGKILL, *(pytest.param(s, marks=pytest.mark.long)  # graceful stops: -m long
                                                    for s in (signal.SIGTERM, signal.SIGINT))],
                         ids=["KILL", "TERM", "INT"])
def test_interrupted_run_resumes_to_the_same_results(sig, tmp_path, reference_run):
    out, cache = tmp_path / "run", tmp_path / "cache"
    proc = _start(out, cache)
    _wait_for_results(out, 2, proc)
    os.kill(proc.pid, sig)
    _, err = proc.communicate(timeout=120)
    partial = json.loads((out / "results.json").read_text())  # whole, valid JSON after any kill
    assert partial["status"] == "partial" and len(partial["results"]) >= 2
    if sig != signal.SIGKILL:  # a graceful stop: one line, status 130, no traceback
        assert proc.returncode == 130 and "Traceback" not in err and "rerun" in err
    # no temporary files left behind; a kill leaves the lock file, which never blocks (the kernel dropped the lock)
    assert not [p for p in out.iterdir() if p.name.startswith(".") and p.name != ".privbench.lock"]
    assert sig == signal.SIGKILL or not (out / ".privbench.lock").exists()
    resumed = subprocess.run([sys.executable, "-m", "bench", "run", *FAST, "--output", str(out), "--cache-dir",
                              str(cache)], capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    doc = json.loads((out / "results.json").read_text())
    assert doc["status"] == "complete"
    assert sum(r["timings"]["cached"] for r in doc["results"]) >= 2  # finished models were reused
    assert _numbers(doc) == _numbers(reference_run[0])


@pytest.mark.slow
def test_corrupt_cache_entry_is_detected_and_retrained(tmp_path, reference_run):
    reference, filled = reference_run
    cache = tmp_path / "cache"
    shutil.copytree(filled, cache)  # the reference run's cache, every model of the grid in it
    args = [sys.executable, "-m", "bench", "run", *FAST, "--cache-dir", str(cache)]
    key = reference["results"][0]["cache_key"]  # a target model, not a shadow
    victim = next(p for p in cache.rglob("model.pt") if key in str(p))
    victim.write_bytes(victim.read_bytes()[: victim.stat().st_size // 2])  # truncate one model
    proc = subprocess.run([*args, "--output", str(tmp_path / "again")], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0 and "corrupt" in proc.stderr
    doc = json.loads((tmp_path / "again" / "results.json").read_text())
    assert sum(not r["timings"]["cached"] for r in doc["results"]) == 1
    assert _numbers(doc) == _numbers(reference)


@pytest.mark.slow
def test_divergence_marks_the_cell_failed_and_the_run_goes_on(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("training:\n  baseline: {lr: 1.0e+12, momentum: 0.9}\n")
    proc = subprocess.run([sys.executable, "-m", "bench", "all", "--profile", "smoke", "--mechanisms",
                           "baseline,local-gaussian", "--epsilons", "8", "--config", str(cfg), "--no-cache",
                           "--output", str(tmp_path / "o")], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 1  # the run finished, but says a cell failed
    doc = json.loads((tmp_path / "o" / "results.json").read_text())
    status = {r["mechanism"]: r for r in doc["results"]}
    assert status["baseline"]["status"] == "failed" and "loss became" in status["baseline"]["error"]
    assert all(r["status"] == "ok" for r in doc["results"] if r["mechanism"] != "baseline")
    assert "failed" in (tmp_path / "o" / "report.md").read_text()


def test_full_disk_keeps_the_previous_results(tmp_path, monkeypatch):
    out = tmp_path / "o"
    cfg = build_config({}, {"profile": "smoke", "mechanisms": "baseline", "output": str(out), "no_cache": True})
    Harness(plan_from_config(cfg)).run()
    before = (out / "results.json").read_bytes()

    def full(*a, **k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("bench.core.io.os.fsync", full)
    with pytest.raises(OSError):  # a new run over the finished one (--overwrite): its first write fails
        Harness(plan_from_config(cfg, overwrite=True)).run()
    assert (out / "results.json").read_bytes() == before
    assert [p.name for p in out.iterdir() if p.name.startswith(".")] == []


def test_different_seeds_draw_different_members():
    from bench.core.data import load_dataset, make_split

    pool, test = load_dataset("digits")
    a, b = (make_split(pool, test, n_members=300, n_non_members=300, n_population=0, n_test=10, seed=s)
            for s in (0, 1))
    assert a.members.fingerprint() != b.members.fingerprint()


BROKEN_ATTACKS = '''
"""Two attacks that fail: one with a clear ValueError, one with a bug (an IndexError)."""
from attacks import ATTACKS
from attacks.base.attack import MembershipAttack


class Refuses(MembershipAttack):
    name = "refuses"

    def score(self, ctx):
        raise ValueError("refuses: cannot run on this data")


class Buggy(MembershipAttack):
    name = "buggy"

    def score(self, ctx):
        return [][1]


ATTACKS.add("refuses", Refuses)
ATTACKS.add("buggy", Buggy)
'''


def test_a_failed_attack_is_shown_everywhere_and_exits_1(tmp_path):
    """An attack that raises, whatever it raises, is a failed part of its cell: the other attacks and cells run,
    results.json and the reports name it, and the run exits 1 (never a silent gap in the privacy-bug check)."""
    (tmp_path / "broken_attacks.py").write_text(BROKEN_ATTACKS)
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{Path(__file__).resolve().parents[3]}"}
    out = tmp_path / "o"
    proc = subprocess.run([sys.executable, "-m", "bench", "all", "--profile", "smoke", "--plugins", "broken_attacks",
                           "--mechanisms", "baseline", "--attacks", "loss,refuses,buggy", "--no-cache",
                           "--output", str(out)], capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    (r,) = json.loads((out / "results.json").read_text())["results"]
    assert r["status"] == "ok" and "loss" in r["attacks"]
    assert r["attack_errors"] == {"refuses": "refuses: cannot run on this data",
                                  "buggy": "IndexError: list index out of range"}
    tb = r["attack_tracebacks"]  # where to look: the full traceback, ending in the attack's own line
    assert set(tb) == {"refuses", "buggy"} and tb["buggy"].startswith("Traceback")
    assert "return [][1]" in tb["buggy"] and tb["buggy"].rstrip().endswith("IndexError: list index out of range")
    for report in ("report.md", "report.html"):
        text = (out / report).read_text()
        assert "buggy" in text and "refuses" in text, report
    assert "failed attacks" in proc.stdout + proc.stderr
