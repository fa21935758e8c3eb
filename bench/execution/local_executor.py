"""The ``local`` executor: training jobs in this process (the driver) and in worker processes beside it.

With processes × torch threads = the CPUs (``bench.core.device.parallelism``).
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Collection, Sequence
from typing import TYPE_CHECKING, Any

from bench.core.processes import die_with_parent
from bench.execution.calljob import CallJob, JobFailed, Pending, run_any

if TYPE_CHECKING:  # pragma: no cover
    import torch

    from bench.core.training import EpochCallback


def _next_task(tasks: Any, parent: int) -> Any:
    """The next task, or None (stop) once the driver that started this worker is gone."""
    import queue

    while True:
        try:
            return tasks.get(timeout=1.0)
        except queue.Empty:
            if os.getppid() != parent:
                return None


def _worker_main(index: int, threads: int | None, tasks: Any, results: Any, parent: int, plugins: tuple[str, ...] = (),
                 cpus: frozenset[int] | None = None) -> None:
    """A worker process.

    ``run_any`` on every pickled job from ``tasks`` (torch, imported with the first ``TrainJob``, at ``threads``
    threads, default 1) on ``cpus`` (its affinity; None: the driver's); puts ``(kind, index, job id, pickled result or
    exception)`` on ``results`` (kind ``ready`` once started, then ``ok`` or ``error`` per job); ``None`` stops it.
    Ctrl-C is the driver's to handle.
    """
    import pickle
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    die_with_parent(parent)  # where prctl is missing, `_next_task` notices the orphaning between jobs
    if cpus:
        os.sched_setaffinity(0, cpus)
    for module in plugins:  # what the driver registered (mechanisms, models, ...), and what its plug-ins patch
        importlib.import_module(module)
    results.put(("ready", index, None, b""))
    torch_threads = False
    while (task := _next_task(tasks, parent)) is not None:
        job_id, payload = task
        try:
            job = pickle.loads(payload)
            if not (torch_threads or isinstance(job, CallJob)):
                import torch

                torch.set_num_threads(threads or 1)
                torch_threads = True
            out = ("ok", index, job_id, pickle.dumps(run_any(job, to_cpu=True)))
        except Exception as exc:  # the job's outcome, handed to the driver
            try:
                out = ("error", index, job_id, pickle.dumps(exc))
            except Exception:  # an exception that does not pickle: its type and message
                out = ("error", index, job_id, pickle.dumps(JobFailed(f"{type(exc).__name__}: {exc}")))
        results.put(out)


class LocalExecutor:
    """Runs jobs on this machine: in this process (the driver) and in ``workers`` worker processes.

    Jobs wait in a queue in submission order; a dispatcher thread gives the oldest to the next idle worker, so the
    workers train the next cells while the driver attacks the current one. When the driver needs a job's result it
    trains it itself if no worker has taken it (with live per-epoch progress), and while it waits for a job a worker
    is training, it trains the oldest waiting job: no process idles while work waits. Every process uses
    ``threads`` torch threads (``bench.core.device.parallelism``: processes × threads = the CPUs), so the numbers
    are the same to the bit wherever a job runs. Workers start with ``spawn`` (no forked OpenMP state) and take
    jobs once they have started; a worker that dies fails its job (``JobFailed``). Finished jobs are handed to
    their ``on_done`` (the cache) in the driver's thread, the next time it submits or waits. ``wait`` leaves the jobs
    to the workers (the driver runs them only where there are none; once every worker has died, they fail).

    Args:
        workers: worker processes besides the driver (0: everything in this process).
        threads: torch threads of each process, the driver's included (None: leave the driver's as they are, 1 in a
            worker).
        plugins: modules every worker imports before its first job (the run's ``--plugins``).
        cpus: each worker's CPUs (its affinity, which its child processes inherit), one set per worker; empty: the
            driver's.
    """

    name = "local"

    def __init__(self, workers: int = 0, threads: int | None = None, plugins: tuple[str, ...] = (),
                 cpus: Sequence[frozenset[int]] = ()) -> None:
        import threading

        self.workers, self.threads, self.plugins = max(0, int(workers)), threads, tuple(plugins)
        self.cpus = tuple(cpus)
        if threads is not None:
            import torch

            torch.set_num_threads(threads)
        self._lock = threading.Condition()
        self._queue: list[Pending] = []  # submitted, not yet taken by a worker
        self._running: dict[int, Pending] = {}  # job id -> pending, taken by a worker
        self._taken: dict[int, int] = {}  # worker index -> the job id it trains
        self._inbox: list[tuple[str, int, int | None, bytes]] = []  # finished, not yet handed over
        self._ready: set[int] = set()
        self._procs: list[Any] = []
        self._tasks: list[Any] = []
        self._next_id = 0
        self._stop = False
        self._thread: Any = None

    # -- the worker pool (dispatcher thread) ----------------------------------------------------------------------
    def _start(self) -> None:
        if self._procs or not self.workers:
            return
        import multiprocessing as mp
        import threading

        ctx = mp.get_context("spawn")
        self._results = ctx.Queue()
        for i in range(self.workers):
            tasks = ctx.Queue()
            proc = ctx.Process(target=_worker_main, args=(i, self.threads, tasks, self._results, os.getpid(),
                                                             self.plugins, self.cpus[i] if self.cpus else None),
                               daemon=True, name=f"privbench-worker-{i}")
            proc.start()
            self._tasks.append(tasks)
            self._procs.append(proc)
        self._thread = threading.Thread(target=self._dispatcher, name="privbench-dispatcher", daemon=True)
        self._thread.start()

    def _dispatch(self) -> None:
        """Give the oldest waiting jobs to idle, started workers (the lock held)."""
        import pickle

        for w in sorted(self._ready - set(self._taken)):
            if not self._queue:
                break
            pending = self._queue.pop(0)
            job_id, self._next_id = self._next_id, self._next_id + 1
            self._running[job_id] = pending
            try:
                payload = pickle.dumps(pending.job)
            except Exception as exc:  # a job that cannot be shipped fails, the dispatcher goes on
                why = JobFailed(f"the job cannot be sent to a worker ({type(exc).__name__}: {exc})")
                self._inbox.append(("error", w, job_id, pickle.dumps(why)))
                continue
            self._taken[w] = job_id
            self._tasks[w].put((job_id, payload))

    def _dispatcher(self) -> None:
        """Thread: take the workers' messages into the inbox, notice dead workers, dispatch waiting jobs."""
        import pickle
        import queue

        while not self._stop:
            try:
                msg = self._results.get(timeout=0.2)
            except queue.Empty:
                msg = None
            except (OSError, ValueError, EOFError):  # queue closed: shutting down
                return
            with self._lock:
                if msg is not None:
                    kind, w, _job_id, _payload = msg
                    if kind == "ready":
                        self._ready.add(w)
                    else:
                        self._taken.pop(w, None)
                        self._inbox.append(msg)
                for w, proc in enumerate(self._procs):
                    if w in self._ready and not proc.is_alive():
                        self._ready.discard(w)
                        if w in self._taken:
                            why = JobFailed(f"worker {w} died (exit code {proc.exitcode})")
                            self._inbox.append(("error", w, self._taken.pop(w), pickle.dumps(why)))
                self._dispatch()
                if msg is not None or self._inbox:
                    self._lock.notify_all()

    def _hand_over(self) -> None:
        """Finish every job in the inbox (its ``on_done`` runs here, in the driver's thread)."""
        import pickle

        with self._lock:
            inbox, self._inbox = self._inbox, []
            done = [(self._running.pop(job_id), kind, payload) for kind, _w, job_id, payload in inbox]
        for pending, kind, payload in done:
            if kind == "ok":
                pending.finish(pickle.loads(payload))
            else:
                pending.finish(None, pickle.loads(payload))

    # -- executor interface ---------------------------------------------------------------------------------------
    def resolve_device(self, name: str) -> torch.device:
        """The device ``name`` means here (``auto``: CUDA where available)."""
        from bench.core.device import resolve_device

        return resolve_device(name)

    def submit(self, job: Any, *, on_done: Callable[[Any], None] | None = None) -> Pending:
        """Queue ``job`` (a ``TrainJob`` or ``CallJob``) for the next free worker; ``on_done`` gets its result."""
        pending = Pending(job, on_done)
        self._start()
        with self._lock:
            self._queue.append(pending)
            if self._procs:
                self._dispatch()
        self._hand_over()
        return pending

    def _run_here(self, pending: Pending, on_epoch: EpochCallback | None = None) -> None:
        try:
            out = run_any(pending.job, on_epoch)
        except Exception as exc:  # the job's outcome; re-raised by ``outcome``, and again if asked again
            pending.finish(None, exc)
        else:
            pending.finish(out)

    def result(self, pending: Pending, *, on_epoch: EpochCallback | None = None) -> Any:
        """The job's result (a ``TrainJob``'s models): run here now if no worker has taken it.

        Else, while a worker trains it, this process trains the oldest waiting job. Raises what training raised, or
        ``JobFailed`` if its worker died.
        """
        while True:
            self._hand_over()
            if pending.done:
                return pending.outcome()
            with self._lock:
                if pending in self._queue:
                    self._queue.remove(pending)
                    here, progress = pending, on_epoch
                elif self._queue:
                    here, progress = self._queue.pop(0), None
                else:
                    here = progress = None
                    self._lock.wait(timeout=0.5)
            if here is not None:
                self._run_here(here, progress)

    def wait(self, pendings: Collection[Pending]) -> Pending:
        """The first of ``pendings`` to finish, run by the workers (by this process where there are none).

        Where every worker has died, the waiting jobs fail (``JobFailed``) rather than run here.
        """
        while True:
            self._hand_over()
            done = next((p for p in pendings if p.done), None)
            if done is not None:
                return done
            with self._lock:
                mine = [p for p in self._queue if p in pendings]
                dead = self._procs and not any(proc.is_alive() for proc in self._procs)
                taken = mine if dead else [] if self._procs else mine[:1]  # no workers: this process runs them
                for p in taken:
                    self._queue.remove(p)
                if not taken:
                    self._lock.wait(timeout=0.5)
            for p in taken:
                if self._procs:
                    p.finish(None, JobFailed("no worker left: every worker process died"))
                else:
                    self._run_here(p)

    def describe(self) -> dict[str, Any]:
        """The ``executor`` block of results.json: processes, torch threads each, and this machine's CPUs."""
        import torch

        from bench.core.device import available_cpus

        return {"name": self.name, "torch_threads": torch.get_num_threads(), "workers": self.workers,
                "processes": self.workers + 1, "available_cpus": available_cpus(),
                "resources": {"CPU": float(os.cpu_count() or 1), "GPU": float(torch.cuda.device_count())}}

    def close(self) -> None:
        """Keep the jobs the workers have finished (``on_done``: into the cache), then stop the workers.

        Jobs still training or waiting are dropped (a rerun resumes from the cache).
        """
        if not self._procs:
            return
        self._stop = True
        self._thread.join(timeout=2.0)
        self._hand_over()
        for tasks in self._tasks:
            tasks.put(None)
        for proc in self._procs:
            proc.join(timeout=1.0)
            if proc.is_alive():
                proc.terminate()
                proc.join(timeout=5.0)
        for q in (*self._tasks, self._results):
            q.close()
            q.cancel_join_thread()
        self._procs, self._tasks, self._queue = [], [], []
        self._running.clear()
        self._taken.clear()
        self._ready.clear()
