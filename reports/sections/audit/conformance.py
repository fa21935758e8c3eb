"""Conformance in the reports.

Each audit run's tests of "this run is the certified mechanism" (the noise in every parameter tensor and channel, the
sample rate, the records' participation, the steps, the clip bound, ...) and the ε its measured parameters imply
(``bench.results.Conformance``), read generically from whatever ``AttackRecord`` holds one, so that a new audit or a new
test shows up with no change here. Only the run-level check (``Results.privacy_bugs``, method ``conformance``) says a
test failed; a test with ``deciding`` false is shown with its p-value and decides nothing.
"""

from __future__ import annotations

from bench.results import ConformanceTest, PrivacyBug, Results, RunResult
from reports.bounds import bugs_for, conformance_text, family_text
from reports.common import DASH, is_failed, measured_text, model_label, target_of, target_text

CONFORMANCE_METHODS = ("conformance", "sampling_test")  # the run-level check's conformance refutations
CONFORMANCE_HEADERS = ("mechanism", "target ε", "audit", "test", "quantity", "certified", "measured", "n",
                       "p-value", "alternative", "validity", "deciding")  # fmt: skip


def conformance_tests(r: RunResult) -> list[tuple[str, ConformanceTest]]:
    """``(audit, test)`` of each conformance test an attack of ``r`` recorded, by audit, then in the design's order."""
    return [(name, t) for name, a in sorted(r.attacks.items()) if a.conformance is not None
            for t in a.conformance.tests]


def conformance_failures(results: Results, r: RunResult) -> list[PrivacyBug]:
    """The run-level check's conformance refutations of model ``r`` (each a privacy bug)."""
    return [b for b in bugs_for(results, r) if b.method in CONFORMANCE_METHODS]


def _count(tests: list[tuple[str, ConformanceTest]], measured: int) -> tuple[int, int]:
    """``(deciding, shown)``: the tests that are comparisons of the run's family (the measured ε one of them).

    And those shown with their p-value that decide nothing.
    """
    deciding = sum(t.deciding for _, t in tests)
    return deciding + measured, len(tests) - deciding


def conformance_cell(results: Results, r: RunResult) -> tuple[str, str]:
    """The compact table's conformance cell of model ``r`` and its title (every test with its p-value).

    Returns:
        ``("passed (7)", title)`` (7 deciding tests, the ε from the measured parameters one of them);
        ``("FAILED: noise σ, tensor 2 of 2", title)`` where the run-level check refuted a test; ``("7, not judged",
        ...)`` before the run completed; ``("—", "")`` without any test.
    """
    tests = conformance_tests(r)
    measured = [a.conformance.measured_epsilon for _, a in sorted(r.attacks.items())
                if a.conformance is not None and a.conformance.measured_epsilon is not None]
    if not tests and not measured:
        return DASH, ""
    lines = [f"{name}: {t.name}: measured {_value(t.measured)} vs certified {_value(t.certified)}, "
             f"p = {t.p_value:.2g}{'' if t.deciding else ' (shown, not deciding)'}" for name, t in tests]
    lines += [measured_text(m) for m in measured]
    failed = conformance_failures(results, r)
    deciding, shown = _count(tests, len(measured))
    counted = f"{deciding} deciding test(s)" + (f", {shown} shown but not deciding" if shown else "")
    if failed:
        title = "; ".join(f"{b.attack}: {conformance_text(b)}" if b.test else b.method for b in failed)
        return f"FAILED: {failed[0].test or failed[0].method}", f"{title} ({family_text(results)}). " + \
            "; ".join(lines)
    if results.audit is None:
        return f"{deciding}, not judged", f"{counted}, not judged (the run did not complete): " + \
            "; ".join(lines)
    return f"passed ({deciding})", f"none of {counted} refuted ({family_text(results)}): " + "; ".join(lines)


def _value(x: float | None) -> str:
    return DASH if x is None else f"{x:.4g}"


def conformance_rows(results: Results) -> list[list[str]]:
    """``CONFORMANCE_HEADERS`` rows.

    Every conformance test of every finished model, then the ε from its measured parameters (with its relation,
    accountant and confidence) where one was recomputed.
    """
    seeds = len({r.seed for r in results.results}) > 1
    rows = []
    for r in results.results:
        if is_failed(r):
            continue
        head = [model_label(r) + (f" (seed {r.seed})" if seeds else ""), target_text(target_of(r))]
        for name, t in conformance_tests(r):
            rows.append(head + [name, t.name, t.quantity, _value(t.certified), _value(t.measured), f"{t.n:,}",
                                f"{t.p_value:.2g}", t.alternative, t.validity, "yes" if t.deciding else "no"])
        for name, a in sorted(r.attacks.items()):
            m = a.conformance.measured_epsilon if a.conformance is not None else None
            if m is not None:
                p = DASH if m.p_value is None else f"{m.p_value:.2g}"
                rows.append(head + [name, "ε from measured parameters", measured_text(m), num_text(m.certified),
                                    num_text(m.epsilon), DASH, p, "greater", "lower confidence limit", "yes"])
    return rows


def num_text(x: float) -> str:
    """An ε as the conformance table prints it (three significant digits)."""
    return f"{x:.3g}"


def conformance_reading(results: Results) -> str:
    """One line: how many models' audit runs were tested for conformance and whether any failed."""
    tested = [r for r in results.results if not is_failed(r) and conformance_tests(r)]
    if not tested:
        return "No audit run measured its conformance to the certified mechanism."
    failed = [r for r in tested if conformance_failures(results, r)]
    n = sum(len(conformance_tests(r)) for r in tested)
    verdict = (f"{len(failed)} model(s) FAILED a test (privacy bug)" if failed
               else "none refuted" if results.audit is not None else "not judged (the run did not complete)")
    return (f"Conformance: {n} tests of {len(tested)} model(s)' audit runs against the parameters their accountant "
            f"certifies: {verdict} ({family_text(results)}).")
