"""The main job end to end: `--profile smoke` (digits) and a small real-MNIST run, as a user runs them."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from bench.results import SCHEMA_VERSION

pytestmark = pytest.mark.slow  # whole CLI jobs

MECHANISMS = {"baseline", "dpsgd", "dpmix", "local-gaussian", "weight-noise"}


def _bench(*args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", "bench", *args], capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def _numbers(doc: dict) -> list:
    """Every number of a run that must be reproducible (timings excluded)."""
    return [(r["mechanism"], r["target_epsilon"], r["seed"], r["privacy"], r["utility"], r["params"],
             r["attacks"], r["release"], r["history"]) for r in doc["results"]]


def _check_privacy_claims(doc: dict) -> None:
    for r in doc["results"]:
        p = r["privacy"]
        if p["guarantee"] == "none":  # no guarantee, or privacy off (ε = ∞: the baseline, an ε = ∞ point)
            assert p["epsilon"] is None and p["accountant"] == "none"
            assert p["off"] == (r["mechanism"] == "baseline" or r["off_point"])
        else:  # an ε always comes with δ, the accountant and the neighbouring relation, and meets the target
            assert p["delta"] == doc["config"]["delta"] and p["accountant"] and p["relation"]
            assert p["epsilon"] <= r["target_epsilon"] * (1 + 1e-6), r


def test_smoke_run_writes_every_cell_and_report(smoke_run):
    run, _, proc = smoke_run
    doc = json.loads((run / "results.json").read_text())
    assert doc["schema_version"] == SCHEMA_VERSION and doc["status"] == "complete"
    assert {r["mechanism"] for r in doc["results"]} == MECHANISMS
    assert all(r["status"] == "ok" for r in doc["results"]), [r["error"] for r in doc["results"]]
    assert len(doc["results"]) == 1 + 4 * (len(doc["config"]["epsilons"]) + 1)  # each mechanism's ε = ∞ point too
    off = [r for r in doc["results"] if r["off_point"]]
    assert sorted(r["mechanism"] for r in off) == sorted(MECHANISMS - {"baseline"})
    assert all(r["target_epsilon"] is None and r["privacy"]["off"] for r in off)
    assert doc["ceilings"]["digits"]["mechanism"] in MECHANISMS
    _check_privacy_claims(doc)
    for r in doc["results"]:
        loss = r["attacks"]["loss"]
        assert loss["n_members"] == loss["n_non_members"] == 500  # balanced, the profile's sizes
        assert loss["audit"]["design"]["kind"] == "heuristic" and r["attack_errors"] == {}
        assert (r["release"] is not None) == (r["mechanism"] in ("dpmix", "local-gaussian"))
    # the non-private MLP fits its 500 digits perfectly but not the test set, and LOSS sees members (AUC above ½)
    baseline = next(r for r in doc["results"] if r["mechanism"] == "baseline")
    assert baseline["utility"]["train_accuracy"] == 1.0 > baseline["utility"]["test_accuracy"]
    assert baseline["attacks"]["loss"]["metrics"]["auc"] > 0.5
    for name in ("report.md", "report.html", "summary.csv", "accuracy_vs_epsilon.png"):
        assert (run / name).stat().st_size > 0
    html = (run / "report.html").read_text()
    assert "no guarantee" in html and "opacus-prv" in html
    assert "dpsgd" in proc.stdout and "δ" in proc.stdout  # the final table


@pytest.mark.long  # tests/conftest.py: left out of the default run, CI runs it with `pytest -m long`
def test_rerun_reuses_cached_models_with_identical_numbers(smoke_run, tmp_path):
    run, cache, _ = smoke_run
    _bench("run", "--profile", "smoke", "--output", str(tmp_path / "again"), "--cache-dir", str(cache))
    first = json.loads((run / "results.json").read_text())
    again = json.loads((tmp_path / "again" / "results.json").read_text())
    assert all(r["timings"]["cached"] for r in again["results"])
    assert _numbers(again) == _numbers(first)


def test_report_redraws_from_results_json_without_torch(smoke_run, tmp_path):
    run, _, _ = smoke_run
    copy = tmp_path / "copy"
    copy.mkdir()
    (copy / "results.json").write_text((run / "results.json").read_text())
    code = ("import sys; from bench.cli import main; rc = main(['report', sys.argv[1]]); "
            "assert 'torch' not in sys.modules, 'report imported torch'; sys.exit(rc)")
    proc = subprocess.run([sys.executable, "-c", code, str(copy)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (copy / "report.html").stat().st_size > 0 and (copy / "report.md").stat().st_size > 0


MNIST_CONFIG = """\
dataset: mnist
profile: default
epsilons: [1, 8]
reference_epsilons: false
n_members: 2000
n_non_members: 2000
n_population: 0
n_test: 1000
max_attack_examples: 1000
# no attacker population: only the attacks that need none (the others are refused with one line)
attacks: [loss, confidence, entropy, miface, dpmix-mia-corr, dpmix-mia-lr, dpmix-reconstruct, local-linkage]
training:
  baseline: {epochs: 3}
  dpsgd: {epochs: 3}
  dpmix: {epochs: 2, params: {num_samples: 2000, mixture_degree: 16}}
  local-gaussian: {epochs: 2}
  weight-noise: {epochs: 2, params: {ae_epochs: 2}}
"""


@pytest.mark.long  # two real-MNIST jobs; CI runs it in its second pytest command (pytest -m long)
def test_real_mnist_subset_is_deterministic(mnist_root, tmp_path):
    """Real MNIST from the data root; two uncached runs with one seed give identical numbers."""
    cfg = tmp_path / "mnist.yaml"
    cfg.write_text(MNIST_CONFIG)
    docs = []
    for name in ("a", "b"):
        _bench("run", "--config", str(cfg), "--data-root", str(mnist_root), "--no-cache", "--device", "cpu",
               "--output", str(tmp_path / name))
        docs.append(json.loads((tmp_path / name / "results.json").read_text()))
    assert _numbers(docs[0]) == _numbers(docs[1])
    doc = docs[0]
    _check_privacy_claims(doc)
    acc = {(r["mechanism"], r["target_epsilon"]): r["utility"]["test_accuracy"] for r in doc["results"]}
    # 2,000 real MNIST digits and 3 epochs of the Opacus example CNN reach well above 80 % (chance: 10 %).
    assert acc[("baseline", None)] > 0.8
    # Local noise at ε = 1 destroys the images (σ ≈ 9 per pixel on unit-norm images): far below the baseline.
    assert acc[("local-gaussian", 1.0)] < acc[("baseline", None)] - 0.3
    # DP-SGD learns something at ε = 8 even on 2,000 examples.
    assert acc[("dpsgd", 8.0)] > 0.3
