"""Issue 20: training curves (per-epoch records of real training, their figure and CSV) and what the convolutions see
(feature maps read by forward hooks on the model's own layers, filters compared after Hungarian matching)."""

from __future__ import annotations

import csv
import io
import json

import numpy as np
import pytest
import torch
from torch import nn

from bench.core.data import ArrayDataset, load_dataset
from bench.core.epochs import PROBE_MAX
from bench.core.features import conv_feature_maps
from bench.core.models import build_model
from bench.core.training import evaluate
from bench.execution.executor import TrainJob, run_job
from bench.execution.jobs import Recipe
from bench.results import Results, RunResult, Timings, read
from bench.runner.cells import epoch_records, feature_maps_record, privacy_record
from mechanisms import MECHANISMS
from mechanisms.local.mechanism import L2Normalize
from reports import write_reports
from reports.common import target_of
from reports.sections.curves.table import CURVE_COLUMNS, curve_rows, curves_csv
from reports.sections.features.feature_maps import compare, matched_cosine_distance

pytestmark = pytest.mark.usefixtures("one_thread")
EPOCHS = 3


def _recipe(mechanism: str, target: float | None) -> Recipe:
    cls = MECHANISMS.get(mechanism)
    smoke = dict(cls.recipes["smoke"])
    params = smoke.pop("params", None)
    spec = cls.spec(**{**smoke, "epochs": EPOCHS}, params=params)
    return Recipe(mechanism, spec, target, 1e-5, "digits")


def _trained(recipe: Recipe, members: ArrayDataset, probe: ArrayDataset):
    job = TrainJob(recipe, (members,), (0,), "cpu", probe=probe)
    (trained,) = run_job(job)
    return trained


@pytest.fixture(scope="module")
def curves_doc(digits_split):
    """Baseline, DP-SGD (ε = 4) and local noise (ε = 16) trained for 3 epochs on 300 real digits, each evaluated on
    the 397 test digits after every epoch, as one results document."""
    split = digits_split
    runs, models = [], {}
    for mechanism, target in (("baseline", None), ("dpsgd", 4.0), ("local-gaussian", 16.0)):
        recipe = _recipe(mechanism, target)
        trained = _trained(recipe, split.members, split.test)
        models[mechanism] = trained
        runs.append(RunResult(dataset="digits", mechanism=mechanism, seed=0, target_epsilon=target,
                              model=recipe.spec.model, spec=recipe.spec.to_dict(), params=trained.params,
                              privacy=privacy_record(trained.privacy, False), history=trained.history,
                              epochs=epoch_records(trained, recipe), timings=Timings(train_s=trained.train_seconds)))
    doc = Results(run_id="curves", created="2026-01-01T00:00:00+00:00", config={}, versions={}, git_hash=None,
                  git_dirty=None, platform="test", device="cpu", results=runs)
    return doc, models, split


def test_epoch_records_are_the_training_run(curves_doc):
    """Every model has one record per epoch; the records' training loss is the history the loop returned, and the
    last epoch's test accuracy is the final released model's accuracy on the test images (local noise: the
    normalisation included, not the inner network alone)."""
    doc, models, split = curves_doc
    for r in doc.results:
        assert [e.epoch for e in r.epochs] == list(range(1, EPOCHS + 1))
        assert [e.train_loss for e in r.epochs] == r.history
        final = evaluate(models[r.mechanism].model, split.test.x[:PROBE_MAX], split.test.y[:PROBE_MAX],
                         device=torch.device("cpu"))
        assert r.epochs[-1].test_accuracy == pytest.approx(final["accuracy"], abs=1e-9)
        assert r.epochs[-1].test_loss == pytest.approx(final["loss"], rel=1e-5)
    base = doc.results[0]
    assert all(0 <= e.train_accuracy <= 1 for e in base.epochs)
    assert base.epochs[-1].test_accuracy > 0.5  # 3 epochs of the smoke recipe on real digits: far above chance


def test_dpsgd_epsilon_so_far_grows_to_the_accounted_epsilon(curves_doc):
    """DP-SGD's ε after each epoch increases and ends at the ε its accountant certified for the whole run; other
    mechanisms have none."""
    doc, _, _ = curves_doc
    dpsgd = next(r for r in doc.results if r.mechanism == "dpsgd")
    eps = [e.epsilon for e in dpsgd.epochs]
    assert all(a < b for a, b in zip(eps, eps[1:], strict=False))
    assert eps[-1] == pytest.approx(dpsgd.privacy.epsilon, rel=1e-6)
    assert all(e.epsilon is None for r in doc.results if r.mechanism != "dpsgd" for e in r.epochs)


def test_curve_csv_and_figure_equal_the_recorded_history(curves_doc, tmp_path):
    """``write_reports`` writes curves_digits.png and curves_digits.csv; the CSV's rows are the results document's
    records, number for number, and its ε so far carries δ, accountant and relation."""
    doc, _, _ = curves_doc
    written = write_reports(doc, tmp_path)
    assert (tmp_path / "curves_digits.png").stat().st_size > 10_000
    assert written["curves_digits_csv"] == tmp_path / "curves_digits.csv"
    rows = list(csv.DictReader(io.StringIO((tmp_path / "curves_digits.csv").read_text())))
    assert tuple(rows[0]) == CURVE_COLUMNS
    assert (tmp_path / "curves_digits.csv").read_text() == curves_csv(doc, "digits")
    for r in doc.results:
        mine = [row for row in rows if row["mechanism"] == r.mechanism]
        assert [float(row["train_loss"]) for row in mine] == r.history
        assert [float(row["test_accuracy"]) for row in mine] == [e.test_accuracy for e in r.epochs]
        for row in mine:
            assert (row["epsilon_so_far"] != "") == (r.mechanism == "dpsgd")
            if row["epsilon_so_far"]:
                assert (row["accountant"], row["relation"]) == (r.privacy.accountant, r.privacy.relation)
                assert float(row["delta"]) == r.privacy.delta
    assert len(curve_rows(doc)) == EPOCHS * len(doc.results)
    md = (tmp_path / "report.md").read_text()
    assert "## Training curves" in md and "curves_digits.png" in md and "## What the convolutions see" in md


def _mnist_like_image() -> torch.Tensor:
    """A real digit (scikit-learn's bundled 8×8), upsampled to 28×28 for a 28×28 CNN."""
    _, test = load_dataset("digits")
    return nn.functional.interpolate(test.x[:1], size=(28, 28), mode="bilinear", align_corners=False)[0]


def test_feature_maps_come_from_the_models_own_layers():
    """The maps equal the model's own first convolution applied to the (normalised) image and its second convolution
    applied to what the model feeds it; changing the model's weights in place changes the maps (hooks on the live
    layers, not a copy); the hooks are removed and the modes restored afterwards."""
    torch.manual_seed(0)
    cnn = build_model("cnn-small", (1, 28, 28), 10)
    model = nn.Sequential(L2Normalize(scale=28.0), cnn).train()  # local noise's released model: normalisation first
    image = _mnist_like_image()
    got = conv_feature_maps(model, image)
    conv1, conv2 = cnn[0][0], cnn[0][3]
    with torch.no_grad():
        x = model[0](image.unsqueeze(0))
        a1 = conv1(x)
        a2 = conv2(cnn[0][2](cnn[0][1](a1)))
    assert got["layers"] == ["1.0.0", "1.0.3"]
    assert torch.allclose(got["maps"][0], a1[0], atol=1e-6) and torch.allclose(got["maps"][1], a2[0], atol=1e-6)
    assert torch.equal(got["filters"], conv1.weight.detach())
    with torch.no_grad():
        conv1.weight[3].zero_()
    again = conv_feature_maps(model, image)
    assert torch.allclose(again["maps"][0][3], conv1.bias[3].detach().expand_as(again["maps"][0][3]))
    assert not torch.allclose(again["maps"][0][3], got["maps"][0][3])
    assert all(not m._forward_hooks for m in model.modules()) and all(m.training for m in model.modules())
    assert conv_feature_maps(build_model("mlp", (1, 8, 8), 10), torch.zeros(1, 8, 8)) is None


def test_matching_undoes_a_permutation_of_channels(digits_split):
    """Hungarian matching: a model whose filters are the baseline's in another order is at distance 0; a negated
    filter is at distance 2, and orthonormal filters, negated, are paired with orthogonal ones (distance 1); the
    recorded maps of a model compare with themselves at 0."""
    rng = np.random.default_rng(0)
    a = rng.normal(size=(16, 64))
    perm = rng.permutation(16)
    dist, partner = matched_cosine_distance(a, a[perm])
    assert dist == pytest.approx(0.0, abs=1e-12) and np.array_equal(perm[partner], np.arange(16))
    assert matched_cosine_distance(a[:1], -a[:1])[0] == pytest.approx(2.0)
    q = np.linalg.qr(a.T)[0].T  # orthonormal rows: every other pairing is orthogonal, better than the negated one
    assert matched_cosine_distance(q, -q)[0] == pytest.approx(1.0)
    torch.manual_seed(0)
    model = build_model("cnn-small", (1, 28, 28), 10)
    test = ArrayDataset(_mnist_like_image().unsqueeze(0), torch.tensor([0]), 10, "digits-28")
    split = type("S", (), {"test": test})()
    fm = feature_maps_record(type("T", (), {"model": model})(), split, torch.device("cpu"))
    same = compare(fm, fm)
    assert same["filters"] == pytest.approx(0.0, abs=1e-6) and max(same["maps"]) == pytest.approx(0.0, abs=1e-6)
    assert json.loads(fm.model_dump_json())["map_shapes"] == [[16, 14, 14], [32, 5, 5]]


@pytest.mark.slow
def test_smoke_run_writes_curves_and_the_feature_map_section(smoke_run):
    """``bench all --profile smoke``: curves_digits.png and .csv beside the report, the CSV equal to results.json's
    histories, and the feature-map section in both reports."""
    run, _, _ = smoke_run
    doc = read(run / "results.json")
    assert (run / "curves_digits.png").is_file()
    rows = list(csv.DictReader(io.StringIO((run / "curves_digits.csv").read_text())))
    for r in doc.results:
        if r.ok:
            mine = [row for row in rows if (row["mechanism"], row["target_epsilon"]) ==
                    (r.mechanism, "" if target_of(r) is None else str(target_of(r)))]  # ε = ∞ points: "inf"
            assert [float(row["train_loss"]) for row in mine] == [x for x in r.history if x is not None]
            assert len(r.epochs) == len(r.history) or r.mechanism == "local-gaussian" and not r.history
    html = (run / "report.html").read_text()
    assert 'id="curves"' in html and 'id="features"' in html
    assert "## What the convolutions see" in (run / "report.md").read_text()
