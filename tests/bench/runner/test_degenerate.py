"""Models that learned nothing are marked, never read as private (issue 40, item 1): a planted collapse (a learning
rate too small or too large for the model to learn) gives one line, a ``degenerate`` mark in results.json and every
report, and a verdict that does not count its attack results; local noise at chance because of its noise is told
apart from a recipe that collapsed."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from bench.core.data import load_dataset
from bench.runner.degenerate import check_predictions

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def labels() -> torch.Tensor:
    """The real labels of digits' 397-record test split (as the smoke profile draws it)."""
    from bench.core.data import make_split

    pool, test = load_dataset("digits")
    return make_split(pool, test, n_members=100, n_non_members=100, n_population=0, n_test=397, seed=0).test.y


def test_a_model_that_learned_is_not_marked(labels):
    assert check_predictions(labels.clone(), labels) is None
    gen = torch.Generator().manual_seed(0)
    some = labels[torch.randperm(len(labels), generator=gen)]  # the prior's guess...
    keep = torch.rand(len(labels), generator=gen) < 0.3  # ...right on a random 30 % besides: it learned a little
    some[keep] = labels[keep]
    assert check_predictions(some, labels) is None


def test_one_class_for_every_record_is_a_collapse(labels):
    counts = torch.bincount(labels)
    top = int(counts.argmax())
    d = check_predictions(torch.full_like(labels, top), labels)  # the best constant prediction is still a collapse
    assert d is not None and d.reason == "constant" and d.predicted_classes == 1 and d.chance_class == top
    assert d.test_accuracy == d.chance_accuracy == float(counts[top]) / len(labels)
    assert d.text.startswith(f"collapsed: predicts class {top} for every test record (test accuracy ")


def test_guessing_by_the_prior_or_worse_is_at_chance(labels):
    gen = torch.Generator().manual_seed(1)
    guess = labels[torch.randperm(len(labels), generator=gen)]  # right class shares, no link to the record
    d = check_predictions(guess, labels)
    assert d is not None and d.reason == "at-chance" and d.predicted_classes > 1
    assert d.lower <= d.chance_accuracy < d.upper
    wrong = (labels + 1) % 10  # never right: below chance
    d = check_predictions(wrong, labels)
    assert d is not None and d.reason == "at-chance" and d.test_accuracy == 0.0
    with pytest.raises(ValueError, match="same length"):
        check_predictions(labels[:3], labels)


def _all(tmp: Path, name: str, lr: float, mechanisms: str) -> tuple[subprocess.CompletedProcess, Path]:
    (tmp / f"{name}.yaml").write_text(f"training:\n  baseline: {{lr: {lr!r}}}\n")
    out = tmp / name
    proc = subprocess.run([sys.executable, "-m", "bench", "all", "--profile", "smoke", "--mechanisms", mechanisms,
                           "--epsilons", "1", "--attacks", "loss", "--config", str(tmp / f"{name}.yaml"),
                           "--output", str(out), "--cache-dir", str(tmp / "cache")],
                          capture_output=True, text=True, timeout=900, cwd=REPO,
                          env={**os.environ, "COLUMNS": "400"})  # no wrapped lines
    return proc, out


def _verdict_rows(report: str) -> dict[str, str]:
    """report.md's verdict rows (the folded verdict table, every number with its provenance) by their first cell."""
    verdict = report[report.index("<summary>The verdict table"):report.index("Pareto-optimal:")]
    return {line.split(" | ")[0].lstrip("| "): line for line in verdict.splitlines() if line.startswith("| ")}


@pytest.mark.slow
def test_a_too_small_learning_rate_is_marked_and_local_noise_at_chance_is_told_apart(tmp_path):
    proc, out = _all(tmp_path, "small", 1e-7, "baseline,local-gaussian")
    assert proc.returncode == 0, proc.stderr[-3000:]  # a result, not a failure
    doc = json.loads((out / "results.json").read_text())
    base = next(r for r in doc["results"] if r["mechanism"] == "baseline")
    noisy = next(r for r in doc["results"] if r["mechanism"] == "local-gaussian" and not r["off_point"])
    off = next(r for r in doc["results"] if r["mechanism"] == "local-gaussian" and r["off_point"])
    assert base["degenerate"]["cause"] == "recipe" and base["degenerate"]["reason"] in {"at-chance", "constant"}
    assert base["attacks"]["loss"]["metrics"]["auc"]  # its attack results are kept
    assert noisy["degenerate"]["cause"] == "noise" and off["degenerate"] is None
    assert off["utility"]["test_accuracy"] > 0.5
    lines = [line for line in proc.stdout.splitlines() if line.startswith("degenerate model:")]
    assert len(lines) == 2 and lines[0].startswith("degenerate model: baseline seed 0: ")
    assert lines[0].endswith("the recipe itself collapsed; its attack results are not evidence of privacy")
    assert "the noise at this ε, not the recipe" in lines[1]

    report = (out / "report.md").read_text()
    rows = _verdict_rows(report)
    base_row = next(v for k, v in rows.items() if k.startswith("baseline"))
    assert base_row.startswith("| baseline — degenerate (") and base_row.rstrip(" |").endswith("— (degenerate)")
    assert base["degenerate"]["text"] in base_row and "not evidence of privacy" in base_row
    assert next(v for k, v in rows.items() if k.startswith("local-gaussian — degenerate (")).count("the noise") >= 1
    assert "**The baseline is degenerate: " in report
    html = (out / "report.html").read_text()
    assert html.count('class="degenerate') == 4  # greyed in the compact table and in the verdict table
    with open(out / "summary.csv", newline="") as f:
        causes = {(r["mechanism"], r["target_epsilon"]): r["degenerate_cause"] for r in csv.DictReader(f)}
    assert causes[("baseline", "")] == "recipe" and causes[("local-gaussian", "1.0")] == "noise"
    assert causes[("local-gaussian", "inf")] == ""


@pytest.mark.slow
def test_a_too_large_learning_rate_that_collapses_is_marked(tmp_path):
    proc, out = _all(tmp_path, "large", 3.0, "baseline")
    assert proc.returncode == 0, proc.stderr[-3000:]
    (base,) = json.loads((out / "results.json").read_text())["results"]
    assert base["status"] == "ok" and base["degenerate"]["reason"] == "constant"  # no NaN: a collapse, not a failure
    assert base["degenerate"]["predicted_classes"] == 1
    assert "\ndegenerate model: baseline seed 0: collapsed: predicts class " in proc.stdout
    assert "| baseline — degenerate (collapsed to one class; the recipe) |" in (out / "report.md").read_text()
