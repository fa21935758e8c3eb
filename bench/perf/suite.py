"""``python -m bench perf``: throughput of the hot paths, measured as same-run ratios.

Candidates are timed interleaved (round r runs every candidate once, in an order rotated each round), so
background load hits all of them alike; a ratio is the median over rounds of the per-round ratio. Absolute
samples/s depend on the machine and its load and are indicative only. Records: one non-private step,
DP-SGD steps (Opacus' ``hooks``/``functorch``/``ew``/``ghost`` and our ``vmap``/``bk``, Abadi et al. 2016;
Yousefpour et al. 2021; Subramani et al. 2021; Bu et al. 2023), the DPMix synthesis rate (Lee et al. 2019),
and K shadow models trained one after another vs as one vectorised ensemble.
"""

from __future__ import annotations

import math
import os
import time
import warnings
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

import torch

from bench.core.device import resolve_device
from bench.core.errors import BenchError
from bench.core.io import atomic_write_json
from bench.perf.config import PerfConfig, validate
from bench.perf.paths import (
    OPACUS_MODES,
    fast_step,
    measure_dpmix,
    measure_shadows,
    measure_steps,
    nonprivate_step,
)

__all__ = ["FLOORS", "OPACUS_MODES", "SCHEMA_VERSION", "PerfConfig", "check", "fast_step", "nonprivate_step",
           "render", "run_perf", "validate"]
SCHEMA_VERSION = 1
# Same-run ratio floors for ``--check`` (docs/performance.md): a fall below one fails CI.
FLOORS = {
    "cpu": {"dpsgd_vs_nonprivate": 0.6, "ensemble_chosen_speedup": 0.9},
    "cuda": {"dpsgd_vs_nonprivate": 0.8, "ensemble_chosen_speedup": 5.0},
}
# Throughput targets (docs/performance.md), shown beside the measured ratios (text: not all are floors).
TARGETS = {
    "cpu": {"dpsgd_vs_nonprivate": "≥ 0.8", "ensemble_chosen_speedup": "≥ 1", "dpmix_60k_seconds": "< 2"},
    "cuda": {"dpsgd_vs_nonprivate": "≥ 0.9", "ensemble_speedup": "≥ 10 (K = 64)", "dpmix_60k_seconds": "< 2"},
}


def run_perf(cfg: PerfConfig, log: Callable[[str], None] = lambda s: None) -> dict[str, Any]:
    """Measure everything and write ``cfg.json_path``.

    Returns:
        The document: ``schema_version``, ``config``, ``environment``, ``records`` (list of Record dicts),
        ``ratios`` (``dpsgd_vs_nonprivate``, ``fastest_dpsgd``, ``opacus_best_vs_nonprivate``,
        ``ensemble_speedup``, ``ensemble_chosen_speedup``), ``targets`` and ``floors`` for the device.

    Raises:
        BenchError: bad configuration (see ``validate``) or an unwritable output path.
    """
    validate(cfg)
    device = resolve_device(cfg.device)
    rounds = cfg.repeats or (7 if cfg.quick else 15)
    calls = 3 if cfg.quick else 5
    start = time.perf_counter()
    log(f"DP-SGD steps: {cfg.model}, batch {cfg.batch_size}, {device.type}, {rounds} interleaved rounds")
    with warnings.catch_warnings():  # Opacus' hooks: "full backward hook is firing ... no inputs require grad"
        warnings.simplefilter("ignore")
        records = measure_steps(cfg, device, rounds, calls)
    log("DPMix synthesis")
    records.append(measure_dpmix(cfg, 2 if cfg.quick else 5))
    log(f"shadow models: {min(cfg.shadow_models, 16) if cfg.quick else cfg.shadow_models} × "
        f"{cfg.shadow_examples} examples, sequential vs ensemble")
    records += measure_shadows(cfg, device, 2 if cfg.quick else 3)
    ratios = same_run_ratios(records)
    doc = {
        "schema_version": SCHEMA_VERSION,
        "config": asdict(cfg) | {"device": device.type, "rounds": rounds, "calls_per_round": calls},
        "environment": {"torch": torch.__version__, "threads": torch.get_num_threads(),
                        "cpu_count": os.cpu_count(),
                        "gpu": torch.cuda.get_device_name(device) if device.type == "cuda" else None,
                        "load_average": os.getloadavg() if hasattr(os, "getloadavg") else None,
                        "wall_seconds": round(time.perf_counter() - start, 1)},
        "records": [asdict(r) for r in records],
        "ratios": ratios,
        "targets": TARGETS[device.type],
        "floors": FLOORS[device.type],
    }
    try:
        atomic_write_json(cfg.json_path, doc)
    except OSError as exc:
        raise BenchError(f"perf: cannot write {cfg.json_path} ({exc.strerror or exc})") from None
    return doc


def same_run_ratios(records: list) -> dict[str, Any]:
    """The ratios of a run's records (all from the same run).

    Fastest DP-SGD / non-private, best Opacus mode / non-private, vectorised / sequential shadows (and for the path the
    harness chooses), DPMix seconds.
    """
    by = {r.name: r for r in records}
    dp = [r for r in records if r.name.startswith("dpsgd-") and r.ratio_to_nonprivate is not None]
    best = max(dp, key=lambda r: r.ratio_to_nonprivate) if dp else None
    opacus = [r for r in dp if r.name.startswith("dpsgd-opacus-")]
    seq, ens = by["shadow-sequential"], by["shadow-ensemble"]
    ens_speedup = ens.samples_per_s / seq.samples_per_s
    return {
        "dpsgd_vs_nonprivate": best.ratio_to_nonprivate if best else None,
        "fastest_dpsgd": best.name if best else None,
        "opacus_best_vs_nonprivate": max((r.ratio_to_nonprivate for r in opacus), default=None),
        "ensemble_speedup": ens_speedup,
        "ensemble_chosen_speedup": ens_speedup if ens.extra["chosen_path"] == "ensemble" else 1.0,
        "dpmix_60k_seconds": by["dpmix-synthesis"].extra["seconds_median"],
    }


def check(doc: dict[str, Any]) -> list[str]:
    """Ratios below their device's floor, as one-line messages (empty: all pass)."""
    bad = []
    for key, floor in doc["floors"].items():
        value = doc["ratios"].get(key)
        if value is None or not math.isfinite(value) or value < floor:
            bad.append(f"{key} = {value if value is None else f'{value:.3f}'} is below its floor {floor}")
    return bad


def render(doc: dict[str, Any], console=None) -> None:
    """Print the records and ratios as rich tables."""
    from rich.console import Console
    from rich.table import Table

    console = console or Console()
    cfg = doc["config"]
    table = Table(title=f"bench perf — {cfg['model']}, batch {cfg['batch_size']}, {cfg['device']} "
                        f"({doc['environment']['threads']} threads; absolute numbers indicative only)",
                  header_style="bold")
    for h in ("path", "samples/s (median)", "min – max", "× non-private (paired)", "peak MiB", "note"):
        table.add_column(h, justify="left" if h in ("path", "note") else "right", overflow="fold")
    for r in doc["records"]:
        if r["error"]:
            table.add_row(r["name"], "—", "—", "—", "—", f"failed: {r['error']}", style="red")
            continue
        lo, hi = r["spread"]
        ratio = r["ratio_to_nonprivate"]
        note = ", ".join(f"{k}={v}" for k, v in r["extra"].items() if k != "seconds_median")
        table.add_row(r["name"], f"{r['samples_per_s']:,.0f}", f"{lo:,.0f} – {hi:,.0f}",
                      "" if ratio is None else f"{ratio:.2f}", f"{r['peak_memory_mb']:,.0f}", note)
    console.print(table)
    rt = Table(title="same-run ratios", header_style="bold")
    for h in ("ratio", "value", "target", "CI floor"):
        rt.add_column(h, justify="left" if h == "ratio" else "right")
    for key, value in doc["ratios"].items():
        shown = value if isinstance(value, str) or value is None else f"{value:.3f}"
        rt.add_row(key, str(shown), str(doc["targets"].get(key, "")), str(doc["floors"].get(key, "")))
    console.print(rt)
