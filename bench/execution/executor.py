"""Where training jobs run: ``local`` or ``ray``.

Where training jobs run: ``local`` (this process and training worker processes beside it, processes × torch
threads = the CPUs; ``bench.execution.local_executor``) or ``ray`` (one Ray task per job, on a local Ray instance or on
a cluster; Moritz et al. 2018, "Ray: a distributed framework for emerging AI applications";
``bench.execution.ray_executor``). Jobs themselves: ``bench.execution.trainjob``.

A job (``TrainJob``) trains one model — a target of the ε sweep, or one shadow / reference / canary model — or
one vectorised ensemble of non-private shadows (``bench.execution.ensemble.fit_ensemble``, one task per ensemble).
``run_job`` is a pure function of the job (every mechanism seeds itself from ``job.seeds``), so where a job runs
does not change its result; on CPU the numbers are the same to the bit when jobs (and the driver, which evaluates
and attacks) run with the same number of torch threads (a Ray task uses as many as the CPUs it requested,
``CPUS_PER_JOB``); otherwise they agree to float rounding.

The model cache across workers: workers never touch it. A worker process or a Ray task returns its ``TrainedModel``
list (CPU weights, any released data, privacy spent, timings) to the driver (a pipe; Ray's object store), which
writes it into its content-addressed cache (``bench.execution.cache``) as soon as it sees the job finish
(``on_done``), whichever job it is waiting for. So ``--cache-dir`` is a folder on the driver's machine and needs no
shared filesystem; a job already in the cache is never submitted, and a driver that is interrupted and restarted
resumes from the cache.

Worker failure: Ray re-runs a task whose worker process or node died up to ``MAX_RETRIES`` times (``max_retries``;
the job is deterministic, so a retry gives the same model). An exception raised by training itself (a diverged
loss, an ε that cannot be met) is the job's outcome, not a failure of the cluster: it is not retried and reaches
the driver as the original exception.
"""

from __future__ import annotations

import os

from bench.config.validation import EXECUTORS
from bench.core.errors import ConfigError
from bench.execution.local_executor import LocalExecutor
from bench.execution.ray_executor import CPUS_PER_JOB, MAX_RETRIES, RayExecutor
from bench.execution.trainjob import JobFailed, Pending, TrainJob, run_job

__all__ = ["CPUS_PER_JOB", "MAX_RETRIES", "Executor", "JobFailed", "LocalExecutor", "Pending", "RayExecutor",
           "TrainJob", "make_executor", "run_job"]

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
