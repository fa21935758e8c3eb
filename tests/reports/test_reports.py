"""Reports rendered from a realistic results.json document: honesty of every ε, escaping, files."""

from __future__ import annotations

import csv
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from rich.console import Console

from attacks.metrics import membership_metrics
from reports import load_results, render_terminal, write_reports
from reports.html import render_html
from reports.markdown import render_markdown
from reports.tables import format_privacy, format_tpr, summary_rows

REPO = Path(__file__).resolve().parents[2]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
SCRIPT = "<script>alert(1)</script>"
ACCOUNTANTS = ("opacus-prv", "dpmix-closed-form")


def _attack(name: str, rng: np.random.Generator, n: int, shift: float) -> dict:
    labels = np.r_[np.ones(n, int), np.zeros(n, int)]
    metrics = membership_metrics(rng.normal(size=2 * n) + shift * labels, labels)
    return {"attack": name, "n_members": n, "n_non_members": n, "roc": metrics.pop("roc"), "metrics": metrics}


def _privacy(eps=None, delta=None, accountant="none", guarantee="none", claimed=None, note="", weak=False):
    return {"epsilon": eps, "delta": delta, "accountant": accountant, "guarantee": guarantee,
            "claimed_epsilon": claimed, "note": note, "weak_delta": weak}  # fmt: skip


def _run(mechanism, target, privacy, acc, attacks, *, release=None, status="ok", error=None):
    return {
        "dataset": "mnist", "mechanism": mechanism, "seed": 0, "target_epsilon": target, "model": "cnn-small",
        "spec": {"model": "cnn-small", "epochs": 3, "batch_size": 256, "lr": 0.5, "optimizer": "sgd",
                 "momentum": 0.0, "params": {}},
        "params": {}, "privacy": privacy,
        "utility": None if acc is None else {"test_accuracy": acc, "test_loss": 0.3, "train_accuracy": acc},
        "attacks": attacks,
        "timings": {"train_s": 10.0, "samples_per_s": 4100.0, "eval_s": 0.4, "attack_s": 0.8, "cached": False},
        "history": [0.9, 0.5], "release": release, "status": status, "error": error, "cache_key": "3f2a",
    }  # fmt: skip


@pytest.fixture(scope="module")
def results() -> dict:
    rng = np.random.default_rng(0)
    release = {"kind": "dpmix", "shape": [28, 28], "labels": [0, 1, 2, 3],
               "examples": rng.integers(0, 256, size=(4, 784)).tolist()}  # fmt: skip
    runs = [
        _run("baseline", None, _privacy(note="non-private baseline"), 0.985,
             {"loss": _attack("loss", rng, 10_000, 0.8), "entropy": _attack("entropy", rng, 10_000, 0.3)}),
        _run("dpsgd", 1.0, _privacy(0.99, 1e-5, "opacus-prv", "central-dp"), 0.90,
             {"loss": _attack("loss", rng, 2_000, 0.05)}),  # 0.1 % of 2,000 < 10: not measurable
        _run("dpsgd", 8.0, _privacy(7.93, 1e-5, "opacus-prv", "central-dp"), 0.95,
             {"loss": _attack("loss", rng, 2_000, 0.15)}),
        _run("dpmix", 15.0, _privacy(14.7, 1e-4, "dpmix-closed-form", "dp-release", weak=True), 0.68,
             {"loss": _attack("loss", rng, 2_000, 0.02)}, release=release),
        _run("weight-noise", 10.0, _privacy(claimed=10.0, note="noise std 0.1 on weights"), 0.76,
             {"loss": _attack("loss", rng, 2_000, 0.3)}),
        _run("local-gaussian", 1.0, None, None, {}, status="failed",
             error="RuntimeError: CUDA out of memory | tried to allocate 2 GiB"),
    ]  # fmt: skip
    return {
        "schema_version": 1, "run_id": "mnist-default-20261122T0540", "status": "partial",
        "created": "2026-11-22T05:40:00+00:00",
        "config": {"profile": "default", "dataset": "mnist", "output": SCRIPT, "n_members": 10_000,
                   "training": {"baseline": {"epochs": 8}, "dpsgd": {"epochs": 8}}},
        "versions": {"python": "3.11.7", "torch": "2.5.0", "opacus": "1.5.2", "privbench": "0.1.0"},
        "git_hash": "abc123def", "device": "cpu",
        "datasets": {"mnist": {"n_members": 10_000, "n_non_members": 10_000, "n_test": 2_000,
                               "n_population": 10_000, "input_shape": [1, 28, 28], "num_classes": 10}},
        "results": runs,
    }  # fmt: skip


@pytest.fixture(scope="module")
def written(results, tmp_path_factory) -> tuple[Path, dict[str, Path]]:
    out = tmp_path_factory.mktemp("run")
    return out, write_reports(results, out)


@pytest.fixture(scope="module")
def texts(results, written) -> dict[str, str]:
    out, paths = written
    console = Console(record=True, width=240, file=io.StringIO())
    render_terminal(results, console=console)
    return {
        "markdown": paths["markdown"].read_text(encoding="utf-8"),
        "html": paths["html"].read_text(encoding="utf-8"),
        "terminal": console.export_text(),
    }


@pytest.mark.parametrize("fmt", ["markdown", "html", "terminal"])
def test_every_epsilon_comes_with_delta_and_accountant(texts, fmt):
    text = texts[fmt]
    found = 0
    for m in re.finditer(r"(claimed )?ε = ([0-9][0-9.e+-]*|∞)", text):
        after = text[m.end() : m.end() + 60]
        if m.group(1):
            assert after.startswith(", not a guarantee"), f"claimed ε printed as if it held: {after!r}"
            continue
        found += 1
        assert re.match(r" \(δ = [0-9.e+-]+, (" + "|".join(ACCOUNTANTS) + r")\)", after), after
    assert found >= 3  # 0.99, 7.93, 14.7 are all printed
    assert "ε = 0.99 (δ = 1e-05, opacus-prv)" in text
    assert "weak δ ≥ 1/n" in text  # the DPMix cell uses δ = 1e-4 with 10,000 members


@pytest.mark.parametrize("fmt", ["markdown", "html", "terminal"])
def test_no_guarantee_cells_and_failures_are_labelled(texts, fmt):
    text = texts[fmt]
    weight_line = next(line for line in text.splitlines() if "weight-noise" in line and "claimed" in line)
    assert "no guarantee" in weight_line and "not a guarantee" in weight_line
    assert "failed: RuntimeError: CUDA out of memory" in text
    assert "not measurable" in text


def test_markdown_structure(texts, written):
    md = texts["markdown"]
    out, paths = written
    for heading in ("## Verdict: mnist", "## Membership attacks", "## Setup and guarantees", "## Failed cells",
                    "## Provenance"):
        assert heading in md
    assert md.index("## Verdict: mnist") < md.index("## Membership attacks") < md.index("## Provenance")
    for name in ("mnist-default-20261122T0540", "abc123def", "cpu", "opacus 1.5.2", "Profile default"):
        assert name in md
    links = re.findall(r"!\[([^\]]+)\]\(([^)]+)\)", md)
    assert {target for _, target in links} == {p.name for k, p in paths.items() if p.suffix == ".png"}
    assert all(alt.strip() and "/" not in target for alt, target in links)
    assert "out of memory \\| tried" in md  # a pipe in a reason must not break the table
    notes = md.split("## Setup and guarantees", 1)[1]
    assert "weight-noise: no formal guarantee" in notes
    assert "central" in notes and "opacus-prv" in notes and "dpmix-closed-form" in notes


def test_html_escapes_config_and_is_self_contained(texts):
    html = texts["html"]
    assert SCRIPT not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    imgs = re.findall(r"<img\b[^>]*>", html)
    assert len(imgs) == 6
    for tag in imgs:
        assert re.search(r'alt="[^"]*\w[^"]*"', tag), tag
        assert 'src="data:image/png;base64,' in tag
    ths = re.findall(r"<th\b[^>]*>", html)
    assert ths and all('scope="col"' in th for th in ths)
    assert "<details>" in html and "abc123def" in html and '&#34;profile&#34;: &#34;default&#34;' in html
    assert not re.search(r"""(src|href)=["'](?!data:|#)""", html)  # nothing fetched from outside


def test_plots_are_valid_pngs(written):
    out, paths = written
    # no audits and no TPR measurable at 0.1 % FPR on a model with an ε: no ε_LB plot, no TPR-vs-ε plot
    expected = {"accuracy_vs_epsilon", "attack_auc_vs_epsilon", "pareto_mnist", "throughput", "roc_mnist",
                "release_mnist_dpmix"}
    assert {k for k, p in paths.items() if p.suffix == ".png"} == expected
    for name in expected:
        path = out / f"{name}.png"
        assert paths[name] == path
        assert path.read_bytes()[:8] == PNG_MAGIC
    assert not [p for p in out.iterdir() if p.name.endswith(".tmp")]


def test_summary_csv(written):
    out, paths = written
    with paths["csv"].open(newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        rows = list(reader)
    assert reader.fieldnames == [
        "dataset", "mechanism", "seed", "target_epsilon", "privacy", "test_accuracy", "strongest_attack",
        "attack_auc", "tpr_at_0.1%_fpr", "samples_per_s", "status", "error", "guarantee", "epsilon", "delta",
        "accountant", "tpr_attack", "tpr", "tpr_lower", "tpr_upper", "epsilon_lb", "epsilon_lb_attack",
    ]  # fmt: skip
    assert len(rows) == 6
    assert [r["status"] for r in rows].count("failed") == 1
    baseline = rows[0]
    assert baseline["strongest_attack"] == "loss"  # shift 0.8 beats the entropy attack's 0.3
    assert float(baseline["attack_auc"]) > 0.65 and baseline["privacy"] == "no guarantee"
    assert baseline["guarantee"] == "none" and baseline["epsilon"] == "" and baseline["accountant"] == ""
    dpsgd = rows[1]
    assert (float(dpsgd["epsilon"]), float(dpsgd["delta"]), dpsgd["accountant"]) == (0.99, 1e-5, "opacus-prv")
    assert float(baseline["tpr_lower"]) <= float(baseline["tpr"]) <= float(baseline["tpr_upper"])


def test_summary_rows_pick_the_strongest_attack_per_metric():
    run = _run("x", None, _privacy(), 0.9, {
        "a": {"metrics": {"auc": 0.55, "tpr_at_fpr": {"0.001": {"tpr": 0.5, "measurable": True,
                                                                "lower": 0.4, "upper": 0.6}}}},
        "b": {"metrics": {"auc": 0.61, "tpr_at_fpr": {"0.001": {"tpr": None, "measurable": False}}}},
    })  # fmt: skip
    (row,) = summary_rows({"results": [run]})
    assert row["strongest_attack"] == "b" and row["attack_auc"] == 0.61  # by AUC
    # at 0.1 % FPR the strongest is the one with the highest measurable TPR there (Carlini et al. 2022)
    assert row["tpr_attack"] == "a" and row["tpr_at_0.1%_fpr"] == "50.0% [40.0, 60.0]"
    (row,) = summary_rows({"results": [{**run, "attacks": {"b": run["attacks"]["b"]}}]})
    assert row["tpr_attack"] is None and row["tpr_at_0.1%_fpr"] == "not measurable"


def test_format_privacy_and_tpr():
    assert format_privacy(_privacy(0.99, 1e-5, "opacus-prv", "central-dp")) == "ε = 0.99 (δ = 1e-05, opacus-prv)"
    assert format_privacy(_privacy()) == "no guarantee"
    assert format_privacy(_privacy(claimed=10.0)) == "no guarantee (claimed ε = 10, not a guarantee)"
    weak = format_privacy(_privacy(15.0, 1 / 60_000, "dpmix-closed-form", "dp-release", weak=True))
    assert weak.startswith("ε = 15 (δ = 1.7e-05, dpmix-closed-form)") and "weak δ ≥ 1/n" in weak
    assert "ε =" not in format_privacy(_privacy(2.0, None, "", "central-dp"))  # never an ε without δ
    assert format_tpr({"fpr": 0.001, "tpr": 0.012, "lower": 0.008, "upper": 0.019, "measurable": True}) == (
        "1.2% [0.8, 1.9]"
    )
    assert format_tpr({"fpr": 1e-4, "tpr": None, "lower": None, "upper": None, "measurable": False}) == (
        "not measurable"
    )


def test_load_results(tmp_path, results):
    good = tmp_path / "results.json"
    good.write_text(json.dumps(results))
    assert load_results(good)["run_id"] == results["run_id"]
    bad = tmp_path / "v2.json"
    bad.write_text(json.dumps({**results, "schema_version": 2}))
    with pytest.raises(ValueError, match="schema_version 2") as info:
        load_results(bad)
    assert "\n" not in str(info.value)
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    with pytest.raises(ValueError, match="not valid JSON"):
        load_results(broken)


def test_partial_documents_render(tmp_path):
    doc = {"schema_version": 1, "run_id": "empty", "status": "partial", "config": {}, "results": []}
    paths = write_reports(doc, tmp_path)
    assert set(paths) == {"markdown", "html", "csv"}
    assert "Run status: partial" in paths["markdown"].read_text()
    assert render_markdown(doc, {}) and render_html(doc, {})


def test_import_reports_does_not_import_torch():
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    code = "import sys, reports, reports.plots, reports.html; sys.exit(int('torch' in sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr or "reports imported torch"


def test_verdict_table_rows_frontier_and_notes(results):
    from reports.verdict import VERDICT_HEADERS, verdict_headline, verdict_notes, verdict_tables

    (table,) = verdict_tables(results)
    # dpsgd's attacks have 2,000 non-members: 0.1 % FPR is not measurable there, so the frontier uses 1 %
    assert table["dataset"] == "mnist" and table["axis"].level == 0.01
    rows = {r["cells"][0] + " " + r["cells"][1]: r for r in table["rows"]}
    assert len(rows) == 6 and all(len(r["cells"]) == len(VERDICT_HEADERS) for r in rows.values())
    base, weight, failed = rows["baseline —"], rows["weight-noise 10"], rows["local-gaussian 1"]
    assert base["cells"][2:4] == ["none", "no guarantee"] and base["cells"][6].endswith("(loss)")
    assert weight["cells"][3] == "no guarantee (claimed ε = 10, not a guarantee)"
    assert rows["dpsgd 1"]["cells"][2] == "central DP" and rows["dpsgd 1"]["cells"][6] == "not measurable"
    assert failed["failed"] and failed["cells"][2].startswith("failed: RuntimeError") and failed["frontier"] is None
    assert base["frontier"] is True  # the most accurate model is never dominated
    assert all(r["frontier"] is not None for k, r in rows.items() if k != "local-gaussian 1")
    notes = verdict_notes(results)["mnist"]
    base_note = next(n for n in notes if n.startswith("baseline:"))
    assert "loss recovers membership at TPR" in base_note and "× chance" in base_note  # shift 0.8, 10,000 each
    assert any(n.startswith("weight-noise: no formal guarantee") for n in notes)
    assert any(n.startswith("At target ε 1, by test accuracy: dpsgd 90.0% (central DP)") for n in notes)
    headline = verdict_headline(results)["mnist"]
    assert headline[0].startswith("Most accurate with a formal guarantee: dpsgd at target ε 1 (90.0%); dpsgd at "
                                  "target ε 8 (95.0%); dpmix at target ε 15 (68.0%). The non-private baseline reaches")
    assert "Membership attacks beat chance at 0.1% FPR on: baseline (loss" in headline[1]


def test_pareto_optimal():
    from reports.verdict import pareto_optimal

    points = [(90.0, 1.0), (95.0, 2.0), (85.0, 1.5), None, (95.0, 2.0), (80.0, 0.5)]
    assert pareto_optimal(points) == [True, True, False, None, True, True]


def test_reproduction_section_only_when_present(results, texts, tmp_path):
    from reports.reproduction import reproduction_rows

    assert reproduction_rows(results) == [] and "Reproduction" not in texts["html"] + texts["markdown"]
    doc = {**results, "reproduction": [  # the shape bench.runner.reproduce writes (accuracies in percent)
        {"preset": "dpsgd-cnn", "source": "Opacus MNIST example", "setting": "DP-SGD, σ = 1.1, 10 epochs",
         "metric": "test accuracy (%)", "published": 93.4,
         "reproduced": {"mean": 92.5, "std": 0.3, "seeds": [0, 1, 2], "values": [92.5, 92.2, 92.8]},
         "status": "reproduced", "claimed_privacy": "ε = 1.0 (δ = 1e-5, shuffled batches)",
         "corrected_privacy": {"epsilon": 0.427, "delta": 1e-5, "accountant": "opacus-prv"},
         "attacks": {"loss": {"auc": 0.51, "tpr_at_0.1%_fpr": None}, "lira": {"auc": 0.56, "tpr_at_0.1%_fpr": 0.002}},
         "notes": "sampling as in the source", "command": "python -m bench reproduce dpsgd-cnn", "wall_s": 1.0},
        {"preset": "weight-noise", "source": "a | source", "setting": "noise σ = 0.1", "published": 93.6,
         "reproduced": {"mean": 97.6, "std": 0.0, "seeds": [0], "values": [97.6]},
         "corrected_privacy": {"guarantee": "none"}, "attacks": {}, "notes": "",
         "command": "python -m bench reproduce weight-noise"},
    ], "reproduction_curves": [
        {"preset": "dpmix-per-class", "name": "accuracy_vs_T", "x_label": "released samples T", "x": [600, 6000],
         "mean": [61.2, 79.0], "std": [1.1, 0.3], "published": [None, 79.3], "claim": "accuracy grows with T",
         "holds": True, "log_x": True, "plot": "reproduction_dpmix-per-class_accuracy_vs_T.png"},
    ]}  # fmt: skip
    rows = reproduction_rows(doc)
    assert rows[0][0] == "dpsgd-cnn (Opacus MNIST example)"
    assert rows[0][2:5] == ["93.40%", "92.50% ± 0.30 (3 seeds)", "reproduced"]
    assert rows[0][6] == "ε = 0.427 (δ = 1e-05, opacus-prv)"
    assert rows[0][7].startswith("lira: AUC 0.560, TPR 0.20% at 0.1% FPR; loss: AUC 0.510, TPR not measurable")
    # no status written: the 1.5-point rule decides (97.6 vs 93.6 is 4 points off); no guarantee says so
    assert rows[1][3:7] == ["97.60% (1 seed)", "not reproduced", "—", "no guarantee"]
    paths = write_reports(doc, tmp_path)
    html, md = paths["html"].read_text(encoding="utf-8"), paths["markdown"].read_text(encoding="utf-8")
    assert '<section id="reproduction">' in html and "92.50% ± 0.30 (3 seeds)" in html
    assert "python -m bench reproduce dpsgd-cnn" in html
    assert (tmp_path / "reproduction_dpmix-per-class_accuracy_vs_T.png").is_file()
    assert "## Reproduction" in md and "(a \\| source)" in md and "reproduction_dpmix-per-class_accuracy_vs_T.png" in md


def test_provenance_facts_and_rows(results):
    from reports.provenance import provenance_rows, run_facts

    facts = dict(run_facts({**results, "git_dirty": True, "platform": "Linux-6.1-x86_64"}))
    assert facts["Git hash"] == "abc123def (uncommitted changes to tracked files)"
    assert facts["Platform"] == "Linux-6.1-x86_64" and "opacus 1.5.2" in facts["Versions"]
    assert dict(run_facts({}))["Git hash"] == "unknown (not run from a git checkout)"
    rows = provenance_rows(results)
    assert len(rows) == len(results["results"]) and rows[1][:8] == ["mnist", "dpsgd", "1", "0", "cnn-small", "3",
                                                                    "256", "0.5"]  # fmt: skip


def test_a_reproductions_rows_of_one_mechanism_stay_apart():
    """Two DP-SGD models of a preset at the same target ε (an end-to-end CNN and ScatterNet + linear) are two
    models, not two seeds of one: each keeps its row in the tables, and the ranking lists both, never their mean."""
    from reports.verdict import verdict_notes

    cnn = {**_run("dpsgd", 3.0, _privacy(2.99, 1e-5, "opacus-prv", "central-dp"), 0.9811, {}), "row": "eps3"}
    scatter = {**_run("dpsgd", 3.0, _privacy(3.0, 1e-5, "opacus-prv", "central-dp"), 0.9879, {}),
               "row": "scatternet-eps3"}
    plain = _run("baseline", None, _privacy(), 0.99, {})
    doc = {"results": [cnn, scatter, {**plain, "row": "baseline"}]}
    assert [r["mechanism"] for r in summary_rows(doc)] == ["dpsgd (eps3)", "dpsgd (scatternet-eps3)", "baseline"]
    ranking = verdict_notes(doc)["mnist"][0]
    assert ranking == ("At target ε 3, by test accuracy: dpsgd (scatternet-eps3) 98.8% (central DP), "
                       "dpsgd (eps3) 98.1% (central DP).")
    assert [r["mechanism"] for r in summary_rows({"results": [plain]})] == ["baseline"]  # bench all: no rows
