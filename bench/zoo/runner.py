"""``privbench zoo run``: every bug (and each mechanism's correct version) × seed.

Each as one ``bench run`` of its mechanism with the bug applied in every process of it (``bench.zoo.apply``), then every
auditor's verdict on it.

Design notes: docs/design-notes.md.
"""

from __future__ import annotations

import hashlib
import inspect
import os
import resource
import sys
import time
from collections.abc import Callable
from typing import Any

from bench.core.device import available_cpus
from bench.execution.calljob import CallJob, JobFailed, Pending, as_completed
from bench.zoo.api import AUDITORS, BUGS, ZOO_MECHANISMS, Bug
from bench.zoo.catalogue import load
from bench.zoo.options import CORRECT, CPUS_PER_RUN, MECHANISM_RUN, PROFILE_EPSILON, REPO, RunSpec, ZooOptions
from bench.zoo.resume import code_version, kept, run_key
from bench.zoo.worker import _failure, work

__all__ = ["CORRECT", "MECHANISM_RUN", "PROFILE_EPSILON", "REPO", "ZooOptions", "_failure", "cases", "cpu_shares",
           "plan", "run_zoo"]


def cases(bugs: tuple[str, ...]) -> list[tuple[str, str, Bug | None]]:
    """``(case name, zoo mechanism, bug or None)`` for each bug and, first.

    The correct version of every mechanism a bug mutates (its false alarms are always measured).
    """
    chosen = [BUGS.get(b) for b in bugs]
    mechanisms = [m for m in ZOO_MECHANISMS if any(b.mechanism == m for b in chosen)]
    return [(f"{m}:{CORRECT}", m, None) for m in mechanisms] + [(b.name, b.mechanism, b) for b in chosen]


def _hash(bug: Bug | None) -> str:
    """A hash of the bug's module source (its models' cache folder changes when it is edited)."""
    if bug is None:
        return "correct"
    source = inspect.getsource(sys.modules[bug.apply.__module__])
    return hashlib.sha256(source.encode()).hexdigest()[:10]


def plan(options: ZooOptions) -> list[RunSpec]:
    """Every run of the zoo, in report order (each case's seeds in turn), with the attacks any of its auditors reads.

    A case none of the chosen auditors can audit has none.
    """
    load(options.plugins)
    auditors = [AUDITORS.get(a) for a in options.auditors]
    version = code_version(options.plugins)
    specs = []
    for case, mechanism, bug in cases(options.bugs):
        members = tuple(a.name for a in auditors if a.attacks_for(mechanism))
        attacks = tuple(sorted({x for a in auditors for x in a.attacks_for(mechanism)}))
        if not attacks:
            continue
        for seed in range(options.seeds):
            name = bug.name if bug else None
            specs.append(RunSpec(
                options=options, case=case, mechanism=mechanism, bug=name, seed=seed, attacks=attacks,
                auditors=members, folder=options.output / "runs" / case.replace(":", "-") / f"seed-{seed}",
                cache=options.output / "cache" / f"{case.replace(':', '-')}-{_hash(bug)}",
                key=run_key(options, version, case, name, seed, attacks, members)))
    return specs


def _refused(options: ZooOptions, spec: RunSpec, record: dict[str, Any]) -> None:
    """Stop the zoo in one line: ``spec``'s run refused its configuration (``record``'s exit status 2)."""
    from bench.core.errors import ConfigError

    lines = [x for x in str(record.get("error") or "").splitlines() if x.strip()]
    why = lines[-1].strip() if lines else "exit status 2"
    raise ConfigError(f"zoo: the run of {spec.case} (seed {spec.seed}) at --profile {options.profile} refused its "
                      f"configuration ({why}); the runs not yet started were cancelled")


def cpu_shares(options: ZooOptions) -> list[frozenset[int]] | None:
    """This process's CPUs cut into ``options.jobs`` disjoint shares, one per local worker.

    Its affinity, which its ``bench run`` inherits: processes × threads = its share, instead of every run starting a
    training process per CPU of the whole machine. None where there is nothing to share (one job, Ray, fewer CPUs
    than jobs, no affinity).
    """
    if options.jobs < 2 or options.executor != "local" or not hasattr(os, "sched_setaffinity"):
        return None
    cpus = sorted(os.sched_getaffinity(0))[:available_cpus()]
    if len(cpus) < options.jobs:
        return None
    return [frozenset(cpus[i::options.jobs]) for i in range(options.jobs)]


def _executor(options: ZooOptions, runs: int) -> Any:
    """``bench.execution``'s executor of ``options.executor`` for ``runs`` runs.

    ``local``: ``options.jobs`` worker processes (at most one per run), each on its ``cpu_shares``; ``ray``: one task
    per run, with this repository and ``$PRIVBENCH_DATA`` in every task's environment.

    Raises:
        bench.core.errors.BenchError: see ``RayExecutor``.
    """
    if options.executor == "ray":
        from bench.execution.ray_executor import RayExecutor

        path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
        env = {"PYTHONPATH": path, **{k: os.environ[k] for k in ("PRIVBENCH_DATA",) if k in os.environ}}
        return RayExecutor(options.ray_address, env=env)
    from dataclasses import replace

    from bench.execution.local_executor import LocalExecutor

    workers = max(1, min(options.jobs, runs))
    return LocalExecutor(workers, cpus=cpu_shares(replace(options, jobs=workers)) or ())


def _record(spec: RunSpec, pending: Pending) -> dict[str, Any]:
    """The record of ``spec``'s finished job; one with ``error`` and no rows where the job failed."""
    try:
        return dict(pending.outcome())
    except Exception as exc:  # a job that failed (its worker died, Ray gave up, it raised): a failed run
        why = str(exc) if isinstance(exc, JobFailed) else f"{type(exc).__name__}: {exc}"
        return {"key": spec.key, "case": spec.case, "seed": spec.seed, "attacks": list(spec.attacks), "exit": None,
                "wall_s": None, "run_cpu_s": None, "worker_cpu_s": None, "error": why.splitlines()[0][:300],
                "rows": []}


def _failed_rows(spec: RunSpec, record: dict[str, Any]) -> list[dict[str, Any]]:
    """A run that came back without rows (its job failed): one failed row per auditor, never a gap."""
    return [{"case": spec.case, "bug": spec.bug, "mechanism": spec.mechanism, "seed": spec.seed, "auditor": a,
             "attacks": [], "certified_epsilon": None, "true_epsilon": None, "exit": record.get("exit"),
             "run_cpu_s": None, "folder": str(spec.folder.relative_to(spec.options.output)),
             "error": record.get("error") or "no rows"} for a in spec.auditors]


def run_zoo(options: ZooOptions, *, progress: Callable[[str], None] = lambda _: None) -> dict[str, Any]:
    """Every case × seed: reuse the runs judged under the same key, run and judge the others as executor jobs.

    One ``CallJob`` of ``bench.zoo.worker.work`` per run (``_executor``; at most ``options.jobs`` at a time), a failed
    job an error row per auditor; ``zoo.json`` written after each (``bench.zoo.document``). The caller holds the output
    folder's lock.

    Raises:
        ValueError: an unknown bug or auditor (one line listing the known ones).
        bench.core.errors.ConfigError: a run refused its configuration (exit status 2; e.g. a plug-in mechanism
            without settings for the profile): the same for every seed, so the zoo stops at once, the runs not yet
            started cancelled and the finished ones kept.
    """
    from bench.zoo.document import write_document

    start = time.monotonic()
    specs = plan(options)
    records: dict[RunSpec, dict[str, Any]] = {}
    for spec in specs:
        record = kept(spec)
        if record is not None:
            records[spec] = record
    todo = [s for s in specs if s not in records]
    progress(f"{len(specs)} runs: {len(records)} already judged under this code version and configuration, "
             f"{len(todo)} to run ({options.executor}, {options.jobs} at a time)")

    def rows() -> list[dict[str, Any]]:
        return [r for s in specs if s in records for r in records[s]["rows"]]

    def cost() -> dict[str, Any]:
        return _cost(start, [records[s] for s in todo if s in records])

    executor = _executor(options, len(todo)) if todo else None
    cpus = CPUS_PER_RUN if options.executor == "ray" else None  # a local worker's share is its affinity
    jobs = ((spec, CallJob(work, (spec, cpus), cpus=CPUS_PER_RUN)) for spec in todo)
    try:
        for spec, pending in as_completed(executor, jobs, options.jobs) if executor is not None else ():
            record = _record(spec, pending)
            if record.get("exit") == 2:
                _refused(options, spec, record)
            if not record.get("rows"):
                record = {**record, "rows": _failed_rows(spec, record)}
            records[spec] = record
            caught = sum(bool(r.get("caught")) for r in record["rows"])
            progress(f"{spec.case}, seed {spec.seed}: " + (f"{caught} of {len(record['rows'])} auditors caught it"
                                                           if not record.get("error") else "failed"))
            write_document(options, rows(), cost=cost())
    finally:  # the workers stopped (their runs die with them) and reaped: their CPU time is in RUSAGE_CHILDREN
        if executor is not None:
            executor.close()
    return write_document(options, rows(), cost=cost())


def _cost(start: float, fresh: list[dict[str, Any]]) -> dict[str, Any]:
    """What this invocation cost.

    Its wall time; ``driver_cpu_s``, the driver's own CPU-seconds (this process, no child); ``runs_cpu_s``, the workers'
    for the runs it computed (each run's processes and its judging, summed over their records); ``children_cpu_s``,
    every child process this driver has reaped (local workers with their start-up and their runs; a local Ray instance's
    processes), complete once the workers are done; and ``driver_share``, the driver's part of the whole.
    """
    me, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    runs = sum(r.get("worker_cpu_s") or 0.0 for r in fresh)
    driver, reaped = me.ru_utime + me.ru_stime, children.ru_utime + children.ru_stime
    total = driver + max(runs, reaped)
    return {"wall_s": round(time.monotonic() - start, 2), "driver_cpu_s": round(driver, 2),
            "runs_cpu_s": round(runs, 2), "children_cpu_s": round(reaped, 2), "runs_computed": len(fresh),
            "driver_share": round(driver / total, 4) if total else None}
