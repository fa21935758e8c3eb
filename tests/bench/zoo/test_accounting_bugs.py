"""A bug inside each mechanism's accounting code ends a ``ci`` run with exit 3, by the conformance family alone (issue
45): the zoo's accounting bugs (``bench/zoo/bugs/*_accountant_*``), each patching the mechanism's own accountant and
applied in every process of the run by ``bench.zoo.apply``, as ``privbench zoo run`` applies them. DP-SGD told half
its sample rate and DPMix without its label channel are refuted by the declared-ε test (their declared parameters
through the conformance code's own accountants); local noise drawing labels at the keep rate of 2ε_label by the keep
rate against the conformance code's own randomized response. The verdict is read with the ε lower bounds removed
(the ``privbench-conformance`` auditor of the zoo)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.zoo.api import AuditorInput

pytestmark = [pytest.mark.slow, pytest.mark.long]  # whole CLI jobs: CI runs them with `pytest -m long`

REPO = Path(__file__).resolve().parents[3]
DECLARED = "ε of the declared mechanism (conformance's own accountant)"
CASES = {  # bug: (mechanism, attack, the test that refutes it)
    "dpsgd-accountant-rate": ("dpsgd", "canary", DECLARED),
    "dpmix-accountant-sensitivity": ("dpmix", "dpmix-canary", DECLARED),
    "local-accountant-keep-rate": ("local-gaussian", "local-canary", "label keep rate"),
}


@pytest.mark.parametrize("bug", sorted(CASES))
def test_an_accounting_bug_exits_3_by_the_conformance_family_alone(tmp_path, bug):
    from bench.results import read
    from bench.zoo.catalogue import AUDITORS, load

    mechanism, attack, test = CASES[bug]
    env = {**os.environ, "PRIVBENCH_ZOO_BUG": bug}
    done = subprocess.run([sys.executable, "-m", "bench", "run", "--profile", "ci", "--mechanisms", mechanism,
                           "--attacks", attack, "--plugins", "bench.zoo.apply", "--no-cache", "--device", "cpu",
                           "--output", str(tmp_path / "run")], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=900)
    assert done.returncode == 3, done.stdout[-3000:] + done.stderr[-3000:]
    doc = read(tmp_path / "run" / "results.json")
    assert test in {b.test for b in doc.privacy_bugs if b.method == "conformance"}
    load()
    target = next(r for r in doc.results if not r.off_point)
    verdict = AUDITORS.get("privbench-conformance").judge(AuditorInput(results=doc, target=target))
    assert verdict.caught, verdict.text
