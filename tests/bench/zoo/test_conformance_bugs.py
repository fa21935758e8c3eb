"""Release bugs that the canaries' lower bounds miss, caught end to end by the audit runs' conformance tests
(issue 38): ``bench run --profile ci`` with a zoo bug (``bench.zoo.apply``) that patches only the mechanism's own
code exits 3 with one privacy bug, method ``conformance``, naming the test that measured the fault
(``tests/attacks/conformance/hypothesis_tests/test_release_conformance.py`` tests each test on its own;
``test_privacy_bugs.py`` the lower bounds)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import planted

pytestmark = pytest.mark.slow  # whole CLI jobs (about 1 and 2 minutes)

REPO = Path(__file__).resolve().parents[3]
CASES = {  # zoo bug -> (mechanism, audit, the conformance test that must refute it)
    "local-region-noise": ("local-gaussian", "local-canary", "image noise σ, smallest of 16 regions"),
    "dpmix-uneven-mixing": ("dpmix", "dpmix-canary", "inclusion dispersion"),
}


@pytest.mark.parametrize("plugin", [pytest.param(c, marks=[pytest.mark.long] if c == "dpmix-uneven-mixing" else [])
                                    for c in sorted(CASES)])
def test_a_release_bug_the_lower_bounds_miss_exits_3_by_its_conformance_test(plugin, tmp_path):
    mechanism, attack, test = CASES[plugin]
    extra, env = planted(plugin)
    done = subprocess.run([sys.executable, "-m", "bench", "run", "--profile", "ci", "--mechanisms", mechanism,
                           "--attacks", attack, "--epsilons", "1", "--no-reference-epsilons", "--no-cache", "--device",
                           "cpu", *extra, "--output", str(tmp_path / "run")],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 3, done.stdout[-3000:] + done.stderr[-3000:]
    bugs = json.loads((tmp_path / "run" / "results.json").read_text())["privacy_bugs"]
    assert [(b["attack"], b["method"], b["test"]) for b in bugs] == [(attack, "conformance", test)]
    lines = [line for line in done.stdout.splitlines() if line.startswith("PRIVACY BUG")]
    assert len(lines) == 1 and "inconsistent with the" in lines[0] and mechanism in lines[0]
