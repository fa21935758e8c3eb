"""The wall time of a zoo on W workers, estimated from one measured zoo's per-run costs (docs/zoo.md).

Each run is run and judged in one worker (``bench.zoo.worker``); its record (``runs/<case>/seed-<s>/zoo-run.json``)
holds ``worker_cpu_s``: the run's CPU-seconds, every process of it, plus the worker's for reading and judging it.
On a worker with one CPU of its own a run takes about that in wall time (it trains on one process and one thread).
The runs are then scheduled longest first onto the worker that frees up first (LPT; Graham 1969, within 4/3 of the
best schedule), plus the driver's own CPU-seconds (``zoo.json``'s ``cost.driver_cpu_s``), which run beside the
workers. ``--seeds-scale K`` repeats every run K times (the cost of K times the seeds, each seed costing what the
measured ones did).

    python -m scripts.zoo_workers ZOO_DIR [--workers 8] [--seeds-scale 5]
"""

from __future__ import annotations

import argparse
import heapq
import json
from pathlib import Path


def run_costs(folder: Path) -> list[float]:
    """``worker_cpu_s`` of every run the zoo in ``folder`` judged (one per run folder its rows name)."""
    doc = json.loads((folder / "zoo.json").read_text(encoding="utf-8"))
    costs = []
    for run in sorted({r["folder"] for r in doc["rows"]}):
        record = json.loads((folder / run / "zoo-run.json").read_text(encoding="utf-8"))
        costs.append(float(record["worker_cpu_s"]))
    return costs


def makespan(costs: list[float], workers: int) -> float:
    """The finishing time of the last worker when ``costs`` are given out longest first to the least loaded."""
    loads = [0.0] * workers
    for c in sorted(costs, reverse=True):
        heapq.heappush(loads, heapq.heappop(loads) + c)
    return max(loads)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("folder", type=Path)
    p.add_argument("--workers", type=int, default=8)
    p.add_argument("--seeds-scale", type=int, default=1)
    args = p.parse_args()
    costs = run_costs(args.folder) * args.seeds_scale
    doc = json.loads((args.folder / "zoo.json").read_text(encoding="utf-8"))
    driver = float(doc.get("cost", {}).get("driver_cpu_s") or 0.0)
    span = makespan(costs, args.workers)
    print(f"{len(costs)} runs, {sum(costs):.0f} CPU-s in all (longest {max(costs):.0f}, mean "
          f"{sum(costs) / len(costs):.1f}); driver {driver:.1f} CPU-s ({100 * driver / (driver + sum(costs)):.2f} % "
          f"of the whole)")
    print(f"{args.workers} workers: {span:.0f} s = {span / 60:.1f} min (the lower limit, all CPU-s spread evenly: "
          f"{sum(costs) / args.workers / 60:.1f} min)")


if __name__ == "__main__":
    main()
