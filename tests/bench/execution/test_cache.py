"""Tests for bench.execution.cache: round trips of trained models, corruption handling, keys and safe loading."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
import torch

import bench.execution.cache as cache_mod
from bench.core.types import TrainedModel
from bench.execution.cache import ModelCache, cache_key
from mechanisms import MECHANISMS

CPU = torch.device("cpu")
SETTINGS = dict(model="mlp", epochs=2, batch_size=32, lr=0.1, momentum=0.9, params={"model_kwargs": {"hidden": 16}})
SPEC = MECHANISMS.get("baseline").spec(**SETTINGS)
LOCAL_SPEC = MECHANISMS.get("local-gaussian").spec(**SETTINGS)


def _key(name: str) -> str:
    return cache_key({"test": name})


@pytest.fixture(scope="module")
def baseline_fit(digits_split) -> TrainedModel:
    return MECHANISMS.get("baseline")().fit(digits_split.members, SPEC, target_epsilon=None, delta=1e-5, seed=0,
                                            device=CPU)


@pytest.fixture(scope="module")
def local_fit(digits_split) -> TrainedModel:
    return MECHANISMS.get("local-gaussian")().fit(digits_split.members, LOCAL_SPEC, target_epsilon=8.0, delta=1e-5,
                                                  seed=0, device=CPU)


def _fresh(name: str, split):
    return MECHANISMS.get(name)().build(split.members.input_shape, 10, LOCAL_SPEC if name == "local-gaussian" else SPEC)


def _logits(model, x):
    model.eval()
    with torch.no_grad():
        return model(x)


def _entry(root: Path, key: str) -> Path:
    return root / key[:2] / key


def test_baseline_round_trip(tmp_path, baseline_fit, digits_split):
    cache = ModelCache(tmp_path)
    key = _key("baseline")
    assert cache.load(key, _fresh("baseline", digits_split)) is None  # a miss before saving
    cache.save(key, baseline_fit)
    entry = _entry(tmp_path, key)
    assert sorted(p.name for p in entry.iterdir()) == ["meta.json", "model.pt"]
    assert not [p for p in entry.parent.iterdir() if p.name.startswith(".tmp-")]  # no temporary leftovers

    fresh = _fresh("baseline", digits_split)
    x = digits_split.test.x
    assert not torch.equal(_logits(fresh, x), _logits(baseline_fit.model, x))  # untrained differs
    loaded = cache.load(key, fresh)
    assert loaded is not None
    assert loaded.model is fresh
    assert torch.equal(_logits(loaded.model, x), _logits(baseline_fit.model, x))
    assert loaded.privacy == baseline_fit.privacy
    assert loaded.params == baseline_fit.params
    assert loaded.history == pytest.approx(baseline_fit.history)
    assert loaded.train_seconds == pytest.approx(baseline_fit.train_seconds)
    assert loaded.release is None


def test_local_gaussian_round_trip_restores_release_and_scale(tmp_path, local_fit, digits_split):
    cache = ModelCache(tmp_path)
    key = _key("local")
    cache.save(key, local_fit)
    fresh = _fresh("local-gaussian", digits_split)
    x = digits_split.test.x
    loaded = cache.load(key, fresh)
    assert loaded is not None
    # identical logits: the L2Normalize scale buffer (≠ 1 after fit) was restored with the weights
    assert torch.equal(_logits(loaded.model, x), _logits(local_fit.model, x))
    assert float(loaded.model[0].scale) == float(local_fit.model[0].scale) != 1.0
    assert loaded.privacy == local_fit.privacy
    assert loaded.params == local_fit.params
    rel, orig = loaded.release, local_fit.release
    assert rel is not None
    assert torch.equal(rel.x, orig.x) and torch.equal(rel.y, orig.y)
    assert rel.x.dtype == orig.x.dtype and rel.y.dtype == orig.y.dtype
    assert rel.kind == orig.kind == "local-gaussian"
    assert rel.params == orig.params


def test_save_overwrites_an_existing_entry(tmp_path, baseline_fit, local_fit, digits_split):
    cache = ModelCache(tmp_path)
    key = _key("overwrite")
    cache.save(key, local_fit)
    cache.save(key, baseline_fit)
    loaded = cache.load(key, _fresh("baseline", digits_split))
    assert loaded is not None and loaded.release is None
    assert loaded.privacy == baseline_fit.privacy


def _flip_byte(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0xFF
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("where", ["start", "middle", "end"])
def test_corrupted_model_file_is_a_miss_with_warning(tmp_path, baseline_fit, digits_split, caplog, where):
    cache = ModelCache(tmp_path)
    key = _key("corrupt-model")
    cache.save(key, baseline_fit)
    model_pt = _entry(tmp_path, key) / "model.pt"
    size = model_pt.stat().st_size
    _flip_byte(model_pt, {"start": 0, "middle": size // 2, "end": size - 1}[where])
    with caplog.at_level(logging.WARNING, logger="privbench.cache"):
        assert cache.load(key, _fresh("baseline", digits_split)) is None
    assert any(r.levelno == logging.WARNING and key[:12] in r.getMessage() for r in caplog.records)


def test_truncated_meta_is_a_miss_with_warning(tmp_path, baseline_fit, digits_split, caplog):
    cache = ModelCache(tmp_path)
    key = _key("truncated-meta")
    cache.save(key, baseline_fit)
    meta = _entry(tmp_path, key) / "meta.json"
    text = meta.read_text()
    meta.write_text(text[: len(text) // 2])
    with caplog.at_level(logging.WARNING, logger="privbench.cache"):
        assert cache.load(key, _fresh("baseline", digits_split)) is None
    assert any(r.levelno == logging.WARNING for r in caplog.records)


def test_missing_release_file_is_a_miss(tmp_path, local_fit, digits_split, caplog):
    cache = ModelCache(tmp_path)
    key = _key("missing-release")
    cache.save(key, local_fit)
    (_entry(tmp_path, key) / "release.pt").unlink()
    with caplog.at_level(logging.WARNING, logger="privbench.cache"):
        assert cache.load(key, _fresh("local-gaussian", digits_split)) is None


def test_disabled_cache_loads_nothing_and_writes_nothing(tmp_path, baseline_fit, digits_split):
    root = tmp_path / "cache"
    enabled = ModelCache(root)
    key = _key("disabled")
    enabled.save(key, baseline_fit)
    before = sorted(str(p) for p in root.rglob("*"))
    disabled = ModelCache(root, enabled=False)
    assert disabled.load(key, _fresh("baseline", digits_split)) is None  # even though the entry exists
    disabled.save(_key("disabled-2"), baseline_fit)
    assert sorted(str(p) for p in root.rglob("*")) == before
    other = tmp_path / "never"
    ModelCache(other, enabled=False).save(key, baseline_fit)
    assert not other.exists()


def test_cache_key_changes_with_every_part_and_ignores_order():
    base = {"mechanism": "dpsgd", "epsilon": 1.0, "seed": 0, "spec": {"epochs": 5, "lr": 0.1}, "data": "abc"}
    k = cache_key(base)
    assert len(k) == 64 and all(c in "0123456789abcdef" for c in k)
    assert cache_key(dict(base)) == k  # stable
    reordered = {"data": "abc", "spec": {"lr": 0.1, "epochs": 5}, "seed": 0, "epsilon": 1.0, "mechanism": "dpsgd"}
    assert cache_key(reordered) == k
    variants = [
        {**base, "mechanism": "dpmix"},
        {**base, "epsilon": 2.0},
        {**base, "seed": 1},
        {**base, "spec": {"epochs": 6, "lr": 0.1}},
        {**base, "spec": {"epochs": 5, "lr": 0.2}},
        {**base, "data": "abd"},
        {**base, "extra": None},
        {k2: v for k2, v in base.items() if k2 != "seed"},
    ]
    keys = [cache_key(v) for v in variants]
    assert k not in keys
    assert len(set(keys)) == len(keys)


@pytest.mark.parametrize("bad", ["../../etc", "A" * 64, "0" * 63, "g" * 64, "", "0" * 64 + "/x"])
def test_malformed_keys_are_rejected(tmp_path, baseline_fit, digits_split, bad):
    cache = ModelCache(tmp_path / "c")
    with pytest.raises(ValueError):
        cache.load(bad, _fresh("baseline", digits_split))
    with pytest.raises(ValueError):
        cache.save(bad, baseline_fit)
    assert not (tmp_path / "etc").exists()


_UNPICKLED: list[str] = []


def _record_unpickling(tag: str) -> str:
    _UNPICKLED.append(tag)
    return tag


class _Payload:
    """An object whose unpickling runs code (``_record_unpickling``): what weights_only must refuse."""

    def __reduce__(self):
        return (_record_unpickling, ("ran",))


def _resign(entry: Path, name: str) -> None:
    """Update meta.json's checksum of ``name`` so that only the content, not the checksum, is wrong."""
    meta_path = entry / "meta.json"
    meta = json.loads(meta_path.read_text())
    meta["files"][name] = cache_mod._sha256(entry / name)
    meta["meta_sha256"] = cache_mod._meta_digest(meta)
    meta_path.write_text(json.dumps(meta))


def test_model_file_is_loaded_with_weights_only(tmp_path, baseline_fit, digits_split, caplog, monkeypatch):
    cache = ModelCache(tmp_path)
    key = _key("weights-only")
    cache.save(key, baseline_fit)
    entry = _entry(tmp_path, key)
    # a state_dict-shaped pickle that smuggles an arbitrary object, with a matching checksum
    state = dict(baseline_fit.model.state_dict())
    state["evil"] = _Payload()
    torch.save(state, entry / "model.pt")
    _resign(entry, "model.pt")

    seen_kwargs = []
    real_load = torch.load

    def spy(*args, **kwargs):
        seen_kwargs.append(kwargs)
        return real_load(*args, **kwargs)

    monkeypatch.setattr(torch, "load", spy)
    _UNPICKLED.clear()
    with caplog.at_level(logging.WARNING, logger="privbench.cache"):
        assert cache.load(key, _fresh("baseline", digits_split)) is None
    assert _UNPICKLED == []  # the payload's code never ran
    assert seen_kwargs and all(kw.get("weights_only") is True for kw in seen_kwargs)
    assert any(r.levelno == logging.WARNING for r in caplog.records)
    # control: the same file loads (and runs the payload) without weights_only, so the refusal above is real
    real_load(entry / "model.pt", weights_only=False)
    assert _UNPICKLED == ["ran"]


@pytest.mark.parametrize("damage", ["bad-guarantee", "missing-key"])
def test_parseable_but_invalid_meta_is_a_miss(tmp_path, baseline_fit, digits_split, caplog, damage):
    cache = ModelCache(tmp_path)
    key = _key("invalid-meta")
    cache.save(key, baseline_fit)
    meta_path = _entry(tmp_path, key) / "meta.json"
    meta = json.loads(meta_path.read_text())
    if damage == "bad-guarantee":
        meta["privacy"]["guarantee"] = "nonf"  # one flipped letter, still valid JSON
    else:
        del meta["history"]
    meta["meta_sha256"] = cache_mod._meta_digest(meta)  # re-signed: only the content is wrong
    meta_path.write_text(json.dumps(meta))
    with caplog.at_level(logging.WARNING, logger="privbench.cache"):
        assert cache.load(key, _fresh("baseline", digits_split)) is None
    assert any(r.levelno == logging.WARNING for r in caplog.records)


def test_edited_meta_value_fails_its_checksum(tmp_path, baseline_fit, digits_split, caplog):
    """A value that still parses (one digit of a timing) is caught by meta.json's own checksum."""
    cache = ModelCache(tmp_path)
    key = _key("edited-meta")
    cache.save(key, baseline_fit)
    meta_path = _entry(tmp_path, key) / "meta.json"
    meta = json.loads(meta_path.read_text())
    meta["train_seconds"] += 1.0
    meta_path.write_text(json.dumps(meta))
    with caplog.at_level(logging.WARNING, logger="privbench.cache"):
        assert cache.load(key, _fresh("baseline", digits_split)) is None
    assert any("meta.json" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("where", ["file", "under-a-file"])
def test_unusable_cache_folder_is_one_line_before_any_work(tmp_path, capsys, where):
    from bench.cli import main

    blocker = tmp_path / "not-a-folder"
    blocker.write_text("x")
    cache = blocker if where == "file" else blocker / "models"
    out = tmp_path / "out"
    code = main(["run", "--profile", "smoke", "--mechanisms", "baseline", "--attacks", "loss",
                 "--cache-dir", str(cache), "--output", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1
    assert err[0].startswith(f"privbench: error: cache folder {cache} cannot be used (not a folder)")
    assert not out.exists()


def test_leftovers_of_an_interrupted_save_are_removed_but_a_save_in_progress_is_kept(tmp_path, caplog):
    import os
    import time

    old, fresh = tmp_path / "ab" / ".tmp-old", tmp_path / "cd" / ".tmp-fresh"
    for d in (old, fresh):
        d.mkdir(parents=True)
        (d / "model.pt").write_bytes(b"half")
    then = time.time() - cache_mod.STALE_TMP_S - 5
    os.utime(old, (then, then))
    with caplog.at_level(logging.WARNING, logger="privbench.cache"):
        assert ModelCache(tmp_path).prepare() == 1
    assert not old.exists() and fresh.exists()
    assert "removed 1 unfinished cache entry" in caplog.text


def test_a_leftover_of_a_killed_save_goes_at_the_next_run_however_fresh(tmp_path, baseline_fit, monkeypatch):
    """A save killed before its rename (kill -9: no ``finally`` runs) leaves ``.tmp-<host>-<pid>-*``; the next run's
    ``prepare`` removes it at once when that process is gone, and keeps it while the process lives."""
    import os
    import subprocess
    import sys

    monkeypatch.setattr(cache_mod.os, "replace", lambda *a: (_ for _ in ()).throw(KeyboardInterrupt))
    monkeypatch.setattr(cache_mod.shutil, "rmtree", lambda *a, **k: None)  # as if killed: nothing cleans up
    with pytest.raises(KeyboardInterrupt):
        ModelCache(tmp_path).save(_key("killed"), baseline_fit)
    monkeypatch.undo()
    (ours,) = tmp_path.glob("??/.tmp-*")
    assert f"-{os.getpid()}-" in ours.name and (ours / "model.pt").is_file()
    assert ModelCache(tmp_path).prepare() == 0 and ours.exists()  # its process (this one) lives: kept
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead = ours.with_name(ours.name.replace(f"-{os.getpid()}-", f"-{int(gone.stdout)}-"))
    ours.rename(dead)
    assert ModelCache(tmp_path).prepare() == 1 and not dead.exists()  # seconds old, but its process is gone
