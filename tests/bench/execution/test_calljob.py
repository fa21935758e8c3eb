"""Any call as a job (``bench.execution.calljob.CallJob``, how the zoo runs): local workers run it on their own CPUs
without importing torch, ``as_completed`` keeps at most its limit in flight, and a job that raises or whose worker
dies comes back as a failure, never a gap."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.execution.calljob import CallJob, JobFailed, Pending, as_completed
from bench.execution.local_executor import LocalExecutor

REPO = Path(__file__).resolve().parents[3]


def test_call_jobs_run_in_the_workers_and_every_one_comes_back():
    executor = LocalExecutor(workers=2)
    try:
        done = list(as_completed(executor, ((i, CallJob(os.getpid)) for i in range(5)), limit=2))
    finally:
        executor.close()
    assert sorted(key for key, _ in done) == list(range(5))
    pids = {pending.outcome() for _, pending in done}
    assert os.getpid() not in pids and len(pids) <= 2  # the workers ran them, not this process
    assert not any(p.is_alive() for p in executor._procs)


def test_as_completed_keeps_at_most_its_limit_in_flight():
    class Recorder:
        """Runs jobs at once, remembering how many were submitted and not yet waited for."""

        def __init__(self) -> None:
            self.flight: list[Pending] = []
            self.most = 0

        def submit(self, job, *, on_done=None) -> Pending:
            pending = Pending(job, on_done)
            self.flight.append(pending)
            self.most = max(self.most, len(self.flight))
            return pending

        def wait(self, pendings) -> Pending:
            first = next(p for p in self.flight if p in pendings)
            self.flight.remove(first)
            first.finish(first.job.function(*first.job.args))
            return first

    recorder = Recorder()
    done = list(as_completed(recorder, ((i, CallJob(abs, (-i,))) for i in range(7)), limit=3))
    assert recorder.most == 3 and [(k, p.outcome()) for k, p in done] == [(i, i) for i in range(7)]


def test_a_job_that_raises_or_whose_worker_dies_is_a_failure():
    executor = LocalExecutor(workers=1)
    try:
        (_, raised), = as_completed(executor, [("sqrt", CallJob(math.sqrt, (-1.0,)))], limit=1)
        with pytest.raises(ValueError, match="math domain error"):
            raised.outcome()
        (_, died), = as_completed(executor, [("exit", CallJob(os._exit, (7,)))], limit=1)
        with pytest.raises(JobFailed, match="worker 0 died \\(exit code 7\\)"):
            died.outcome()
        (_, last), = as_completed(executor, [("pid", CallJob(os.getpid))], limit=1)
        with pytest.raises(JobFailed, match="no worker left"):  # failed, rather than run here or waited for ever
            last.outcome()
        (_, unsent), = as_completed(LocalExecutor(workers=0), [("no", CallJob(os.getpid))], limit=1)
        assert unsent.outcome() == os.getpid()  # no workers: this process runs it
    finally:
        executor.close()


def test_a_job_that_cannot_be_sent_to_a_worker_fails_and_the_others_run():
    executor = LocalExecutor(workers=1)
    try:
        jobs = [("lambda", CallJob(lambda: 1)), ("pid", CallJob(os.getpid))]
        done = dict(as_completed(executor, jobs, limit=2))
        with pytest.raises(JobFailed, match="cannot be sent to a worker"):
            done["lambda"].outcome()
        assert done["pid"].outcome() != os.getpid()
    finally:
        executor.close()


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity") or (os.cpu_count() or 1) < 2, reason="one CPU")
def test_each_worker_runs_on_its_own_cpus():
    # the machine's CPUs, not this process's affinity: the test workers are pinned to one CPU each (tests/conftest.py)
    cpus = list(range(os.cpu_count() or 1))
    shares = [frozenset(cpus[0::2]), frozenset(cpus[1::2])]
    executor = LocalExecutor(workers=2, cpus=shares)
    try:
        seen = {frozenset(p.outcome()) for _, p in as_completed(
            executor, ((i, CallJob(os.sched_getaffinity, (0,))) for i in range(6)), limit=2)}
    finally:
        executor.close()
    assert seen <= set(shares) and seen


def test_a_call_job_worker_and_its_driver_never_import_torch():
    code = ("import sys\nfrom bench.execution.calljob import CallJob, as_completed\n"
            "from bench.execution.local_executor import LocalExecutor\nimport bench.zoo.runner\n"
            "ex = LocalExecutor(workers=1)\n"
            "((_, p),) = as_completed(ex, [(0, CallJob(eval, (\"'torch' in __import__('sys').modules\",)))], 1)\n"
            "ex.close()\nprint(p.outcome(), 'torch' in sys.modules)\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join((str(REPO), os.environ.get("PYTHONPATH", ""))))
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["False", "False"]
