"""The Empirical privacy table, privacy-bug lines and the every-attack ROC panels, from a typed ``Results``."""

from __future__ import annotations

import numpy as np
import pytest

from attacks.audit import privacy_bugs
from reports.empirical import BUG_MARK, audit_note, empirical_rows, privacy_bug_lines
from reports.markdown import render_markdown
from reports.plots import roc_figure


@pytest.fixture(scope="module")
def doc(build):
    """A baseline (loss, lira and a canary audit), DP-SGD at ε 0.5 with a lira attack strong enough to be a privacy
    bug, and weight noise whose claimed ε 1 the loss attack refutes; the run-level check as the runner makes it."""
    rng = np.random.default_rng(0)
    dp = build.privacy(0.5, 1e-5, "opacus-prv", "central-dp", relation="add-remove")
    none = build.privacy()
    results = [
        build.run("baseline", None, none, 0.9, {"loss": build.attack("loss", rng, 2000, 1.0),
                                                "lira": build.attack("lira", rng, 2000, 3.0),
                                                "canary": build.attack("canary", rng, 2000, 1.0, canary=True)}),
        build.run("dpsgd", 0.5, dp, 0.9, {"loss": build.attack("loss", rng, 2000, 0.0),
                                          "lira": build.attack("lira", rng, 2000, 3.0)}),
        build.run("weight-noise", 1.0, build.privacy(claimed=1.0), 0.9, {"loss": build.attack("loss", rng, 2000, 3.0)}),
    ]  # fmt: skip
    bugs, comparisons = privacy_bugs(results)
    return build.results(results, privacy_bugs=bugs, audit={"confidence": 0.95, "comparisons": comparisons})


def test_empirical_table_has_a_column_per_attack_and_flags_bugs(doc):
    headers, rows, flags = empirical_rows(doc)
    assert headers == ["dataset", "mechanism", "target ε", "accountant ε (δ, accountant, relation)", "ε_LB lira",
                       "ε_LB loss", "ε̂ one-run (canary)"]
    assert [r[1] for r in rows] == ["baseline", "dpsgd", "weight-noise"] and flags == [False, True, False]
    baseline, dpsgd, weight = rows
    assert baseline[3] == "no guarantee" and float(baseline[6]) > 0  # the canary column
    assert dpsgd[3] == "ε = 0.5 (δ = 1e-05, opacus-prv, add/remove)" and BUG_MARK in dpsgd[4]
    assert BUG_MARK not in dpsgd[5] and dpsgd[6] == "—"
    assert "claimed ε" in weight[5]  # a lower bound above a merely claimed ε refutes the claim


def test_privacy_bug_lines_and_markdown(doc):
    [line] = privacy_bug_lines(doc)
    assert line.startswith("PRIVACY BUG: dpsgd (target ε 0.5, seed 0): ε lower bound of attack lira")
    assert "exceeds the accountant's ε = 0.5 (δ = 1e-05, opacus-prv, add/remove) at " in line and "Bonferroni" in line
    md = render_markdown(doc, {})
    assert md.index("## Privacy bugs") < md.index("## Verdict: mnist") < md.index("## Empirical privacy")
    empirical = md.split("## Empirical privacy", 1)[1].split("\n## ", 1)[0]
    comparisons = doc.audit.comparisons
    assert comparisons == 2  # loss and lira on dpsgd, the only model with a guarantee
    assert f"compared {comparisons} bounds" in empirical and audit_note(doc) in empirical
    assert privacy_bug_lines(doc.model_copy(update={"privacy_bugs": []})) == []


def test_roc_panels_one_per_model_with_every_attack_and_the_bound(doc):
    fig = roc_figure(doc.results)
    axes = [ax for ax in fig.axes if ax.get_visible()]
    assert len(axes) == 3
    labels = {ax.get_title(): [line.get_label() for line in ax.get_lines()] for ax in axes}
    base = labels["baseline"]
    assert sum(lbl.startswith(("loss", "lira", "canary")) for lbl in base) == 3 and "chance" in base
    assert any(lbl.startswith("DP bound") for lbl in labels["dpsgd, target ε = 0.5"])
    assert any("claimed" in lbl for lbl in labels["weight-noise, target ε = 1"])


def test_verdict_flags_privacy_bugs_and_refuted_claims(doc):
    from reports.verdict import verdict_tables
    from reports.verdict_notes import verdict_headline
    from reports.verdict_plots import lower_bound_figure

    (table,) = verdict_tables(doc)
    base, dpsgd, weight = table["rows"]
    assert dpsgd["bug"] and BUG_MARK in dpsgd["cells"][4] and not base["bug"]
    assert weight["cells"][4].endswith("> claimed ε: the claim is false")
    assert base["cells"][4].endswith(("(lira)", "(loss)", "(canary)"))  # the largest bound names its attack
    headline = verdict_headline(doc)["mnist"]
    assert any(line.startswith("Refuted by the audits: weight-noise's claimed ε 1") for line in headline)
    assert any(line.startswith(BUG_MARK) for line in headline)
    fig = lower_bound_figure(doc.results)
    (ax,) = [a for a in fig.axes if a.get_visible()]
    assert any("ε_LB = ε" in t.get_text() for t in ax.get_legend().get_texts())
