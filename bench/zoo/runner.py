"""``privbench zoo run``: every bug (and each mechanism's correct version) × seed, each as one ``bench run`` of its
mechanism with the bug applied in every process (``bench.zoo.apply``), then every auditor's verdict on it.

One run per (case, seed), with every attack any chosen auditor reads. An auditor's CPU-seconds per verdict estimate
what a run of its own would cost: the run's CPU time (every process of it, training workers included) less the
seconds of the attacks it does not read (``timings.attacks``, their audit runs' training included), plus its own
analysis; auditors that read the same attacks share that cost. Each case trains into a model cache of its own
(``cache/<case>-<hash of the bug's module>``): a bug's models are never served to the correct mechanism, nor a
model of an edited bug. Runs go through privbench's executor (``--executor ray`` spreads each run's jobs over a Ray
cluster). Completed work is kept: a run whose ``zoo-run.json`` exists is judged again from its files, never
retrained; an interrupted run resumes through its own results and the cache. ``zoo.json``
(``bench.zoo.document``) is written atomically after every run.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import os
import queue
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bench.core.device import available_cpus
from bench.core.io import atomic_write_text
from bench.zoo.api import AUDITORS, BUGS, ZOO_MECHANISMS, Auditor, AuditorInput, Bug
from bench.zoo.apply import BUG_ENV
from bench.zoo.catalogue import PLUGINS_ENV, load

REPO = Path(__file__).resolve().parents[2]
MECHANISM_RUN = {  # zoo mechanism -> (bench mechanism, extra --plugins, PYTHONPATH addition)
    "dpsgd": ("dpsgd", (), None),
    "dpmix": ("dpmix", (), None),
    "local-gaussian": ("local-gaussian", (), None),
    "opacus-example": ("opacus-dpsgd", ("opacus_plugin",), REPO / "examples"),
}
PROFILE_EPSILON = {"ci": 2.0, "default": 1.0}
CORRECT = "correct"  # the case name suffix of a mechanism's correct version: "dpsgd:correct"


@dataclass(frozen=True)
class ZooOptions:
    """A zoo run's settings: ``profile`` (``ci`` or ``default``), the ``bugs`` and ``auditors`` (names), ``seeds``
    (0..N−1), the target ε (None: the profile's: ci 2, default 1), ``output`` folder, ``executor``
    (``local``/``ray``), ``data_root``, user ``plugins`` (modules registering bugs or auditors), ``jobs`` (runs side
    by side: each is a ``bench run`` with its own training processes)."""

    profile: str
    bugs: tuple[str, ...]
    auditors: tuple[str, ...]
    seeds: int
    output: Path
    epsilon: float | None = None
    executor: str = "local"
    data_root: str | None = None
    plugins: tuple[str, ...] = ()
    jobs: int = 1

    @property
    def target_epsilon(self) -> float:
        return self.epsilon if self.epsilon is not None else PROFILE_EPSILON[self.profile]


def cases(bugs: tuple[str, ...]) -> list[tuple[str, str, Bug | None]]:
    """``(case name, zoo mechanism, bug or None)`` for each bug and, first, the correct version of every mechanism
    a bug mutates (its false alarms are always measured)."""
    chosen = [BUGS.get(b) for b in bugs]
    mechanisms = [m for m in ZOO_MECHANISMS if any(b.mechanism == m for b in chosen)]
    return [(f"{m}:{CORRECT}", m, None) for m in mechanisms] + [(b.name, b.mechanism, b) for b in chosen]


def _hash(bug: Bug | None) -> str:
    """A hash of the bug's module source (its models' cache folder changes when it is edited)."""
    if bug is None:
        return "correct"
    source = inspect.getsource(sys.modules[bug.apply.__module__])
    return hashlib.sha256(source.encode()).hexdigest()[:10]


def run_case(options: ZooOptions, case: str, mechanism: str, bug: Bug | None, seed: int, attacks: tuple[str, ...],
             folder: Path, cpus: frozenset[int] | None = None) -> dict[str, Any]:
    """One ``bench run`` of ``mechanism`` with ``bug`` applied: its exit status, wall time and CPU-seconds (every
    process of it); kept in ``folder/zoo-run.json`` (a run with one is never run again). ``cpus``: the CPUs the run
    may use (its affinity, which its training processes inherit; None: all of this process's)."""
    done = folder / "zoo-run.json"
    if done.exists():
        return dict(json.loads(done.read_text(encoding="utf-8")))
    name, extra_plugins, path = MECHANISM_RUN[mechanism]
    cache = options.output / "cache" / f"{case.replace(':', '-')}-{_hash(bug)}"
    cmd = [sys.executable, "-m", "bench", "run", "--profile", options.profile, "--mechanisms", name,
           "--epsilons", f"{options.target_epsilon:g}", "--seeds", str(seed), "--attacks", ",".join(attacks),
           "--no-reference-epsilons", "--no-privacy-off-points", "--output", str(folder / "run"),
           "--cache-dir", str(cache), "--executor", options.executor,
           "--plugins", ",".join((*extra_plugins, "bench.zoo.apply"))]
    if options.data_root:
        cmd += ["--data-root", options.data_root]
    env = dict(os.environ, **{BUG_ENV: bug.name if bug else "", "PRIVBENCH_SCORES_DIR": str(folder / "scores"),
                              PLUGINS_ENV: ",".join(options.plugins), "PYTHONUNBUFFERED": "1"})  # a killed run's log
    if path is not None:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(path), str(REPO), env.get("PYTHONPATH", "")) if p)
    folder.mkdir(parents=True, exist_ok=True)
    if (folder / "scores").exists():  # an interrupted run's scores: the resumed run writes them again
        for f in (folder / "scores").glob("*.npz"):
            f.unlink()
    start = time.monotonic()
    with open(folder / "bench-run.log", "w", encoding="utf-8") as log:
        proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT)
        if cpus:  # set before the run spawns its training workers (seconds of imports away); they inherit it
            try:
                os.sched_setaffinity(proc.pid, cpus)
            except OSError:  # it has already ended: nothing to pin
                pass
        try:
            _, status, usage = os.wait4(proc.pid, 0)  # this run's own CPU time, its workers included
        except BaseException:
            proc.kill()
            proc.wait()
            raise
        proc.returncode = os.waitstatus_to_exitcode(status)
    code = proc.returncode
    log_tail = (folder / "bench-run.log").read_text(encoding="utf-8", errors="replace").strip()[-400:]
    record = {"case": case, "seed": seed, "attacks": list(attacks), "exit": code,
              "wall_s": round(time.monotonic() - start, 2), "run_cpu_s": round(usage.ru_utime + usage.ru_stime, 2),
              "error": None if code in (0, 1, 3) else _failure(code, log_tail)}
    if code in (0, 1, 3):
        atomic_write_text(done, json.dumps(record, indent=1))
    return record


def _failure(code: int, log_tail: str) -> str:
    """A failed run's one-line reason: its exit status or the signal that ended it, then its log's tail."""
    if code < 0:
        name = signal.Signals(-code).name if -code in signal.valid_signals() else f"signal {-code}"
        why = f"killed by {name}" + (" (as the kernel's out-of-memory killer does)" if -code == signal.SIGKILL else "")
    else:
        why = f"exit status {code}"
    return f"{why}: {log_tail}" if log_tail else why


def _refused(options: ZooOptions, case: str, seed: int, record: dict[str, Any]) -> None:
    """Stop the zoo in one line: ``case``'s run refused its configuration (``record``'s exit status 2)."""
    from bench.core.errors import ConfigError

    lines = [x for x in str(record.get("error") or "").splitlines() if x.strip()]
    why = lines[-1].strip() if lines else "exit status 2"
    raise ConfigError(f"zoo: the run of {case} (seed {seed}) at --profile {options.profile} refused its "
                      f"configuration ({why}); the runs not yet started were cancelled")


def _scores(folder: Path) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    out = {}
    for f in sorted((folder / "scores").glob("*.npz")):
        with np.load(f) as z:
            out[f.stem.rsplit("-", 1)[0]] = (z["scores"], z["labels"])
    return out


def judge(auditor: Auditor, folder: Path) -> dict[str, Any]:
    """``auditor``'s verdict on the run in ``folder`` (``caught``, ``value``, ``text``, ``judge_cpu_s``), or
    ``error`` where it raised or the run left no result."""
    from bench.results import read

    path = folder / "run" / "results.json"
    if not path.exists():
        return {"error": "the run left no results.json"}
    try:
        doc = read(path)
    except ValueError as exc:  # a document this privbench cannot read: a visible failure of the row
        return {"error": str(exc).splitlines()[0][:300]}
    targets = [r for r in doc.results if not r.off_point]
    if not targets or not targets[0].ok:
        return {"error": f"the run failed: {targets[0].error if targets else 'no cell'}"}
    start = time.process_time()
    try:
        v = auditor.judge(AuditorInput(results=doc, target=targets[0], scores=_scores(folder), folder=folder))
    except Exception as exc:  # an auditor that fails is a visible failure of its row, never a silent gap
        return {"error": f"{type(exc).__name__}: {exc}".splitlines()[0][:300]}
    return {"caught": bool(v.caught), "value": v.value, "text": v.text,
            "judge_cpu_s": round(time.process_time() - start, 3)}


def true_epsilon(bug: Bug | None, folder: Path) -> tuple[float | None, float | None]:
    """(certified ε, the ε the bug really spends) of the run in ``folder``; the correct mechanism's true ε is its
    certified one. None where unknown."""
    from bench.results import read

    path = folder / "run" / "results.json"
    try:
        targets = [r for r in read(path).results if r.ok and r.privacy is not None] if path.exists() else []
    except ValueError:
        targets = []
    if not targets:
        return None, None
    p = targets[0].privacy
    certified = p.epsilon
    if bug is None or certified is None:
        return certified, certified
    if bug.true_epsilon is None:
        return certified, None
    try:
        return certified, float(bug.true_epsilon({**targets[0].params, "delta": p.delta}, certified))
    except (KeyError, TypeError, ValueError):
        return certified, None


def attack_seconds(folder: Path) -> dict[str, float]:
    """Seconds each attack of the run in ``folder`` took (results.json's ``timings.attacks``; its audit runs'
    training included); empty where the run left no result."""
    from bench.results import read

    path = folder / "run" / "results.json"
    try:
        targets = [r for r in read(path).results if r.ok] if path.exists() else []
    except ValueError:
        targets = []
    return dict(targets[0].timings.attacks) if targets else {}


def cpu_shares(options: ZooOptions) -> queue.Queue[frozenset[int]] | None:
    """With ``jobs`` local runs side by side on at least as many CPUs: this process's CPUs cut into ``jobs``
    disjoint shares, one per running ``bench run`` (each then sees its share as its machine: processes × threads =
    its CPUs, instead of every run starting a training process per CPU of the whole machine and ``jobs`` times too
    many competing for it). None where there is nothing to share (one job, Ray, fewer CPUs than jobs, no affinity)."""
    if options.jobs < 2 or options.executor != "local" or not hasattr(os, "sched_setaffinity"):
        return None
    cpus = sorted(os.sched_getaffinity(0))[:available_cpus()]
    if len(cpus) < options.jobs:
        return None
    shares: queue.Queue[frozenset[int]] = queue.Queue()
    for i in range(options.jobs):
        shares.put(frozenset(cpus[i::options.jobs]))
    return shares


def run_zoo(options: ZooOptions, *, progress: Callable[[str], None] = lambda _: None) -> dict[str, Any]:
    """Every case × seed × attack set: run, judge, and write ``zoo.json`` after each (``bench.zoo.document``).

    Raises:
        ValueError: an unknown bug or auditor (one line listing the known ones).
        bench.core.errors.ConfigError: a run refused its configuration (exit status 2; e.g. a plug-in mechanism
            without settings for the profile): the same for every seed, so the zoo stops at once, the runs not yet
            started cancelled and the finished ones kept."""
    from bench.zoo.document import write_document

    load(options.plugins)
    auditors = [AUDITORS.get(a) for a in options.auditors]
    rows: list[dict[str, Any]] = []
    planned = []
    for case, mechanism, bug in cases(options.bugs):
        members = [a for a in auditors if a.attacks_for(mechanism)]
        attacks = tuple(sorted({x for a in members for x in a.attacks_for(mechanism)}))
        planned += [(case, mechanism, bug, seed, members, attacks) for seed in range(options.seeds) if attacks]

    shares = cpu_shares(options)

    def start(item: tuple[Any, ...]) -> dict[str, Any]:
        case, mechanism, bug, seed, _, attacks = item
        progress(f"{case}, seed {seed}: {', '.join(attacks)}")
        folder = options.output / "runs" / case.replace(":", "-") / f"seed-{seed}"
        cpus = shares.get() if shares else None
        try:
            return run_case(options, case, mechanism, bug, seed, attacks, folder, cpus)
        finally:
            if shares and cpus is not None:
                shares.put(cpus)

    with ThreadPoolExecutor(max_workers=options.jobs) as pool:  # runs side by side; verdicts in plan order
        futures = [pool.submit(start, item) for item in planned]
        for (case, mechanism, bug, seed, members, _), future in zip(planned, futures, strict=True):
            record = future.result()
            if record["exit"] == 2:
                pool.shutdown(wait=True, cancel_futures=True)
                _refused(options, case, seed, record)
            folder = options.output / "runs" / case.replace(":", "-") / f"seed-{seed}"
            certified, true = true_epsilon(bug, folder)
            spent = attack_seconds(folder)
            for a in members:
                verdict = {"missing": a.missing()} if a.missing() else judge(a, folder)
                others = sum(t for name, t in spent.items() if name not in a.attacks_for(mechanism))
                rows.append({"case": case, "bug": bug.name if bug else None, "mechanism": mechanism,
                             "seed": seed, "auditor": a.name, "attacks": list(a.attacks_for(mechanism)),
                             "certified_epsilon": certified, "true_epsilon": true, "exit": record["exit"],
                             "run_cpu_s": None if record["run_cpu_s"] is None
                             else round(max(record["run_cpu_s"] - others, 0.0), 2),
                             "folder": str(folder.relative_to(options.output)), **verdict})
            write_document(options, rows)
    return write_document(options, rows)
