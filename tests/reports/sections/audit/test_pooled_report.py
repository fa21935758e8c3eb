"""The Audit section's "Seeds pooled" table: each pooled white-box audit of results.json's ``audit.pooled``
(``attacks.analysis.audits.pooled``) against the accountant's ε of the audit's own relation, named with its δ and
accountant (taken from the pooled runs' privacy records), in Markdown and HTML: an estimate (it assumes the summed
log-likelihood ratios Gaussian), never an "ε ≥"; the column after it says whether that assumption stood its shape
test."""

from __future__ import annotations

from reports import write_reports
from reports.markdown import render_markdown


def _pool(**over):
    return {"dataset": "mnist", "mechanism": "dpsgd", "target_epsilon": 1.0, "attack": "canary-whitebox",
            "seeds": [0, 1], "size": 77_414, "epsilon_lb": 0.4, "valid": True, "epsilon": 0.5, "delta": 1e-5,
            "relation": "add-remove", **over}  # fmt: skip


def _runs(build):
    # replace-one is the records' own relation; the pool tests add/remove, stated beside it with its accountant
    priv = build.privacy(1.0, 1e-5, "dp_accounting-pld", "central-dp", relation="replace-one")
    priv["other_relations"] = [{"relation": "add-remove", "epsilon": 0.5, "accountant": "opacus-prv"}]
    return [build.run("dpsgd", 1.0, priv, 0.9, {}, seed=s) for s in (0, 1)]


def _rows(md: str) -> list[list[str]]:
    section = md.split("<summary>Seeds pooled</summary>", 1)[1]
    lines = [ln for ln in section.strip().splitlines() if ln.startswith("|")]
    return [[c.strip() for c in ln.strip("|").split("|")] for ln in lines]


def test_a_pool_is_shown_against_the_accountants_epsilon_of_its_relation(build, tmp_path):
    doc = build.results(_runs(build), audit={"confidence": 0.95, "comparisons": 7, "pooled": [_pool()]})
    header, _, row = _rows(render_markdown(doc, {}))[:3]
    assert header[5] == "pooled estimate (method, 95 %)"
    assert header[-3:] == ["accountant ε (δ, accountant, relation)", "estimate / ε", "assumption's test"]
    assert row == ["dpsgd", "1", "canary-whitebox", "0, 1", "77,414", "0.4 (gaussian-llr, 95 %)",
                   "ε = 0.5 (δ = 1e-05, opacus-prv, add/remove)", "0.8", "passed"]
    html = write_reports(doc, tmp_path)["html"].read_text()
    assert "Seeds pooled" in html and "<td>ε = 0.5 (δ = 1e-05, opacus-prv, add/remove)</td>" in html


def test_a_pool_whose_shape_test_rejects_is_marked_rejected(build):
    doc = build.results(_runs(build), audit={"confidence": 0.95, "comparisons": 7,
                                             "pooled": [_pool(valid=False, epsilon_lb=0.6)]})
    row = _rows(render_markdown(doc, {}))[2]
    assert row[-2:] == ["1.2", "rejected"]  # an estimate either way: the test only says whether its assumption stood
    assert "Seeds pooled" not in render_markdown(build.results(_runs(build)), {})
