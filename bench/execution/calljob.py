"""What an executor runs: a job (a ``TrainJob`` or a ``CallJob``), the driver's handle on it, and its failure.

One fault model for every job: what the job raised, or ``JobFailed`` where it could not finish (its worker died, Ray
gave up on it), reaches the driver through ``Pending.outcome``; the caller makes it a visible failure. No torch import
(the zoo's driver and workers import this; a ``TrainJob`` imports torch where it runs).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:  # pragma: no cover
    from bench.core.training import EpochCallback
    from bench.execution.trainjob import TrainJob

K = TypeVar("K")


class JobFailed(RuntimeError):
    """A job that did not finish for a reason outside the job itself.

    (e.g. its worker died, or died more often than ``MAX_RETRIES`` on Ray.) The caller marks its cell, attack or zoo
    run failed, like a diverged training run.
    """


@dataclass(frozen=True)
class CallJob:
    """A job that calls ``function(*args)`` where it runs and returns what it returns.

    Attributes:
        function: a module-level function (pickled by reference: its module is imported where the job runs).
        args: its picklable arguments.
        cpus: the CPUs it takes on Ray (its task's ``num_cpus``).
    """

    function: Callable[..., Any]
    args: tuple[Any, ...] = ()
    cpus: int = 1



def run_any(job: TrainJob | CallJob, on_epoch: EpochCallback | None = None, *, to_cpu: bool = False) -> Any:
    """Run ``job`` in this process: a ``CallJob``'s call, or ``bench.execution.trainjob.run_job``.

    ``to_cpu``: a ``TrainJob``'s models moved to the CPU (to be shipped back from a worker).
    """
    if isinstance(job, CallJob):
        return job.function(*job.args)
    from bench.execution.trainjob import run_job

    models = run_job(job, on_epoch)
    if to_cpu:
        for trained in models:
            trained.model.cpu()
    return models


class Pending:
    """A submitted job.

    ``on_done(result)`` (e.g. writing models to the cache) runs once, when the driver first sees the job finish;
    ``result`` / ``error`` hold its outcome from then on.
    """

    def __init__(self, job: Any, on_done: Callable[[Any], None] | None) -> None:
        self.job, self.on_done = job, on_done
        self.result: Any = None
        self.error: BaseException | None = None
        self.done = False  # whether the job has a result or an error
        self.ref: Any = None  # Ray's ObjectRef

    def finish(self, result: Any, error: BaseException | None = None) -> None:
        """Record the job's result or error; call ``on_done`` with a result."""
        self.result, self.error, self.done = result, error, True
        if error is None and self.on_done is not None:
            self.on_done(result)

    def outcome(self) -> Any:
        """The job's result; raises its error where it failed."""
        if self.error is not None:
            raise self.error
        assert self.done
        return self.result


def as_completed(executor: Any, jobs: Iterable[tuple[K, Any]], limit: int) -> Iterator[tuple[K, Pending]]:
    """Each ``(key, job)`` of ``jobs`` submitted to ``executor`` in order, at most ``limit`` at a time.

    ``executor``: a ``LocalExecutor`` or ``RayExecutor`` (its ``submit`` and ``wait``). Yields ``(key, its finished
    Pending)`` as each finishes; ``Pending.outcome`` gives the result or raises the job's failure. Jobs not yet
    submitted when the caller stops are never submitted (``close`` the executor to stop the running ones).
    """
    waiting, flight = iter(jobs), {}
    while True:
        while len(flight) < max(1, limit) and (item := next(waiting, None)) is not None:
            flight[executor.submit(item[1])] = item[0]
        if not flight:
            return
        done = executor.wait(list(flight))
        yield flight.pop(done), done
