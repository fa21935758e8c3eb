"""Reports rendered from a realistic typed ``Results`` (``mnist_results`` in conftest.py): honesty of every ε,
failures shown, files."""

from __future__ import annotations

import csv
import io
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from bench.results import PrivacyRecord, RelationEpsilon, TprAtFpr
from bench.runner.outfolder import is_report_file
from reports import render_terminal, write_reports
from reports.bounds import tightest_valid
from reports.common import format_privacy, format_tpr, num
from reports.html import render_html
from reports.markdown import render_markdown
from reports.sections.verdict.compact import KEY_MARKS
from reports.tables import SUMMARY_COLUMNS, summary_rows

REPO = Path(__file__).resolve().parents[2]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
ACCOUNTANTS = ("opacus-prv", "dpmix-closed-form")
RELATIONS = ("add/remove", "replace-one", "replace-one, same class")
LIRA_ERROR = "lira failed: RuntimeError: shadow model 3 diverged (loss nan)"


@pytest.fixture(scope="module")
def written(mnist_results, tmp_path_factory) -> tuple[Path, dict[str, Path]]:
    out = tmp_path_factory.mktemp("run")
    return out, write_reports(mnist_results, out)


@pytest.fixture(scope="module")
def texts(mnist_results, written) -> dict[str, str]:
    out, paths = written
    console = Console(record=True, width=240, file=io.StringIO())
    render_terminal(mnist_results, console=console)
    return {
        "markdown": paths["markdown"].read_text(encoding="utf-8"),
        "html": paths["html"].read_text(encoding="utf-8"),
        "terminal": console.export_text(),
    }


@pytest.mark.parametrize("fmt", ["markdown", "html", "terminal"])
def test_every_epsilon_comes_with_delta_accountant_and_relation(texts, fmt):
    """Every "ε = x" names its δ, accountant and relation beside it; the compact table's bare ε values (every format:
    the terminal prints it alone) carry a key that its legend spells out the same way."""
    text = texts[fmt]
    found = 0
    after_re = re.compile(r" \(δ = [0-9.e+-]+, (" + "|".join(ACCOUNTANTS) + r")(, (" + "|".join(RELATIONS) + r"))?\)")
    for m in re.finditer(r"(claimed )?ε = ([0-9][0-9.e+-]*|∞)", text):
        after = text[m.end() : m.end() + 60]
        if m.group(1):
            assert after.startswith(", not a guarantee"), f"claimed ε printed as if it held: {after!r}"
            continue
        if m.group(2) == "∞":  # privacy turned off (the baseline, an ε = ∞ point): no δ, no accountant to name
            assert after.startswith((" (privacy off)", " point")), f"ε = ∞ without 'privacy off': {after!r}"
            continue
        found += 1
        match = after_re.match(after)
        assert match, after
        assert match.group(2), f"every model of this document has a relation: {after!r}"
    if fmt != "terminal":  # the folded verdict table: every ε written out
        assert found >= 3  # 0.99, 7.93, 14.7 are all printed
        assert "ε = 0.99 (δ = 1e-05, opacus-prv, add/remove)" in text
        assert "ε = 14.7 (δ = 1e-04, dpmix-closed-form, replace-one)" in text
    # the compact table: a key after each ε, and the key's line
    flat = " ".join(text.split())  # a legend the terminal wrapped, on one line
    keys = dict(re.findall(f"([{KEY_MARKS}]) (δ = [^;]*?)(?:;|\\.\\s)", flat))
    assert set(keys.values()) >= {"δ = 1e-05, opacus-prv, add/remove",
                                  "δ = 1e-04 (weak δ ≥ 1/n), dpmix-closed-form, replace-one"}, keys
    for eps, provenance in (("0.99", "δ = 1e-05, opacus-prv, add/remove"),
                            ("14.7", "δ = 1e-04 (weak δ ≥ 1/n), dpmix-closed-form, replace-one")):
        mark = next(k for k, v in keys.items() if v == provenance)
        assert f"{eps}{mark}" in text, (eps, mark)
    assert "weak δ ≥ 1/n" in text  # the DPMix cell uses δ = 1e-4 with 10,000 members


@pytest.mark.parametrize("fmt", ["markdown", "html", "terminal"])
def test_no_guarantee_cells_and_failures_are_labelled(texts, fmt):
    text = texts[fmt]
    rows = [line for line in text.splitlines() if "weight-noise" in line and "claimed" in line
            and line.lstrip().startswith(("|", "<tr", "│"))]  # its rows in the compact and the verdict tables
    assert rows and all("no guarantee" in line for line in rows)
    assert "not a guarantee" in " ".join(text.split())  # the folded table's cell, and the compact table's legend
    assert "failed: RuntimeError: CUDA out of memory" in text
    assert "not measurable" in " ".join(text.split())


@pytest.mark.parametrize("fmt", ["markdown", "html", "terminal"])
def test_a_failed_attack_is_a_visible_failure(texts, fmt):
    """The lira attack failed on dpsgd at ε 8: its cell names it, and a Failed attacks list gives the reason."""
    text = texts[fmt]
    assert "mnist / dpsgd (target ε 8, seed 0): " + LIRA_ERROR in text
    dpsgd8 = [line for line in text.splitlines() if "7.93" in line and "dpsgd" in line]
    assert dpsgd8 and any("attack failed: lira" in line for line in dpsgd8), dpsgd8
    named = [line for line in text.splitlines() if "attack failed: lira" in line]
    assert named and all("7.93" in line for line in named)  # only that model's rows (compact and verdict tables)
    assert "Failed attacks" in text


def test_failed_attack_in_markdown_and_html_sections(texts):
    md, html = texts["markdown"], texts["html"]
    assert md.index("> **1 attack(s) failed on finished models") < md.index("## Verdict: mnist")
    assert "**1** failed attack" in md and html.count('href="#failed-attacks"') == 2  # the badge and the contents
    failed = md.split("## Failed attacks", 1)[1].split("##", 1)[0]
    assert failed.strip() == "- mnist / dpsgd (target ε 8, seed 0): " + LIRA_ERROR
    attacks = md.split("## Membership attacks", 1)[1].split("\n## ", 1)[0]  # its folded table
    assert re.search(r"\| dpsgd \| [^|]*7\.93[^|]* \| lira \| — \| failed: RuntimeError: shadow model 3 diverged",
                     attacks)
    assert '<h3 id="failed-attacks" class="bug">Failed attacks</h3>' in html
    assert html.count('class="attack-failed') == 2  # its rows of the compact table and of the verdict table
    assert "(see Failed attacks)" in md  # the verdict note of dpsgd


def test_markdown_structure(texts, written):
    md = texts["markdown"]
    out, paths = written
    headings = ("## Verdict: mnist", "## Privacy vs utility", "## Membership attacks",
                "<summary>Heuristic ε lower bounds", "## Audits and conformance", "## Throughput",
                "## Training curves", "## Setup and guarantees", "## Failed cells", "## Failed attacks",
                "## Provenance")
    assert [md.index(h) for h in headings] == sorted(md.index(h) for h in headings)  # the issue-47 order
    for name in ("mnist-default-20261122T0540", "abc123def", "cpu", "opacus 1.5.2", "Profile default"):
        assert name in md
    links = re.findall(r"!\[([^\]]+)\]\(([^)]+)\)", md)
    assert {target for _, target in links} == {p.name for k, p in paths.items() if p.suffix == ".png"}
    assert all(alt.strip() and "/" not in target for alt, target in links)
    assert "out of memory \\| tried" in md  # a pipe in a reason must not break the table
    notes = md.split("## Setup and guarantees", 1)[1]
    assert "weight-noise: no formal guarantee" in notes
    assert "central" in notes and "opacus-prv" in notes and "dpmix-closed-form" in notes
    assert "dpsgd: central (ε, δ)-DP of the trained model, certified by the opacus-prv accountant" in notes
    assert "neighbouring relation add/remove" in notes


def test_html_escapes_config_and_is_self_contained(texts, build):
    html = texts["html"]
    assert build.script not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    imgs = re.findall(r"<img\b[^>]*>", html)
    assert len(imgs) == 9  # 8 + the training curves (the fixture documents carry histories)
    for tag in imgs:
        assert re.search(r'alt="[^"]*\w[^"]*"', tag), tag
        assert 'src="data:image/png;base64,' in tag
    ths = re.findall(r"<th\b[^>]*>", html)
    assert ths and all('scope="col"' in th for th in ths)
    assert "<details>" in html and "abc123def" in html and '&#34;profile&#34;: &#34;default&#34;' in html
    assert not re.search(r"""(src|href)=["'](?!data:|#)""", html)  # nothing fetched from outside


def test_plots_are_valid_pngs(written):
    out, paths = written
    # no model with an ε has a TPR measurable at 0.1 % FPR: no TPR-vs-ε plot
    expected = {"accuracy_vs_epsilon", "attack_auc_vs_epsilon", "audit_tightness", "pareto_mnist", "throughput",
                "roc_strongest_mnist", "roc_mnist", "release_mnist_dpmix", "curves_mnist"}
    assert {k for k, p in paths.items() if p.suffix == ".png"} == expected
    for name in expected:
        path = out / f"{name}.png"
        assert paths[name] == path
        assert path.read_bytes()[:8] == PNG_MAGIC
    assert not [p for p in out.iterdir() if p.name.endswith(".tmp") or p.name.startswith(".tmp-")]
    # every file the reports write is one an output folder's check knows (--overwrite deletes them)
    assert all(is_report_file(p.name) for p in paths.values())


def test_summary_csv(written):
    out, paths = written
    with paths["csv"].open(newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        rows = list(reader)
    assert reader.fieldnames == list(SUMMARY_COLUMNS) == [
        "dataset", "mechanism", "seed", "target_epsilon", "privacy", "test_accuracy", "strongest_attack",
        "attack_auc", "tpr_at_0.1%_fpr", "samples_per_s", "status", "error", "guarantee", "epsilon", "delta",
        "accountant", "tpr_attack", "tpr", "tpr_lower", "tpr_upper", "epsilon_lb", "epsilon_lb_attack", "relation",
        "attack_errors", "epsilon_lb_threat_model", "epsilon_lb_design", "epsilon_lb_method", "epsilon_lb_confidence",
        "epsilon_lb_ratio", "epsilon_lb_reference", "epsilon_lb_relation", "epsilon_lb_ratio_headline",
        "epsilon_measured", "epsilon_measured_relation", "epsilon_measured_accountant", "degenerate",
        "degenerate_cause",
    ]  # fmt: skip
    assert len(rows) == 6
    assert [r["status"] for r in rows].count("failed") == 1
    baseline = rows[0]
    assert baseline["strongest_attack"] == "loss"  # shift 0.8 beats the entropy attack's 0.3
    assert float(baseline["attack_auc"]) > 0.65 and baseline["privacy"] == "no guarantee"
    assert baseline["guarantee"] == "none" and baseline["epsilon"] == "" and baseline["accountant"] == ""
    assert baseline["relation"] == "" and baseline["attack_errors"] == ""
    dpsgd = rows[1]
    assert (float(dpsgd["epsilon"]), float(dpsgd["delta"]), dpsgd["accountant"]) == (0.99, 1e-5, "opacus-prv")
    assert dpsgd["relation"] == "add-remove"
    assert rows[2]["attack_errors"] == "lira: RuntimeError: shadow model 3 diverged (loss nan)"
    # the tightest valid audit bound, never a heuristic one: the baseline has no audit, DP-SGD at ε 1 its canaries
    assert baseline["epsilon_lb"] == "" and float(baseline["tpr"]) > 0.001  # (its loss attack is heuristic)
    assert (dpsgd["epsilon_lb_attack"], dpsgd["epsilon_lb_threat_model"], dpsgd["epsilon_lb_design"]) == (
        "canary-whitebox", "white-box", "one-run, m = 2000")
    assert float(dpsgd["epsilon_lb_confidence"]) == 0.95
    assert dpsgd["epsilon_lb_method"] in ("one-run", "f-dp")  # never an estimate (gaussian-llr)
    # compared with the audit run's ε 0.98, not the model's 0.99
    assert float(dpsgd["epsilon_lb_ratio"]) == pytest.approx(float(dpsgd["epsilon_lb"]) / 0.98)
    assert (float(dpsgd["epsilon_lb_reference"]), dpsgd["epsilon_lb_relation"]) == (0.98, "add-remove")
    assert float(baseline["tpr_lower"]) <= float(baseline["tpr"]) <= float(baseline["tpr_upper"])


def _tpr(tpr=None, lower=None, upper=None, fpr=0.001) -> dict:
    return {"fpr": fpr, "tpr": tpr, "lower": lower, "upper": upper, "measurable": tpr is not None}


def test_summary_rows_pick_the_strongest_attack_per_metric(build, mnist_results):
    base = mnist_results.results[0].attacks["loss"].model_dump()
    a = {**base, "metrics": {**base["metrics"], "auc": 0.55, "tpr_at_fpr": {"0.001": _tpr(0.5, 0.4, 0.6)}}}
    b = {**base, "metrics": {**base["metrics"], "auc": 0.61, "tpr_at_fpr": {"0.001": _tpr()}}}
    (row,) = summary_rows(build.results([build.run("x", None, build.privacy(), 0.9, {"a": a, "b": b})]))
    assert row["strongest_attack"] == "b" and row["attack_auc"] == 0.61  # by AUC
    # at 0.1 % FPR the strongest is the one with the highest measurable TPR there (Carlini et al. 2022)
    assert row["tpr_attack"] == "a" and row["tpr_at_0.1%_fpr"] == "50.0% [40.0, 60.0]"
    (row,) = summary_rows(build.results([build.run("x", None, build.privacy(), 0.9, {"b": b})]))
    assert row["tpr_attack"] is None and row["tpr_at_0.1%_fpr"] == "not measurable"


def test_format_privacy_and_tpr(build):
    def priv(*args, **kwargs) -> PrivacyRecord:
        return PrivacyRecord(**build.privacy(*args, **kwargs))

    with pytest.raises(ValueError, match="neighbouring relation"):  # an ε is never stored without its relation
        priv(0.99, 1e-5, "opacus-prv", "central-dp")
    assert format_privacy(priv(0.99, 1e-5, "opacus-prv", "central-dp", relation="add-remove")) == (
        "ε = 0.99 (δ = 1e-05, opacus-prv, add/remove)")
    assert format_privacy(priv(2.0, 1e-5, "rdp", "central-dp", relation="replace-one-same-class")) == (
        "ε = 2 (δ = 1e-05, rdp, replace-one, same class)")
    dpsgd = priv(1.0, 1e-5, "dp_accounting-pld", "central-dp", relation="replace-one").model_copy(
        update={"other_relations": (RelationEpsilon(relation="add-remove", epsilon=0.5, accountant="opacus-prv"),)})
    assert format_privacy(dpsgd) == (
        "ε = 1 (δ = 1e-05, dp_accounting-pld, replace-one); add/remove: ε = 0.5 (opacus-prv)")
    assert format_privacy(priv()) == "no guarantee"
    assert format_privacy(priv(claimed=10.0)) == "no guarantee (claimed ε = 10, not a guarantee)"
    assert format_privacy(None) == "—"
    weak = format_privacy(priv(15.0, 1 / 60_000, "dpmix-closed-form", "dp-release", weak=True, relation="replace-one"))
    assert weak.startswith("ε = 15 (δ = 1.7e-05, dpmix-closed-form, replace-one)") and "weak δ ≥ 1/n" in weak
    with pytest.raises(ValueError, match="needs epsilon, delta"):  # never an ε without δ: not even stored
        priv(2.0, None, "", "central-dp", relation="add-remove")
    assert format_tpr(TprAtFpr(**_tpr(0.012, 0.008, 0.019))) == "1.2% [0.8, 1.9]"
    assert format_tpr(TprAtFpr(**_tpr(fpr=1e-4))) == "not measurable"
    assert format_tpr(None) == "—"


def test_partial_documents_render(tmp_path, build):
    doc = build.results([], run_id="empty", status="partial")
    paths = write_reports(doc, tmp_path)
    assert set(paths) == {"markdown", "html", "csv"}
    md = paths["markdown"].read_text()
    assert "Run status: partial" in md and "## Failed" not in md
    assert "<h1>privbench report: empty</h1>" in render_html(doc, {})
    assert render_markdown(doc, {}).startswith("# privbench report: empty\n")
    assert paths["csv"].read_text().splitlines() == [",".join(SUMMARY_COLUMNS)]


def test_import_reports_imports_no_torch_runner_or_plugins():
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    code = ("import sys, reports, reports.plots, reports.html, reports.sections.verdict.plots, "
            "reports.sections.verdict.notes; "
            "bad = [m for m in sys.modules if m.split('.')[0] in ('torch', 'mechanisms') "
            "or m.startswith(('bench.runner', 'bench.cli'))]; print(bad); sys.exit(int(bool(bad)))")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_verdict_table_rows_frontier_and_notes(mnist_results):
    from reports.sections.verdict.notes import verdict_headline, verdict_notes
    from reports.sections.verdict.table import VERDICT_HEADERS, verdict_tables

    (table,) = verdict_tables(mnist_results)
    # dpsgd's attacks have 2,000 non-members: 0.1 % FPR is not measurable there, so the frontier uses 1 %
    assert table["dataset"] == "mnist" and table["axis"].level == 0.01
    rows = {r["cells"][0] + " " + r["cells"][1]: r for r in table["rows"]}
    assert len(rows) == 6 and all(len(r["cells"]) == len(VERDICT_HEADERS) for r in rows.values())
    base, weight, failed = rows["baseline —"], rows["weight-noise 10"], rows["local-gaussian 1"]
    assert base["cells"][2:4] == ["none", "no guarantee"] and base["cells"][7].endswith("(loss)")
    assert weight["cells"][3] == "no guarantee (claimed ε = 10, not a guarantee)"
    assert rows["dpsgd 1"]["cells"][2] == "central DP" and rows["dpsgd 1"]["cells"][7] == "not measurable"
    assert rows["dpsgd 8"]["cells"][7] == "not measurable; attack failed: lira" and rows["dpsgd 8"]["attack_failed"]
    assert failed["failed"] and failed["cells"][2].startswith("failed: RuntimeError") and failed["frontier"] is None
    assert base["frontier"] is True  # the most accurate model is never dominated
    assert all(r["frontier"] is not None for k, r in rows.items() if k != "local-gaussian 1")
    notes = verdict_notes(mnist_results)["mnist"]
    base_note = next(n for n in notes if n.startswith("baseline:"))
    # shift 0.8 with 10,000 each: far above chance even after the correction over 8 comparisons (baseline loss
    # and entropy at 1 % and 0.1 %; one 1 % level for each of the four other models' loss attacks)
    assert "loss beats chance: TPR " in base_note and "× chance" in base_note
    assert "significant after Bonferroni over 8 comparisons" in base_note
    assert any(n.startswith("weight-noise: no formal guarantee") for n in notes)
    assert "At target ε 1 under add/remove, by test accuracy: dpsgd 90.0% (central DP)." in notes
    dpsgd_note = next(n for n in notes if n.startswith("dpsgd:"))
    assert dpsgd_note.startswith("dpsgd: central (ε, δ)-DP of the trained model (opacus-prv accountant, δ = 1e-05, "
                                 "add/remove);")
    assert "attack(s) lira failed on 1 model(s)" in dpsgd_note
    headline = verdict_headline(mnist_results)["mnist"]
    assert headline[0].startswith("Most accurate with a formal guarantee: dpsgd at target ε 1 (90.0%); dpsgd at "
                                  "target ε 8 (95.0%); dpmix at target ε 15 (68.0%). The non-private baseline reaches")
    assert headline[1].startswith("Membership attacks beat chance on: baseline (loss, TPR ")
    assert headline[2].startswith("Audits (valid bounds only): the tightest against its accountant's ε is ε_LB ")
    # run-level comparisons: DP-SGD's white-box canaries (one-run, f-dp, its certified curve) 3, DPMix's (one-run,
    # f-dp) 2, weight noise's multi-run audit (clopper-pearson; its gdp-fit and gaussian-pair are estimates, though
    # Gaussian by construction) 1
    assert mnist_results.audit.comparisons == 6 and mnist_results.privacy_bugs == []
    assert "(canary-whitebox: white-box, one-run, m = 2000, " in headline[2] and "Bonferroni over 6" in headline[2]
    assert base["cells"][4] == "no audit" and rows["dpsgd 1"]["cells"][4].startswith(
        f"{num(tightest_valid(mnist_results.results[1]).value)} (canary-whitebox: white-box, one-run, m = 2000, ")
    assert headline[-1].startswith("1 attack(s) failed on finished models")


def test_pareto_optimal():
    from reports.sections.verdict.table import pareto_optimal

    points = [(90.0, 1.0), (95.0, 2.0), (85.0, 1.5), None, (95.0, 2.0), (80.0, 0.5)]
    assert pareto_optimal(points) == [True, True, False, None, True, True]


def test_provenance_facts_and_rows(mnist_results, build):
    from reports.sections.provenance.table import provenance_rows, run_facts

    dirty = mnist_results.model_copy(update={"git_dirty": True, "platform": "Linux-6.1-x86_64"})
    facts = dict(run_facts(dirty))
    assert facts["Git hash"] == "abc123def (uncommitted changes to tracked files)"
    assert facts["Platform"] == "Linux-6.1-x86_64" and "opacus 1.5.2" in facts["Versions"]
    assert dict(run_facts(mnist_results))["Git hash"] == "abc123def (working-tree state not recorded)"
    assert dict(run_facts(build.results([])))["Git hash"] == "unknown (not run from a git checkout)"
    rows = provenance_rows(mnist_results)
    assert len(rows) == len(mnist_results.results)
    assert rows[1] == ["mnist", "dpsgd", "1", "0", "cnn-small", "3", "256", "0.5", "sgd", "{}", "10.0", "3f2a", "no"]


def test_a_reproductions_rows_of_one_mechanism_stay_apart(build):
    """Two DP-SGD models of a preset at the same target ε (an end-to-end CNN and ScatterNet + linear) are two
    models, not two seeds of one: each keeps its row in the tables, and the ranking lists both, never their mean."""
    from reports.sections.verdict.notes import verdict_notes

    dp = {"accountant": "opacus-prv", "guarantee": "central-dp", "relation": "add-remove"}
    cnn = build.run("dpsgd", 3.0, build.privacy(2.99, 1e-5, **dp), 0.9811, {}, row="eps3")
    scatter = build.run("dpsgd", 3.0, build.privacy(3.0, 1e-5, **dp), 0.9879, {}, row="scatternet-eps3")
    plain = build.run("baseline", None, build.privacy(), 0.99, {})
    doc = build.results([cnn, scatter, {**plain, "row": "baseline"}])
    assert [r["mechanism"] for r in summary_rows(doc)] == ["dpsgd (eps3)", "dpsgd (scatternet-eps3)", "baseline"]
    ranking = verdict_notes(doc)["mnist"][0]
    assert ranking == ("At target ε 3 under add/remove, by test accuracy: dpsgd (scatternet-eps3) 98.8% (central DP), "
                       "dpsgd (eps3) 98.1% (central DP).")
    assert [r["mechanism"] for r in summary_rows(build.results([plain]))] == ["baseline"]  # bench all: no rows


def test_the_ranking_never_mixes_neighbouring_relations(build):
    """A DP-SGD model calibrated under add/remove and a DPMix one under replace-one at the same target ε are ranked
    apart, each line naming its relation (the same ε protects differently under the two)."""
    from reports.sections.verdict.notes import verdict_notes

    ar = build.run("dpsgd", 1.0, build.privacy(1.0, 1e-5, "opacus-prv", "central-dp", relation="add-remove"),
                   0.95, {})
    ro = build.run("dpmix", 1.0, build.privacy(1.0, 1e-5, "dpmix-closed-form", "dp-release",
                                               relation="replace-one"), 0.5, {})
    notes = verdict_notes(build.results([ar, ro]))["mnist"]
    assert "At target ε 1 under add/remove, by test accuracy: dpsgd 95.0% (central DP)." in notes
    assert "At target ε 1 under replace-one, by test accuracy: dpmix 50.0% (DP of the release)." in notes


def test_throughput_section_shows_where_the_time_went(mnist_results, tmp_path):
    """One row per model with its train / evaluate / attack seconds and every attack's seconds (slowest first), the
    run's wall time and processes × threads: the numbers of results.json's timings, in Markdown and HTML."""
    doc = mnist_results.model_copy(deep=True)
    doc.wall_s, doc.report_s = 754.2, 12.5
    doc.executor = {"name": "local", "workers": 1, "processes": 2, "torch_threads": 1, "available_cpus": 2}
    r = doc.results[0]
    r.timings.train_s, r.timings.eval_s, r.timings.attack_s = 41.25, 1.5, 30.0
    r.timings.attacks = {"loss": 2.0, "shadow": 27.5, "rmia": 0.5}
    paths = write_reports(doc, tmp_path)
    md = paths["markdown"].read_text(encoding="utf-8")
    section = md[md.index("## Throughput"):]
    assert "Whole run: 754 s wall clock (12.6 min)" in section
    assert "2 process(es) (the driver and 1 training worker(s)) × 1 torch thread(s), 2 CPU(s) available" in section
    assert "Reports: 12.5 s" in section
    row = next(line for line in section.splitlines() if line.startswith("| ") and "41.2" in line)
    assert "| 1.5 |" in row and "| 30.0 |" in row and "shadow 27.5, loss 2.0, rmia 0.5" in row
    folded = section.split("<summary>Where the time went", 1)[1].split("</details>", 1)[0]
    table = [line for line in folded.splitlines() if line.startswith("| ")]
    assert table[0].startswith("| model | target ε | seed | train (s)") and len(table) == 1 + len(doc.results)
    html = paths["html"].read_text(encoding="utf-8")
    assert "Where the time went" in html and "shadow 27.5, loss 2.0, rmia 0.5" in html


def test_bench_all_draws_the_pages_bench_report_redraws(smoke_run, smoke_report):
    """The reports `bench all` draws at the end of its run come from results.json as written (strict JSON), so
    every model's settings read the same as in the pages `bench report` redraws: an unbounded clip norm (DP-SGD's
    ε = ∞ point) is ``null`` in both, never a non-JSON ``Infinity`` in one of them."""
    def settings(folder):
        return [line for line in (folder / "report.md").read_text(encoding="utf-8").splitlines() if '{"' in line]

    drawn, redrawn = settings(smoke_run[0]), settings(smoke_report)
    assert drawn and drawn == redrawn
    assert any('"max_grad_norm": null' in line for line in drawn)  # the smoke run holds an ε = ∞ DP-SGD point
    assert not any(token in line for line in drawn for token in ("Infinity", "NaN"))
