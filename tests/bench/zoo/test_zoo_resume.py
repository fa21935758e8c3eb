"""What keys a judged zoo run, so that a rerun reuses only runs of the same code version and configuration
(``bench.zoo.resume``), and what the worker does with a folder of another key (``bench.zoo.worker._prepare``). No
training: the keys and records alone (the real SIGKILL and rerun: ``test_zoo_run.py``)."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pytest

import bench.zoo.runner as runner
from bench.execution.fingerprint import _closure, _top_origin_on
from bench.zoo.resume import code_version, kept
from bench.zoo.runner import ZooOptions, plan
from bench.zoo.worker import KEY_FILE, _prepare, keep


@pytest.fixture
def options(tmp_path: Path) -> ZooOptions:
    return ZooOptions(profile="ci", bugs=("dpsgd-half-noise",), auditors=("privbench-whitebox", "privbench"),
                      seeds=2, output=tmp_path / "z")


def _keys(options: ZooOptions) -> list[str]:
    return [s.key for s in plan(options)]


def test_the_key_follows_code_version_and_configuration_not_how_the_zoo_runs(options, monkeypatch):
    base = _keys(options)
    assert len(base) == len(set(base)) == 4  # dpsgd:correct and the bug, two seeds each: every run its own key
    for same in (dict(jobs=2), dict(executor="ray"), dict(seeds=3), dict(ray_address="auto")):
        assert _keys(dataclasses.replace(options, **same))[:2] == base[:2], same  # the same runs: reused
    for other in (dict(profile="default"), dict(epsilon=3.0), dict(auditors=("privbench",))):
        assert not set(_keys(dataclasses.replace(options, **other))) & set(base), other
    monkeypatch.setattr(runner, "code_version", lambda plugins=(): "another code version")
    assert not set(_keys(options)) & set(base)


def test_code_version_changes_with_code_not_with_docstrings(tmp_path, monkeypatch):
    module = tmp_path / "zoo_plugin_version_49.py"
    monkeypatch.syspath_prepend(str(tmp_path))

    def version(text: str) -> str:
        module.write_text(text, encoding="utf-8")
        for cached in (code_version, _closure, _top_origin_on):
            cached.cache_clear()
        return code_version(("zoo_plugin_version_49",))

    first = version('"""A bug."""\nSCALE = 0.5\n')
    assert version('"""A bug, said otherwise."""\nSCALE = 0.5\n') == first
    assert version('"""A bug."""\nSCALE = 0.25\n') != first


def _spec(options: ZooOptions):
    return plan(options)[0]


def test_a_record_is_reused_only_under_its_own_key(options):
    spec = _spec(options)
    spec.folder.mkdir(parents=True)
    rows = [{"auditor": a, "case": spec.case, "true_epsilon": math.inf, "caught": True} for a in spec.auditors]
    keep(spec, {"key": spec.key, "rows": rows})
    again = kept(spec)
    assert again is not None and again["rows"][0]["true_epsilon"] == math.inf  # "unbounded" in JSON, ∞ again
    keep(spec, {"key": "another", "rows": rows})
    assert kept(spec) is None
    keep(spec, {"key": spec.key, "rows": rows[:1]})  # fewer rows than auditors: not a whole run
    assert kept(spec) is None
    spec.record_path.write_text('{"key": "' + spec.key + '", "rows": [', encoding="utf-8")  # torn: run again
    assert kept(spec) is None


def test_a_folder_of_another_key_is_emptied_and_one_of_this_key_resumes(options):
    spec = _spec(options)
    (spec.folder / "run").mkdir(parents=True)
    (spec.folder / "run" / "results.json").write_text("{}", encoding="utf-8")
    (spec.folder / KEY_FILE).write_text("an older key\n", encoding="utf-8")
    _prepare(spec)
    assert not (spec.folder / "run").exists() and (spec.folder / KEY_FILE).read_text().strip() == spec.key
    (spec.folder / "run").mkdir()
    (spec.folder / "run" / "results.json").write_text("{}", encoding="utf-8")
    (spec.folder / "scores").mkdir()
    (spec.folder / "scores" / "canary-0.npz").write_bytes(b"")
    _prepare(spec)  # an interrupted run of this key: its results stay (the bench run resumes), its scores go
    assert (spec.folder / "run" / "results.json").exists() and not list((spec.folder / "scores").iterdir())
    assert json.loads((spec.folder / "run" / "results.json").read_text()) == {}


def test_a_run_that_ended_but_was_not_judged_is_judged_not_run_again(options, monkeypatch):
    """Its worker was killed while judging: the bench run's record (``RUN_FILE``) and results are there, so the
    rerun judges them; no process is started."""
    import bench.zoo.worker as worker

    spec = _spec(options)
    (spec.folder / "run").mkdir(parents=True)
    (spec.folder / "run" / "results.json").write_text('{"status": "complete"}', encoding="utf-8")
    (spec.folder / KEY_FILE).write_text(spec.key + "\n", encoding="utf-8")
    (spec.folder / worker.RUN_FILE).write_text('{"exit": 3, "wall_s": 9.0, "run_cpu_s": 8.0, "error": null}')
    (spec.folder / "scores").mkdir()
    (spec.folder / "scores" / "canary-0.npz").write_bytes(b"kept")

    def no_process(*args, **kwargs):
        raise AssertionError("the finished run was started again")

    monkeypatch.setattr(worker.subprocess, "Popen", no_process)
    assert worker.run_case(spec) == {"exit": 3, "wall_s": 9.0, "run_cpu_s": 8.0, "error": None}
    assert (spec.folder / "scores" / "canary-0.npz").read_bytes() == b"kept"  # its scores are judged, not deleted


def test_a_run_whose_worker_dies_is_one_failed_row_per_auditor_and_is_not_kept(options, monkeypatch):
    """The zoo's runs go through the local executor: a worker that dies (here: at once, exit status 9) fails its run,
    which becomes an error row for every auditor (never a gap) and is not kept, so a rerun runs it again; the run
    after it, with no worker left, fails the same way rather than run in the driver."""
    import os

    from bench.execution.calljob import CallJob

    monkeypatch.setattr(runner, "CallJob", lambda function, args, cpus: CallJob(os._exit, (9,), cpus))
    options = dataclasses.replace(options, seeds=1)
    options.output.mkdir(parents=True)
    doc = runner.run_zoo(options)
    specs = plan(options)
    assert [(r["case"], r["auditor"]) for r in doc["rows"]] == [(s.case, a) for s in specs for a in s.auditors]
    errors = [r["error"] for r in doc["rows"]]
    assert errors == ["worker 0 died (exit code 9)"] * 2 + ["no worker left: every worker process died"] * 2
    assert not any(s.record_path.exists() or kept(s) for s in specs)
