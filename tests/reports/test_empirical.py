"""The Empirical privacy table, privacy-bug lines and the every-attack ROC panels, from results.json alone."""

from __future__ import annotations

import numpy as np

from attacks.audit import membership_audit, one_run_guesses, privacy_bugs
from attacks.metrics import membership_metrics
from reports.empirical import BUG_MARK, empirical_rows, privacy_bug_lines
from reports.markdown import render_markdown
from reports.plots import _roc


def _attack(name, rng, shift, *, canary=False):
    n = 2000
    scores = np.concatenate([rng.normal(shift, 1, n), rng.normal(0, 1, n)])
    labels = np.repeat([1, 0], n)
    metrics = membership_metrics(scores, labels)
    one_run = {"m": 2 * n, "guesses": one_run_guesses(scores, labels)} if canary else None
    return {"attack": name, "n_members": n, "n_non_members": n, "roc": metrics.pop("roc"), "metrics": metrics,
            "audit": membership_audit(scores, labels, delta=1e-5, one_run=one_run)}


def _run(mechanism, target, privacy, attacks):
    return {"dataset": "mnist", "mechanism": mechanism, "seed": 0, "target_epsilon": target, "status": "ok",
            "privacy": privacy, "attacks": attacks, "utility": {"test_accuracy": 0.9}, "timings": {}}


def _doc():
    rng = np.random.default_rng(0)
    dp = {"epsilon": 0.5, "delta": 1e-5, "accountant": "opacus-prv", "guarantee": "central-dp"}
    results = [
        _run("baseline", None, {"epsilon": None, "delta": None, "accountant": "none", "guarantee": "none"},
             {"loss": _attack("loss", rng, 1.0), "lira": _attack("lira", rng, 3.0),
              "canary": _attack("canary", rng, 1.0, canary=True)}),
        _run("dpsgd", 0.5, dp, {"loss": _attack("loss", rng, 0.0), "lira": _attack("lira", rng, 3.0)}),
        _run("weight-noise", 1.0, {"epsilon": None, "delta": None, "accountant": "none", "guarantee": "none",
                                   "claimed_epsilon": 1.0}, {"loss": _attack("loss", rng, 3.0)}),
    ]
    bugs, comparisons = privacy_bugs(results)
    return {"run_id": "t", "status": "complete", "results": results, "privacy_bugs": bugs,
            "audit": {"confidence": 0.95, "comparisons": comparisons}}


def test_empirical_table_has_a_column_per_attack_and_flags_bugs():
    doc = _doc()
    headers, rows, flags = empirical_rows(doc)
    assert headers == ["dataset", "mechanism", "target ε", "accountant ε (δ, accountant)", "ε_LB lira",
                       "ε_LB loss", "ε̂ one-run (canary)"]
    assert [r[1] for r in rows] == ["baseline", "dpsgd", "weight-noise"] and flags == [False, True, False]
    baseline, dpsgd, weight = rows
    assert baseline[3] == "no guarantee" and float(baseline[6]) > 0  # the canary column
    assert dpsgd[3].startswith("ε = 0.5 (δ = 1e-05, opacus-prv)") and BUG_MARK in dpsgd[4]
    assert BUG_MARK not in dpsgd[5] and dpsgd[6] == "—"
    assert "claimed ε" in weight[5]  # a lower bound above a merely claimed ε refutes the claim


def test_privacy_bug_lines_and_markdown():
    doc = _doc()
    [line] = privacy_bug_lines(doc)
    assert line.startswith("PRIVACY BUG: dpsgd (target ε 0.5, seed 0): ε lower bound of attack lira")
    assert "opacus-prv" in line and "Bonferroni" in line
    md = render_markdown(doc, {})
    assert "## Privacy bugs" in md and "## Empirical privacy" in md and "comparisons" not in md.split("##")[0]
    assert privacy_bug_lines({"results": doc["results"], "privacy_bugs": []}) == []


def test_roc_panels_one_per_model_with_every_attack_and_the_bound():
    doc = _doc()
    fig = _roc(doc["results"])
    axes = [ax for ax in fig.axes if ax.get_visible()]
    assert len(axes) == 3
    labels = {ax.get_title(): [line.get_label() for line in ax.get_lines()] for ax in axes}
    base = labels["baseline"]
    assert sum(lbl.startswith(("loss", "lira", "canary")) for lbl in base) == 3 and "chance" in base
    assert any(lbl.startswith("DP bound") for lbl in labels["dpsgd, target ε = 0.5"])
    assert any("claimed" in lbl for lbl in labels["weight-noise, target ε = 1"])


def test_verdict_flags_privacy_bugs_and_refuted_claims():
    from reports.verdict import verdict_headline, verdict_tables
    from reports.verdict_plots import lower_bound_figure

    doc = _doc()
    (table,) = verdict_tables(doc)
    base, dpsgd, weight = table["rows"]
    assert dpsgd["bug"] and BUG_MARK in dpsgd["cells"][4] and not base["bug"]
    assert weight["cells"][4].endswith("> claimed ε: the claim is false")
    assert base["cells"][4].endswith(("(lira)", "(loss)", "(canary)"))  # the largest bound names its attack
    headline = verdict_headline(doc)["mnist"]
    assert any(line.startswith("Refuted by the audits: weight-noise's claimed ε 1") for line in headline)
    assert any(line.startswith(BUG_MARK) for line in headline)
    fig = lower_bound_figure(doc["results"])
    (ax,) = [a for a in fig.axes if a.get_visible()]
    assert any("ε_LB = ε" in t.get_text() for t in ax.get_legend().get_texts())
