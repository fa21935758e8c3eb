"""The ``ray`` executor: one Ray task per training job, on a local Ray instance or a cluster.

Moritz et al. 2018, "Ray: a distributed framework for emerging AI applications". See ``bench.execution.executor`` for
how jobs, the model cache and worker failures behave.
"""

from __future__ import annotations

import importlib
import socket
from collections.abc import Callable, Collection
from typing import TYPE_CHECKING, Any

from bench.core.errors import BenchError, ConfigError
from bench.execution.calljob import CallJob, JobFailed, Pending, run_any

if TYPE_CHECKING:  # pragma: no cover
    import torch

    from bench.core.training import EpochCallback

CPUS_PER_JOB = 1  # Ray resource request of one TrainJob (its torch threads); a CUDA job also asks for one GPU
MAX_RETRIES = 3  # Ray re-runs of a job whose worker died (not of one whose training raised)


def _ray_job(job: Any, threads: int, plugins: tuple[str, ...] = ()) -> Any:
    """The body of a Ray task: the run's plug-in modules imported, then the job run.

    The plug-ins are what the driver registered and patched (once per worker process, as Python caches imports); a
    ``TrainJob`` runs with ``threads`` torch threads, its models returned on the CPU.
    """
    for module in plugins:
        importlib.import_module(module)
    if not isinstance(job, CallJob):
        import torch

        torch.set_num_threads(threads)
    return run_any(job, to_cpu=True)


class RayExecutor:
    """One Ray task per job (``num_cpus=CPUS_PER_JOB``, ``num_gpus=1`` for CUDA jobs, ``max_retries=MAX_RETRIES``).

    Args:
        address: a running cluster (``HOST:PORT`` of its head, ``ray://HOST:PORT`` for Ray Client, or ``auto``);
            None: a local Ray instance with this machine's CPUs (and GPUs). A process that has already called
            ``ray.init`` keeps that connection (an ``address`` must still answer).
        plugins: modules every task imports before training (the run's ``--plugins``); on a cluster they must be
            importable on every node (installed there, or shipped with Ray's ``runtime_env``).
        env: environment variables of every task (Ray's ``runtime_env``) where this process starts Ray; None: none
            set.

    Raises:
        BenchError: ray is not installed, or the cluster cannot be reached (one line, no traceback).
    """

    name = "ray"

    def __init__(self, address: str | None = None, plugins: tuple[str, ...] = (),
                 env: dict[str, str] | None = None) -> None:
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
                         configure_logging=True, **({"runtime_env": {"env_vars": env}} if env else {}))
            except (ConnectionError, RuntimeError, ValueError) as exc:
                raise BenchError(f"cannot connect to the Ray cluster at {address!r} ({str(exc).splitlines()[0]}); "
                                 "start one with 'ray start --head' or omit --ray-address for a local Ray") from None
        self._task = ray.remote(_ray_job)
        self._outstanding: dict[Any, Pending] = {}

    def resolve_device(self, name: str) -> torch.device:
        """``auto`` -> cuda when the cluster has GPUs, else cpu. Raises ConfigError for cuda without any GPU."""
        import torch

        gpus = self._ray.cluster_resources().get("GPU", 0)
        if name == "cuda" and not gpus:
            raise ConfigError("device 'cuda' requested but the Ray cluster has no GPU; use --device cpu or auto")
        return torch.device("cuda" if name == "cuda" or (name == "auto" and gpus) else "cpu")

    def submit(self, job: Any, *, on_done: Callable[[Any], None] | None = None) -> Pending:
        """Submit ``job`` (a ``TrainJob`` or ``CallJob``) as one Ray task; ``on_done`` is called with its result."""
        pending = Pending(job, on_done)
        call = isinstance(job, CallJob)
        task = self._task.options(num_cpus=job.cpus if call else CPUS_PER_JOB,
                                  num_gpus=1 if not call and job.device == "cuda" else 0,
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

    def result(self, pending: Pending, *, on_epoch: EpochCallback | None = None) -> Any:
        """Wait for ``pending``; every other job that finishes meanwhile is handed to its ``on_done`` too.

        The cache and the progress bar follow the whole cluster. Per-epoch progress is not reported from workers.
        """
        while not pending.done:
            ready, _ = self._ray.wait(list(self._outstanding), num_returns=1)
            self._finish(ready)
        return pending.outcome()

    def wait(self, pendings: Collection[Pending]) -> Pending:
        """The first of ``pendings`` to finish (every other job that finishes meanwhile handed to its ``on_done``)."""
        while not any(p.done for p in pendings):
            ready, _ = self._ray.wait([p.ref for p in pendings if not p.done], num_returns=1)
            self._finish(ready)
        return next(p for p in pendings if p.done)

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
