"""The zoo's results document (``zoo.json``) and its summary.

Per bug (or correct mechanism) and auditor, the detection rate over seeds with its 95 % Clopper-Pearson interval (on a
correct mechanism: the false-alarm rate), and the mean CPU-seconds per verdict. No torch import.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from attacks.analysis.statistics.confidence import clopper_pearson_lower, clopper_pearson_upper
from bench.core.io import atomic_write_text

ZOO_SCHEMA = 2  # 2: runs keyed by code version and configuration (``configuration``, ``code_version``, ``cost``)
TIMES = ("wall_s", "run_cpu_s", "judge_cpu_s", "cpu_s_per_verdict", "written", "cost")  # differ between identical runs


def rate_interval(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """The two-sided Clopper-Pearson interval of a rate k/n (fractions; (0, 1) for n = 0).

    α/2 in each tail, the upper limit's tail read as 1 − (1 − α/2), the complement of its level, as zoo.json has always
    computed it.
    """
    if n == 0:
        return 0.0, 1.0
    a = (1 - confidence) / 2
    return clopper_pearson_lower(k, n, a), clopper_pearson_upper(k, n, 1 - (1 - a))


def summarise(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One summary row per (case, auditor), in the order the cases were run.

    ``verdicts`` (seeds judged), ``caught``, ``rate`` and its ``lower`` / ``upper`` 95 % limits, ``errors`` (runs or
    verdicts that failed: shown, never counted as a pass), ``missing`` (why the auditor could not run),
    ``cpu_s_per_verdict`` (mean over judged seeds of the run's CPU-seconds plus the auditor's own), the bug's
    ``true_epsilon`` / certified ε ratio (the mean over seeds; ∞ for an unbounded bug; None where unknown).
    """
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for r in rows:
        key = (r["case"], r["auditor"])
        s = out.setdefault(key, {"case": r["case"], "bug": r["bug"], "mechanism": r["mechanism"],
                                 "auditor": r["auditor"], "verdicts": 0, "caught": 0, "errors": 0,
                                 "missing": r.get("missing"), "_cpu": [], "_ratio": []})
        if r.get("missing"):
            continue
        if "error" in r:
            s["errors"] += 1
            continue
        s["verdicts"] += 1
        s["caught"] += bool(r["caught"])
        s["_cpu"].append((r.get("run_cpu_s") or 0.0) + (r.get("judge_cpu_s") or 0.0))
        if r.get("true_epsilon") is not None and r.get("certified_epsilon"):
            s["_ratio"].append(r["true_epsilon"] / r["certified_epsilon"])
    summary = []
    for s in out.values():
        cpu, ratio = s.pop("_cpu"), s.pop("_ratio")
        lo, hi = rate_interval(s["caught"], s["verdicts"])
        s.update(rate=s["caught"] / s["verdicts"] if s["verdicts"] else None, lower=lo, upper=hi,
                 cpu_s_per_verdict=sum(cpu) / len(cpu) if cpu else None,
                 epsilon_ratio=(math.inf if any(math.isinf(x) for x in ratio) else sum(ratio) / len(ratio))
                 if ratio else None)
        summary.append(s)
    return summary


def write_document(options: Any, rows: list[dict[str, Any]], *, cost: dict[str, Any] | None = None
                   ) -> dict[str, Any]:
    """Write ``zoo.json`` atomically into ``options.output``.

    The settings, the configuration and code version its runs are keyed by (``bench.zoo.resume``), the catalogue's
    entries that ran, every verdict row, the summary, and ``cost`` (this invocation's wall time and the driver's and
    workers' CPU-seconds); returns the document.
    """
    from bench.zoo.api import AUDITORS, BUGS
    from bench.zoo.resume import code_version, configuration

    bugs = sorted({r["bug"] for r in rows if r["bug"]})
    auditors = sorted({r["auditor"] for r in rows})
    doc = {
        "schema": ZOO_SCHEMA, "profile": options.profile, "seeds": options.seeds,
        "target_epsilon": options.target_epsilon, "executor": options.executor,
        "configuration": configuration(options), "code_version": code_version(tuple(options.plugins)),
        "bugs": {b: {k: getattr(BUGS.get(b), k) for k in ("mechanism", "summary", "source", "documented",
                                                          "changes", "claims", "true_epsilon_text")} for b in bugs},
        "auditors": {a: {k: getattr(AUDITORS.get(a), k) for k in ("threat_model", "source", "description")}
                     for a in auditors},
        "rows": rows, "summary": summarise(rows), "cost": cost or {},
    }
    options.output.mkdir(parents=True, exist_ok=True)
    atomic_write_text(Path(options.output) / "zoo.json", json.dumps(finite(doc), indent=1, allow_nan=False))
    return doc


def finite(x: Any) -> Any:
    """``x`` with +∞ written ``"unbounded"`` and NaN / −∞ as null (strict JSON)."""
    if isinstance(x, float) and not math.isfinite(x):
        return "unbounded" if x > 0 else None
    if isinstance(x, dict):
        return {k: finite(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [finite(v) for v in x]
    return x


def without_times(doc: dict[str, Any]) -> dict[str, Any]:
    """The document less every time (what differs between a resumed run and an uninterrupted one)."""
    def strip(x: Any) -> Any:
        if isinstance(x, dict):
            return {k: strip(v) for k, v in x.items() if k not in TIMES}
        if isinstance(x, list):
            return [strip(v) for v in x]
        return x

    return dict(strip(doc))
