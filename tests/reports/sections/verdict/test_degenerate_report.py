"""How the reports show a degenerate model (issue 40, item 1), drawn from results.json alone: its row marked with its
one line, off the Pareto frontier, left out of "no attack beats chance", and a degenerate baseline in the headline."""

from __future__ import annotations

import numpy as np

from reports.sections.verdict.notes import verdict_headline
from reports.sections.verdict.table import verdict_tables

DP = {"accountant": "opacus-prv", "guarantee": "central-dp", "relation": "add-remove"}


def _degenerate(cause: str | None, acc: float) -> dict:
    return {"reason": "at-chance", "cause": cause, "text": f"at chance: test accuracy {100 * acc:.1f}% [..]",
            "test_accuracy": acc, "lower": acc - 0.01, "upper": acc + 0.01, "chance_accuracy": 0.1135,
            "chance_class": 1, "predicted_classes": 4}


def _doc(build, *, baseline_degenerate: bool):
    rng = np.random.default_rng(0)
    base_acc = 0.10 if baseline_degenerate else 0.98
    base = build.run("baseline", None, build.privacy(), base_acc, {"loss": build.attack("loss", rng, 10_000, 0.0)},
                     **({"degenerate": _degenerate("recipe", base_acc)} if baseline_degenerate else {}))
    noisy = build.run("dpsgd", 1.0, build.privacy(1.0, 1e-5, **DP), 0.09,
                      {"loss": build.attack("loss", rng, 10_000, 0.0)}, degenerate=_degenerate("noise", 0.09))
    fine = build.run("dpsgd", 8.0, build.privacy(8.0, 1e-5, **DP), 0.95,
                     {"loss": build.attack("loss", rng, 10_000, 0.0)})
    return build.checked([base, noisy, fine])


def test_a_degenerate_model_is_marked_and_never_evidence(build):
    doc = _doc(build, baseline_degenerate=False)
    (table,) = verdict_tables(doc)
    rows = table["rows"]
    assert [r["degenerate"] for r in rows] == [False, True, False]
    cells = rows[1]["cells"]
    assert cells[0] == "dpsgd — degenerate (at chance; the noise)"
    assert cells[5] == "9.00% — at chance: test accuracy 9.0% [..]"
    assert cells[7].endswith("; not evidence of privacy (learned nothing)") and cells[9] == "— (degenerate)"
    assert rows[1]["frontier"] is None  # never on the frontier, although its leakage is the lowest
    headline = " ".join(verdict_headline(doc)["mnist"])
    assert "Degenerate models (they learned nothing; their attack results are shown but are not evidence of " \
           "privacy): dpsgd at target ε 1 seed 0 (at chance; the noise)." in headline
    assert "No membership attack beats chance on any model that learned (1 degenerate model(s) left out: no " \
           "evidence either way) after" in headline
    assert "The baseline is degenerate" not in headline


def test_a_degenerate_baseline_leads_the_headline(build):
    headline = verdict_headline(_doc(build, baseline_degenerate=True))["mnist"]
    assert headline[0].startswith("The baseline is degenerate: at chance: test accuracy 10.0% [..]. It learned "
                                  "nothing")
