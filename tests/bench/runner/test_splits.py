"""Splits that cannot drift (issue 40, item 3): every model's training records are recorded as a split hash in
results.json and re-checked when a cached model or a resumed run is reused; a mismatch retrains, and says so."""

from __future__ import annotations

import io
import json
import logging
from pathlib import Path

import pytest
import torch
from rich.console import Console

from bench.config.run import build_config
from bench.core.data import concat, load_dataset, make_split
from bench.execution.cache import _meta_digest
from bench.runner.harness import Harness
from bench.runner.planning import plan_from_config


@pytest.fixture(scope="module")
def digits_pool():
    return load_dataset("digits")


def test_the_split_hash_is_the_index_set(digits_pool):
    pool, test = digits_pool
    a = make_split(pool, test, n_members=200, n_non_members=200, n_population=100, n_test=100, seed=0)
    again = make_split(pool, test, n_members=200, n_non_members=200, n_population=100, n_test=100, seed=0)
    other = make_split(pool, test, n_members=200, n_non_members=200, n_population=100, n_test=100, seed=1)
    assert a.members.split_hash() == again.members.split_hash() != other.members.split_hash()
    assert a.members.split_hash() != a.non_members.split_hash()
    reordered = a.members.subset(torch.randperm(200, generator=torch.Generator().manual_seed(3)))
    assert reordered.split_hash() == a.members.split_hash()  # which records, not their order
    swapped = concat(a.members.subset(torch.arange(199)), a.non_members.subset(torch.arange(1)))
    assert swapped.split_hash() != a.members.split_hash()  # one record replaced by another
    assert concat(a.members, a.population).origin is not None
    # a crafted record (no pool position) counts by its content
    blank = a.population.subset(torch.arange(1))
    crafted = type(blank)(torch.zeros_like(blank.x), blank.y, blank.num_classes, blank.name)
    assert concat(a.members, crafted).split_hash() != concat(a.members, blank).split_hash()


def _plan(out: Path, cache: Path):
    cfg = build_config({"privacy_off_points": False}, {
        "profile": "smoke", "mechanisms": "baseline", "attacks": "loss,rmia", "output": str(out),
        "cache_dir": str(cache)})
    return plan_from_config(cfg)


def _run(out: Path, cache: Path) -> tuple[dict, str]:
    text = io.StringIO()
    Harness(_plan(out, cache), console=Console(file=text, width=400)).run()
    (result,) = json.loads((out / "results.json").read_text())["results"]
    return result, text.getvalue()


@pytest.mark.slow
def test_a_planted_split_mismatch_retrains_from_the_cache_and_on_resume(tmp_path, caplog):
    cache = tmp_path / "cache"
    first, _ = _run(tmp_path / "a", cache)
    split = _plan(tmp_path / "x", cache).cells[0].split
    assert first["split_hash"] == split.members.split_hash()
    shadows = first["training_splits"]["rmia"]  # its reference model: recorded, and not the target's records
    assert shadows and first["split_hash"] not in shadows and len(shadows[0]) == 64

    # a cached model whose recorded split differs from the one the run derives is retrained, with one line
    entry = next(p for p in cache.rglob("meta.json") if first["cache_key"] in str(p))
    meta = json.loads(entry.read_text())
    assert meta["split_hash"] == first["split_hash"]
    meta["split_hash"] = "f" * 64
    meta["meta_sha256"] = _meta_digest(meta)
    entry.write_text(json.dumps(meta))
    with caplog.at_level(logging.WARNING, logger="privbench.cache"):
        second, _ = _run(tmp_path / "b", cache)
    lines = [r.getMessage() for r in caplog.records if "another split" in r.getMessage()]
    assert lines == [f"cached model {first['cache_key'][:12]} (baseline seed 0) was trained on another split "
                     f"(recorded split hash ffffffffffff, this run derives {first['split_hash'][:12]}); retraining it"]
    assert second["timings"]["cached"] is False and second["utility"] == first["utility"]

    # a resumed run whose recorded split differs from the one it derives retrains that cell, with one line
    doc = json.loads((tmp_path / "b" / "results.json").read_text())
    doc["status"] = "partial"
    doc["results"][0]["split_hash"] = "0" * 64
    (tmp_path / "b" / "results.json").write_text(json.dumps(doc))
    resumed, console = _run(tmp_path / "b", cache)
    assert (f"privbench: baseline seed 0: the resumed run recorded split hash 000000000000, this run derives "
            f"{first['split_hash'][:12]}; retraining it (its earlier model is not reused)") in console
    assert resumed["timings"]["cached"] is False and resumed["split_hash"] == first["split_hash"]
    again, console = _run(tmp_path / "c", cache)  # the models retrained are the cache's again
    assert again["timings"]["cached"] is True and "another split" not in console
