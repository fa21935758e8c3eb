"""Hostile results files (issue 55, item 5): a results.json written by another version, cut short, or holding NaN /
±Infinity where numbers belong is input like any other: ``bench report`` (and ``bench compare``) answer with one
line, or show an optional number as not measured, never a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.cli import main
from bench.results import read


def _folder(tmp_path: Path, doc: dict, text: str | None = None) -> Path:
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "results.json").write_text(text if text is not None else json.dumps(doc), encoding="utf-8")
    return folder


def _one_line_error(capsys, folder: Path, *needles: str) -> None:
    assert main(["report", str(folder)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert err.startswith("privbench: error:") and all(n in err for n in needles), err
    assert sorted(p.name for p in folder.iterdir()) == ["results.json"]  # no half-drawn report


@pytest.fixture()
def doc(mnist_results) -> dict:
    return json.loads(mnist_results.to_json())


def test_nan_test_accuracy_is_one_line(tmp_path, capsys, doc):
    """The issue's case: today a ValueError traceback from the first screen's compact table."""
    text = json.dumps(doc).replace('"test_accuracy": 0.9,', '"test_accuracy": NaN,', 1)
    assert "NaN" in text
    _one_line_error(capsys, _folder(tmp_path, doc, text), "results.1.utility.test_accuracy", "NaN or ±inf")


@pytest.mark.parametrize("constant", ["Infinity", "-Infinity", "1e999"])
def test_infinite_auc_is_one_line(tmp_path, capsys, doc, constant):
    doc["results"][0]["attacks"]["loss"]["metrics"]["auc"] = "@"
    text = json.dumps(doc).replace('"@"', constant)
    _one_line_error(capsys, _folder(tmp_path, doc, text), "results.0.attacks.loss.metrics.auc")


def test_nan_in_an_optional_number_reads_as_not_measured(tmp_path, capsys, doc):
    doc["results"][0]["timings"]["samples_per_s"] = "@"
    doc["results"][1]["utility"]["test_loss"] = "@"
    folder = _folder(tmp_path, doc, json.dumps(doc).replace('"@"', "NaN"))
    assert read(folder / "results.json").results[0].timings.samples_per_s is None
    assert main(["report", str(folder)]) == 0
    capsys.readouterr()
    assert "NaN" not in (folder / "report.md").read_text(encoding="utf-8")


def test_cut_short_is_one_line(tmp_path, capsys, doc):
    text = json.dumps(doc)
    _one_line_error(capsys, _folder(tmp_path, doc, text[: len(text) // 2]), "not valid JSON")


def test_another_version_is_one_line(tmp_path, capsys, doc):
    _one_line_error(capsys, _folder(tmp_path, {**doc, "schema_version": 4}), "schema_version 4 is not supported")


def test_another_versions_field_is_one_line(tmp_path, capsys, doc):
    doc["results"][0]["utility"]["top5_accuracy"] = 0.99  # a field this version does not know
    _one_line_error(capsys, _folder(tmp_path, doc), "results.0.utility.top5_accuracy")
