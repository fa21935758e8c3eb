"""Privacy bugs caught end to end: mechanisms broken on purpose (zoo bugs planted by ``bench.zoo.apply``: the noise
removed or reduced, clipping removed — the accountant still certifies the ε it was asked for) end ``bench all`` /
``bench audit`` with exit status 3, one red line per bug, and every report saying so. The audits are not touched:
each bug patches only the mechanism's own code. The same commands without the bug exit 0
(``test_null.py`` measures the false-alarm rate over seeds)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import planted

pytestmark = [pytest.mark.slow, pytest.mark.long]  # whole CLI jobs; CI runs them in its second command (-m long)

REPO = Path(__file__).resolve().parents[3]
SMOKE = ["--profile", "smoke", "--no-reference-epsilons", "--no-cache", "--device", "cpu"]
CASES = {  # zoo bug -> (mechanism, audit, ε, the audit that must refute it)
    "dpsgd-no-noise": ("dpsgd", "canary", "1", "canary-whitebox"),
    "dpsgd-no-clipping": ("dpsgd", "canary", "1", "canary-whitebox"),
    "dpsgd-quarter-noise": ("dpsgd", "canary", "1", "canary-whitebox"),
    "local-half-noise": ("local-gaussian", "local-canary", "1", "local-canary"),
    "local-labels-in-clear": ("local-gaussian", "local-canary", "1", "local-canary"),
    "dpmix-tenth-noise": ("dpmix", "dpmix-canary", "1", "dpmix-canary"),
}


def _bench(*args: str, out: Path, plugin: str | None = None) -> subprocess.CompletedProcess:
    extra, env = planted(plugin)
    return subprocess.run([sys.executable, "-m", "bench", *args, *SMOKE, *extra, "--output", str(out)], cwd=REPO,
                          env=env, capture_output=True, text=True, timeout=600)


def _bug_lines(stdout: str) -> list[str]:
    return [line for line in stdout.splitlines() if line.startswith("PRIVACY BUG")]


@pytest.mark.parametrize("plugin", sorted(CASES))
def test_a_broken_mechanism_ends_the_main_job_with_exit_3(plugin, tmp_path):
    mechanism, attack, epsilon, auditor = CASES[plugin]
    done = _bench("all", "--mechanisms", mechanism, "--attacks", attack, "--epsilons", epsilon, out=tmp_path / "run",
                  plugin=plugin)
    assert done.returncode == 3, done.stdout[-3000:] + done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    doc = json.loads((tmp_path / "run" / "results.json").read_text())
    bugs = doc["privacy_bugs"]
    assert bugs and {b["attack"] for b in bugs} == {auditor}
    for bug in bugs:  # a valid design, the accountant's own relation, a bound above its ε (or its whole curve), or
        # a conformance test the run's measured parameters fail (attacks.conformance.hypothesis_tests)
        assert bug["design"].startswith(("one-run", "multi-run")) and bug["relation"] in ("add-remove", "replace-one")
        assert bug["lower_bound"] is None and bug["method"] in ("certified-curve", "conformance") \
            or bug["lower_bound"] > bug["epsilon"]
        assert bug["confidence"] >= 0.95
    lines = _bug_lines(done.stdout)
    assert len(lines) == len(bugs) and all(mechanism in line for line in lines)  # one line per bug
    for report in ("report.md", "report.html"):
        assert "PRIVACY BUG" in (tmp_path / "run" / report).read_text(encoding="utf-8")


@pytest.mark.xdist_group("ray")  # one local Ray instance at a time (tests/conftest.py, GROUPS)
def test_ray_tasks_train_with_the_plugins(tmp_path):
    """With ``--executor ray`` the broken mechanism is the one trained in the Ray tasks too (they import the run's
    plug-ins): the audit refutes it as it does locally."""
    from helpers import every_cpu

    pytest.importorskip("ray")
    with every_cpu():  # the xdist worker's pin (tests/conftest.py) lifted: the Ray instance gets both cores
        done = _bench("all", "--mechanisms", "dpsgd", "--attacks", "canary", "--epsilons", "1", "--executor", "ray",
                      out=tmp_path / "run", plugin="dpsgd-no-noise")
    assert done.returncode == 3, done.stdout[-3000:] + done.stderr[-3000:]
    doc = json.loads((tmp_path / "run" / "results.json").read_text())
    assert doc["executor"]["name"] == "ray" and {b["attack"] for b in doc["privacy_bugs"]} == {"canary-whitebox"}


def test_the_multi_run_audit_catches_dpsgd_without_noise(tmp_path):
    args = ["audit", "--mechanisms", "dpsgd", "--epsilons", "1", "--runs", "60", "--members", "200"]
    done = _bench(*args, out=tmp_path / "run", plugin="dpsgd-no-noise")
    assert done.returncode == 3, done.stdout[-3000:] + done.stderr[-3000:]
    doc = json.loads((tmp_path / "run" / "results.json").read_text())
    assert {b["attack"] for b in doc["privacy_bugs"]} == {"multi-run-whitebox"}
    [bug] = doc["privacy_bugs"]
    assert bug["design"] == "multi-run, R = 60" and bug["threat_model"] == "white-box"


def test_the_same_commands_on_correct_mechanisms_exit_0(tmp_path):
    done = _bench("all", "--mechanisms", "dpsgd,local-gaussian", "--attacks", "canary,local-canary", "--epsilons",
                  "1", out=tmp_path / "run")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    doc = json.loads((tmp_path / "run" / "results.json").read_text())
    assert doc["privacy_bugs"] == [] and doc["audit"]["comparisons"] >= 4 and not _bug_lines(done.stdout)
