"""Where training jobs run: ``local`` or ``ray``.

Where training jobs run: ``local`` (this process and training worker processes beside it, processes × torch
threads = the CPUs; ``bench.execution.local_executor``) or ``ray`` (one Ray task per job, on a local Ray instance or on
a cluster; Moritz et al. 2018, "Ray: a distributed framework for emerging AI applications";
``bench.execution.ray_executor``). Jobs themselves: ``bench.execution.trainjob`` (training) and
``bench.execution.calljob`` (any call, e.g. a zoo run; the handle, the fault model).

Design notes: docs/design-notes.md.
"""

from __future__ import annotations

import os

from bench.config.validation import EXECUTORS
from bench.core.errors import ConfigError
from bench.execution.calljob import CallJob, JobFailed, Pending, as_completed
from bench.execution.local_executor import LocalExecutor
from bench.execution.ray_executor import CPUS_PER_JOB, MAX_RETRIES, RayExecutor
from bench.execution.trainjob import TrainJob, run_job

__all__ = ["CPUS_PER_JOB", "MAX_RETRIES", "CallJob", "Executor", "JobFailed", "LocalExecutor", "Pending",
           "RayExecutor", "TrainJob", "as_completed", "make_executor", "run_job"]

Executor = LocalExecutor | RayExecutor


def make_executor(name: str, address: str | None = None, *, workers: int = 0, threads: int | None = None,
                  plugins: tuple[str, ...] = ()) -> Executor:
    """The executor called ``name`` (one of ``EXECUTORS``); for ``ray`` the address defaults to ``$RAY_ADDRESS``.

    ``workers`` / ``threads``: ``LocalExecutor``'s (Ray's tasks use ``CPUS_PER_JOB`` threads each); ``plugins``: the
    modules every training process or Ray task imports first.

    Raises:
        ConfigError: unknown name. BenchError: see ``RayExecutor``.
    """
    if name == "local":
        return LocalExecutor(workers, threads, plugins)
    if name == "ray":
        return RayExecutor(address or os.environ.get("RAY_ADDRESS") or None, plugins)
    raise ConfigError(f"executor {name!r} is not known; allowed: {', '.join(EXECUTORS)}")
