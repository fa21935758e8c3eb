"""The report's DP-SGD rows: the accountant's ε under both relations, the last-iterate heuristic ε (not a bound) and the
final-model audit's valid bound side by side, in the Verdict section, the terminal, the guarantee text and the
tightness plot."""

from __future__ import annotations

import io

import numpy as np
from rich.console import Console

from reports.common import format_privacy
from reports.last_iterate import GAP_SENTENCE, last_iterate_rows
from reports.sections.audit.plots import heuristic_of, tightness_figure, tightness_points
from reports.sections.verdict.section import Verdict
from reports.terminal import render_terminal

LABEL = "last-iterate heuristic (Steinke et al. 2025): not a bound"


def dpsgd_privacy(build, replace_one: float, add_remove: float, heuristics: tuple[float, float] | None):
    p = build.privacy(replace_one, 1e-5, "dp_accounting-pld", "central-dp", relation="replace-one")
    p["other_relations"] = [{"relation": "add-remove", "epsilon": add_remove, "accountant": "opacus-prv"}]
    if heuristics is not None:
        p["heuristics"] = [{"relation": r, "epsilon": e, "delta": 1e-5, "label": LABEL, "basis": "the run's σ"}
                           for r, e in zip(("replace-one", "add-remove"), heuristics, strict=True)]
    return p


def document(build):
    """DP-SGD at ε 3 with a black-box canary audit (its own audit run, heuristic recorded) that separates clearly, and
    DP-SGD at ε 8 whose record has no heuristic (an old results.json): no row for it."""
    rng = np.random.default_rng(3)
    audited = dpsgd_privacy(build, 2.98, 1.40, (2.97, 1.39))
    black_box = build.canary("canary", rng, 4_000, 0.4, threat_model="black-box", audited=audited)
    runs = [build.run("dpsgd", 3.0, dpsgd_privacy(build, 3.0, 1.41, (2.999, 1.40)), 0.95, {"canary": black_box}),
            build.run("dpsgd", 8.0, dpsgd_privacy(build, 8.0, 3.71, None), 0.96, {})]
    return build.checked(runs, datasets={"mnist": {"n_members": 10_000, "n_non_members": 10_000, "n_test": 2_000,
                                                    "n_population": 10_000, "input_shape": [1, 28, 28],
                                                    "num_classes": 10}})


def test_rows_put_the_audit_runs_three_numbers_side_by_side(build):
    doc = document(build)
    (row,) = last_iterate_rows(doc)
    bound = doc.results[0].attacks["canary"].audit.epsilon_lb
    assert 0 < bound < 1.39
    assert row[:5] == ["dpsgd", "3", "1.4 (δ = 1e-05, opacus-prv)", "2.98 (δ = 1e-05, dp_accounting-pld)",
                       "1.39 (add/remove, δ = 1e-05)"]
    assert row[5].startswith(f"{bound:.3g} (canary: black-box, ")
    assert row[6] == f"{bound / 1.39:.2f}"


def test_the_verdict_section_and_the_terminal_show_them_with_the_sentence(build, tmp_path):
    doc = document(build)
    section = Verdict().build(doc, {})
    text = repr(section)
    assert "What the final model alone can leak" in text and "last-iterate heuristic" in text
    out = io.StringIO()
    render_terminal(doc, Console(file=out, width=200, color_system=None))
    printed = out.getvalue()
    assert "what the final model alone can leak" in printed and "1.39 (add/remove, δ = 1e-05)" in printed
    assert " ".join(GAP_SENTENCE.split()[:8]) in " ".join(printed.split())


def test_the_guarantee_text_labels_the_heuristic_as_not_a_bound(build):
    doc = document(build)
    text = format_privacy(doc.results[0].privacy)
    assert text.startswith("ε = 3 (δ = 1e-05, dp_accounting-pld, replace-one); add/remove: ε = 1.41 (opacus-prv)")
    assert text.endswith(f"; {LABEL}: replace-one ε ≈ 3, add/remove ε ≈ 1.4 (δ = 1e-05)")
    assert "heuristic" not in format_privacy(doc.results[1].privacy)


def test_the_tightness_plot_draws_the_heuristic_above_the_black_box_bound(build):
    doc = document(build)
    points = tightness_points(doc.results)
    assert [heuristic_of(b) for b in points] == [1.39]
    fig = tightness_figure(doc.results)
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert any("last-iterate heuristic" in label and "not a bound" in label for label in labels)
