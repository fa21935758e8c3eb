"""Your data by path (issue 21): the ``--dataset FORMAT:PATH[,KEY=VALUE]`` forms, their loaders on files the tests
write themselves (tests/datafiles.py), one-line errors for bad data, models that follow the data, and the main job
on each format."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from datafiles import tabular, write_cifar10, write_csv, write_imagefolder, write_npz

from bench.cli import main
from bench.core.datasource import check_dataset_name, parse_source
from bench.core.errors import ConfigError, DataError
from bench.core.fileformats import open_dataset

SIZES = {"n_members": 100, "n_non_members": 100, "n_population": 60, "n_test": 40}
# the sizes above and the smoke attacks' settings that fit them (a run on a few hundred records)
SMALL = """n_members: 100
n_non_members: 100
n_population: 60
n_test: 40
attack_params:
  rmia: {num_shadow: 1, shadow_size: 60}
  canary: {num_canaries: 60, gradient_canaries: 200}
"""


# --- the syntax -------------------------------------------------------------------------------------------------

def test_forms_parse_into_format_path_and_options():
    src = parse_source("csv:data/adult.csv,label=income,bounds=0:100")
    assert (src.format, src.path, src.options) == ("csv", "data/adult.csv", {"label": "income", "bounds": "0:100"})
    assert parse_source("csv:adult.csv?label=income").options == {"label": "income"}  # the URL-like form too
    assert parse_source("npz:/x/y.npz").path == "/x/y.npz"
    assert parse_source("imagefolder:my,pics").path == "my,pics"  # a comma not followed by KEY= is the path's
    assert parse_source("csv:a b.csv,label=y").short_name() == "csv-a-b"
    check_dataset_name("mnist", ["mnist"])
    check_dataset_name("npz:f.npz", ["mnist"])


@pytest.mark.parametrize("spec, needle", [
    ("csv:data.csv", "name the label column, e.g. csv:data.csv,label=COLUMN"),
    ("parquet:data.parquet", "not known; allowed: mnist, or your data as imagefolder:DIR, npz:FILE.npz or csv:"),
    ("csv:data.csv,label=y,sep=;", "unknown option 'sep'; allowed for csv: label, bounds"),
    ("csv:data.csv,label=y,bounds=5:1", "bounds = '5:1' must be LOW:HIGH with finite LOW < HIGH"),
    ("npz:", "names no path"),
    ("imagefolder:pics,label=y", "unknown option 'label'; allowed for imagefolder: none"),
])
def test_malformed_forms_are_one_line_config_errors(spec, needle):
    with pytest.raises(ConfigError) as err:
        check_dataset_name(spec, ["mnist"])
    assert needle in str(err.value) and "\n" not in str(err.value)


# --- loaders on real files ----------------------------------------------------------------------------------------

def test_imagefolder_keeps_pixels_classes_and_channels(tmp_path):
    from PIL import Image

    root = write_imagefolder(tmp_path / "pics", n=90, classes=3, shape=(6, 5, 3))
    pool, test, origin = open_dataset(f"imagefolder:{root}", None, {"n_members": 50, "n_test": 10})
    assert (len(pool), len(test)) == (80, 10) and pool.input_shape == (3, 6, 5) and pool.num_classes == 3
    assert origin.classes == ("class_a", "class_b", "class_c") and origin.source == str(root.resolve())
    # a record equals its PNG's pixels / 255, with the label of its folder
    files = sorted(root.glob("*/*.png"))
    want = {np.asarray(Image.open(f), dtype=np.float32).transpose(2, 0, 1).tobytes(): f.parent.name for f in files}
    for x, y in zip(torch.cat([pool.x, test.x]) * 255, torch.cat([pool.y, test.y]), strict=True):
        assert want[x.round().numpy().tobytes()] == origin.classes[y]
    grey = write_imagefolder(tmp_path / "grey", n=40, classes=2, shape=(7, 7, 1))
    assert open_dataset(f"imagefolder:{grey}", None, {"n_test": 4})[0].input_shape == (1, 7, 7)


def test_npz_images_and_tabular_arrays(tmp_path):
    path = write_npz(tmp_path / "d.npz", n=50, shape=(4, 6, 1))
    pool, test, origin = open_dataset(f"npz:{path}", None, {"n_test": 5})
    arrays = np.load(path)
    assert pool.input_shape == (1, 4, 6) and origin.kind == "image" and origin.classes == ("0", "1")
    assert sorted((torch.cat([pool.x, test.x]) * 255).round().flatten().tolist()) == sorted(
        arrays["x"].astype(float).flatten().tolist())
    feats = np.random.default_rng(0).uniform(-3, 5, size=(30, 4))
    np.savez(tmp_path / "t.npz", x=feats, y=np.arange(30) % 3)
    pool, test, origin = open_dataset(f"npz:{tmp_path / 't.npz'},bounds=-3:5", None, {"n_test": 6})
    assert origin.kind == "tabular" and pool.input_shape == (1, 1, 4)
    got = torch.cat([pool.x, test.x]).flatten(1).double().numpy()
    assert np.allclose(np.sort(got.ravel()), np.sort(((feats + 3) / 8).ravel()), atol=1e-6)


def test_csv_features_scaled_by_public_bounds_not_by_the_data(tmp_path):
    path = write_csv(tmp_path / "adult.csv", n=200)
    table = tabular(200)
    pool, test, origin = open_dataset(f"csv:{path},label=income,bounds=0:100", None, {"n_test": 20})
    assert origin.kind == "tabular" and origin.features == ("age", "hours", "education")
    assert origin.classes == ("<=50K", ">50K") and "[0, 100]" in origin.scaling
    x = torch.cat([pool.x, test.x]).flatten(1).double().numpy()
    y = torch.cat([pool.y, test.y]).numpy()
    # every record is its row / 100 (the given bounds, not the data's min / max) with its label
    rows = {tuple(np.round(r, 6)): lab for r, lab in zip(table[["age", "hours", "education"]].to_numpy() / 100,
                                                          (table["income"] == ">50K").astype(int), strict=True)}
    for r, lab in zip(np.round(x, 6), y, strict=True):
        assert rows[tuple(r)] == lab
    # per-feature bounds from a file
    (tmp_path / "b.csv").write_text("feature,low,high\nage,17,90\nhours,0,100\neducation,1,16\n")
    pool, _, origin = open_dataset(f"csv:{path},label=income,bounds={tmp_path / 'b.csv'}", None, {"n_test": 0})
    assert float(pool.x[..., 0].min()) >= 0 and float(pool.x[..., 0].max()) <= 1 and "b.csv" in origin.scaling


def test_cifar10_in_torchvision_format(tmp_path):
    root = write_cifar10(tmp_path, per_batch=8, n_test=6)
    pool, test, origin = open_dataset("cifar10", root, {})
    assert (len(pool), len(test)) == (40, 6) and pool.input_shape == (3, 32, 32) and pool.num_classes == 10
    import pickle

    with open(root / "cifar-10-batches-py" / "data_batch_1", "rb") as f:
        first = pickle.load(f)
    # row 0 of the first batch: channel-major bytes, as torchvision reads them
    assert torch.equal((pool.x[0] * 255).round().to(torch.uint8).flatten(), torch.from_numpy(first["data"][0]))
    assert int(pool.y[0]) == first["labels"][0]
    assert origin.source == str((root / "cifar-10-batches-py").resolve())


def test_cifar10_missing_or_corrupt_files_are_named(tmp_path):
    with pytest.raises(DataError, match="data_batch_1 not found; pass --data-root"):
        open_dataset("cifar10", tmp_path, {})
    root = write_cifar10(tmp_path, per_batch=4, n_test=4)
    (root / "cifar-10-batches-py" / "data_batch_3").write_bytes(b"\x80\x04truncated")
    with pytest.raises(DataError, match="cannot be read") as err:
        open_dataset("cifar10", root, {})
    assert "\n" not in str(err.value)


# --- models follow the data ---------------------------------------------------------------------------------------

def test_tabular_data_get_the_profile_mlp_and_skip_image_attacks(tmp_path):
    from bench.config.run import build_config
    from bench.runner.planning import plan_from_config

    path = write_csv(tmp_path / "t.csv", n=300)
    cfg = build_config({**SIZES, "tabular_hidden": [16, 8], "attacks": ["loss", "miface"]},
                       {"profile": "default", "dataset": f"csv:{path},label=income,bounds=0:100",
                        "output": str(tmp_path / "out")})
    assert cfg.training["baseline"].model == "cnn-small"  # the image recipe, until the data are seen
    plan = plan_from_config(cfg)
    assert list(plan.config["attacks"]) == ["loss"]
    for name, spec in plan.config["training"].items():  # a dense linear model is kept as it is
        assert spec["model"] == "linear" or (spec["model"] == "mlp"
                                             and spec["params"]["model_kwargs"] == {"hidden": [16, 8]}), name
    assert plan.config["training"]["baseline"]["model"] == "mlp"
    info = next(iter(plan.datasets.values()))
    assert info.kind == "tabular" and info.input_shape == [1, 1, 3] and info.source == str(path.resolve())
    assert not (tmp_path / "out").exists()


def test_image_augmentation_on_tabular_data_is_refused_before_any_work(tmp_path):
    from bench.config.run import build_config
    from bench.runner.planning import plan_from_config

    path = write_csv(tmp_path / "t.csv", n=300)
    cfg = build_config({**SIZES, "attacks": ["loss"], "mechanisms": ["dpsgd"],
                        "training": {"dpsgd": {"model": "cnn-small", "params": {"augmult": 4}}}},
                       {"profile": "default", "dataset": f"csv:{path},label=income,bounds=0:100",
                        "output": str(tmp_path / "out")})
    with pytest.raises(ConfigError, match=r"training\.dpsgd\.params\.augmult = 4 augments images and csv:.* is "
                                          "tabular; leave augmult unset"):
        plan_from_config(cfg)
    assert not (tmp_path / "out").exists()


def test_image_models_read_the_input_shape(tmp_path):
    from bench.core.models import build_model

    for shape in ((3, 32, 32), (1, 20, 24), (4, 16, 16)):
        for name in ("cnn-small", "wrn-16-4", "mlp"):
            assert build_model(name, shape, 7)(torch.zeros(2, *shape)).shape == (2, 7)
    wrn = build_model("wrn-16-4", (3, 32, 32), 10)
    assert sum(p.numel() for p in wrn.parameters()) == pytest.approx(2.75e6, rel=0.01)  # WRN-16-4's size
    assert not any(isinstance(m, torch.nn.BatchNorm2d) for m in wrn.modules())


# --- bad data: one line, exit 2, no output folder -----------------------------------------------------------------

def _bad(tmp_path: Path, case: str) -> list[str]:
    """The command line of one bad-data case (the files written here)."""
    csv = write_csv(tmp_path / "t.csv", n=300)
    if case == "missing label column":
        return ["--dataset", f"csv:{csv},label=salary,bounds=0:100"]
    if case == "one class only":
        table = tabular(300)
        table["income"] = "<=50K"
        table.to_csv(tmp_path / "one.csv", index=False)
        return ["--dataset", f"csv:{tmp_path / 'one.csv'},label=income,bounds=0:100"]
    if case == "one class folder":
        write_imagefolder(tmp_path / "pics", n=30, classes=1)
        return ["--dataset", f"imagefolder:{tmp_path / 'pics'}"]
    if case == "mixed image sizes":
        root = write_imagefolder(tmp_path / "pics", n=30, classes=2, shape=(8, 8, 3))
        write_imagefolder(tmp_path / "odd", n=1, classes=1, shape=(9, 8, 3))
        (tmp_path / "odd" / "class_a" / "0000.png").rename(root / "class_b" / "odd.png")
        return ["--dataset", f"imagefolder:{root}"]
    if case == "NaN features":
        table = tabular(300)
        table["hours"] = table["hours"].astype(float)
        table.loc[[3, 7], "hours"] = np.nan
        table.to_csv(tmp_path / "nan.csv", index=False)
        return ["--dataset", f"csv:{tmp_path / 'nan.csv'},label=income,bounds=0:100"]
    if case == "too few records":
        return ["--dataset", f"csv:{csv},label=income,bounds=0:100", "--profile", "smoke"]
    if case == "values outside [0, 1] without bounds":
        return ["--dataset", f"csv:{csv},label=income"]
    if case == "missing file":
        return ["--dataset", f"npz:{tmp_path / 'none.npz'}"]
    if case == "npz without y":
        np.savez(tmp_path / "d.npz", x=np.zeros((300, 4, 4), np.uint8), labels=np.arange(300) % 2)
        return ["--dataset", f"npz:{tmp_path / 'd.npz'}"]
    raise AssertionError(case)


BAD = {
    "missing label column": "no label column 'salary'; the columns are age, hours, education, income",
    "one class only": "one class only (every label is '<=50K'); a classifier needs at least two classes",
    "one class folder": "one class only (the folder 'class_a'); a classifier needs at least two class folders",
    "mixed image sizes": "mixed image sizes:",
    "NaN features": "feature 'hours' has 2 missing (NaN) or infinite values; fill or drop them first",
    "too few records": "300 records, but the smoke profile needs 1797 (n_members 500 + n_non_members 500 + "
                       "n_population 400 + n_test 397); give more records or set smaller sizes in --config",
    "values outside [0, 1] without bounds": "feature 'age' has values outside [0, 1]; give public bounds",
    "missing file": "none.npz does not exist",
    "npz without y": "no array 'y' (arrays: x, labels); name them with npz:FILE,x=NAME,y=NAME",
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_data_is_one_line_error(case, tmp_path, capsys):
    argv = _bad(tmp_path, case)
    out = tmp_path / "out"
    sizes = tmp_path / "sizes.yaml"
    sizes.write_text(SMALL if "--profile" not in argv else "")
    code = main(["all", *(["--profile", "smoke"] if "--profile" not in argv else []), *argv, "--config", str(sizes),
                 "--output", str(out)])
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("privbench: error: "), err
    assert BAD[case] in lines[0] and "Traceback" not in err
    assert not out.exists()


# --- the main job on each format (slow: whole CLI runs) ----------------------------------------------------------



def _dataset(tmp_path: Path, fmt: str) -> tuple[list[str], str, str]:
    """(flags, the dataset's name in the results, its source path) for one format, files written here."""
    if fmt == "imagefolder":
        root = write_imagefolder(tmp_path / "pics", n=300, classes=3, shape=(12, 12, 3))
        return ["--dataset", f"imagefolder:{root}"], f"imagefolder:{root}", str(root.resolve())
    if fmt == "npz":
        path = write_npz(tmp_path / "d.npz", n=300, classes=2, shape=(10, 10, 1))
        return ["--dataset", f"npz:{path}"], f"npz:{path}", str(path.resolve())
    if fmt == "csv":
        path = write_csv(tmp_path / "adult.csv", n=400)
        spec = f"csv:{path},label=income,bounds=0:100"
        return ["--dataset", spec], spec, str(path.resolve())
    root = write_cifar10(tmp_path / "data", per_batch=60, n_test=100)
    return ["--dataset", "cifar10", "--data-root", str(root)], "cifar10", str((root / "cifar-10-batches-py").resolve())


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["csv",  # the image formats (CIFAR-10: 4 min): CI runs them with -m long
                                 *(pytest.param(f, marks=pytest.mark.long) for f in ("imagefolder", "npz", "cifar10"))])
def test_smoke_profile_on_each_format(fmt, tmp_path):
    flags, name, source = _dataset(tmp_path, fmt)
    cfg = tmp_path / "small.yaml"
    # the csv has 3 features: the orthogonal DPMix canaries need one coordinate each
    cfg.write_text(SMALL + ("  dpmix-canary: {num_canaries: 2, releases: 16}\n" if fmt == "csv" else ""))
    out = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-m", "bench", "all", "--profile", "smoke", "--epsilons", "4", *flags,
                           "--config", str(cfg), "--output", str(out), "--cache-dir", str(tmp_path / "cache")],
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads((out / "results.json").read_text())
    assert list(doc["datasets"]) == [name] and doc["datasets"][name]["source"] == source
    assert all(r["status"] == "ok" and not r["attack_errors"] for r in doc["results"]), \
        [(r["mechanism"], r["error"], r["attack_errors"]) for r in doc["results"]]
    assert {r["mechanism"] for r in doc["results"]} == {"baseline", "dpsgd", "dpmix", "local-gaussian",
                                                       "weight-noise"}
    classes = doc["datasets"][name]["num_classes"]
    baseline = next(r for r in doc["results"] if r["mechanism"] == "baseline")
    # the classes' patterns are learnt; the CSV's labels are drawn from a logistic model of its features (its Bayes
    # accuracy is well below 1), so there "learnt" is above chance by 10 points on 40 test records
    assert baseline["utility"]["test_accuracy"] > (0.6 if fmt == "csv" else 1.5 / classes)
    report = (out / "report.md").read_text()
    assert name in report and source in report
    if fmt == "csv":
        assert "[0, 100]" in report and "tabular" in report
