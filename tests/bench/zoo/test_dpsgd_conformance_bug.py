"""DP-SGD's conformance tests end to end (``bench run --profile ci``): a mechanism with no noise in one parameter
tensor (the last layer's bias: its canaries barely move the one-run bounds) ends the run with exit 3 and a
``conformance`` privacy bug naming that tensor's noise test; the correct mechanism exits 0 with every test passed and
ε from its measured parameters beside the certified one."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import planted

pytestmark = pytest.mark.slow  # whole CLI jobs

REPO = Path(__file__).resolve().parents[3]


def _run(tmp_path: Path, plugin: str | None) -> tuple[subprocess.CompletedProcess, dict]:
    extra, env = planted(plugin)
    done = subprocess.run([sys.executable, "-m", "bench", "run", "--profile", "ci", "--mechanisms", "dpsgd",
                           "--attacks", "canary", "--no-cache", "--device", "cpu", "--output", str(tmp_path / "run"),
                           *extra], cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    return done, json.loads((tmp_path / "run" / "results.json").read_text())


def _conformance(doc: dict) -> dict:
    [result] = [r for r in doc["results"] if r["mechanism"] == "dpsgd"]
    return result["attacks"]["canary-whitebox"]["conformance"]


def test_no_noise_in_one_tensor_ends_the_run_with_exit_3(tmp_path):
    done, doc = _run(tmp_path, "dpsgd-noise-one-tensor")
    assert done.returncode == 3, done.stdout[-3000:] + done.stderr[-3000:]
    bugs = [b for b in doc["privacy_bugs"] if b["method"] == "conformance"]
    assert [b["test"] for b in bugs] == ["noise σ, tensor 4 of 4"] and bugs[0]["measured"] == 0.0
    assert bugs[0]["attack"] == "canary-whitebox" and bugs[0]["relation"] == "replace-one"
    assert "inconsistent with the certified mechanism" in " ".join(done.stdout.split())  # the console wraps


def test_the_correct_mechanism_passes_every_conformance_test(tmp_path):
    done, doc = _run(tmp_path, None)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    c = _conformance(doc)
    assert len(c["tests"]) == 4 + 10 and doc["privacy_bugs"] == []
    m = c["measured_epsilon"]
    assert m["relation"] == "replace-one" and 0.98 * m["certified"] <= m["epsilon"] <= m["certified"] * 1.0001
