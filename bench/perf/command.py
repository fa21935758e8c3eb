"""``privbench perf``'s work below the parser (``bench.cli``).

The built-in paths (``bench.perf.suite``) or, with ``--mechanism``, any registered mechanism against its non-private
reference (``bench.perf.mechanism``); ``--check`` against the floors, ``--baseline`` against an earlier perf.json. Exit
0, 1 (a floor missed), 4 (below the baseline).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time
from pathlib import Path
from typing import Any

from bench.core.errors import BenchError

EXIT_REGRESSION = 4  # as ``privbench compare``


def _read_baseline(path: str | None, factor: float) -> dict[str, Any] | None:
    """The baseline perf.json, read before any measurement (a bad one is refused first)."""
    if not 0 < factor <= 1:
        raise BenchError(f"perf: --baseline-factor {factor} must be in (0, 1] (e.g. 0.9)")
    if path is None:
        return None
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise BenchError(f"perf: --baseline {path} is not a readable perf.json ({str(exc).splitlines()[0]})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("ratios", {}), dict) or \
            not isinstance(doc.get("mechanisms", {}), dict):
        raise BenchError(f"perf: --baseline {path} is not a perf.json written by 'privbench perf'")
    return doc


def perf_command(args: argparse.Namespace, console: Any) -> int:
    """Run ``privbench perf`` as parsed; print, write perf.json, and return the exit status.

    Raises:
        BenchError: a bad setting, an unknown mechanism or plug-in, an unreadable baseline, an unwritable path.
    """
    from bench.perf.config import PerfConfig, validate

    cfg = PerfConfig(model=args.model, batch_size=args.batch_size, device=args.device, quick=args.quick,
                     repeats=args.repeats, json_path=args.json)
    validate(cfg)  # before torch loads: its import-time warnings must not precede a usage error
    baseline = _read_baseline(args.baseline, args.baseline_factor)
    log = lambda line: console.print(f"[dim]perf: {line}[/dim]")  # noqa: E731
    if args.mechanism:
        doc = _mechanism_perf(args, cfg, log)
    else:
        from bench.perf.suite import render, run_perf

        doc = run_perf(cfg, log=log)
        render(doc, console=console)
    console.print(f"perf.json: {args.json}")
    from bench.perf.suite import check

    failures = check(doc) if args.check and "floors" in doc else []
    for line in failures:
        console.print(f"[bold red]perf check failed: {line}[/bold red]")
    from bench.perf.mechanism import baseline_regressions

    regressions = baseline_regressions(doc, baseline, args.baseline_factor) if baseline is not None else []
    for line in regressions:
        console.print(line, style="bold red", markup=False)
    return EXIT_REGRESSION if regressions else 1 if failures else 0


def _mechanism_perf(args: argparse.Namespace, cfg: Any, log: Any) -> dict[str, Any]:
    """Measure each mechanism of ``--mechanism`` (a comma list) and write perf.json."""
    from bench.config.plugins import load_plugins
    from bench.core.device import resolve_device
    from bench.core.io import atomic_write_json
    from bench.perf.mechanism import measure_mechanism

    load_plugins([m for m in (args.plugins or "").split(",") if m.strip()])
    device = resolve_device(cfg.device)
    rounds = cfg.repeats or (3 if cfg.quick else 5)
    start = time.perf_counter()
    found = {name: measure_mechanism(name, rounds=rounds, device=device, log=log)
             for name in dict.fromkeys(n.strip() for n in args.mechanism.split(",") if n.strip())}
    import torch

    doc = {"schema_version": 1, "config": {"device": device.type, "rounds": rounds, "dataset": "digits"},
           "environment": {"torch": torch.__version__, "threads": torch.get_num_threads(),
                           "cpu_count": os.cpu_count(), "wall_seconds": round(time.perf_counter() - start, 1)},
           "mechanisms": found}
    try:
        atomic_write_json(cfg.json_path, doc)
    except OSError as exc:
        raise BenchError(f"perf: cannot write {cfg.json_path} ({exc.strerror or exc})") from None
    for name, m in found.items():
        ratio = m["ratio"]
        log(f"{name}: {m['samples_per_s']:,.0f} samples/s, {m['reference']}: {m['reference_samples_per_s']:,.0f}; "
            f"× {'—' if ratio is None or not math.isfinite(ratio) else f'{ratio:.2f}'} (median of {m['rounds']})")
    return doc
