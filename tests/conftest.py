"""Shared fixtures: tiny seeded splits of real data, an isolated model cache, the MNIST root, the smoke run built
once per test run (across pytest-xdist's workers too, ``helpers.run_once``).

The suite runs on pytest-xdist (pyproject.toml's addopts: ``-n auto --dist loadgroup``; the scheduling is in
``pytest_xdist_make_scheduler`` below): one worker per available CPU, each training on one torch thread.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import torch
from documents import build, mnist_results  # noqa: F401  (fixtures: typed results documents)
from helpers import run_once

from bench.core.data import load_dataset, make_split
from bench.core.device import available_cpus


def pytest_configure(config: pytest.Config) -> None:
    """In an xdist worker, when there are as many workers as CPUs (``-n auto``): pin the worker to its own CPU.

    What a test starts inherits the pin: a whole CLI job (``python -m bench ...``) then sees one CPU
    (``available_cpus``) and trains in its own process on one thread, as a one-CPU machine would, instead of
    spawning a training worker (a second interpreter importing torch: ~8 CPU-s per job) that competes with the
    other xdist worker's job for the same two cores. Tests that need both CPUs (a local Ray instance) take them
    back for their duration (``helpers.every_cpu``)."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0"))
    if not worker.startswith("gw") or not hasattr(os, "sched_setaffinity"):
        return
    cpus = sorted(os.sched_getaffinity(0))
    if count < 2 or count != min(available_cpus(), len(cpus)):
        return
    os.sched_setaffinity(0, {cpus[int(worker[2:]) % len(cpus)]})
    os.environ["PRIVBENCH_TEST_CPUS"] = ",".join(map(str, cpus))  # what every_cpu gives back


@pytest.fixture(autouse=True, scope="session")
def _isolated_cache(tmp_path_factory: pytest.TempPathFactory):
    """Never write into the user's model cache from tests."""
    old = os.environ.get("PRIVBENCH_CACHE")
    os.environ["PRIVBENCH_CACHE"] = str(tmp_path_factory.mktemp("model-cache"))
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))  # set in pytest-xdist's workers
    torch.set_num_threads(max(1, min(2, available_cpus() // workers)))  # 2 workers on 2 CPUs (pinned): one thread
    yield
    if old is None:
        os.environ.pop("PRIVBENCH_CACHE", None)
    else:
        os.environ["PRIVBENCH_CACHE"] = old


@pytest.fixture(scope="session")
def digits_split():
    """Real 8×8 digits: 300 members, 300 non-members, 200 population, 397 test, seed 0."""
    pool, test = load_dataset("digits")
    return make_split(pool, test, n_members=300, n_non_members=300, n_population=200, n_test=397, seed=0)


@pytest.fixture(scope="session")
def mnist_root() -> Path:
    """The folder holding MNIST/raw (``$PRIVBENCH_DATA``). Skipped where absent, but fails in CI."""
    env = os.environ.get("PRIVBENCH_DATA")
    root = Path(env) if env else None
    if root is None or not (root / "MNIST" / "raw").is_dir():
        if os.environ.get("CI"):
            pytest.fail(f"CI must set PRIVBENCH_DATA to a folder holding MNIST/raw (got {env!r})")
        pytest.skip("real MNIST not available: set PRIVBENCH_DATA to a folder holding MNIST/raw")
    return root


@pytest.fixture(scope="session")
def smoke_run(tmp_path_factory: pytest.TempPathFactory):
    """The main job as a user runs it: ``python -m bench all --profile smoke`` (sklearn's bundled digits: real
    data, every mechanism, every attack of the profile), once per test run (a minute or two on two cores), shared
    by the xdist workers (``run_once``).

    Returns:
        (run folder, its model cache, the finished process). Tests that change the folder copy it first.
    """
    proc = run_once(tmp_path_factory, "smoke", [sys.executable, "-m", "bench", "all", "--profile", "smoke",
                                                "--output", "{folder}/run", "--cache-dir", "{folder}/cache"])
    folder = Path(proc.args[proc.args.index("--cache-dir") + 1]).parent
    return folder / "run", folder / "cache", proc


@pytest.fixture(scope="module")
def one_thread():
    """Torch on one thread for a module (``pytestmark = pytest.mark.usefixtures("one_thread")``): tiny MLPs train
    fastest on one thread, and two threads on a busy 2-core machine stall."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


# ---- pytest-xdist: how many workers, which tests go together ---------------------------------------------------

MAX_WORKERS = 4  # each worker's CLI jobs start their own training processes (one per CPU): keep the product sane


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto``: one worker per CPU this process may use (``available_cpus``: the cgroup quota too), at most
    ``MAX_WORKERS``; no workers at all on one CPU. ``PYTEST_XDIST_AUTO_NUM_WORKERS`` overrides, as in xdist."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return int(os.environ["PYTEST_XDIST_AUTO_NUM_WORKERS"])
    n = min(available_cpus(), MAX_WORKERS)
    return n if n > 1 else 0


def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """``--dist loadgroup`` with every test module one unit of work unless its tests name an ``xdist_group``: a
    module's module-scoped fixtures (trained models) are built once, by one worker. Units go out in collection
    order, which ``pytest_collection_modifyitems`` puts longest first."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadGroupScheduling

    class ModuleOrGroup(LoadGroupScheduling):
        def _split_scope(self, nodeid: str) -> str:
            group = super()._split_scope(nodeid)
            return group if group != nodeid else nodeid.split("::", 1)[0]

    config.option.loadscopereorder = False  # keep the order below
    return ModuleOrGroup(config, log)


GROUPS = {"smoke_run": "smoke", "ray_2cpu": "ray"}  # tests that use the fixture run on one worker, one after another


@pytest.hookimpl(tryfirst=True)  # before xdist reads the xdist_group marks
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """In xdist's workers (which all collect the same order): the tests that use a fixture of ``GROUPS`` in that
    group (the smoke run is built once and nobody waits for it; one local Ray instance at a time), and the modules
    with the most ``slow`` tests first (whole CLI jobs, real-MNIST training), so that the long units of work start
    early and the short ones fill the end."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return
    for item in items:
        for fixture, group in GROUPS.items():
            if fixture in getattr(item, "fixturenames", ()):
                item.add_marker(pytest.mark.xdist_group(group))
    slow: dict[str, int] = {}
    for item in items:
        module = item.nodeid.split("::", 1)[0]
        slow[module] = slow.get(module, 0) + bool(item.get_closest_marker("slow"))
    rank = {module: i for i, module in enumerate(sorted(slow, key=lambda m: -slow[m]))}
    items.sort(key=lambda item: rank[item.nodeid.split("::", 1)[0]])
