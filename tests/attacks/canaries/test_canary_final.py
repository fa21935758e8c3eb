"""``canary-final``: DP-SGD's final-model (hidden-state) audit end to end at ``ci`` size — its own threat model in
results.json, its Bonferroni family fixed by the design, the correct mechanism below its add/remove ε and DP-SGD
drawing half its noise (the zoo bug ``dpsgd-half-noise``) caught with exit status 3."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import planted

from attacks.analysis import estimates, family
from bench.core.design import AuditDesign
from bench.results.document import read
from reports.sections.audit.table import audit_rows

REPO = Path(__file__).resolve().parents[3]
CI = ["--profile", "ci", "--no-cache", "--device", "cpu", "--mechanisms", "dpsgd", "--attacks", "canary-final"]


def _run(out: Path, plugin: str | None) -> subprocess.CompletedProcess:
    extra, env = planted(plugin)
    return subprocess.run([sys.executable, "-m", "bench", "run", *CI, *extra, "--output", str(out)], cwd=REPO,
                          env=env, capture_output=True, text=True, timeout=600)


def test_the_hidden_state_design_has_its_family_fixed_in_advance():
    design = AuditDesign("one-run", "hidden-state", size=100, relation="add-remove")
    # the valid analyses decide; the μ-GDP analysis of the sums of noisy updates is an estimate beside them
    assert family(AuditDesign(design.kind, design.threat_model)) == ("one-run", "f-dp")
    assert "gaussian-llr" in estimates(AuditDesign(design.kind, design.threat_model))
    with pytest.raises(ValueError, match="threat model"):
        AuditDesign("one-run", "grey-box", size=100, relation="add-remove")


@pytest.mark.slow  # a whole CLI job, about 20 s
@pytest.mark.long  # tests/conftest.py: left out of the default run, CI runs it with `pytest -m long`
def test_the_correct_mechanism_stays_below_its_epsilon(tmp_path):
    done = _run(tmp_path / "run", None)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    doc = json.loads((tmp_path / "run" / "results.json").read_text())
    [result] = doc["results"]
    record = result["attacks"]["canary-final"]
    audit = record["audit"]
    add_remove = next(o["epsilon"] for o in result["privacy"]["other_relations"] if o["relation"] == "add-remove")
    assert audit["design"]["threat_model"] == "hidden-state" and audit["design"]["relation"] == "add-remove"
    assert doc["privacy_bugs"] == []
    assert 0 < audit["epsilon_lb"] < add_remove  # the final model shows the canaries, and no more than ε allows
    assert {b["method"] for b in audit["bounds"] if b["valid"]} == {"one-run", "f-dp"}
    assert audit["method"] in ("one-run", "f-dp")
    llr = next(b for b in audit["bounds"] if b["method"] == "gaussian-llr")
    assert llr["evidence"] == "estimate" and not llr["valid"]  # shown, deciding nothing
    extra = record["extra"]
    assert extra["momentum"] == 0.0 and extra["steps"] > 0 and extra["members_sd"] < extra["noise_sd"]
    headers, [row], _ = audit_rows(read(tmp_path / "run" / "results.json"))  # the report's Audit table
    ratio = row[headers.index("hidden-state ε_LB / ε")]
    assert "(add/remove ε); " in ratio and ratio.endswith("(replace-one ε)") and 0 < float(ratio.split()[0]) < 1
    assert row[headers.index("white-box ε_LB (audit: design, method, confidence)")] == "no audit"


@pytest.mark.slow  # a whole CLI job, about 20 s
def test_half_the_noise_is_caught_from_the_final_model_alone(tmp_path):
    done = _run(tmp_path / "run", "dpsgd-half-noise")
    assert done.returncode == 3, done.stdout[-3000:] + done.stderr[-3000:]
    doc = json.loads((tmp_path / "run" / "results.json").read_text())
    assert {b["attack"] for b in doc["privacy_bugs"]} == {"canary-final"}
    # caught by valid evidence: an assumption-free bound, the certified curve or a conformance test, never an estimate
    assert {b["method"] for b in doc["privacy_bugs"]} <= {"one-run", "f-dp", "certified-curve", "conformance"}
