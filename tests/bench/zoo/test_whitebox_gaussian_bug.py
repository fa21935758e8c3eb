"""White-box DP-SGD canaries end to end at smoke size, with a canary at every free coordinate
(``gradient_canaries: all``): DP-SGD drawing half its noise ends ``bench run`` with exit 3 from valid evidence (the
conformance test of the noise σ the run measured, exact under the certified mechanism), never from the μ-GDP analysis
of the canaries' log-likelihood ratios (``gaussian-llr``: an estimate, it assumes their sums Gaussian); the correct
mechanism in the same command exits 0 with ``gaussian-llr`` shown as an estimate."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import planted

pytestmark = pytest.mark.slow  # whole CLI jobs

REPO = Path(__file__).resolve().parents[3]
CONFIG = "attack_params:\n  canary: {num_canaries: 400, gradient_canaries: all}\n"


def _run(tmp_path: Path, plugin: str | None) -> tuple[subprocess.CompletedProcess, dict]:
    (tmp_path / "c.yaml").write_text(CONFIG)
    extra, env = planted(plugin)
    done = subprocess.run([sys.executable, "-m", "bench", "run", "--profile", "smoke", "--config",
                           str(tmp_path / "c.yaml"), "--mechanisms", "dpsgd", "--attacks", "canary", "--epsilons", "1",
                           "--no-cache", "--device", "cpu", "--no-privacy-off-points", "--output",
                           str(tmp_path / "run"), *extra], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=600)
    return done, json.loads((tmp_path / "run" / "results.json").read_text())


def _whitebox(doc: dict) -> dict:
    [result] = [r for r in doc["results"] if r["mechanism"] == "dpsgd"]
    return result["attacks"]["canary-whitebox"]["audit"]


def test_half_the_noise_is_caught_by_valid_evidence(tmp_path):
    done, doc = _run(tmp_path, "dpsgd-half-noise")
    assert done.returncode == 3, done.stdout[-3000:] + done.stderr[-3000:]
    bugs = [b for b in doc["privacy_bugs"] if b["attack"] == "canary-whitebox"]
    assert bugs
    # every bug is valid evidence: an assumption-free bound, the certified curve or a conformance test
    assert {b["method"] for b in bugs} <= {"one-run", "f-dp", "certified-curve", "conformance"}
    # here the noise σ the run measured, about half the certified σ (rejected at the run's corrected level)
    noise = [b for b in bugs if b["method"] == "conformance" and b["test"].startswith("noise σ")]
    assert noise and noise[0]["measured"] < 0.6 * noise[0]["certified"]
    assert noise[0]["p_value"] < 1 - noise[0]["confidence"]
    audit = _whitebox(doc)
    llr = {b["method"]: b for b in audit["bounds"]}["gaussian-llr"]
    assert llr["evidence"] == "estimate" and not llr["valid"] and audit["method"] in ("one-run", "f-dp")
    assert audit["design"]["guess_fraction"] is not None and len(audit["one_run"]["guesses"]) == 1


def test_the_correct_mechanism_passes_with_gaussian_llr_an_estimate(tmp_path):
    done, doc = _run(tmp_path, None)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    audit = _whitebox(doc)
    llr = {b["method"]: b for b in audit["bounds"]}["gaussian-llr"]
    assert llr["evidence"] == "estimate" and not llr["valid"] and 0 < llr["epsilon_lb"]
    assert audit["method"] in ("one-run", "f-dp") and doc["privacy_bugs"] == []
    # every coordinate of the smoke MLP (64·128 + 128 + 128·10 + 10 = 9,610) holds a canary but 2.5 % per tensor
    assert 9_000 < audit["design"]["size"] < 9_610
