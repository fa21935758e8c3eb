"""Where training jobs run: ``local`` (in this process, one after another, when their result is asked for) or
``ray`` (one Ray task per job, on a local Ray instance or on a cluster; Moritz et al. 2018, "Ray: a distributed
framework for emerging AI applications").

A job (``TrainJob``) trains one model — a target of the ε sweep, or one shadow / reference / canary model — or
one vectorised ensemble of non-private shadows (``bench.runner.ensemble.fit_ensemble``, one task per ensemble).
``run_job`` is a pure function of the job (every mechanism seeds itself from ``job.seeds``), so where a job runs
does not change its result; on CPU the numbers are the same to the bit when jobs (and the driver, which evaluates
and attacks) run with the same number of torch threads (a Ray task uses as many as the CPUs it requested,
``CPUS_PER_JOB``); otherwise they agree to float rounding.

The model cache across workers: workers never touch it. A Ray task returns its ``TrainedModel`` list (CPU weights,
any released data, privacy spent, timings) through Ray's object store, and the driver writes it into its
content-addressed cache (``bench.runner.cache``) as soon as it sees the task finish (``on_done``), whichever job it is
waiting for. So ``--cache-dir`` is a folder on the driver's machine and needs no shared filesystem; a job already
in the cache is never submitted, and a driver that is interrupted and restarted resumes from the cache.

Worker failure: Ray re-runs a task whose worker process or node died up to ``MAX_RETRIES`` times (``max_retries``;
the job is deterministic, so a retry gives the same model). An exception raised by training itself (a diverged
loss, an ε that cannot be met) is the job's outcome, not a failure of the cluster: it is not retried and reaches
the driver as the original exception.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from bench.core.data import ArrayDataset
from bench.core.device import resolve_device
from bench.core.errors import BenchError, ConfigError
from bench.core.training import EpochCallback
from bench.core.types import TrainedModel, TrainSpec
from bench.runner.validation import EXECUTORS

CPUS_PER_JOB = 1  # Ray resource request of one job (its torch threads); a CUDA job also asks for one GPU
MAX_RETRIES = 3  # Ray re-runs of a job whose worker died (not of one whose training raised)


class JobFailed(RuntimeError):
    """A job that did not finish for a reason outside training itself (e.g. its worker died more often than
    ``MAX_RETRIES``); the harness marks its cell or attack failed, like a diverged training run."""


@dataclass(frozen=True)
class TrainJob:
    """One independent unit of training.

    Attributes:
        mechanism: registered mechanism name. spec: its training settings.
        datasets: the training set of every model (one; several for a vectorised ensemble).
        seeds: one training seed per model. target_epsilon: target ε (None: no target). delta: δ.
        device: device type to train on (``"cpu"`` / ``"cuda"``), on whichever machine runs the job.
        audit: an audit request for ``Mechanism.fit`` (one model only; e.g. ``GradientCanaries``), or None.
    """

    mechanism: str
    spec: TrainSpec
    datasets: tuple[ArrayDataset, ...]
    seeds: tuple[int, ...]
    target_epsilon: float | None
    delta: float
    device: str
    audit: Any = None

    def __len__(self) -> int:
        return len(self.seeds)


def run_job(job: TrainJob, on_epoch: EpochCallback | None = None) -> list[TrainedModel]:
    """Train every model of ``job``: ``Mechanism.fit`` for one model, ``fit_ensemble`` for several.

    Returns:
        One TrainedModel per model, in the order of ``job.seeds``.

    Raises:
        TrainingDiverged, ValueError: from training (e.g. a NaN loss, an unreachable ε).
    """
    from bench.runner.ensemble import fit_ensemble
    from mechanisms import MECHANISMS

    mech, device = MECHANISMS.get(job.mechanism)(), torch.device(job.device)
    if len(job) > 1:
        return fit_ensemble(mech, job.datasets, job.spec, job.seeds, device)
    extra = {} if job.audit is None else {"audit": job.audit}
    return [mech.fit(job.datasets[0], job.spec, target_epsilon=job.target_epsilon, delta=job.delta,
                     seed=job.seeds[0], device=device, on_epoch=on_epoch, **extra)]


def _ray_job(job: TrainJob, threads: int) -> list[TrainedModel]:
    """The body of a Ray task: ``run_job`` with ``threads`` torch threads, models returned on the CPU."""
    torch.set_num_threads(threads)
    out = run_job(job)
    for trained in out:
        trained.model.cpu()
    return out


class Pending:
    """A submitted job. ``on_done(models)`` (e.g. writing them to the cache) runs once, when the driver first sees
    the job finish; ``result`` / ``error`` hold its outcome from then on."""

    def __init__(self, job: TrainJob, on_done: Callable[[list[TrainedModel]], None] | None) -> None:
        self.job, self.on_done = job, on_done
        self.result: list[TrainedModel] | None = None
        self.error: BaseException | None = None
        self.ref: Any = None  # Ray's ObjectRef

    @property
    def done(self) -> bool:
        return self.result is not None or self.error is not None

    def finish(self, result: list[TrainedModel] | None, error: BaseException | None = None) -> None:
        self.result, self.error = result, error
        if result is not None and self.on_done is not None:
            self.on_done(result)

    def outcome(self) -> list[TrainedModel]:
        if self.error is not None:
            raise self.error
        assert self.result is not None
        return self.result


class LocalExecutor:
    """Runs a job in this process when its result is first asked for (so a sweep trains each target just before
    it is attacked, with live per-epoch progress)."""

    name = "local"

    def resolve_device(self, name: str) -> torch.device:
        return resolve_device(name)

    def submit(self, job: TrainJob, *, on_done: Callable[[list[TrainedModel]], None] | None = None) -> Pending:
        return Pending(job, on_done)

    def result(self, pending: Pending, *, on_epoch: EpochCallback | None = None) -> list[TrainedModel]:
        """The job's models, training them now if needed. Raises what training raised."""
        if not pending.done:
            try:
                models = run_job(pending.job, on_epoch)
            except Exception as exc:  # the job's outcome; re-raised below, and again if asked again
                pending.finish(None, exc)
            else:
                pending.finish(models)
        return pending.outcome()

    def describe(self) -> dict[str, Any]:
        """The ``executor`` block of results.json."""
        return {"name": self.name, "torch_threads": torch.get_num_threads(),
                "resources": {"CPU": float(os.cpu_count() or 1), "GPU": float(torch.cuda.device_count())}}

    def close(self) -> None:
        pass


class RayExecutor:
    """One Ray task per job (``num_cpus=CPUS_PER_JOB``, ``num_gpus=1`` for CUDA jobs, ``max_retries=MAX_RETRIES``).

    Args:
        address: a running cluster (``HOST:PORT`` of its head, ``ray://HOST:PORT`` for Ray Client, or ``auto``);
            None: a local Ray instance with this machine's CPUs (and GPUs). A process that has already called
            ``ray.init`` keeps that connection (an ``address`` must still answer).

    Raises:
        BenchError: ray is not installed, or the cluster cannot be reached (one line, no traceback).
    """

    name = "ray"

    def __init__(self, address: str | None = None) -> None:
        try:
            import ray
        except ImportError:
            raise ConfigError("executor 'ray' needs Ray: pip install -e '.[ray]' (or pip install 'privbench[ray]')"
                              ) from None
        self._ray, self.address = ray, address
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
        pending = Pending(job, on_done)
        task = self._task.options(num_cpus=CPUS_PER_JOB, num_gpus=1 if job.device == "cuda" else 0,
                                  max_retries=MAX_RETRIES, retry_exceptions=False)
        pending.ref = task.remote(job, CPUS_PER_JOB)
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
        """Wait for ``pending``; every other job that finishes meanwhile is handed to its ``on_done`` too (the
        cache and the progress bar follow the whole cluster). Per-epoch progress is not reported from workers."""
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


Executor = LocalExecutor | RayExecutor


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


def make_executor(name: str, address: str | None = None) -> Executor:
    """The executor called ``name`` (one of ``EXECUTORS``); for ``ray`` the address defaults to ``$RAY_ADDRESS``.

    Raises:
        ConfigError: unknown name. BenchError: see ``RayExecutor``.
    """
    if name == "local":
        return LocalExecutor()
    if name == "ray":
        return RayExecutor(address or os.environ.get("RAY_ADDRESS") or None)
    raise ConfigError(f"executor {name!r} is not known; allowed: {', '.join(EXECUTORS)}")
