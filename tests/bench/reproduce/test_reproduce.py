"""``python -m bench reproduce``: presets, the reproduction rows' shape, corrected ε against independent
computations, the "reproduced" rule, and bad input. Real data: MNIST (``--quick``: 1,000 images, 1 epoch)."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import pytest
from scipy.optimize import brentq
from scipy.special import log_ndtr

from bench.cli import main
from bench.core.errors import ConfigError
from bench.reproduce.presets import PRESETS, Row, validate_preset, validate_presets
from bench.reproduce.rows import reproduction_row
from bench.results import REPRODUCED_WITHIN, RunResult

ROW_KEYS = {"preset", "source", "setting", "metric", "published", "reproduced", "status", "claimed_privacy",
            "corrected_privacy", "attacks", "notes", "command", "wall_s"}  # docs/results-schema.md


def _gaussian_epsilon(sigma: float, delta: float, sensitivity: float) -> float:
    """Independent analytic Gaussian ε (Balle & Wang 2018, Thm. 8) via scipy, in log space."""
    mu = sensitivity / sigma

    def excess(eps: float) -> float:
        a, b = mu / 2 - eps / mu, -mu / 2 - eps / mu
        return math.exp(log_ndtr(a)) - math.exp(eps + log_ndtr(b)) - delta

    hi = 1.0
    while excess(hi) > 0:
        hi *= 2
    return brentq(excess, 0.0, hi, xtol=1e-9, rtol=1e-10)


def _reproduce(tmp_path: Path, mnist_root: Path, *args: str) -> dict:
    out = tmp_path / "out"
    code = main(["reproduce", *args, "--quick", "--data-root", str(mnist_root), "--device", "cpu",
                 "--output", str(out), "--cache-dir", str(tmp_path / "cache")])
    assert code in (0, 1)
    doc = json.loads((out / "results.json").read_text())
    assert doc["status"] == "complete"
    return doc


def test_every_reference_system_and_recipe_is_a_valid_preset():
    validate_presets()
    assert {"dpsgd-cnn", "dpsgd-resnet18", "dpmix", "dpmix-per-class", "local-gaussian", "weight-noise",
            "dpsgd-best", "dpsgd-best-fashion", "dpmix-best"} <= set(PRESETS.names())


def test_a_preset_with_a_bad_setting_is_rejected_with_its_row():
    p = PRESETS.get("dpsgd-cnn")
    bad = replace(p.rows[1], training={**p.rows[1].training, "params": {"noise_multiplier": -1.0}})
    with pytest.raises(ConfigError, match=r"preset dpsgd-cnn\.dpsgd\.params\.noise_multiplier = -1\.0"):
        validate_preset(replace(p, rows=(p.rows[0], bad)))


@pytest.mark.parametrize("argv, needle", [
    (["reproduce", "dpsgd-nope"], "preset 'dpsgd-nope' is not known"),
    (["reproduce"], "exactly one of PRESET or --all"),
    (["reproduce", "dpmix", "--all"], "exactly one of PRESET or --all"),
    (["reproduce", "dpmix", "--seeds", "x"], "seeds[0] = 'x'"),
    (["reproduce", "dpmix", "--device", "tpu"], "'tpu'"),
    (["reproduce", "dpmix", "--max-epochs", "0"], "--max-epochs 0"),
])
def test_bad_input_is_one_line_and_exit_2(capsys, tmp_path, argv, needle, mnist_root):
    out = tmp_path / "never"
    code = main([*argv, "--output", str(out), "--data-root", str(mnist_root)])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert err.startswith("privbench: error:") and needle in err and "\n" not in err
    assert not out.exists()


_HEAD = {"dataset": "mnist", "mechanism": "weight-noise", "target_epsilon": None, "model": "mlp", "spec": {},
         "timings": {"train_s": 1.0, "eval_s": 0.5, "attack_s": 0.25}}


def _cells(values: list[float]) -> list[RunResult]:
    return [RunResult.model_validate({
        **_HEAD, "seed": i, "utility": {"test_accuracy": v / 100, "test_loss": 0.3, "train_accuracy": v / 100},
        "privacy": {"epsilon": None, "delta": None, "accountant": "none", "guarantee": "none"}})
        for i, v in enumerate(values)]


@pytest.mark.parametrize("offset, status", [(REPRODUCED_WITHIN - 0.1, "reproduced"),
                                            (-(REPRODUCED_WITHIN - 0.1), "reproduced"),
                                            (REPRODUCED_WITHIN + 0.1, "not reproduced"),
                                            (-(REPRODUCED_WITHIN + 0.1), "not reproduced")])
def test_reproduced_means_within_one_and_a_half_points(offset, status):
    preset = PRESETS.get("weight-noise")
    row = Row("x", "x", "weight-noise", preset.rows[0].training, published=80.0)
    entry = reproduction_row(preset, row, _cells([80.0 + offset - 0.5, 80.0 + offset + 0.5]), command="c", cut="")
    assert set(entry.model_dump()) == ROW_KEYS
    assert entry.status == status
    assert entry.reproduced.mean == pytest.approx(80.0 + offset)
    assert entry.reproduced.std == pytest.approx(math.sqrt(0.5))
    assert entry.corrected_privacy == {"guarantee": "none"}
    assert entry.wall_s == pytest.approx(2 * 1.75)  # training + evaluation + attacks of both seeds


@pytest.mark.parametrize("values, status", [([80.9, 81.1], "target met (≥ 80 %)"),
                                            ([79.8, 80.0], "target missed (≥ 80 %)")])
def test_our_recipes_say_whether_their_target_was_met(values, status):
    preset = PRESETS.get("weight-noise")
    row = Row("x", "x", "weight-noise", preset.rows[0].training, published=68.35, target=80.0)
    entry = reproduction_row(preset, row, _cells(values), command="c", cut="")
    assert entry.status == status and "the record 68.35 %" in entry.notes


def test_every_seed_failing_is_not_reproduced_and_says_why():
    preset = PRESETS.get("weight-noise")
    cells = [RunResult.model_validate({**_HEAD, "seed": 0, "status": "failed",
                                       "error": "training loss became nan in epoch 1"})]
    entry = reproduction_row(preset, preset.rows[0], cells, command="c", cut="")
    assert entry.status == "not reproduced" and "nan" in entry.notes
    assert entry.reproduced.values == [] and entry.corrected_privacy is None


@pytest.mark.slow
@pytest.mark.long  # tests/conftest.py: left out of the default run, CI runs it with `pytest -m long`
def test_dpsgd_cnn_quick_rows_and_poisson_epsilon(tmp_path, mnist_root):
    """The DP-SGD row's corrected ε is Opacus' PRV accountant for the preset's σ, its Poisson rate and steps,
    computed here from the accountant's own API; seeded reruns give the same accuracies."""
    from opacus.accountants import PRVAccountant

    doc = _reproduce(tmp_path, mnist_root, "dpsgd-cnn", "--seeds", "0,1")
    rows = doc["reproduction"]
    assert [r["published"] for r in rows] == [98.8, 93.4]
    for r in rows:
        assert set(r) == ROW_KEYS
        rep = r["reproduced"]
        assert rep["seeds"] == [0, 1] and len(rep["values"]) == 2
        assert rep["mean"] == pytest.approx(sum(rep["values"]) / 2)
        assert (r["status"] == "reproduced") == (abs(rep["mean"] - r["published"]) <= 1.5)
        assert "--quick" in r["notes"] and r["command"].startswith("python -m bench reproduce dpsgd-cnn")
    cells = {(c["row"], c["seed"]): c for c in doc["results"]}
    for r, key in zip(rows, ("non-private", "dpsgd"), strict=True):  # the row's attack: the mean over its seeds
        aucs = [cells[(key, s)]["attacks"]["loss"]["metrics"]["auc"] for s in (0, 1)]
        assert r["attacks"]["loss"]["auc"] == pytest.approx(sum(aucs) / 2)
    assert rows[1]["reproduced"]["values"] == [100 * cells[("dpsgd", s)]["utility"]["test_accuracy"] for s in (0, 1)]
    assert rows[0]["corrected_privacy"] == {"guarantee": "none"}
    params = cells[("dpsgd", 0)]["params"]
    assert params["noise_multiplier"] == 1.1 and params["sample_rate"] == pytest.approx(1 / math.ceil(1000 / 64))
    acct = PRVAccountant()
    acct.history = [(1.1, params["sample_rate"], params["steps"])]
    assert rows[1]["corrected_privacy"]["epsilon"] == pytest.approx(acct.get_epsilon(1e-5), rel=1e-6)
    assert rows[1]["corrected_privacy"]["accountant"] == "opacus-prv"
    assert rows[1]["corrected_privacy"]["relation"] == "add-remove"
    again = _reproduce(tmp_path / "again", mnist_root, "dpsgd-cnn", "--seeds", "0,1", "--no-cache")
    assert [r["reproduced"]["values"] for r in again["reproduction"]] == [r["reproduced"]["values"] for r in rows]


@pytest.mark.slow
@pytest.mark.long  # tests/conftest.py: left out of the default run, CI runs it with `pytest -m long`
def test_local_gaussian_reports_what_the_sources_sigma_really_buys(tmp_path, mnist_root):
    doc = _reproduce(tmp_path, mnist_root, "local-gaussian", "--seeds", "0")
    delta = 1 / 784**2
    by_claim = {}
    for c in doc["results"]:
        claimed = c["target_epsilon"]
        if c["row"].startswith("iic-analytic"):  # IIC with the analytic σ: ε is what it says
            assert c["privacy"]["epsilon"] == pytest.approx(claimed, rel=1e-6)
            continue
        sigma = math.sqrt(2 * math.log(1.25 / delta)) / claimed  # the source's σ: classic, "sensitivity 1"
        assert c["params"]["sigma"] == pytest.approx(sigma, rel=1e-12)
        assert c["privacy"]["claimed_epsilon"] == claimed
        if not c["row"].startswith("iic"):
            by_claim[claimed] = c["privacy"]["epsilon"]
    for claimed in (150.0, 2000.0):  # the two rows with a published figure (the source's "learning fails")
        true = _gaussian_epsilon(math.sqrt(2 * math.log(1.25 / delta)) / claimed, delta, 2.0)
        assert by_claim[claimed] == pytest.approx(true, rel=1e-6)
        assert true > claimed  # the source understated ε
    rows = doc["reproduction"]
    # the source's "fails at ε ≤ 2,000" (chance, 10 %): the CNN rows and the IIC rows with either σ
    assert [r["published"] for r in rows] == [10.0] * 6
    assert all(r["corrected_privacy"]["accountant"] == "analytic-gaussian, image only (labels public)" for r in rows)
    assert {c["name"] for c in doc["reproduction_curves"]} == {
        "accuracy_vs_claimed_epsilon", "iic_accuracy_vs_epsilon_source_sigma", "iic_accuracy_vs_epsilon_analytic_sigma"}
    assert (tmp_path / "out" / doc["reproduction_curves"][0]["plot"]).is_file()


@pytest.mark.parametrize("claim, accuracies, holds", [
    ("increasing", [60.0, 70.0, 69.0, 80.0], True),
    ("increasing", [60.0, 70.0, 65.0, 80.0], False),  # a step down by more than 1.5 points
    ("increasing", [80.0, 80.5, 81.0, 81.2], False),  # less than 1.5 points in all
    ("peak", [77.5, 79.3, 78.6], True),
    ("peak", [77.5, 78.6, 79.3], False),
])
def test_claimed_trends_are_checked(claim, accuracies, holds):
    from bench.reproduce.presets import Curve
    from bench.reproduce.rows import claim_row, curve_entry

    preset = PRESETS.get("weight-noise")
    keys = tuple(f"k{i}" for i in range(len(accuracies)))
    curve = Curve("c", "x", keys, tuple(float(i + 1) for i in range(len(keys))), claim=claim, claim_text="trend")
    by_key = {k: _cells([a]) for k, a in zip(keys, accuracies, strict=True)}
    rows = tuple(Row(k, k, "weight-noise", preset.rows[0].training) for k in keys)
    entry = curve_entry(replace(preset, rows=rows), curve, by_key)
    assert entry.holds is holds and entry.mean == pytest.approx(accuracies)
    row = claim_row(preset, curve, entry, by_key, command="c", cut="")
    assert set(row.model_dump()) == ROW_KEYS and row.published is None
    assert row.status == ("reproduced" if holds else "not reproduced")


@pytest.mark.slow
@pytest.mark.long  # tests/conftest.py: left out of the default run, CI runs it with `pytest -m long`
def test_dpsgd_best_quick_trains_every_recipe_row_to_its_epsilon(tmp_path, mnist_root):
    """Our recipes, ScatterNet + linear included, run end to end on real MNIST: each row is calibrated to its target
    ε by Opacus' PRV accountant, is attacked, and says whether its target was met (a quick run is far from it)."""
    doc = _reproduce(tmp_path, mnist_root, "dpsgd-best", "--seeds", "0")
    rows = doc["reproduction"]
    assert {r["preset"] for r in rows} == {"dpsgd-best"} and len(rows) == 3
    scatter = next(r for r in rows if r["setting"].startswith("ScatterNet"))
    for r in rows:
        assert r["corrected_privacy"]["accountant"] == "opacus-prv" and r["corrected_privacy"]["delta"] == 1e-5
        assert r["status"].startswith("target") and set(r["attacks"]) == {"loss"}
    assert scatter["corrected_privacy"]["epsilon"] == pytest.approx(3.0, abs=0.05)
    assert scatter["reproduced"]["values"][0] > 20.0  # one epoch on 1,000 images: far above chance (10 %)
