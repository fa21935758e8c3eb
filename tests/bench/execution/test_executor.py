"""The executors: bad input is one line and status 2; on Ray (a local instance with 2 CPUs) a smoke sweep gives the
numbers the local executor gives, a training error reaches the driver as itself, and a worker that dies is
retried to the same model."""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from pathlib import Path

import pytest
import torch

import bench.execution.executor
import bench.execution.ray_executor
from bench.cli import main
from bench.config.run import build_config
from bench.core.data import ArrayDataset
from bench.execution.executor import JobFailed, RayExecutor, TrainJob, run_job
from bench.execution.trainjob import Recipe

SWEEP = ["--profile", "smoke", "--mechanisms", "baseline,local-gaussian", "--epsilons", "2"]


def _usage_error(capsys, argv: list[str], *needles: str) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("privbench: error: ") and len(err.splitlines()) == 1 and "Traceback" not in err
    for needle in needles:
        assert needle in err


@pytest.mark.parametrize("argv,needles", [
    (["--executor", "dask"], ("'dask'", "local, ray")),
    (["--ray-address", "127.0.0.1:6379"], ("127.0.0.1:6379", "--executor ray")),
])
def test_bad_executor_settings_are_usage_errors(capsys, tmp_path, argv, needles):
    _usage_error(capsys, ["run", *SWEEP, "--output", str(tmp_path / "o"), *argv], *needles)
    assert not (tmp_path / "o").exists()


def test_unreachable_ray_address_is_a_usage_error(capsys, tmp_path):
    _import_ray()
    out = tmp_path / "o"
    _usage_error(capsys, ["run", *SWEEP, "--output", str(out), "--executor", "ray", "--ray-address", "127.0.0.1:1"],
                 "'127.0.0.1:1'", "unreachable", "ray start --head")
    _usage_error(capsys, ["run", *SWEEP, "--output", str(out), "--executor", "ray", "--ray-address", "headnode"],
                 "'headnode'", "HOST:PORT")
    assert not out.exists()


def test_ray_executor_without_ray_installed_is_a_usage_error(capsys, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError
    _usage_error(capsys, ["run", *SWEEP, "--output", str(tmp_path / "o"), "--executor", "ray"], "[ray]")


# ---- on a local Ray instance ----------------------------------------------------------------------------------


def _import_ray():
    """Ray, or a skip without the ``[ray]`` extra; CI installs it, so there a missing Ray fails."""
    if os.environ.get("CI"):
        import ray

        return ray
    return pytest.importorskip("ray")


@pytest.fixture(scope="module")
def ray_2cpu():
    """A local Ray instance with 2 CPUs for this module (workers: 1 torch thread per job)."""
    from helpers import every_cpu

    ray = _import_ray()
    with every_cpu():  # the xdist worker's pin (conftest.py) lifted: Ray's two workers on two cores
        ray.init(num_cpus=2, include_dashboard=False, logging_level="WARNING")
        yield ray
        ray.shutdown()


@pytest.fixture
def one_thread():
    """The local executor with as many torch threads as a Ray job (CPUS_PER_JOB): the same kernels, the same bits."""
    before = torch.get_num_threads()
    torch.set_num_threads(bench.execution.executor.CPUS_PER_JOB)
    yield
    torch.set_num_threads(before)


def _comparable(doc: dict) -> dict:
    """Every number of a results document except timings and what names the run (id, date, paths, executor)."""
    return {"results": [{k: v for k, v in r.items() if k != "timings"} for r in doc["results"]],
            **{k: doc[k] for k in ("status", "device", "datasets", "audit", "privacy_bugs")}}


@pytest.mark.slow
def test_smoke_sweep_on_ray_equals_local(ray_2cpu, one_thread, tmp_path, capsys):
    cfg = tmp_path / "two-references.yaml"  # two reference models per cell: a batch the executor runs in parallel
    cfg.write_text("attack_params: {rmia: {num_shadow: 2}}\n")
    docs = {}
    for executor in ("local", "ray"):
        out = tmp_path / executor
        code = main(["run", *SWEEP, "--config", str(cfg), "--executor", executor, "--output", str(out),
                     "--cache-dir", str(tmp_path / f"cache-{executor}")])  # separate caches: both train everything
        assert code == 0
        docs[executor] = json.loads((out / "results.json").read_text())
        # the run-wide bar: 2 cells × (target + 2 references + 1 canary run) = 8 models, and local-gaussian's ε = ∞
        # point: its target and 2 references (no audit runs on it) = 11
        bar = [line for line in capsys.readouterr().err.splitlines() if "models trained or cached" in line]
        assert bar and f"({executor})" in bar[-1] and "11/11" in bar[-1]
    local, ray = docs["local"], docs["ray"]
    assert not any(r["timings"]["cached"] for d in docs.values() for r in d["results"])
    assert [r["status"] for r in ray["results"]] == ["ok", "ok", "ok"] and ray["results"][0]["attacks"]["rmia"]
    assert _comparable(ray) == _comparable(local)
    assert local["executor"]["name"] == "local"
    assert ray["executor"]["name"] == "ray" and ray["executor"]["resources"]["CPU"] == 2.0
    assert ray["executor"]["max_retries"] == bench.execution.executor.MAX_RETRIES
    # the driver cached every model the workers trained: a rerun on Ray trains nothing and gives the same document
    assert main(["run", *SWEEP, "--config", str(cfg), "--executor", "ray", "--output", str(tmp_path / "again"),
                 "--cache-dir", str(tmp_path / "cache-ray")]) == 0
    again = json.loads((tmp_path / "again" / "results.json").read_text())
    assert all(r["timings"]["cached"] for r in again["results"])
    assert _comparable(again) == _comparable(ray)


def _job(digits_split, dataset: ArrayDataset | None = None, **kw) -> TrainJob:
    cfg = build_config({}, {"profile": "smoke"})
    spec = cfg.spec_for(kw.get("mechanism", "baseline"))
    recipe = Recipe(kw.get("mechanism", "baseline"), spec, kw.get("target_epsilon"), 1e-5, "digits")
    return TrainJob(recipe, (dataset or digits_split.members,), (0,), "cpu")


@pytest.mark.slow
def test_training_errors_reach_the_driver_as_themselves(ray_2cpu, digits_split):
    executor = RayExecutor()
    pending = executor.submit(_job(digits_split, mechanism="local-gaussian", target_epsilon=None))
    with pytest.raises(ValueError, match="local-gaussian needs a target epsilon"):
        executor.result(pending)
    executor.close()
    assert ray_2cpu.is_initialized()  # a Ray this process started itself is left running


class _KillsFirstWorker(ArrayDataset):
    """A dataset whose first unpickling (in the first Ray worker that gets the job) kills that worker."""

    marker: str = ""

    def __reduce__(self):
        return _revive, (self.marker, self.x, self.y, self.num_classes, self.name)


def _revive(marker: str, x, y, num_classes: int, name: str) -> ArrayDataset:
    if not os.path.exists(marker):
        Path(marker).touch()
        os._exit(1)  # the worker process dies, as on a lost node
    return ArrayDataset(x, y, num_classes, name)


def _crashing(digits_split, marker: Path) -> ArrayDataset:
    data = _KillsFirstWorker(digits_split.members.x, digits_split.members.y, 10, "digits")
    object.__setattr__(data, "marker", str(marker))
    return data


@pytest.mark.slow
@pytest.mark.parametrize("retries", [bench.execution.executor.MAX_RETRIES, 0])
def test_a_dead_worker_is_retried_to_the_same_model(ray_2cpu, one_thread, digits_split, tmp_path, monkeypatch,
                                                    retries):
    ray_2cpu.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # workers cannot import the tests
    monkeypatch.setattr(bench.execution.ray_executor, "MAX_RETRIES", retries)
    executor = RayExecutor()
    pending = executor.submit(_job(digits_split, _crashing(digits_split, tmp_path / "died")))
    if retries == 0:
        with pytest.raises(JobFailed, match="Ray could not run the job"):
            executor.result(pending)
        return
    (trained,) = executor.result(pending)
    assert (tmp_path / "died").exists()  # the first worker did die
    (local,) = run_job(_job(digits_split))
    for a, b in zip(local.model.state_dict().values(), trained.model.state_dict().values(), strict=True):
        assert torch.equal(a, b)


# ---- the local executor's training workers ---------------------------------------------------------------------


def _started(executor, timeout: float = 120.0):
    """Start the workers and wait until they take jobs (so a test can put a job in a worker, not in the driver)."""
    import time

    executor._start()
    end = time.monotonic() + timeout
    while len(executor._ready) < executor.workers and time.monotonic() < end:
        time.sleep(0.05)
    assert len(executor._ready) == executor.workers, "the training workers did not start"
    return executor


def _in_worker(executor, job: TrainJob):
    """Submit ``job`` and wait until a worker has taken it."""
    import time

    pending = executor.submit(job)
    end = time.monotonic() + 60
    while pending not in executor._running.values() and not pending.done and time.monotonic() < end:
        time.sleep(0.02)
    assert pending in executor._running.values() or pending.done
    return pending


def test_local_workers_train_the_models_the_driver_would(one_thread, digits_split):
    """Jobs trained in a worker process and jobs the driver takes itself (waiting, it trains the oldest waiting
    job) are the same models to the bit as ``run_job`` in this process, at one torch thread each."""
    from bench.execution.executor import LocalExecutor

    executor = _started(LocalExecutor(workers=1, threads=1))
    try:
        jobs = [TrainJob(_job(digits_split).recipe, (digits_split.members,), (seed,), "cpu") for seed in range(3)]
        first = _in_worker(executor, jobs[0])
        pendings = [first] + [executor.submit(job) for job in jobs[1:]]
        models = [executor.result(p)[0] for p in pendings]
        assert executor._next_id >= 1  # at least one job went to the worker
        for job, trained in zip(jobs, models, strict=True):
            (here,) = run_job(job)
            for a, b in zip(here.model.state_dict().values(), trained.model.state_dict().values(), strict=True):
                assert torch.equal(a, b)
        assert executor.describe()["workers"] == 1 and executor.describe()["torch_threads"] == 1
    finally:
        executor.close()
    assert not any(p.is_alive() for p in executor._procs)


def test_a_training_error_in_a_local_worker_reaches_the_driver_as_itself(digits_split):
    from bench.execution.executor import LocalExecutor

    executor = _started(LocalExecutor(workers=1, threads=1))
    try:
        pending = _in_worker(executor, _job(digits_split, mechanism="local-gaussian", target_epsilon=None))
        with pytest.raises(ValueError, match="local-gaussian needs a target epsilon"):
            executor.result(pending)
    finally:
        executor.close()


def test_a_dead_local_worker_fails_its_job(digits_split):
    """A worker killed while it trains fails that job with JobFailed (the harness then marks the cell failed)."""
    from bench.execution.executor import LocalExecutor

    executor = _started(LocalExecutor(workers=1, threads=1))
    try:
        job = _job(digits_split)
        slow = TrainJob(dataclasses.replace(job.recipe, spec=job.recipe.spec.model_copy(update={"epochs": 500})),
                        job.datasets, job.seeds, "cpu")
        pending = _in_worker(executor, slow)
        executor._procs[0].kill()
        with pytest.raises(JobFailed, match="worker 0 died"):
            executor.result(pending)
    finally:
        executor.close()
