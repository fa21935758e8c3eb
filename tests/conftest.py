"""Shared fixtures: tiny seeded splits of real data, an isolated model cache, the MNIST root."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from bench.core.data import load_dataset, make_split


@pytest.fixture(autouse=True, scope="session")
def _isolated_cache(tmp_path_factory: pytest.TempPathFactory):
    """Never write into the user's model cache from tests."""
    old = os.environ.get("PRIVBENCH_CACHE")
    os.environ["PRIVBENCH_CACHE"] = str(tmp_path_factory.mktemp("model-cache"))
    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
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
    data, every mechanism, every attack of the profile), once per session (a minute or two on two cores).

    Returns:
        (run folder, its model cache, the finished process). Tests that change the folder copy it first.
    """
    out, cache = tmp_path_factory.mktemp("smoke"), tmp_path_factory.mktemp("smoke-cache")
    proc = subprocess.run([sys.executable, "-m", "bench", "all", "--profile", "smoke", "--output", str(out / "run"),
                           "--cache-dir", str(cache)], capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out / "run", cache, proc


@pytest.fixture(scope="module")
def one_thread():
    """Torch on one thread for a module (``pytestmark = pytest.mark.usefixtures("one_thread")``): tiny MLPs train
    fastest on one thread, and two threads on a busy 2-core machine stall."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
