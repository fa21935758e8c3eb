"""A run whose empirical ε lower bound exceeds an accountant's ε is a privacy bug: red lines, every report
says so, and ``bench all`` exits with status 3."""

from __future__ import annotations

import json

import pytest

import attacks.audit
from bench.cli import EXIT_PRIVACY_BUG, main

pytestmark = pytest.mark.slow  # whole CLI jobs

ARGS = ["all", "--profile", "smoke", "--mechanisms", "local-gaussian", "--epsilons", "1", "--attacks", "loss",
        "--device", "cpu"]


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return str(tmp_path_factory.mktemp("bug-cache"))


def test_a_sound_run_has_no_privacy_bug(tmp_path, cache):
    assert main([*ARGS, "--output", str(tmp_path / "run"), "--cache-dir", cache]) == 0
    doc = json.loads((tmp_path / "run" / "results.json").read_text())
    assert doc["privacy_bugs"] == [] and doc["audit"]["comparisons"] == 1
    audit = doc["results"][0]["attacks"]["loss"]["audit"]
    assert audit["epsilon_lb"] <= doc["results"][0]["privacy"]["epsilon"]


def test_a_lower_bound_above_the_accountant_fails_the_run(tmp_path, cache, monkeypatch, capsys):
    perfect = [[10_000, 0, 0, 10_000]] * 24  # what a perfect attacker on 10,000 + 10,000 examples would give
    monkeypatch.setattr(attacks.audit, "threshold_counts", lambda scores, labels, **kw: perfect)
    code = main([*ARGS, "--output", str(tmp_path / "run"), "--cache-dir", cache])
    assert code == EXIT_PRIVACY_BUG == 3
    out = capsys.readouterr().out
    assert "PRIVACY BUG: local-gaussian (target ε 1, seed 0)" in out and "exceeds the accountant's ε" in out
    doc = json.loads((tmp_path / "run" / "results.json").read_text())
    [bug] = doc["privacy_bugs"]
    assert bug["attack"] == "loss" and bug["lower_bound"] > 7 > bug["epsilon"]
    assert bug["confidence"] == pytest.approx(0.95)  # one comparison in the run: no correction
    for report in ("report.md", "report.html"):
        assert "PRIVACY BUG" in (tmp_path / "run" / report).read_text()
    assert 'class="bug"' in (tmp_path / "run" / "report.html").read_text()
