"""Where the zoo's runs go: ``jobs`` worker processes on this machine (``--executor local``).

Each with its own share of the CPUs, or one Ray task per run on a local Ray instance or a cluster (``--executor ray``).
Either way a run is run and judged in its worker (``bench.zoo.worker.work``) and only its record comes back to the
driver.

Local workers are spawned processes that live for the whole zoo (the anchors' packages are imported once per
worker, not once per run) and ask Linux to kill them when the driver dies (``PR_SET_PDEATHSIG``), as the runs they
start do. No torch import in the driver.
"""

from __future__ import annotations

import os
import queue
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

from bench.core.device import available_cpus
from bench.core.errors import BenchError, ConfigError
from bench.core.processes import die_with_parent
from bench.zoo.options import CPUS_PER_RUN, RunSpec, ZooOptions


class WorkerDied(BenchError):
    """A local zoo worker process died (killed, out of memory): the runs it judged are kept, the zoo stops."""


def cpu_shares(options: ZooOptions) -> queue.Queue[frozenset[int]] | None:
    """With ``jobs`` local workers on at least as many CPUs.

    This process's CPUs cut into ``jobs`` disjoint shares, one per worker (its affinity, which its ``bench run``
    inherits: processes × threads = its share, instead of every run starting a training process per CPU of the whole
    machine). None where there is nothing to share (one job, Ray, fewer CPUs than jobs, no affinity).
    """
    if options.jobs < 2 or options.executor != "local" or not hasattr(os, "sched_setaffinity"):
        return None
    cpus = sorted(os.sched_getaffinity(0))[:available_cpus()]
    if len(cpus) < options.jobs:
        return None
    shares: queue.Queue[frozenset[int]] = queue.Queue()
    for i in range(options.jobs):
        shares.put(frozenset(cpus[i::options.jobs]))
    return shares


def _init_worker(parent: int, shares: Any, plugins: tuple[str, ...]) -> None:
    """A local worker's start: die with the driver, take a share of the CPUs.

    Ignore Ctrl-C (the driver's to handle; the worker's run gets it from the terminal), load the catalogue.
    """
    import signal

    die_with_parent(parent)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if shares is not None:
        os.sched_setaffinity(0, shares.get())
    from bench.zoo.catalogue import load

    load(plugins)


def _work(spec: RunSpec) -> dict[str, Any]:
    from bench.zoo.worker import work

    return work(spec)


def run_local(options: ZooOptions, specs: list[RunSpec]) -> Iterator[tuple[RunSpec, dict[str, Any]]]:
    """Each of ``specs`` run and judged in ``options.jobs`` worker processes.

    Yields ``(spec, record)`` as each finishes.

    Raises:
        WorkerDied: a worker process ended without its record (one line; the records kept so far stay).
    """
    import multiprocessing
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
    from concurrent.futures.process import BrokenProcessPool

    context = multiprocessing.get_context("spawn")
    workers = max(1, min(options.jobs, len(specs)))
    local = cpu_shares(replace(options, jobs=workers))
    shares = None
    if local is not None:
        shares = context.Queue()
        while not local.empty():
            shares.put(local.get())
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=context,
                               initializer=_init_worker, initargs=(os.getpid(), shares, options.plugins))
    try:
        todo = {pool.submit(_work, spec): spec for spec in specs}
        while todo:
            done, _ = wait(todo, return_when=FIRST_COMPLETED)
            for future in done:
                spec = todo.pop(future)
                try:
                    record = future.result()
                except BrokenProcessPool:
                    raise WorkerDied(f"a zoo worker process died while running {spec.case} (seed {spec.seed}) or "
                                     "another run (killed, or out of memory); the runs judged so far are kept: "
                                     "rerun the same command to resume") from None
                yield spec, record
    except BaseException:  # Ctrl-C, SIGTERM, a worker lost: stop the others now (their runs die with them)
        for process in list((getattr(pool, "_processes", None) or {}).values()):
            process.kill()
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown(wait=True)  # every worker reaped: its CPU time is in this process's RUSAGE_CHILDREN


def _connect(address: str | None) -> Any:
    """Ray, connected to ``address`` (None: a local instance with this machine's CPUs).

    Raises:
        ConfigError: Ray is not installed; BenchError: the cluster cannot be reached (one line each).
    """
    try:
        import ray
    except ImportError:
        raise ConfigError("--executor ray needs Ray: pip install -e '.[ray]' (or pip install 'privbench[ray]')"
                          ) from None
    from bench.execution.ray_executor import _check_reachable
    from bench.zoo.options import REPO

    if address:
        _check_reachable(address)
    if not ray.is_initialized():
        path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
        env = {"PYTHONPATH": path, **{k: os.environ[k] for k in ("PRIVBENCH_DATA",) if k in os.environ}}
        try:
            ray.init(address=address or "local", include_dashboard=False, logging_level="WARNING",
                     configure_logging=True, runtime_env={"env_vars": env})
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise BenchError(f"cannot connect to the Ray cluster at {address!r} ({str(exc).splitlines()[0]}); "
                             "start one with 'ray start --head' or omit --ray-address for a local Ray") from None
    return ray


def _ray_work(spec: RunSpec, cpus: int) -> dict[str, Any]:
    """A Ray task's body: the run, trained on the task's ``cpus``, and judged in the task."""
    from bench.zoo.catalogue import load
    from bench.zoo.worker import work

    load(spec.options.plugins)
    return work(spec, cpus)


def run_ray(options: ZooOptions, specs: list[RunSpec]) -> Iterator[tuple[RunSpec, dict[str, Any]]]:
    """Each of ``specs`` as one Ray task (``num_cpus=CPUS_PER_RUN``), at most ``options.jobs`` in flight.

    Yields ``(spec, record)`` as each finishes. A task Ray could not run is a failed run (its record's ``error``).
    """
    ray = _connect(options.ray_address)
    task = ray.remote(_ray_work).options(num_cpus=CPUS_PER_RUN, max_retries=1)
    waiting, flight = list(specs), {}
    try:
        while waiting or flight:
            while waiting and len(flight) < options.jobs:
                spec = waiting.pop(0)
                flight[task.remote(spec, CPUS_PER_RUN)] = spec
            ready, _ = ray.wait(list(flight), num_returns=1)
            spec = flight.pop(ready[0])
            try:
                record = ray.get(ready[0])
            except ray.exceptions.RayError as exc:
                record = {"key": spec.key, "case": spec.case, "seed": spec.seed, "attacks": list(spec.attacks),
                          "exit": None, "wall_s": None, "run_cpu_s": None, "worker_cpu_s": None,
                          "error": f"Ray could not run it: {str(exc).splitlines()[0][:300]}", "rows": []}
            yield spec, record
    finally:
        for ref in flight:
            ray.cancel(ref, force=True)
        ray.shutdown()


def dispatch(options: ZooOptions, specs: list[RunSpec]) -> Iterator[tuple[RunSpec, dict[str, Any]]]:
    """``run_local`` or ``run_ray``, by ``options.executor``."""
    runner: Callable[[ZooOptions, list[RunSpec]], Iterator[tuple[RunSpec, dict[str, Any]]]] = (
        run_ray if options.executor == "ray" else run_local)
    return runner(options, specs)
