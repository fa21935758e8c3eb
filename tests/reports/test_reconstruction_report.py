"""The Reconstruction section: a score table and one image grid per (dataset, attack), from a typed ``Results``."""

from __future__ import annotations

import re

import numpy as np
import pytest

from bench.runner.outfolder import is_report_file
from reports import write_reports
from reports.sections.reconstruction.table import RECONSTRUCTION_HEADERS, reconstruction_rows

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _inversion(attack: str, metrics: dict, classes: int = 10) -> dict:
    rng = np.random.default_rng(0)
    return {"attack": attack, "shape": [8, 8], "images": rng.integers(0, 256, size=(classes, 64)).tolist(),
            "labels": list(range(classes)), "metrics": metrics}


@pytest.fixture(scope="module")
def results(build):
    none = build.privacy()
    local = build.privacy(8.0, 1e-5, "analytic-gaussian", "local-dp", relation="replace-one")
    miface = {"attack_accuracy": 0.7, "attack_accuracy_lower": 0.35, "attack_accuracy_upper": 0.93, "chance": 0.1,
              "ssim_class_mean": 0.21, "mse_class_mean": 0.0812, "nearest_member_ssim": 0.3,
              "closer_to_member": 0.6, "member_mse_ratio": 0.97}
    runs = [
        build.run("baseline", None, none, 0.9, {}, dataset="digits", model="mlp",
                  inversion={"miface": _inversion("miface", miface)}),
        build.run("local-gaussian", 8.0, local, 0.9, {}, dataset="digits", model="mlp", inversion={
            "miface": _inversion("miface", {**miface, "attack_accuracy": 0.1}),
            "local-linkage": _inversion("local-linkage", {"linkage_accuracy": 0.25, "lower": 0.2, "upper": 0.3,
                                                          "chance": 0.0167}),
            "local-reconstruct": _inversion("local-reconstruct", {"ssim_to_source": 0.62,
                                                                  "prior_ssim_to_source": 0.5}),
        }),
        build.run("dpsgd", 1.0, None, None, {}, dataset="digits", status="failed", error="boom",
                  inversion={"miface": _inversion("miface", miface)}),  # a failed cell shows no reconstruction
    ]  # fmt: skip
    return build.results(runs, run_id="digits-smoke-test")


def test_reconstruction_rows_show_every_score(results):
    rows = reconstruction_rows(results)
    assert len(rows) == 4 and all(len(r) == len(RECONSTRUCTION_HEADERS) for r in rows)
    base = rows[0]
    assert base[3] == "miface" and base[4] == "70.0% [35.0, 93.0] (10%)" and base[5] == "0.210"
    assert base[8] == "0.60 (MSE ratio 0.97)"
    linkage = next(r for r in rows if r[3] == "local-linkage")
    assert linkage[9] == "25.0% [20.0, 30.0] (1.7%)" and linkage[4] == "—"
    recon = next(r for r in rows if r[3] == "local-reconstruct")
    assert recon[7] == "0.620 (label alone 0.500)"
    assert linkage[2] == "ε = 8 (δ = 1e-05, analytic-gaussian, replace-one)"


def test_grids_and_tables_in_every_report(results, tmp_path):
    paths = write_reports(results, tmp_path)
    grids = {k for k in paths if k.startswith("inversion_")}
    assert grids == {"inversion_digits_miface", "inversion_digits_local-linkage", "inversion_digits_local-reconstruct"}
    for name in grids:
        assert paths[name].read_bytes()[:8] == PNG_MAGIC
    assert all(is_report_file(p.name) for p in paths.values())  # --overwrite deletes every one
    md = paths["markdown"].read_text(encoding="utf-8")
    assert "![Reconstructions by the miface attack on digits: one row per mechanism" in md  # the section's alt text
    section = md.split("## Reconstruction", 1)[1]
    assert "| digits | baseline | no guarantee | miface | 70.0% [35.0, 93.0] (10%)" in section
    assert "(inversion_digits_miface.png)" in section and md.count("inversion_digits_miface.png") == 1
    html = paths["html"].read_text(encoding="utf-8")
    assert "<h2>Reconstruction</h2>" in html and "25.0% [20.0, 30.0] (1.7%)" in html
    assert len(re.findall(r'<img src="data:image/png;base64,[^"]+" alt="Reconstructions by', html)) == 3
