"""One zoo run, where it runs.

A worker process of this machine (``--executor local``) or a Ray task (``ray``) runs the ``bench run`` of its mechanism
with the bug applied (``bench.zoo.apply``), reads the run's document once, and computes every row of it there — the
bug's true ε, each auditor's verdict, the CPU-seconds each verdict costs — so the driver only collects rows
(``bench.zoo.runner``).

Design notes: docs/design-notes.md.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench.core.io import atomic_write_text
from bench.zoo.api import AUDITORS, BUGS, Auditor, AuditorInput, Bug
from bench.zoo.catalogue import BUG_ENV, PLUGINS_ENV, load
from bench.zoo.options import MECHANISM_RUN, REPO, RunSpec

KEY_FILE = "zoo-run.key"  # the key of the run in this folder, written before its bench run starts
RUN_FILE = "bench-run.json"  # the bench run's exit status and cost, written as it ends (before it is judged)
CPUS_ENV = "PRIVBENCH_CPUS"  # bench.core.device.available_cpus: the CPUs a scheduler granted (a Ray task's)
# exec the bench run with PR_SET_PDEATHSIG (it survives exec): it dies with the worker that started it
_LAUNCH = ("import ctypes, os, signal, sys; ctypes.CDLL(None).prctl(1, int(signal.SIGKILL)); "
           "os.getppid() == int(sys.argv[1]) or os._exit(1); os.execv(sys.executable, [sys.executable] + sys.argv[2:])")


def _command(spec: RunSpec) -> list[str]:
    o = spec.options
    name, extra_plugins, _ = MECHANISM_RUN[spec.mechanism]
    cmd = [sys.executable, "-c", _LAUNCH, str(os.getpid()), "-m", "bench", "run", "--profile", o.profile,
           "--mechanisms", name, "--epsilons", f"{o.target_epsilon:g}", "--seeds", str(spec.seed), "--attacks",
           ",".join(spec.attacks), "--no-reference-epsilons", "--no-privacy-off-points", "--output",
           str(spec.folder / "run"), "--cache-dir", str(spec.cache), "--executor", "local",
           "--plugins", ",".join((*extra_plugins, "bench.zoo.apply"))]
    return cmd + (["--data-root", o.data_root] if o.data_root else [])


def _environment(spec: RunSpec, cpus: int | None) -> dict[str, str]:
    env = dict(os.environ, **{BUG_ENV: spec.bug or "", "PRIVBENCH_SCORES_DIR": str(spec.folder / "scores"),
                              PLUGINS_ENV: ",".join(spec.options.plugins), "PYTHONUNBUFFERED": "1"})
    extra = MECHANISM_RUN[spec.mechanism][2]
    env["PYTHONPATH"] = os.pathsep.join(str(p) for p in (extra, REPO, env.get("PYTHONPATH")) if p)
    if cpus:
        env[CPUS_ENV] = str(cpus)
    return env


def _prepare(spec: RunSpec) -> None:
    """The run's folder, emptied where it holds a run of another key (or of none).

    An interrupted run of this key stays (its bench run resumes), less its scores (written again).
    """
    key_file = spec.folder / KEY_FILE
    same = key_file.is_file() and key_file.read_text(encoding="utf-8").strip() == spec.key
    if spec.folder.exists() and not same:
        shutil.rmtree(spec.folder)
    spec.folder.mkdir(parents=True, exist_ok=True)
    atomic_write_text(key_file, spec.key + "\n")
    if _finished(spec) is None:  # a run to (re)start: its scores are written again
        for f in (spec.folder / "scores").glob("*.npz"):
            f.unlink()


def _finished(spec: RunSpec) -> dict[str, Any] | None:
    """The record of this key's bench run where it ended with results but was not judged.

    (its worker killed while judging.) It is judged again from its files, never rerun.
    """
    try:
        run = json.loads((spec.folder / RUN_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    ok = isinstance(run, dict) and run.get("exit") in (0, 1, 3) and (spec.folder / "run" / "results.json").is_file()
    return dict(run) if ok else None


def _complete(folder: Path) -> bool:
    """Whether the bench run in ``folder`` wrote its complete results (killed before ``RUN_FILE`` was written)."""
    try:
        return json.loads((folder / "run" / "results.json").read_text(encoding="utf-8")).get("status") == "complete"
    except (OSError, ValueError, AttributeError):
        return False


def run_case(spec: RunSpec, cpus: int | None = None) -> dict[str, Any]:
    """The ``bench run`` of ``spec``.

    Its exit status, wall time, CPU-seconds (every process of it, training workers included) and, where it failed, why
    (``error``), kept in ``RUN_FILE``. ``cpus``: the CPUs it may train on where a scheduler granted them (a Ray task); a
    local worker's share is its affinity, which the run inherits. A run of this key that already ended with results is
    not run again.
    """
    _prepare(spec)
    done = _finished(spec)
    if done is not None:
        return done
    command = _command(spec) + (["--overwrite"] if _complete(spec.folder) else [])  # its models are cached
    start = time.monotonic()
    with open(spec.folder / "bench-run.log", "w", encoding="utf-8") as log:
        proc = subprocess.Popen(command, cwd=REPO, env=_environment(spec, cpus), stdout=log,
                                stderr=subprocess.STDOUT)
        try:
            _, status, usage = os.wait4(proc.pid, 0)  # this run's own CPU time, its workers included
        except BaseException:
            proc.kill()
            proc.wait()
            raise
        proc.returncode = code = os.waitstatus_to_exitcode(status)
    log_tail = (spec.folder / "bench-run.log").read_text(encoding="utf-8", errors="replace").strip()[-400:]
    run = {"exit": code, "wall_s": round(time.monotonic() - start, 2),
           "run_cpu_s": round(usage.ru_utime + usage.ru_stime, 2),
           "error": None if code in (0, 1, 3) else _failure(code, log_tail)}
    atomic_write_text(spec.folder / RUN_FILE, json.dumps(run))
    return run


def _failure(code: int, log_tail: str) -> str:
    """A failed run's one-line reason: its exit status or the signal that ended it, then its log's tail."""
    if code < 0:
        name = signal.Signals(-code).name if -code in signal.valid_signals() else f"signal {-code}"
        why = f"killed by {name}" + (" (as the kernel's out-of-memory killer does)" if -code == signal.SIGKILL else "")
    else:
        why = f"exit status {code}"
    return f"{why}: {log_tail}" if log_tail else why


def _scores(folder: Path) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    out = {}
    for f in sorted((folder / "scores").glob("*.npz")):
        with np.load(f) as z:
            out[f.stem.rsplit("-", 1)[0]] = (z["scores"], z["labels"])
    return out


def read_run(folder: Path) -> tuple[Any, str | None]:
    """(the run's results document, None), or (None, why there is none to judge) for the run in ``folder``."""
    from bench.results import read

    path = folder / "run" / "results.json"
    if not path.exists():
        return None, "the run left no results.json"
    try:
        return read(path), None
    except ValueError as exc:  # a document this privbench cannot read: a visible failure of the row
        return None, str(exc).splitlines()[0][:300]


def judge(auditor: Auditor, doc: Any, folder: Path, scores: dict[str, Any]) -> dict[str, Any]:
    """``auditor``'s verdict on the run ``doc`` in ``folder``, or ``error`` where it raised or the run failed.

    (``caught``, ``value``, ``text``, ``judge_cpu_s``: this process's CPU time for it.)
    """
    targets = [r for r in doc.results if not r.off_point]
    if not targets or not targets[0].ok:
        return {"error": f"the run failed: {targets[0].error if targets else 'no cell'}"}
    start = time.process_time()
    try:
        v = auditor.judge(AuditorInput(results=doc, target=targets[0], scores=scores, folder=folder))
    except Exception as exc:  # an auditor that fails is a visible failure of its row, never a silent gap
        return {"error": f"{type(exc).__name__}: {exc}".splitlines()[0][:300]}
    return {"caught": bool(v.caught), "value": v.value, "text": v.text,
            "judge_cpu_s": round(time.process_time() - start, 3)}


def true_epsilon(bug: Bug | None, doc: Any) -> tuple[float | None, float | None]:
    """(certified ε, the ε the bug really spends) of the run ``doc`` (None: no document).

    The correct mechanism's true ε is its certified one. None where unknown.
    """
    targets = [r for r in doc.results if r.ok and r.privacy is not None] if doc is not None else []
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


def attack_seconds(doc: Any) -> dict[str, float]:
    """Seconds each attack of the run ``doc`` took (``timings.attacks``; its audit runs' training included)."""
    targets = [r for r in doc.results if r.ok] if doc is not None else []
    return dict(targets[0].timings.attacks) if targets else {}


def judge_rows(spec: RunSpec, run: dict[str, Any]) -> list[dict[str, Any]]:
    """Every auditor's row on the finished run of ``spec`` (``run``: ``run_case``'s record).

    In ``spec.auditors``' order: the case, the certified and true ε, the verdict, and the CPU-seconds of the run the
    auditor needs (the run's, less the attacks it does not read).
    """
    load(spec.options.plugins)
    bug = BUGS.get(spec.bug) if spec.bug else None
    doc, why = read_run(spec.folder)
    certified, true = true_epsilon(bug, doc)
    spent, scores = attack_seconds(doc), _scores(spec.folder)
    rows = []
    for a in (AUDITORS.get(name) for name in spec.auditors):
        attacks = a.attacks_for(spec.mechanism)
        if a.missing():
            verdict: dict[str, Any] = {"missing": a.missing()}
        elif doc is None:
            verdict = {"error": run.get("error") or why}
        else:
            verdict = judge(a, doc, spec.folder, scores)
        others = sum(t for name, t in spent.items() if name not in attacks)
        rows.append({"case": spec.case, "bug": spec.bug, "mechanism": spec.mechanism, "seed": spec.seed,
                     "auditor": a.name, "attacks": list(attacks), "certified_epsilon": certified,
                     "true_epsilon": true, "exit": run["exit"],
                     "run_cpu_s": None if run["run_cpu_s"] is None else round(max(run["run_cpu_s"] - others, 0.0), 2),
                     "folder": str(spec.folder.relative_to(spec.options.output)), **verdict})
    return rows


def work(spec: RunSpec, cpus: int | None = None) -> dict[str, Any]:
    """Run and judge ``spec`` in this process.

    Its record (``key``, ``case``, ``seed``, the run's ``exit``, ``wall_s``, ``run_cpu_s``, ``error``, every auditor's
    ``rows``, and ``worker_cpu_s``: the run's CPU-seconds plus this process's for reading and judging it), kept
    atomically in ``spec.record_path`` when the run ended with results (exit status 0, 1 or 3). Exit status 2 (the run
    refused its configuration) is the driver's to act on: no rows.
    """
    load(spec.options.plugins)
    run = run_case(spec, cpus)
    record: dict[str, Any] = {"key": spec.key, "case": spec.case, "seed": spec.seed, "attacks": list(spec.attacks),
                              **run}
    start = time.process_time()
    record["rows"] = [] if run["exit"] == 2 else judge_rows(spec, run)
    record["worker_cpu_s"] = round(run["run_cpu_s"] + time.process_time() - start, 2)
    if run["exit"] in (0, 1, 3):
        keep(spec, record)
    return record


def keep(spec: RunSpec, record: dict[str, Any]) -> None:
    """Write ``record`` to ``spec.record_path`` atomically (strict JSON: +∞ as ``"unbounded"``)."""
    from bench.zoo.document import finite

    atomic_write_text(spec.record_path, json.dumps(finite(record), indent=1, allow_nan=False))
