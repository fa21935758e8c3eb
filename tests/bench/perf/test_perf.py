"""Tests for bench.perf and ``privbench perf``: the perf.json schema, the ratio gate, one-line errors."""

from __future__ import annotations

import json

import pytest

from bench.cli import main
from bench.perf import suite as perf

SMALL = dict(dpmix_records=2_000, dpmix_degree=16, dpmix_samples=500, shadow_models=3, shadow_examples=64,
             shadow_batch=32)


@pytest.fixture(scope="module")
def doc(tmp_path_factory):
    path = tmp_path_factory.mktemp("perf") / "sub" / "perf.json"
    out = perf.run_perf(perf.PerfConfig(model="mlp", batch_size=32, quick=True, repeats=2, json_path=str(path),
                                        **SMALL))
    assert json.loads(path.read_text()) == json.loads(json.dumps(out))
    return out


def test_records_have_the_schema(doc):
    names = [r["name"] for r in doc["records"]]
    assert names[:3] == ["nonprivate", "dpsgd-bk", "dpsgd-vmap"]
    assert {f"dpsgd-opacus-{m}" for m in perf.OPACUS_MODES} <= set(names)
    assert {"dpmix-synthesis", "shadow-sequential", "shadow-ensemble"} <= set(names)
    for r in doc["records"]:
        assert set(r) >= {"name", "device", "model", "batch_size", "samples_per_s", "spread", "peak_memory_mb"}
        assert r["device"] == "cpu"
        if r["error"] is None:
            lo, hi = r["spread"]
            assert 0 < lo <= r["samples_per_s"] <= hi
            assert r["peak_memory_mb"] > 0
    by = {r["name"]: r for r in doc["records"]}
    assert by["nonprivate"]["ratio_to_nonprivate"] == pytest.approx(1.0)
    assert by["dpsgd-bk"]["model"] == "mlp" and by["dpsgd-bk"]["batch_size"] == 32
    assert by["dpmix-synthesis"]["extra"]["mixture_degree"] == 16


def test_ratios(doc):
    ratios = doc["ratios"]
    assert {"dpsgd_vs_nonprivate", "ensemble_speedup"} <= set(ratios)
    fastest = ratios["fastest_dpsgd"]
    by = {r["name"]: r for r in doc["records"]}
    assert ratios["dpsgd_vs_nonprivate"] == by[fastest]["ratio_to_nonprivate"]
    assert ratios["dpsgd_vs_nonprivate"] == max(r["ratio_to_nonprivate"] or 0 for r in doc["records"]
                                                 if r["name"].startswith("dpsgd-"))
    assert ratios["ensemble_speedup"] == pytest.approx(
        by["shadow-ensemble"]["samples_per_s"] / by["shadow-sequential"]["samples_per_s"])
    assert doc["floors"] == perf.FLOORS["cpu"]


def test_check_compares_with_floors(doc):
    assert perf.check({"floors": {"dpsgd_vs_nonprivate": 0.0}, "ratios": doc["ratios"]}) == []
    bad = perf.check({"floors": {"dpsgd_vs_nonprivate": 1e9, "missing": 1.0}, "ratios": doc["ratios"]})
    assert len(bad) == 2 and "dpsgd_vs_nonprivate" in bad[0] and "below its floor" in bad[0]


def test_cli_quick_builds_its_config_prints_and_gates(doc, tmp_path, monkeypatch, capsys):
    """``privbench perf``'s own work: its flags become the PerfConfig, the measured document is printed and its path
    named, and ``--check`` fails on a floor it misses (the measurement itself: the ``doc`` fixture's run_perf)."""
    seen = []

    def measured(cfg, log=None):  # the module's real document, as run_perf returned it
        seen.append(cfg)
        log("measuring")
        return doc

    monkeypatch.setattr(perf, "run_perf", measured)
    out = tmp_path / "perf.json"
    args = ["perf", "--quick", "--model", "mlp", "--batch-size", "16", "--repeats", "1", "--json", str(out)]
    assert main(args) == 0
    (cfg,) = seen
    assert (cfg.model, cfg.batch_size, cfg.quick, cfg.repeats, cfg.json_path) == ("mlp", 16, True, 1, str(out))
    printed = capsys.readouterr().out
    assert "dpsgd_vs_nonprivate" in printed and "dpsgd-opacus-hooks" in printed and "perf: measuring" in printed
    monkeypatch.setitem(doc["floors"], "dpsgd_vs_nonprivate", 1e9)  # the document's floors are what --check reads
    assert main([*args, "--check"]) == 1
    assert "perf check failed" in capsys.readouterr().out


@pytest.mark.parametrize("args,needle", [
    (["--model", "nope"], "model 'nope' is not known"),
    (["--batch-size", "0"], "batch size 0"),
    (["--batch-size", "x"], "invalid int value"),
    (["--device", "tpu"], "device 'tpu'"),
    (["--repeats", "0"], "repeats 0"),
])
def test_bad_input_is_one_line(tmp_path, capsys, args, needle):
    out = tmp_path / "perf.json"
    assert main(["perf", "--json", str(out), *args]) == 2
    err = capsys.readouterr().err
    assert needle in err and err.count("\n") == 1 and err.startswith("privbench: error:")
    assert not out.exists()


# ---- a plug-in mechanism's throughput (issue 55, item 4) -------------------------------------------------------

PLUGIN = '''
from mechanisms import MECHANISMS
from mechanisms.baseline import Baseline


@MECHANISMS.register()
class PerfPlugin(Baseline):
    """Trains like the baseline, with no eps = inf point of its own: its reference is the baseline training the
    same model."""

    name = "perf-plugin"
    off_point = ""
    recipes = {"smoke": {"model": "mlp", "epochs": 1, "batch_size": 50, "lr": 0.05, "optimizer": "sgd"}}
'''


def test_a_plugin_mechanism_against_its_reference_and_a_baseline(tmp_path, monkeypatch, capsys):
    """``perf --mechanism`` times a plug-in against the baseline training the same model in the same run, writes
    the ratio into perf.json, and ``--baseline`` exits 4 naming each ratio below the factor × the baseline's (a
    baseline claiming 1,000 × the reference: no timing can reach it)."""
    (tmp_path / "perf_plugin_mod.py").write_text(PLUGIN, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    baseline = tmp_path / "baseline.json"
    baseline.write_text(json.dumps({"mechanisms": {"perf-plugin": {"ratio": 1000.0}}, "ratios": {}}))
    rc = main(["perf", "--mechanism", "perf-plugin", "--plugins", "perf_plugin_mod", "--repeats", "1",
               "--json", str(tmp_path / "perf.json"), "--baseline", str(baseline)])
    found = json.loads((tmp_path / "perf.json").read_text())["mechanisms"]["perf-plugin"]
    assert found["reference"] == "baseline, same model" and len(found["ratios"]) == 1
    assert found["samples_per_s"] > 0 and found["reference_samples_per_s"] > 0
    assert rc == 4
    (line,) = [x for x in capsys.readouterr().out.splitlines() if x.startswith("perf regression:")]
    assert "perf-plugin (× its reference): 1000.000 → " in line and "below 0.9 × the baseline's" in line


def test_bad_baseline_or_mechanism_is_one_line(tmp_path, capsys):
    (tmp_path / "bad.json").write_text("{not json", encoding="utf-8")
    for args, needle in ((["--baseline", str(tmp_path / "bad.json")], "is not a readable perf.json"),
                         (["--mechanism", "nope"], "mechanism 'nope' is not known"),
                         (["--baseline-factor", "1.5", "--mechanism", "nope"], "--baseline-factor 1.5")):
        assert main(["perf", *args, "--json", str(tmp_path / "p.json")]) == 2
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and needle in err, err
