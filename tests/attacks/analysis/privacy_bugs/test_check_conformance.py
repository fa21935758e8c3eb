"""The run-level check with conformance (issue 38): a rejected conformance test is a privacy bug named as such, its
comparisons join the Bonferroni family, the ε from measured parameters is printed beside the certified one, and M
follows the run's configuration (a failed job never lowers it)."""

from __future__ import annotations

import numpy as np

from attacks.analysis.privacy_bugs.check import privacy_bugs
from attacks.conformance.hypothesis_tests.noise import noise_test
from reports.empirical import privacy_bug_lines
from reports.tables import summary_rows


def _conformance(sigma_measured: float, *, measured_epsilon: float = 1.96, p: float = 0.5) -> dict:
    rng = np.random.default_rng(0)
    x = rng.normal(0, sigma_measured, 20_000)
    tests = [noise_test(f"noise σ, tensor {k} of 2", float((x**2).sum()), x.size, 2.0) for k in (1, 2)]
    return {"tests": tests, "measured_epsilon": {
        "epsilon": measured_epsilon, "certified": 2.0, "delta": 1e-5, "relation": "add-remove",
        "accountant": "dp_accounting-pld", "confidence": 0.95, "parameters": {"noise_multiplier": 2.01},
        "p_value": p}}


def _doc(build, sigma_measured: float, cells: int = 1):
    rng = np.random.default_rng(1)
    dp = build.privacy(2.0, 1e-5, "opacus-prv", "central-dp", relation="add-remove")
    runs = [build.run("dpsgd", 2.0 + k, dp, 0.9, {"canary-whitebox": {  # distinct ε: no pooled comparison
        **build.canary("canary-whitebox", rng, 400, 0.0), "conformance": _conformance(sigma_measured)}})
        for k in range(cells)]
    return build.checked(runs)


def test_a_conforming_run_passes_and_prints_its_measured_epsilon(build):
    doc = _doc(build, 2.0)
    assert doc.privacy_bugs == []
    assert doc.audit.comparisons == 2 + 3  # the design's family (one-run, f-dp), two noise tests and the measured ε
    (row,) = summary_rows(doc)
    assert "ε certified 2 · from measured parameters ≥ 1.96 (add/remove, dp_accounting-pld, 95%)" in row["privacy"]
    assert row["epsilon_measured"] == 1.96 and row["epsilon_measured_relation"] == "add-remove"


def test_less_noise_than_certified_is_a_privacy_bug_named_as_a_conformance_failure(build):
    doc = _doc(build, 1.9)  # σ × 0.95 over 20,000 observations
    (bug,) = doc.privacy_bugs
    assert bug.method == "conformance" and bug.test.startswith("noise σ, tensor")
    assert bug.measured < bug.certified == 2.0 and bug.p_value < 1e-6 and bug.lower_bound is None
    (line,) = privacy_bug_lines(doc)
    assert "is inconsistent with the certified mechanism" in line and "measured 1.89" in line


def test_a_failed_cell_or_audit_never_lowers_the_number_of_comparisons(build):
    """M follows the run's configuration (issue 38, item 7): a cell that lost its audit counts the comparisons a
    complete cell of the same mechanism made, so the Bonferroni level is the same whichever job failed."""
    complete = _doc(build, 2.0, cells=2)
    lost = _doc(build, 2.0, cells=2)
    lost.results[1].attacks.clear()
    lost.results[1].attack_errors["canary"] = "RuntimeError: planted"
    _, _, m_lost = privacy_bugs(lost.results)
    assert complete.audit.comparisons > 0 and m_lost == complete.audit.comparisons


def test_a_test_shown_but_not_deciding_is_no_comparison_and_no_bug(build):
    """A conformance test whose level under the certified mechanism is not established (DPMix's noise shape:
    ``ConformanceTest.deciding``) keeps its measured p-value in results.json, and neither joins the family nor makes
    a privacy bug, however small its p-value."""
    doc = _doc(build, 2.0)
    shown = _doc(build, 2.0)
    test = shown.results[0].attacks["canary-whitebox"].conformance.tests[0]
    test.p_value, test.deciding = 1e-12, False
    bugs, _, m = privacy_bugs(shown.results)
    assert bugs == [] and m == doc.audit.comparisons - 1
    test.deciding = True  # the same p-value, deciding: a privacy bug
    (bug,), _, m = privacy_bugs(shown.results)
    assert bug.method == "conformance" and bug.p_value == 1e-12 and m == doc.audit.comparisons
