"""``privbench compare`` (issue 55): same run → no significant change, exit 0; a planted regression (test accuracy
down 5 points with the per-example outcomes changed consistently, a TPR up, an ε up, throughput halved) → exit 4
with one line naming cell, metric, before, after and p-value; bad input → exit 2, one line, nothing written.

The real run is the session's smoke run (``tests/conftest.py``: ``bench all --profile smoke``, built once for the
suite); the leakage and ε cases use the report tests' built documents (``tests/documents.py``), whose attacks
score 10,000 members, enough for a TPR at 0.1 % FPR."""

from __future__ import annotations

import base64
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from bench.cli import main
from reports.compare.stats import holm, mcnemar_exact, seed_test

RULES = "accuracy:-1pt,tpr,auc,epsilon,privacy-bug,degenerate,failed"


def _copy(run: Path, to: Path) -> Path:
    """A results folder holding only ``run``'s results.json."""
    to.mkdir()
    shutil.copy(run / "results.json", to / "results.json")
    return to


def _edit(folder: Path, change) -> dict:
    doc = json.loads((folder / "results.json").read_text(encoding="utf-8"))
    change(doc)
    (folder / "results.json").write_text(json.dumps(doc), encoding="utf-8")
    return doc


def _cell(doc: dict, mechanism: str, target: float | None) -> dict:
    return next(r for r in doc["results"] if r["mechanism"] == mechanism and r["target_epsilon"] == target
                and not r.get("off_point"))


def _drop_accuracy(cell: dict, points: float) -> None:
    """Mark ``points`` % of the test records wrong that the model got right, consistently in both the packed
    per-example outcomes and the accuracy."""
    outcomes = cell["utility"]["test_outcomes"]
    raw = np.frombuffer(base64.b64decode(outcomes["correct"]), dtype=np.uint8)
    bits = np.unpackbits(raw, bitorder="little")[: outcomes["n"]].astype(bool)
    bits[np.flatnonzero(bits)[: round(points / 100 * outcomes["n"])]] = False
    outcomes["correct"] = base64.b64encode(np.packbits(bits, bitorder="little").tobytes()).decode("ascii")
    cell["utility"]["test_accuracy"] = float(bits.mean())


def _compare(capsys, *args: str) -> tuple[int, str, str]:
    rc = main(["compare", *args])
    captured = capsys.readouterr()
    return rc, captured.out, captured.err


# ---- the statistics, against their definitions ----------------------------------------------------------------


def test_mcnemar_is_the_exact_binomial_test_of_discordant_pairs():
    before = np.array([True] * 30 + [False] * 10)
    after = before.copy()
    after[:10] = False  # 10 right before and wrong after, none the other way
    p, lost, won = mcnemar_exact(before, after)
    assert (lost, won) == (10, 0) and p == pytest.approx(2 * 0.5**10)
    assert mcnemar_exact(before, before)[0] == 1.0


def test_holm_adjusts_step_down():
    # sorted 0.005, 0.01, 0.03, 0.04: 4·0.005, 3·0.01, 2·0.03, max(that, 1·0.04)
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm([]) == []


def test_holm_controls_the_family_wise_rate_under_the_null():
    rng = np.random.default_rng(0)
    rejected = [min(holm(list(rng.uniform(size=50)))) < 0.05 for _ in range(2000)]
    assert np.mean(rejected) <= 0.05 + 3 * np.sqrt(0.05 * 0.95 / 2000)
    assert stats.binomtest(sum(rejected), 2000, 0.05, alternative="greater").pvalue > 0.001


def test_seed_test_is_the_t_prediction_test_or_welch():
    base = [0.80, 0.82, 0.81, 0.79, 0.83]
    p, name = seed_test(base, [0.5])
    sd = np.std(base, ddof=1)
    t = (0.5 - np.mean(base)) / (sd * np.sqrt(1 + 1 / 5))
    assert "prediction" in name and p == pytest.approx(2 * stats.t.sf(abs(t), 4))
    assert seed_test(base, [0.81])[0] > 0.5
    assert seed_test(base, [0.70, 0.72])[0] == pytest.approx(stats.ttest_ind(base, [0.70, 0.72],
                                                                             equal_var=False).pvalue)
    assert seed_test([0.8], [0.7]) is None  # one seed each: no seed-to-seed variation measured
    assert seed_test([0.8, 0.8], [0.8]) == (1.0, "no seed-to-seed variation")


def test_several_seeds_judge_the_configuration_not_one_model(build, tmp_path, capsys):
    """BASE with five seeds, NEW with one: accuracy is judged against the seeds' spread (the t prediction test),
    so a new seed inside it passes and one far below it fails ``--fail-on accuracy``."""
    accuracies = [0.90, 0.92, 0.91, 0.89, 0.93]
    runs = [build.run("baseline", None, build.privacy(note="b"), a, {}, seed=s) for s, a in enumerate(accuracies)]
    base = _write(tmp_path / "base", build.results(runs))
    inside = _write(tmp_path / "inside", build.results([build.run("baseline", None, build.privacy(note="b"), 0.905,
                                                                  {}, seed=7)]))
    below = _write(tmp_path / "below", build.results([build.run("baseline", None, build.privacy(note="b"), 0.70,
                                                                 {}, seed=7)]))
    rc, out, _ = _compare(capsys, str(base), str(inside), "--fail-on", RULES)
    assert rc == 0 and "No significant change" in out, out
    rc, out, _ = _compare(capsys, str(base), str(below), "--fail-on", RULES)
    assert rc == 4, out
    (line,) = [x for x in out.splitlines() if x.startswith("regression:")]
    assert "seeds 0,1,2,3,4 → 7" in line and "mean over seeds" in line and "t prediction test over 5 seeds" in line


# ---- the smoke run: same run, planted regressions --------------------------------------------------------------


def test_same_run_is_no_significant_change(smoke_run, tmp_path, capsys):
    base, new = _copy(smoke_run[0], tmp_path / "base"), _copy(smoke_run[0], tmp_path / "new")
    rc, out, err = _compare(capsys, str(base), str(new / "results.json"), "--fail-on", RULES)
    assert rc == 0, out + err
    assert "No significant change" in out and "regression:" not in out
    page = (new / "report-compare.md").read_text(encoding="utf-8")
    assert "No significant change" in page and "same: " in page
    html = (new / "report-compare.html").read_text(encoding="utf-8")
    assert "<script" not in html and "No significant change" in html


def test_planted_accuracy_drop_is_a_regression(smoke_run, tmp_path, capsys):
    base, new = _copy(smoke_run[0], tmp_path / "base"), _copy(smoke_run[0], tmp_path / "new")
    before = _cell(json.loads((base / "results.json").read_text()), "dpsgd", 16.0)["utility"]["test_accuracy"]
    doc = _edit(new, lambda d: _drop_accuracy(_cell(d, "dpsgd", 16.0), 5.0))
    after = _cell(doc, "dpsgd", 16.0)["utility"]["test_accuracy"]
    rc, out, _ = _compare(capsys, str(base), str(new), "--fail-on", RULES, "--output", str(tmp_path))
    assert rc == 4, out
    lines = [line for line in out.splitlines() if line.startswith("regression:")]
    assert len(lines) == 1, out
    assert "dpsgd target ε 16 seed 0" in lines[0] and "test accuracy" in lines[0]
    assert f"{100 * before:.1f}% → {100 * after:.1f}%" in lines[0] and "McNemar exact" in lines[0]
    assert "p = " in lines[0] and "Holm" in lines[0]
    # the same drop under a looser threshold is reported but does not fail
    rc, out, _ = _compare(capsys, str(base), str(new), "--fail-on", "accuracy:-10pt", "--output", str(tmp_path))
    assert rc == 0 and "1 significant change(s), 1 of them regression(s)" in out


def test_halved_throughput_fails_the_throughput_rule(smoke_run, tmp_path, capsys):
    base, new = _copy(smoke_run[0], tmp_path / "base"), _copy(smoke_run[0], tmp_path / "new")

    def slower(doc: dict) -> None:
        _cell(doc, "dpsgd", 4.0)["timings"]["samples_per_s"] /= 2

    _edit(new, slower)
    rc, out, _ = _compare(capsys, str(base), str(new), "--fail-on", "throughput:0.9x")
    assert rc == 4, out
    (line,) = [x for x in out.splitlines() if x.startswith("regression:")]
    assert "dpsgd target ε 4 seed 0: samples/s" in line and "×0.50" in line


# ---- leakage and ε on built documents --------------------------------------------------------------------------


def _write(folder: Path, doc) -> Path:
    folder.mkdir()
    (folder / "results.json").write_text(doc.to_json(), encoding="utf-8")
    return folder


def test_tpr_rise_is_a_regression(build, tmp_path, capsys):
    def doc(shift: float):
        rng = np.random.default_rng(1)
        attacks = {"loss": build.attack("loss", rng, 10_000, shift)}
        return build.results([build.run("baseline", None, build.privacy(note="baseline"), 0.98, attacks)])

    base, new = _write(tmp_path / "base", doc(0.3)), _write(tmp_path / "new", doc(1.5))
    rc, out, _ = _compare(capsys, str(base), str(new), "--fail-on", "tpr")
    assert rc == 4, out
    assert any(x.startswith("regression:") and "TPR @ 0.1% FPR (loss)" in x and "Fisher exact" in x
               for x in out.splitlines()), out
    assert _compare(capsys, str(base), str(new), "--fail-on", "accuracy,epsilon")[0] == 0


def test_epsilon_rise_is_an_exact_regression(build, tmp_path, capsys):
    dp = {"accountant": "opacus-prv", "guarantee": "central-dp", "relation": "add-remove"}

    def doc(eps: float, accountant: str = "opacus-prv"):
        return build.results([build.run("dpsgd", 1.0, build.privacy(eps, 1e-5, **{**dp, "accountant": accountant}),
                                        0.9, {})])

    base = _write(tmp_path / "base", doc(0.99))
    rc, out, _ = _compare(capsys, str(base), str(_write(tmp_path / "up", doc(1.4))), "--fail-on", "epsilon")
    assert rc == 4, out
    (line,) = [x for x in out.splitlines() if x.startswith("regression:")]
    assert "ε (accountant)" in line and "ε = 0.99 (δ = 1e-05, opacus-prv, add/remove) → ε = 1.4" in line
    assert "exact" in line
    # a changed accountant is always reported, even where ε did not grow
    rc, out, _ = _compare(capsys, str(base), str(_write(tmp_path / "acc", doc(0.99, "rdp"))), "--fail-on", "epsilon")
    assert rc == 0 and "1 significant change(s), 0 of them regression(s)" in out and "rdp" in out


def test_ignore_seed_matches_across_seeds(build, tmp_path, capsys):
    run = build.run("baseline", None, build.privacy(note="baseline"), 0.98, {})
    base = _write(tmp_path / "base", build.results([run]))
    other = _write(tmp_path / "other", build.results([{**run, "seed": 1}]))
    rc, _, err = _compare(capsys, str(base), str(other))
    assert rc == 2 and "no cell in common" in err
    rc, out, _ = _compare(capsys, str(base), str(other), "--ignore-seed", "--fail-on", RULES)
    assert rc == 0 and "No significant change" in out and "1 matched cell(s)" in out


# ---- bad input: one line, exit 2, nothing written --------------------------------------------------------------


@pytest.mark.parametrize("args, needle", [
    (["{base}", "{missing}"], "not found"),
    (["{base}", "{base}", "--fail-on", "speed"], "--fail-on rule 'speed' is not one of"),
    (["{base}", "{base}", "--fail-on", "throughput:2x"], "the ratio must be in (0, 1]"),
    (["{base}", "{base}", "--fail-on", "accuracy:-1"], "accuracy takes a number followed by pt"),
    (["{base}", "{other}"], "has no cell in common"),
    (["{base}", "{nan}"], "NaN or ±inf where a finite number is required"),
    (["{base}"], "the following arguments are required"),
])  # fmt: skip
def test_bad_input_is_one_line(build, tmp_path, capsys, args, needle):
    run = build.run("baseline", None, build.privacy(note="baseline"), 0.98, {})
    base = _write(tmp_path / "base", build.results([run]))
    other = _write(tmp_path / "other", build.results([{**run, "dataset": "digits"}]))
    nan = _write(tmp_path / "nan", build.results([run]))
    (nan / "results.json").write_text((nan / "results.json").read_text().replace('"test_accuracy": 0.98',
                                                                                 '"test_accuracy": NaN'))
    paths = {"base": base, "missing": tmp_path / "missing", "other": other, "nan": nan}
    rc, out, err = _compare(capsys, *[a.format(**paths) for a in args])
    assert rc == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert err.startswith("privbench: error:") and needle in err, err
    assert not list(tmp_path.rglob("report-compare.*"))


# ---- real reruns (about two minutes: `pytest -m long`) ---------------------------------------------------------


@pytest.mark.long
def test_real_rerun_is_no_change_and_halved_epochs_a_regression(smoke_run, tmp_path, capsys):
    """Two real runs of the smoke profile's baseline and DP-SGD, retrained in a fresh model cache: at the smoke run's
    seed and settings, no significant change (exit 0); with DP-SGD's recipe at half its epochs (15 → 7), a
    significant accuracy regression (exit 4) and the changed setting shown."""
    half = tmp_path / "half.yaml"
    half.write_text("training:\n  dpsgd: {epochs: 7}\n", encoding="utf-8")
    common = ["--profile", "smoke", "--mechanisms", "baseline,dpsgd", "--cache-dir", str(tmp_path / "cache")]
    assert main(["run", *common, "--output", str(tmp_path / "same")]) == 0
    assert main(["run", *common, "--config", str(half), "--output", str(tmp_path / "half")]) == 0
    capsys.readouterr()
    rc, out, _ = _compare(capsys, str(smoke_run[0]), str(tmp_path / "same"), "--fail-on", RULES)
    assert rc == 0 and "No significant change" in out, out
    rc, out, _ = _compare(capsys, str(smoke_run[0]), str(tmp_path / "half"), "--fail-on", RULES)
    assert rc == 4, out
    assert any(x.startswith("regression:") and "dpsgd" in x and "test accuracy" in x for x in out.splitlines())
    assert "settings changed: epochs 15 → 7" in " ".join(out.split())
