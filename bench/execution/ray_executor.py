"""The ``ray`` executor: one Ray task per training job, on a local Ray instance or a cluster.

Moritz et al. 2018, "Ray: a distributed framework for emerging AI applications". See ``bench.execution.executor`` for
how jobs, the model cache and worker failures behave.
"""

from __future__ import annotations

import importlib
import socket
from collections.abc import Callable
from typing import Any

import torch

from bench.core.errors import BenchError, ConfigError
from bench.core.training import EpochCallback
from bench.core.types import TrainedModel
from bench.execution.trainjob import JobFailed, Pending, TrainJob, run_job

CPUS_PER_JOB = 1  # Ray resource request of one job (its torch threads); a CUDA job also asks for one GPU
MAX_RETRIES = 3  # Ray re-runs of a job whose worker died (not of one whose training raised)


def _ray_job(job: TrainJob, threads: int, plugins: tuple[str, ...] = ()) -> list[TrainedModel]:
    """The body of a Ray task: import the run's plug-ins, then run the job.

    The body of a Ray task: the run's plug-in modules imported (what the driver registered and patched; once per
    worker process, as Python caches imports), then ``run_job`` with ``threads`` torch threads, models returned on
    the CPU.
    """
    for module in plugins:
        importlib.import_module(module)
    torch.set_num_threads(threads)
    out = run_job(job)
    for trained in out:
        trained.model.cpu()
    return out


class RayExecutor:
    """One Ray task per job (``num_cpus=CPUS_PER_JOB``, ``num_gpus=1`` for CUDA jobs, ``max_retries=MAX_RETRIES``).

    Args:
        address: a running cluster (``HOST:PORT`` of its head, ``ray://HOST:PORT`` for Ray Client, or ``auto``);
            None: a local Ray instance with this machine's CPUs (and GPUs). A process that has already called
            ``ray.init`` keeps that connection (an ``address`` must still answer).
        plugins: modules every task imports before training (the run's ``--plugins``); on a cluster they must be
            importable on every node (installed there, or shipped with Ray's ``runtime_env``).

    Raises:
        BenchError: ray is not installed, or the cluster cannot be reached (one line, no traceback).
    """

    name = "ray"

    def __init__(self, address: str | None = None, plugins: tuple[str, ...] = ()) -> None:
        try:
            import ray
        except ImportError:
            raise ConfigError("executor 'ray' needs Ray: pip install -e '.[ray]' (or pip install 'privbench[ray]')"
                              ) from None
        self._ray, self.address, self.plugins = ray, address, tuple(plugins)
        if address:
            _check_reachable(address)
        self._started = not ray.is_initialized()
        if self._started:
            try:
                ray.init(address=address or "local", include_dashboard=False, logging_level="WARNING",
                         configure_logging=True)
            except (ConnectionError, RuntimeError, ValueError) as exc:
                raise BenchError(f"cannot connect to the Ray cluster at {address!r} ({str(exc).splitlines()[0]}); "
                                 "start one with 'ray start --head' or omit --ray-address for a local Ray") from None
        self._task = ray.remote(_ray_job)
        self._outstanding: dict[Any, Pending] = {}

    def resolve_device(self, name: str) -> torch.device:
        """``auto`` -> cuda when the cluster has GPUs, else cpu. Raises ConfigError for cuda without any GPU."""
        gpus = self._ray.cluster_resources().get("GPU", 0)
        if name == "cuda" and not gpus:
            raise ConfigError("device 'cuda' requested but the Ray cluster has no GPU; use --device cpu or auto")
        return torch.device("cuda" if name == "cuda" or (name == "auto" and gpus) else "cpu")

    def submit(self, job: TrainJob, *, on_done: Callable[[list[TrainedModel]], None] | None = None) -> Pending:
        """Submit ``job`` as one Ray task; ``on_done`` is called with its models."""
        pending = Pending(job, on_done)
        task = self._task.options(num_cpus=CPUS_PER_JOB, num_gpus=1 if job.device == "cuda" else 0,
                                  max_retries=MAX_RETRIES, retry_exceptions=False)
        pending.ref = task.remote(job, CPUS_PER_JOB, self.plugins)
        self._outstanding[pending.ref] = pending
        return pending

    def _finish(self, refs: list[Any]) -> None:
        ray = self._ray
        for ref in refs:
            pending = self._outstanding.pop(ref)
            try:
                models = ray.get(ref)
            except ray.exceptions.RayTaskError as exc:  # training raised: hand back the original exception
                cause = getattr(exc, "cause", None)
                pending.finish(None, cause if isinstance(cause, Exception) else
                               JobFailed(f"the job raised {str(exc).splitlines()[0]}"))
            except ray.exceptions.RayError as exc:  # worker / node lost beyond the retries, object lost, ...
                pending.finish(None, JobFailed(f"Ray could not run the job: {str(exc).splitlines()[0]}"))
            else:
                pending.finish(models)

    def result(self, pending: Pending, *, on_epoch: EpochCallback | None = None) -> list[TrainedModel]:
        """Wait for ``pending``; every other job that finishes meanwhile is handed to its ``on_done`` too.

        The cache and the progress bar follow the whole cluster. Per-epoch progress is not reported from workers.
        """
        while not pending.done:
            ready, _ = self._ray.wait(list(self._outstanding), num_returns=1)
            self._finish(ready)
        return pending.outcome()

    def describe(self) -> dict[str, Any]:
        """The ``executor`` block of results.json: address, Ray version and ``ray.cluster_resources()``."""
        return {"name": self.name, "address": self.address or "local", "ray": self._ray.__version__,
                "cpus_per_job": CPUS_PER_JOB, "max_retries": MAX_RETRIES,
                "resources": dict(sorted(self._ray.cluster_resources().items()))}

    def close(self) -> None:
        """Keep what has finished (``on_done``: into the cache), cancel the rest, stop Ray if we started it."""
        refs = list(self._outstanding)
        if refs:
            ready, rest = self._ray.wait(refs, num_returns=len(refs), timeout=0)
            self._finish(ready)
            for ref in rest:
                self._ray.cancel(ref, force=True)
            self._outstanding.clear()
        if self._started and self._ray.is_initialized():
            self._ray.shutdown()


def _check_reachable(address: str, timeout: float = 5.0) -> None:
    """Fail fast, with one line, on a cluster address nobody answers (``ray.init`` would retry for minutes)."""
    if address == "auto":
        return
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        raise ConfigError(f"ray address {address!r} is not valid; allowed: HOST:PORT (e.g. 10.0.0.1:6379), "
                          "ray://HOST:PORT or auto")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout).close()
    except OSError as exc:
        raise BenchError(f"Ray cluster at {address!r} is unreachable ({exc.strerror or exc}); start one with "
                         "'ray start --head' there, or omit --ray-address for a local Ray instance") from None
